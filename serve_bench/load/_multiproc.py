"""One point's load from several processes, so one Python process is never the limit.

Each child gets one ``ChildPlan``: the point's ``PointPlan`` as the parent built (and
checked) it, plus its share of the load and its own seed. It connects on its own,
prepares its own payload and runs its share (closed loop: concurrency split; open
loop: rate split, each drawing its own schedule). They start together at an agreed CLOCK_MONOTONIC instant (perf_counter
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
from serve_bench.load._plan import PointPlan
from serve_bench.load._recorder import first_errors
from serve_bench.load._schedule import ArrivalSchedule
from serve_bench.stats import LoadInfo

__all__ = ["ChildPlan", "run_in_processes", "split"]

START_DELAY_S = 8.0  # time for spawned children to import and connect


@dataclass(frozen=True)
class ChildPlan:
    """What one child process runs: the whole point's plan, and its part of it. Picklable."""

    point: PointPlan  # as the parent built it; its load is the whole point's
    share: LoadInfo  # this child's part of ``point.load``
    seed: int  # this child's own (payload and schedule)
    settings: PointSettings
    version: int | None
    image_size: tuple[int, int]
    start_at: float  # perf_counter instant at which every child starts


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

    point, share, settings = plan.point, plan.share, plan.settings
    async with connect(point.target.url, point.model, point.signature, plan.version, settings.timeout_s) as client:
        inputs = make_inputs(
            point.payload, point.batch_size, client.signature_info, seed=plan.seed, image_size=plan.image_size
        )
        prepared = client.prepare(inputs)
        if share.mode == "closed":
            run = await run_closed_loop(
                client,
                prepared,
                share.concurrency or 1,
                settings,
                start_at=plan.start_at,
                fixed_duration=settings.min_duration_s,
            )
        else:
            rate = share.rate or 1.0
            schedule = ArrivalSchedule(
                rate, settings.min_duration_s, share.arrival or "poisson", plan.seed, warmup_s=settings.warmup_s
            )
            run = await run_open_loop(client, prepared, rate, schedule, settings, start_at=plan.start_at)
    digest = digest_records(run.records, share.mode, run.window_start, run.window_end)
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


def _shares(point: PointPlan) -> list[tuple[LoadInfo, int]]:
    """Each child's part of the point's load, with its seed."""
    load, processes, seed = point.load, point.load.processes, point.seed
    if load.mode == "closed":
        counts = [c for c in split(load.concurrency or 1, processes) if c > 0]
        return [(LoadInfo("closed", concurrency=c), seed + i) for i, c in enumerate(counts)]
    rate = (load.rate or 1.0) / processes
    return [(LoadInfo("open", rate=rate, arrival=load.arrival), seed + 1000 * i) for i in range(processes)]


def run_in_processes(
    point: PointPlan, settings: PointSettings, *, version: int | None, image_size: tuple[int, int]
) -> LoadRun:
    """Run ``point`` from ``point.load.processes`` processes at once and add up what they measured.

    ``version`` is the model version the parent's client resolved, ``image_size`` the model's (H, W).
    """
    start_at = time.perf_counter() + START_DELAY_S
    plans = [ChildPlan(point, share, seed, settings, version, image_size, start_at) for share, seed in _shares(point)]
    load = point.load
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
    run.notes = first_errors([f"load from {len(plans)} processes"] + [n for r in results for n in r.notes])
    return run
