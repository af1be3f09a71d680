"""Measure one point: payload, load, server metrics before and after, telemetry -> Point.

It lives in sweep/ because it is the lowest layer allowed to use both ``load`` (the
generators) and ``metrics`` (the server's side); ``bench``, sweeps and tune all call it.
From Python::

    point = measure("grpc://localhost:8500", "inception_v3", batch_size=8,
                    load=LoadInfo("closed", concurrency=4))
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
from dataclasses import replace
from typing import Any

import numpy as np

from serve_bench.client import Client, connect, server_kind, server_runtime
from serve_bench.errors import InvalidValue
from serve_bench.load import (
    ArrivalSchedule,
    Declared,
    InputSet,
    LoadRun,
    PointPlan,
    PointSettings,
    RequestCost,
    analyze,
    check_request,
    check_schedule,
    check_settings,
    image_size_of,
    is_stable,
    load_input_data,
    make_inputs,
    run_closed_loop,
    run_in_processes,
    run_open_loop,
    signature_for_payload,
)
from serve_bench.metrics import TelemetrySession, check_endpoint, read_server, read_settled, server_breakdown
from serve_bench.runtimes import RUNTIMES
from serve_bench.stats import OK, LoadInfo, Point, RequestRecord, ServerView, Target

__all__ = [
    "METRICS_UNREAD",
    "check_bounds",
    "measure",
    "measure_async",
    "measure_idle_power",
    "measure_plan",
    "measure_point",
    "open_telemetry",
    "plan_point",
    "request_cost",
]

IDLE_S = 2.0  # idle power is measured over this long, once per target, before its first point


def _no_metrics_reason(target: Target) -> str:
    if target.metrics_url is None and target.protocol.startswith("v2"):
        return (
            f"no metrics endpoint: {target.url} is not on a v2 server's default port (Triton 8000/8001 -> 8002, "
            "MLServer 8080/8081 -> 8082), so give the target's metrics URL"
        )
    return "no metrics endpoint configured"


def _entrypoint(target: Target) -> str:
    """The front end whose requests the server view counts: TF Serving and MLServer label them."""
    return "GRPC" if target.protocol in ("grpc", "v2-grpc") else "REST"


def _answered_ok(run: LoadRun) -> int:
    """Requests the client got an OK answer for: every one of them the server has counted once it caught up."""
    if run.digest is not None:
        return run.digest.ok  # the measured window's only: a lower bound, as warm-up is left out
    return sum(1 for record in run.records if record.status == OK)


def open_telemetry(target: Target) -> TelemetrySession | None:
    """The energy/utilisation telemetry of ``target``, None when there is none to read.

    Its ``telemetry`` endpoints (dcgm-exporter, node exporter) when the spec lists them;
    else, for a server on this host, this host's RAPL and (device "gpu") NVML counters;
    the local server's process CPU when its pid is known. Never both an endpoint and the
    local counters: a node exporter on this host reads the same RAPL counters (counted twice).
    """
    local = target.address.loopback
    if not (target.telemetry or local or target.pid):
        return None
    use_local = local and not target.telemetry
    return TelemetrySession(
        target.telemetry,
        local_nvml=use_local and target.device == "gpu",
        local_rapl=use_local,
        server_pid=target.pid,
    )


def _settled(records: list[RequestRecord], start: float, end: float, settings: PointSettings) -> bool:
    """Until-stable's test: the windows agree, or no request in them succeeded (running longer cannot
    make failures agree; the point ends at its minimum and says it had no successes)."""
    if not any(r.status == OK for r in records if start <= r.done < end):
        return True
    return is_stable(records, start, end, settings.windows, settings.tolerance)


async def measure_idle_power(session: TelemetrySession, target: Target) -> None:
    """Idle power before the target's first point, when it has a counter to read (kept in the session)."""
    if target.telemetry or (await asyncio.to_thread(session.read)).counters:
        await asyncio.to_thread(session.measure_idle, IDLE_S)


async def _generate(
    client: Client, plan: PointPlan, settings: PointSettings, prepared: Any, image_size: tuple[int, int]
) -> LoadRun:
    load = plan.load
    if load.processes > 1:
        return await asyncio.to_thread(run_in_processes, plan, settings, version=client.version, image_size=image_size)
    if load.mode == "closed":
        return await run_closed_loop(
            client,
            prepared,
            load.concurrency or 1,
            settings,
            stable=lambda records, start, end: _settled(records, start, end, settings),
        )
    rate = load.rate or 1.0
    schedule = ArrivalSchedule(
        rate, settings.min_duration_s, load.arrival or "poisson", plan.seed, warmup_s=settings.warmup_s
    )
    return await run_open_loop(client, prepared, rate, schedule, settings)


def _request_inputs(
    client: Client, payload: str, batch_size: int, seed: int, inputs: InputSet | None = None
) -> dict[str, np.ndarray]:
    """One batch for the client's signature: from ``inputs`` (real images, from the first) or synthetic."""
    if inputs is None:
        image_size = image_size_of(client.signatures.get("serving_default"))
        return make_inputs(payload, batch_size, client.signature_info, seed=seed, image_size=image_size)
    info = client.signature_info
    name = next(iter(info.inputs)) if info is not None and len(info.inputs) == 1 else None
    return {name or ("image_bytes" if payload == "jpeg" else "images"): inputs.batch(0, batch_size)}


def _drawn_bytes(arrays: dict[str, np.ndarray]) -> int:
    """Bytes a batch is drawn as: the arrays, and for JPEG bytes the bytes objects they point to."""
    total = 0
    for array in arrays.values():
        total += array.nbytes
        if array.dtype == object:
            total += sum(len(item) for item in array.reshape(-1) if isinstance(item, bytes))
    return total


def request_cost(client: Client, plan: PointPlan, inputs: InputSet | None = None) -> RequestCost:
    """What one request of the plan's payload costs, from requests of one item and of two, encoded."""
    drawn = [_request_inputs(client, plan.payload, n, plan.seed, inputs) for n in (1, 2)]
    one, two = (client.prepare(arrays).nbytes for arrays in drawn)
    return RequestCost(
        one,
        two,
        max(1, _drawn_bytes(drawn[1]) - _drawn_bytes(drawn[0])),
        synthetic_float=inputs is None and plan.payload == "float",
    )


def check_bounds(
    client: Client,
    plan: PointPlan,
    settings: PointSettings,
    inputs: InputSet | None = None,
    cost: RequestCost | None = None,
) -> None:
    """Refuse a batch or load the client cannot hold, or one the server declared it refuses, before the
    batch is drawn (``InvalidValue``; load._bounds, docs/bounds.md)."""
    check_schedule(plan, settings)
    declared = getattr(client.transport, "declared_limits", None) or {}
    check_request(plan, settings, cost or request_cost(client, plan, inputs), Declared(**declared))


async def measure_point(
    client: Client,
    plan: PointPlan,
    settings: PointSettings,
    telemetry: TelemetrySession | None = None,
    inputs: InputSet | None = None,
) -> Point:
    """Run one point against an open client (processes > 1 opens its own connections).

    ``inputs``: real images to send (``load.load_input_data``, for the plan's payload and the
    model's image size); None sends synthetic ones. Several processes send synthetic images only.

    ``telemetry``: the target's session (sweeps keep one per target, its idle power measured
    once); None opens one for this point only (``open_telemetry``, no idle figure).
    Its EnergyView goes into ``Point.energy``; a telemetry endpoint that is down is a note
    there ("telemetry unavailable: URL"), never a failed point.
    """
    check_settings(settings)  # the plan checked its batch size and load when it was built
    if inputs is not None and plan.load.processes > 1:
        raise InvalidValue("processes", plan.load.processes, "1 when real input data is sent")
    check_bounds(client, plan, settings, inputs)
    target = plan.target
    image_size = image_size_of(client.signatures.get("serving_default"))
    prepared = client.prepare(_request_inputs(client, plan.payload, plan.batch_size, plan.seed, inputs))
    kind, version = server_kind(client, target.server)
    metrics_url = target.scrape_url
    entrypoint = _entrypoint(target)
    before, why = (
        (await read_server(metrics_url, plan.model, kind=kind, target_url=target.http_url or target.url))
        if metrics_url
        else (None, _no_metrics_reason(target))
    )
    session = telemetry if telemetry is not None else open_telemetry(target)
    if session is not None:
        await session.astart()
    started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    try:
        run = await _generate(client, plan, settings, prepared, image_size)
    finally:
        energy = await session.astop() if session is not None else None
        if session is not None and telemetry is None:
            session.close()
    server: ServerView | None = None
    notes: list[str] = []
    if before is not None:
        after, why, late = await read_settled(
            metrics_url, plan.model, before, _answered_ok(run), entrypoint, target_url=target.http_url or target.url
        )
        if after is not None:
            # count only the requests of this point's protocol where the server labels them so
            server = server_breakdown(before, after, entrypoint)
            if late:
                server = replace(server, notes=(*server.notes, late))
    if server is None:
        notes.append(f"{METRICS_UNREAD}{why}")
    runtime, in_effect = server_runtime(client)
    if in_effect:  # what the local server's runtime ran with, as it reports it (device, precision, threads)
        notes.append(f"server {in_effect}")
    figures = analyze(run, plan.load.mode, settings, encode_us=prepared.encode_seconds * 1e6)
    return Point.measured(
        figures,
        target=replace(target, server=kind, server_version=version, runtime=target.runtime or runtime),
        model=plan.model,
        signature=plan.signature,
        payload=plan.payload,
        batch_size=plan.batch_size,
        load=plan.load,
        server=server,
        energy=energy,
        inputs=inputs.source if inputs is not None else None,
        repeat=plan.repeat,
        key=plan.key,
        started_at=started_at,
        warmup_s=settings.warmup_s,
        notes=tuple(notes),
    )


METRICS_UNREAD = "server metrics unavailable: "  # a point's note where the server's page was not read, then why


def plan_point(
    url: str,
    model: str,
    *,
    batch_size: int = 1,
    load: LoadInfo | None = None,
    payload: str = "float",
    signature: str = "",
    target_name: str = "bench",
    device: str = "cpu",
    metrics_url: str | None = None,
    seed: int = 0,
    runtime: str = "",
) -> PointPlan:
    """The plan of one point at ``url`` (``load`` defaults to one request in flight); ``InvalidValue``
    for a batch size or load that cannot be measured, before anything is opened or sent.

    ``runtime`` labels what runs the model there (tensorflow | onnxruntime | openvino; "" not stated)."""
    load = load or LoadInfo("closed", concurrency=1)
    signature = signature_for_payload(payload, signature)
    if runtime and runtime not in RUNTIMES:
        raise InvalidValue("runtime", runtime, " | ".join(RUNTIMES))
    if metrics_url:  # None: the server's default page; "": none. "notaurl" was a note in points.jsonl alone
        check_endpoint(metrics_url, "metrics_url")
    target = Target(target_name, url, device, metrics_url, runtime=runtime)
    return PointPlan(target, model, signature, payload, batch_size, load, 0, seed)


async def measure_plan(
    plan: PointPlan,
    settings: PointSettings | None = None,
    *,
    version: int | None = None,
    input_data: str | os.PathLike[str] | None = None,
) -> Point:
    """Connect to the plan's target, measure its point, close.

    ``input_data``: a directory of images or a video to send instead of synthetic images.
    Bad values raise ``InvalidValue`` before anything is sent; a target that cannot be
    reached raises the client's ``ServeBenchError``.
    """
    settings = check_settings(settings or PointSettings())
    async with connect(plan.target.url, plan.model, plan.signature, version, timeout=settings.timeout_s) as client:
        inputs = None
        if input_data is not None:
            image_size = image_size_of(client.signatures.get("serving_default"))
            inputs = await asyncio.to_thread(load_input_data, input_data, plan.payload, image_size)
        return await measure_point(client, plan, settings, inputs=inputs)


async def measure_async(
    url: str,
    model: str,
    *,
    batch_size: int = 1,
    load: LoadInfo | None = None,
    settings: PointSettings | None = None,
    payload: str = "float",
    signature: str = "",
    version: int | None = None,
    target_name: str = "bench",
    device: str = "cpu",
    metrics_url: str | None = None,
    seed: int = 0,
    input_data: str | os.PathLike[str] | None = None,
) -> Point:
    """Connect to ``url``, measure one point, close: ``measure_plan`` of ``plan_point``'s plan."""
    plan = plan_point(
        url,
        model,
        batch_size=batch_size,
        load=load,
        payload=payload,
        signature=signature,
        target_name=target_name,
        device=device,
        metrics_url=metrics_url,
        seed=seed,
    )
    return await measure_plan(plan, settings, version=version, input_data=input_data)


def measure(url: str, model: str, **options: Any) -> Point:
    """``measure_async`` for code without an event loop (takes the same keyword arguments)."""
    return asyncio.run(measure_async(url, model, **options))
