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
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from serve_bench.client import Client, connect
from serve_bench.errors import InvalidValue
from serve_bench.load import (
    InputSet,
    LoadRun,
    PointSettings,
    analyze,
    arrival_offsets,
    image_size_of,
    is_stable,
    load_input_data,
    make_inputs,
    run_closed_loop,
    run_in_processes,
    run_open_loop,
    signature_for_payload,
)
from serve_bench.metrics import TelemetrySession, default_metrics_url, read_server, read_settled, server_breakdown
from serve_bench.stats import OK, LoadInfo, Point, ServerView, Target, point_key
from serve_bench.sweep._checks import check_batch_size, check_load, check_settings

__all__ = [
    "PointPlan",
    "measure",
    "measure_async",
    "measure_idle_power",
    "measure_point",
    "metrics_url_of",
    "open_telemetry",
    "server_kind",
]

_LOOPBACK = ("localhost", "127.0.0.1", "::1")
IDLE_S = 2.0  # idle power is measured over this long, once per target, before its first point


def metrics_url_of(target: Target) -> str:
    """The target's metrics endpoint: as given, or its server's default for its URL ("" means none;
    ``metrics.default_metrics_url``: TF Serving's port + 1, Triton's 8002, MLServer's 8082)."""
    return default_metrics_url(target.url) if target.metrics_url is None else target.metrics_url


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
    local = urlsplit(target.url).hostname in _LOOPBACK
    if not (target.telemetry or local or target.pid):
        return None
    use_local = local and not target.telemetry
    return TelemetrySession(
        target.telemetry,
        local_nvml=use_local and target.device == "gpu",
        local_rapl=use_local,
        server_pid=target.pid,
    )


async def measure_idle_power(session: TelemetrySession, target: Target) -> None:
    """Idle power before the target's first point, when it has a counter to read (kept in the session)."""
    if target.telemetry or (await asyncio.to_thread(session.read)).counters:
        await asyncio.to_thread(session.measure_idle, IDLE_S)


@dataclass(frozen=True)
class PointPlan:
    """What to measure at one grid point: target, model and signature, payload, batch size, load."""

    target: Target
    model: str
    signature: str
    payload: str
    batch_size: int
    load: LoadInfo
    repeat: int = 0
    seed: int = 0

    @property
    def key(self) -> str:
        return point_key(
            self.target.name, self.model, self.signature, self.payload, self.batch_size, self.load, self.repeat
        )


# servers that name themselves "<name>/<version>" in the Open Inference Protocol's server metadata (GET /v2)
_V2_SERVERS = ("triton", "mlserver")


def server_kind(client: Client, declared: str) -> tuple[str, str]:
    """(kind, version) of the server behind ``client``: the local server names itself, and so do
    Triton and MLServer ("triton/2.51.0", "mlserver/1.7.1" from their server metadata); else as declared."""
    identity = client.transport.server_identity or ""
    if "serve-bench-local" in identity:
        _, _, version = identity.partition("/")
        return "serve-bench-local", version.split()[0] if version else ""
    name, _, version = identity.partition("/")
    if name.strip().lower() in _V2_SERVERS:
        return name.strip().lower(), version.strip()
    return (declared or "unknown"), ""


async def _generate(
    client: Client, plan: PointPlan, settings: PointSettings, prepared: Any, image_size: tuple[int, int]
) -> LoadRun:
    load = plan.load
    if load.processes > 1:
        return await asyncio.to_thread(
            run_in_processes,
            load.processes,
            plan.target.url,
            plan.model,
            plan.signature,
            client.version,
            plan.payload,
            plan.batch_size,
            load,
            settings,
            plan.seed,
            image_size,
        )
    if load.mode == "closed":
        return await run_closed_loop(
            client,
            prepared,
            load.concurrency or 1,
            settings,
            stable=lambda records, start, end: is_stable(records, start, end, settings.windows, settings.tolerance),
        )
    rate = load.rate or 1.0
    offsets = arrival_offsets(
        rate, settings.min_duration_s, load.arrival or "poisson", plan.seed, warmup_s=settings.warmup_s
    )
    return await run_open_loop(client, prepared, rate, offsets, settings)


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
    check_batch_size(plan.batch_size)
    check_load(plan.load)
    check_settings(settings)
    if inputs is not None and plan.load.processes > 1:
        raise InvalidValue("processes", plan.load.processes, "1 when real input data is sent")
    target = plan.target
    image_size = image_size_of(client.signatures.get("serving_default"))
    prepared = client.prepare(_request_inputs(client, plan.payload, plan.batch_size, plan.seed, inputs))
    kind, version = server_kind(client, target.server)
    metrics_url = metrics_url_of(target)
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
        notes.append(f"server metrics unavailable: {why}")
    figures = analyze(run, plan.load.mode, settings, encode_us=prepared.encode_seconds * 1e6)
    return Point.measured(
        figures,
        target=replace(target, server=kind, server_version=version),
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
    """Connect to ``url``, measure one point, close. ``load`` defaults to one request in flight.

    ``input_data``: a directory of images or a video to send instead of synthetic images.
    Bad values raise ``InvalidValue`` before anything is sent; a target that cannot be
    reached raises the client's ``ServeBenchError``.
    """
    load = load or LoadInfo("closed", concurrency=1)
    settings = settings or PointSettings()
    check_batch_size(batch_size)
    check_load(load)
    check_settings(settings)
    signature = signature_for_payload(payload, signature)
    plan = PointPlan(
        Target(target_name, url, device, metrics_url), model, signature, payload, batch_size, load, 0, seed
    )
    async with connect(url, model, signature, version, timeout=settings.timeout_s) as client:
        inputs = None
        if input_data is not None:
            image_size = image_size_of(client.signatures.get("serving_default"))
            inputs = await asyncio.to_thread(load_input_data, input_data, payload, image_size)
        return await measure_point(client, plan, settings, inputs=inputs)


def measure(url: str, model: str, **options: Any) -> Point:
    """``measure_async`` for code without an event loop (takes the same keyword arguments)."""
    return asyncio.run(measure_async(url, model, **options))
