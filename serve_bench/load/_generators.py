"""Closed loop (N requests in flight) and open loop (a seeded schedule), producing records.

Generators only report: each finished request appends one RequestRecord.
Statistics are computed afterwards from the records (see _analysis.py), so the
per-request cost inside the loop is a few attribute reads and one append.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from serve_bench.client import Client, PreparedRequest, ServeBenchError
from serve_bench.stats import OK, RequestRecord

__all__ = ["LoadRun", "PointSettings", "run_closed_loop", "run_open_loop"]


@dataclass(frozen=True)
class PointSettings:
    """How long a point runs and when it counts as stable (perf_analyzer's defaults where it has them)."""

    warmup_s: float = 2.0
    min_duration_s: float = 5.0
    min_requests: int = 50
    windows: int = 3
    tolerance: float = 0.10
    until_stable: bool = False
    max_duration_s: float = 60.0
    timeout_s: float = 30.0
    safety_cap: int = 2048  # open loop: most requests in flight before sends queue in the client
    drain_s: float = 30.0  # open loop: how long to wait for late answers after the schedule ends


@dataclass
class LoadRun:
    """What one generator run produced: records plus the measurement window."""

    records: list[RequestRecord]
    window_start: float
    window_end: float
    loop_cpu_seconds: float = 0.0  # CPU of the event-loop thread during the window
    process_cpu_seconds: float = 0.0  # CPU of the whole process (gRPC's C threads included)
    safety_cap_hits: int = 0
    requested_rate: float | None = None
    notes: list[str] = field(default_factory=list)


def _cpu() -> tuple[float, float]:
    times = __import__("os").times()
    return time.thread_time(), times.user + times.system


async def _one(client: Client, prepared: PreparedRequest, intended: float, sent: float, timeout: float,
               records: list[RequestRecord]) -> None:
    try:
        response = await client.predict_prepared(prepared, timeout)
        status, decode = OK, response.decode_seconds
    except ServeBenchError as exc:
        status, decode = exc.status or type(exc).__name__, 0.0
    records.append(RequestRecord(intended, sent, time.perf_counter(), status, prepared.items, prepared.nbytes, decode))


async def run_closed_loop(client: Client, prepared: PreparedRequest, concurrency: int, settings: PointSettings,
                          stable: Callable[[list[RequestRecord], float, float], bool] | None = None,
                          start_at: float | None = None, fixed_duration: float | None = None) -> LoadRun:
    """``concurrency`` workers, each sending its next request as soon as the last one is answered."""
    records: list[RequestRecord] = []
    stop = False
    if start_at is not None:
        await asyncio.sleep(max(0.0, start_at - time.perf_counter()))
    t0 = time.perf_counter()
    window_start = t0 + settings.warmup_s
    timeout = settings.timeout_s

    async def worker() -> None:
        append = records.append
        predict = client.predict_prepared
        items, nbytes = prepared.items, prepared.nbytes
        perf = time.perf_counter
        while not stop:
            sent = perf()
            try:
                response = await predict(prepared, timeout)
                status, decode = OK, response.decode_seconds
            except ServeBenchError as exc:
                status, decode = exc.status or type(exc).__name__, 0.0
            append(RequestRecord(sent, sent, perf(), status, items, nbytes, decode))

    workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
    cpu_start: tuple[float, float] | None = None
    try:
        await asyncio.sleep(settings.warmup_s)
        cpu_start = _cpu()
        before_window = len(records)
        last_stability_check = 0.0
        while True:
            await asyncio.sleep(0.05)
            now = time.perf_counter()
            elapsed = now - window_start
            if fixed_duration is not None:
                if elapsed >= fixed_duration:
                    break
                continue
            if elapsed >= settings.max_duration_s:
                break
            if elapsed < settings.min_duration_s:
                continue
            if len(records) - before_window < settings.min_requests:
                continue
            if settings.until_stable and stable is not None:
                if now - last_stability_check < 0.5:
                    continue
                last_stability_check = now
                if not stable(records, window_start, now):
                    continue
            break
        window_end = time.perf_counter()
        cpu_end = _cpu()
    finally:
        stop = True
        # let in-flight requests finish (bounded) so the server is idle for the next point
        done, pending = await asyncio.wait(workers, timeout=timeout)
        for task in pending:
            task.cancel()
    run = LoadRun(records, window_start, window_end)
    if cpu_start is not None:
        run.loop_cpu_seconds = cpu_end[0] - cpu_start[0]
        run.process_cpu_seconds = cpu_end[1] - cpu_start[1]
    if fixed_duration is None and settings.until_stable and window_end - window_start >= settings.max_duration_s:
        run.notes.append(f"did not become stable within {settings.max_duration_s:g} s")
    return run


async def run_open_loop(client: Client, prepared: PreparedRequest, rate: float, offsets: np.ndarray,
                        settings: PointSettings, start_at: float | None = None) -> LoadRun:
    """Send at the scheduled times whatever the server does; latency counts from the schedule.

    A thread times the sends with time.sleep (nanosecond clock) and hands each
    to the event loop; asyncio's own timers round to whole milliseconds.
    """
    loop = asyncio.get_running_loop()
    records: list[RequestRecord] = []
    tasks: set[asyncio.Task[None]] = set()
    waiting: deque[float] = deque()
    cap_hits = 0
    finished = asyncio.Event()
    stop = threading.Event()
    timeout = settings.timeout_s
    t0 = (start_at if start_at is not None else time.perf_counter()) + 0.05
    window_start = t0 + settings.warmup_s
    window_end = t0 + float(offsets[-1]) if len(offsets) else window_start

    def launch(intended: float) -> None:
        task = loop.create_task(_one(client, prepared, intended, time.perf_counter(), timeout, records))
        tasks.add(task)
        task.add_done_callback(on_done)

    def on_done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if waiting:
            launch(waiting.popleft())

    def fire(intended: float) -> None:
        nonlocal cap_hits
        if len(tasks) >= settings.safety_cap:
            cap_hits += 1
            waiting.append(intended)  # still timed from its schedule: the wait counts as latency
            return
        launch(intended)

    def ticker() -> None:
        perf, sleep = time.perf_counter, time.sleep
        for offset in offsets:
            due = t0 + offset
            delay = due - perf()
            if delay > 0:
                sleep(delay)
            if stop.is_set():
                break
            loop.call_soon_threadsafe(fire, due)
        loop.call_soon_threadsafe(finished.set)

    thread = threading.Thread(target=ticker, name="open-loop-schedule", daemon=True)
    cpu_start: tuple[float, float] | None = None
    thread.start()
    try:
        await asyncio.sleep(max(0.0, window_start - time.perf_counter()))
        cpu_start = _cpu()
        await finished.wait()
        cpu_end = _cpu()
        deadline = time.perf_counter() + settings.drain_s
        while (tasks or waiting) and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        thread.join(timeout=5)
        for task in list(tasks):
            task.cancel()
    run = LoadRun(records, window_start, window_end, requested_rate=rate)
    if cpu_start is not None:
        run.loop_cpu_seconds = cpu_end[0] - cpu_start[0]
        run.process_cpu_seconds = cpu_end[1] - cpu_start[1]
    run.safety_cap_hits = cap_hits
    unanswered = len(offsets) - len(records)
    if unanswered:
        run.notes.append(f"{unanswered} requests unanswered after a {settings.drain_s:g} s drain")
    return run
