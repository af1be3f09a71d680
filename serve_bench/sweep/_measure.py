"""Measure one point: payload, load, server metrics before and after, telemetry -> Point."""

from __future__ import annotations

import asyncio
import datetime as _dt
from dataclasses import dataclass
from typing import Any

from serve_bench.client import Client
from serve_bench.load import (
    PointSettings,
    analyze,
    arrival_offsets,
    image_size_of,
    is_stable,
    make_inputs,
    run_closed_loop,
    run_in_processes,
    run_open_loop,
)
from serve_bench.metrics import GpuSampler, ProcessCpu, breakdown, default_metrics_url, scrape
from serve_bench.stats import LoadInfo, Point, TargetInfo, point_key

__all__ = ["Target", "PointPlan", "measure_point", "server_kind"]


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    device: str = "cpu"
    metrics_url: str | None = None  # None: TF Serving's default for the URL; "": no metrics
    server: str = ""  # declared server kind, e.g. "tensorflow-serving"
    pid: int | None = None  # a local server process whose CPU to sample

    @property
    def protocol(self) -> str:
        return "grpc" if self.url.startswith("grpc://") else "rest"

    @property
    def resolved_metrics_url(self) -> str:
        if self.metrics_url is None:
            return default_metrics_url(self.url)
        return self.metrics_url


@dataclass(frozen=True)
class PointPlan:
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
        return point_key(self.target.name, self.model, self.signature, self.payload, self.batch_size, self.load,
                         self.repeat)


def server_kind(client: Client, declared: str) -> tuple[str, str]:
    identity = getattr(client.transport, "server_identity", "") or ""
    if "serve-bench-local" in identity:
        name, _, version = identity.partition("/")
        return "serve-bench-local", version.split()[0] if version else ""
    return (declared or "unknown"), ""


async def measure_point(client: Client, plan: PointPlan, settings: PointSettings) -> Point:
    """Run one point against an open client (processes > 1 opens its own connections)."""
    target = plan.target
    image_size = image_size_of(client.signatures.get("serving_default"))
    prepared = client.prepare(make_inputs(plan.payload, plan.batch_size, client.signature_info, seed=plan.seed,
                                          image_size=image_size))
    metrics_url = target.resolved_metrics_url
    before, why = (await scrape(metrics_url, plan.model)) if metrics_url else (None, "no metrics endpoint configured")
    cpu = ProcessCpu(target.pid) if target.pid else None
    gpu = GpuSampler()
    if cpu:
        cpu.start()
    gpu.start()
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    load = plan.load
    if load.processes > 1:
        run = await asyncio.to_thread(
            run_in_processes, load.processes, target.url, plan.model, plan.signature, client.version, plan.payload,
            plan.batch_size, load, settings, plan.seed, image_size)
    elif load.mode == "closed":
        run = await run_closed_loop(
            client, prepared, load.concurrency or 1, settings,
            stable=lambda records, start, end: is_stable(records, start, end, settings.windows, settings.tolerance))
    else:
        offsets = arrival_offsets(load.rate or 1.0, settings.warmup_s + settings.min_duration_s,
                                  load.arrival or "poisson", plan.seed)
        run = await run_open_loop(client, prepared, load.rate or 1.0, offsets, settings)
    telemetry: dict[str, Any] = {}
    if cpu:
        telemetry.update(cpu.stop())
    telemetry.update(gpu.stop())
    server: dict[str, Any]
    if before is not None:
        after, why = await scrape(metrics_url, plan.model)
        server = breakdown(before, after) if after is not None else {"available": False, "reason": why}
    else:
        server = {"available": False, "reason": why}
    server.update(telemetry)
    figures = analyze(run, load.mode, settings)
    kind, version = server_kind(client, target.server)
    return Point(
        target=TargetInfo(target.name, target.url, target.protocol, target.device, kind, version),
        model=plan.model, signature=plan.signature, payload=plan.payload, batch_size=plan.batch_size,
        load=load, duration_s=figures["duration_s"], counts=figures["counts"], throughput=figures["throughput"],
        latency_us=figures["latency_us"], latency_uncorrected_us=figures["latency_uncorrected_us"],
        histogram=figures["histogram"], schedule_lag_us=figures["schedule_lag_us"],
        codec_us={"encode_once": round(prepared.encode_seconds * 1e6, 1), "decode_mean": round(figures["decode_us_mean"], 1),
                  "request_bytes": prepared.nbytes},
        client=figures["client"], server=server, stability=figures["stability"], repeat=plan.repeat, key=plan.key,
        started_at=started_at, warmup_s=settings.warmup_s, notes=figures["notes"],
    )
