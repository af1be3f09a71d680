"""One point's load from several processes, so one Python process is never the limit.

Each child connects on its own, prepares its own payload and runs its share
(closed loop: concurrency split; open loop: rate split, each with its own
seed). They start together at an agreed CLOCK_MONOTONIC instant (perf_counter
is system-wide on Linux). Each child reduces its records to a RunDigest
(histograms and counters, see _digest.py) and the parent adds the digests up,
as Locust's workers report stats entries to the master: what crosses the
process boundary grows with the number of time slices, not of requests.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from serve_bench.load._digest import RunDigest, digest_records, merge_digests
from serve_bench.load._generators import LoadRun, PointSettings, run_closed_loop, run_open_loop
from serve_bench.load._payload import make_inputs
from serve_bench.load._schedule import arrival_offsets
from serve_bench.stats import LoadInfo

__all__ = ["ChildPlan", "run_in_processes", "split"]

START_DELAY_S = 8.0  # time for spawned children to import and connect


@dataclass(frozen=True)
class ChildPlan:
    url: str
    model: str
    signature: str
    version: int | None
    payload: str
    batch_size: int
    load: LoadInfo
    settings: PointSettings
    seed: int
    image_size: tuple[int, int]
    start_at: float


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@dataclass(frozen=True)
class ChildResult:
    """What a child sends back: its digest and its own view of itself, no records."""

    digest: RunDigest
    loop_cpu_seconds: float
    process_cpu_seconds: float
    safety_cap_hits: int
    scheduled: int
    cut_off: str
    notes: tuple[str, ...]


async def _child_async(plan: ChildPlan) -> ChildResult:
    from serve_bench.client import connect

    async with connect(plan.url, plan.model, plan.signature, plan.version, plan.settings.timeout_s) as client:
        prepared = client.prepare(
            make_inputs(
                plan.payload, plan.batch_size, client.signature_info, seed=plan.seed, image_size=plan.image_size
            )
        )
        if plan.load.mode == "closed":
            run = await run_closed_loop(
                client,
                prepared,
                plan.load.concurrency or 1,
                plan.settings,
                start_at=plan.start_at,
                fixed_duration=plan.settings.min_duration_s,
            )
        else:
            rate = plan.load.rate or 1.0
            offsets = arrival_offsets(
                rate,
                plan.settings.min_duration_s,
                plan.load.arrival or "poisson",
                plan.seed,
                warmup_s=plan.settings.warmup_s,
            )
            run = await run_open_loop(client, prepared, rate, offsets, plan.settings, start_at=plan.start_at)
    digest = digest_records(run.records, plan.load.mode, run.window_start, run.window_end)
    return ChildResult(
        digest,
        run.loop_cpu_seconds,
        run.process_cpu_seconds,
        run.safety_cap_hits,
        run.scheduled,
        run.cut_off,
        tuple(run.notes),
    )


def _child(plan: ChildPlan) -> ChildResult:
    return asyncio.run(_child_async(plan))


def run_in_processes(
    processes: int,
    url: str,
    model: str,
    signature: str,
    version: int | None,
    payload: str,
    batch_size: int,
    load: LoadInfo,
    settings: PointSettings,
    seed: int,
    image_size: tuple[int, int],
) -> LoadRun:
    start_at = time.perf_counter() + START_DELAY_S
    plans = []
    if load.mode == "closed":
        shares = [c for c in split(load.concurrency or 1, processes) if c > 0]
        for i, share in enumerate(shares):
            plans.append(
                ChildPlan(
                    url,
                    model,
                    signature,
                    version,
                    payload,
                    batch_size,
                    LoadInfo("closed", concurrency=share),
                    settings,
                    seed + i,
                    image_size,
                    start_at,
                )
            )
    else:
        rate = (load.rate or 1.0) / processes
        for i in range(processes):
            plans.append(
                ChildPlan(
                    url,
                    model,
                    signature,
                    version,
                    payload,
                    batch_size,
                    LoadInfo("open", rate=rate, arrival=load.arrival),
                    settings,
                    seed + 1000 * i,
                    image_size,
                    start_at,
                )
            )
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(len(plans), mp_context=context) as pool:
        results = list(pool.map(_child, plans))
    digest = merge_digests([r.digest for r in results])
    run = LoadRun([], digest.window_start, digest.window_end, requested_rate=load.rate, digest=digest)
    # the busiest child's loop decides whether the generator was the limit
    run.loop_cpu_seconds = max(r.loop_cpu_seconds for r in results)
    run.process_cpu_seconds = sum(r.process_cpu_seconds for r in results)
    run.safety_cap_hits = sum(r.safety_cap_hits for r in results)
    run.scheduled = sum(r.scheduled for r in results)
    run.cut_off = next((r.cut_off for r in results if r.cut_off), "")
    run.notes = [f"load from {len(plans)} processes"] + [n for r in results for n in r.notes]
    return run
