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
from serve_bench.metrics import TelemetrySession, breakdown, default_metrics_url, scrape
from serve_bench.stats import LoadInfo, Point, ServerView, Target, point_key
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
    """The target's metrics endpoint: as given, or TF Serving's default for its URL ("" means none)."""
    return default_metrics_url(target.url) if target.metrics_url is None else target.metrics_url


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


def server_kind(client: Client, declared: str) -> tuple[str, str]:
    """(kind, version) of the server behind ``client``: the local server names itself; else as declared."""
    identity = client.transport.server_identity
    if "serve-bench-local" in identity:
        _, _, version = identity.partition("/")
        return "serve-bench-local", version.split()[0] if version else ""
    return (declared or "unknown"), ""


def _as_server_view(view: ServerView | dict[str, Any]) -> ServerView:
    # metrics.breakdown returned a dict before ServerView existed; accept both while it moves over
    if isinstance(view, ServerView):
        return view
    return ServerView(**{k: v for k, v in view.items() if k in ServerView.__dataclass_fields__})


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
    metrics_url = metrics_url_of(target)
    before, why = (await scrape(metrics_url, plan.model)) if metrics_url else (None, "no metrics endpoint configured")
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
        after, why = await scrape(metrics_url, plan.model)
        if after is not None:
            # count only the predicts of this point's protocol (TF Serving labels them API/entrypoint)
            server = _as_server_view(breakdown(before, after, "GRPC" if target.protocol == "grpc" else "REST"))
    if server is None:
        notes.append(f"server metrics unavailable: {why}")
    figures = analyze(run, plan.load.mode, settings, encode_us=prepared.encode_seconds * 1e6)
    kind, version = server_kind(client, target.server)
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
