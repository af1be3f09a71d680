"""Closed loop (N requests in flight) and open loop (a seeded schedule), producing records.

Generators only report: each finished request appends one RequestRecord (the recorder, _recorder.py).
Statistics are computed afterwards from the records (see _analysis.py), so the
per-request cost inside the loop is a few attribute reads and one append.

Nothing in the process may stall a send while a point runs: the garbage
collector is paused for the run (see ``no_gc_pauses``), the open loop's
schedule is kept by a thread rather than asyncio's millisecond timers, and a
target that stops accepting connections ends the point at once (``cut_off``)
instead of being hammered with failing requests.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from serve_bench.client import Client, ConnectError, PreparedRequest, ServeBenchError
from serve_bench.load._recorder import Recorder
from serve_bench.load._schedule import ArrivalSchedule
from serve_bench.load._timer import precise_timer
from serve_bench.stats import RequestRecord

if TYPE_CHECKING:
    from serve_bench.load._digest import RunDigest

__all__ = ["DOWN_AFTER", "LoadRun", "PointSettings", "no_gc_pauses", "run_closed_loop", "run_open_loop"]

# Connection errors in a row, with no answer in between, after which the target is taken
# for down. A dead server refuses a request in ~0.1 ms, so this ends a point within a few
# milliseconds; a server that merely sheds load answers UNAVAILABLE (Unavailable, not
# ConnectError) and is measured as it is.
DOWN_AFTER = 20

# While another thread of ours holds the GIL (the open loop's fallback schedule thread, the
# closed loop's stability check), the event loop waits for it. CPython hands the GIL over only
# every switch interval (5 ms by default), which alone can push schedule lag p99 past a
# millisecond; 0.2 ms keeps the hand-over well under the lag goal.
_SWITCH_INTERVAL_S = 0.0002

USE_TIMERFD = True  # False: time open-loop sends with a thread (benchmarks compare the two)


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
    """What one generator run produced: records (or, from several processes, their digest) and the window.

    ``cut_off`` says why the run ended early ("" when it ran its course), e.g. the
    target went down. ``scheduled`` is the open loop's number of requests due inside
    the window (the requested rate times the window, by construction of the schedule).
    ``digest`` replaces ``records`` when the load came from several processes: each
    child sends histograms and counters, not its records (see _multiproc.py).
    """

    records: list[RequestRecord]
    window_start: float
    window_end: float
    loop_cpu_seconds: float = 0.0  # CPU of the event-loop thread during the window
    process_cpu_seconds: float = 0.0  # CPU of the whole process (gRPC's C threads included)
    safety_cap_hits: int = 0
    requested_rate: float | None = None
    notes: list[str] = field(default_factory=list)
    scheduled: int = 0
    cut_off: str = ""
    digest: RunDigest | None = None


def _cpu() -> tuple[float, float]:
    times = os.times()
    return time.thread_time(), times.user + times.system


_quiet_depth = 0  # runs in progress in this process that asked for no_gc_pauses (they may overlap)
_quiet_restore: tuple[bool, float] = (True, 0.005)


@contextmanager
def no_gc_pauses(switch_interval: float | None = None) -> Iterator[None]:
    """Run the block with the cyclic garbage collector off, after one full collection.

    A collection during a point stops every send for its duration (a full pass over a
    large heap takes milliseconds). Collecting first and freezing what survives leaves
    nothing old to scan; the client makes almost no cyclic garbage (measured: 0.003
    unreachable objects per gRPC request, none per REST request), so pausing the
    collector for a point costs no memory worth naming. ``switch_interval`` also
    shortens CPython's GIL switch interval for the block. Overlapping runs in one
    process (two generators at once) are counted: the last one out restores both.
    """
    global _quiet_depth, _quiet_restore
    if _quiet_depth == 0:
        _quiet_restore = (gc.isenabled(), sys.getswitchinterval())
        gc.collect()
        gc.freeze()
        gc.disable()
    _quiet_depth += 1
    if switch_interval is not None:
        sys.setswitchinterval(min(sys.getswitchinterval(), switch_interval))
    try:
        yield
    finally:
        _quiet_depth -= 1
        if _quiet_depth == 0:
            enabled, interval = _quiet_restore
            gc.unfreeze()
            if enabled:
                gc.enable()
            sys.setswitchinterval(interval)


class _Liveness:
    """Counts connection errors since the last answer; says when the target is down."""

    def __init__(self, limit: int = DOWN_AFTER) -> None:
        self.limit = limit
        self.in_a_row = 0
        self.answers = 0
        self.down = ""

    def answered(self) -> None:
        self.in_a_row = 0
        self.answers += 1

    def failed(self, exc: ServeBenchError) -> bool:
        """Record one failure; True once the target is taken for down."""
        if not isinstance(exc, ConnectError):
            self.in_a_row = 0
            return False
        self.in_a_row += 1
        if self.in_a_row >= self.limit and not self.down:
            since = "and no answer at all" if self.answers == 0 else f"after {self.answers} answers"
            self.down = f"target down: {self.in_a_row} connection errors in a row {since} ({exc})"
        return bool(self.down)


async def _wait(event: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` or until ``event`` is set; True when it was set."""
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), timeout=max(0.0, seconds))
    except TimeoutError:
        return False
    return True


async def run_closed_loop(
    client: Client,
    prepared: PreparedRequest,
    concurrency: int,
    settings: PointSettings,
    stable: Callable[[list[RequestRecord], float, float], bool] | None = None,
    start_at: float | None = None,
    fixed_duration: float | None = None,
) -> LoadRun:
    """``concurrency`` workers, each sending its next request as soon as the last one is answered."""
    recorder = Recorder(client, settings.timeout_s)
    records = recorder.records
    stop = False
    ended = asyncio.Event()
    down_at = 0.0  # when a worker took the target for down: the window ends there, not when the loop notices
    liveness = _Liveness()
    if start_at is not None:
        await asyncio.sleep(max(0.0, start_at - time.perf_counter()))
    timeout = settings.timeout_s

    async def worker() -> None:
        nonlocal stop, down_at
        send = recorder.send
        while not stop:
            try:
                await send(prepared)
            except ServeBenchError as exc:
                if liveness.failed(exc):
                    if not stop:
                        down_at = time.perf_counter()
                    stop = True
                    ended.set()
                continue
            liveness.answered()

    cpu_start: tuple[float, float] | None = None
    cpu_end = (0.0, 0.0)
    with no_gc_pauses(switch_interval=_SWITCH_INTERVAL_S):
        # processes started together share one window: from the agreed instant, not from when each woke
        window_start = (start_at if start_at is not None else time.perf_counter()) + settings.warmup_s
        workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
        try:
            if not await _wait(ended, window_start - time.perf_counter()):
                cpu_start = _cpu()
            before_window = len(records)
            last_stability_check = 0.0
            check_every = 0.5
            while not ended.is_set():
                if await _wait(ended, 0.05):
                    break
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
                    if now - last_stability_check < check_every:
                        continue
                    last_stability_check = now
                    # The check reads every record so far (~40 ms per 60k): on the loop it would stop
                    # every send for that long. It reads a snapshot on a worker thread instead, and
                    # runs at most ~5% of the time however long the point grows.
                    snapshot = records[:]
                    started = time.perf_counter()
                    settled = await asyncio.to_thread(stable, snapshot, window_start, now)
                    check_every = max(0.5, 20 * (time.perf_counter() - started))
                    if not settled:
                        continue
                break
            window_end = down_at or time.perf_counter()  # not when the loop noticed (a poll later)
            if fixed_duration is not None:  # never past the agreed window, whichever ended it
                window_end = min(window_end, window_start + fixed_duration)
            if cpu_start is not None:
                cpu_end = _cpu()
        finally:
            stop = True
            # let in-flight requests finish (bounded) so the server is idle for the next point
            _, pending = await asyncio.wait(workers, timeout=timeout)
            for task in pending:
                task.cancel()
    run = LoadRun(records, window_start, max(window_end, window_start), cut_off=liveness.down)
    run.notes += recorder.error_notes()
    if cpu_start is not None:
        run.loop_cpu_seconds = cpu_end[0] - cpu_start[0]
        run.process_cpu_seconds = cpu_end[1] - cpu_start[1]
    if (
        not run.cut_off
        and fixed_duration is None
        and settings.until_stable
        and window_end - window_start >= settings.max_duration_s
    ):
        run.notes.append(f"did not become stable within {settings.max_duration_s:g} s")
    return run


class _Dues:
    """The schedule's send times on the perf_counter clock, a chunk in memory at a time."""

    def __init__(self, chunks: Iterator[np.ndarray], t0: float) -> None:
        self._chunks = chunks
        self._t0 = t0
        self._times: list[float] = []
        self._position = 0
        self._refill()

    def _refill(self) -> bool:
        for chunk in self._chunks:
            if len(chunk):
                self._times = (self._t0 + chunk).tolist()
                self._position = 0
                return True
        self._times, self._position = [], 0
        return False

    def next(self) -> float | None:
        """The next send time, None once all are taken."""
        return self._times[self._position] if self._position < len(self._times) else None

    def take(self, now: float) -> list[float]:
        """Every send time up to ``now``: all of them go in one batch, one wake-up rather than several."""
        batch: list[float] = []
        while True:
            times, upper = self._times, self._position
            while upper < len(times) and times[upper] <= now:
                upper += 1
            batch += times[self._position : upper]
            self._position = upper
            if upper < len(times) or not self._refill():
                return batch


async def run_open_loop(
    client: Client,
    prepared: PreparedRequest,
    rate: float,
    offsets: ArrivalSchedule | np.ndarray,
    settings: PointSettings,
    start_at: float | None = None,
) -> LoadRun:
    """Send at the scheduled times whatever the server does; latency counts from the schedule.

    ``offsets`` are send times in seconds from the start, normally
    ``ArrivalSchedule(rate, settings.min_duration_s, arrival, seed, warmup_s=settings.warmup_s)``,
    drawn a chunk at a time as the point runs (or an array of them, e.g. ``arrival_offsets``).
    The measured window is [warm-up end, warm-up end + min_duration_s).

    The event loop waits for each send on a timerfd (see _timer.py): asyncio's own
    timers round to whole milliseconds. Without timerfd, a thread times the sends
    with time.sleep and hands them to the loop. A request's ``sent`` is when its
    coroutine starts on the loop, so the schedule lag it records includes every
    wait inside this process.
    """
    loop = asyncio.get_running_loop()
    recorder = Recorder(client, settings.timeout_s)
    records = recorder.records
    tasks: set[asyncio.Task[None]] = set()
    waiting: deque[float] = deque()
    cap_hits = 0
    finished = asyncio.Event()
    stop = threading.Event()
    liveness = _Liveness()
    cap = settings.safety_cap
    send = recorder.send
    perf = time.perf_counter
    t0 = window_start = window_end = 0.0  # set once the collector is paused (its collection takes time)
    if isinstance(offsets, ArrivalSchedule):
        scheduled, count = offsets.scheduled, offsets.count
    else:
        window = (offsets >= settings.warmup_s) & (offsets < settings.warmup_s + settings.min_duration_s)
        scheduled, count = int(np.count_nonzero(window)), len(offsets)

    async def one(intended: float) -> None:
        try:
            await send(prepared, intended)
        except ServeBenchError as exc:
            if liveness.failed(exc):
                stop.set()
                finished.set()
        else:
            liveness.answered()

    def launch(intended: float) -> None:
        task = loop.create_task(one(intended))
        tasks.add(task)
        task.add_done_callback(on_done)

    def on_done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if waiting and not stop.is_set():
            launch(waiting.popleft())

    def fire(due: list[float]) -> None:
        nonlocal cap_hits
        for intended in due:
            if stop.is_set():
                return
            if len(tasks) >= cap:
                cap_hits += 1
                waiting.append(intended)  # still timed from its schedule: the wait counts as latency
            else:
                launch(intended)

    dues = _Dues(iter(()), 0.0)

    def ticker() -> None:  # the fallback where there is no timerfd: a thread that sleeps
        while (due := dues.next()) is not None and not stop.is_set():
            delay = due - perf()
            if delay > 0:
                time.sleep(delay)
            loop.call_soon_threadsafe(fire, dues.take(perf()))
        loop.call_soon_threadsafe(finished.set)

    timer = precise_timer() if USE_TIMERFD else None

    def on_tick() -> None:  # the timerfd fired: send what is due, arm for the next
        assert timer is not None
        timer.clear()
        fire(dues.take(perf()))
        due = dues.next()
        if due is not None and not stop.is_set():
            timer.arm(due)
        else:
            loop.remove_reader(timer.fd)
            finished.set()

    thread = threading.Thread(target=ticker, name="open-loop-schedule", daemon=True)
    cpu_start: tuple[float, float] | None = None
    cpu_end = (0.0, 0.0)
    with no_gc_pauses(switch_interval=_SWITCH_INTERVAL_S):
        # the clock starts after the collection no_gc_pauses made, or the first sends would be late
        t0 = (start_at if start_at is not None else time.perf_counter()) + 0.05
        window_start = t0 + settings.warmup_s
        window_end = window_start + settings.min_duration_s
        dues = _Dues(offsets.chunks() if isinstance(offsets, ArrivalSchedule) else iter((offsets,)), t0)
        first = dues.next()
        if first is None:
            finished.set()
        elif timer is not None:
            loop.add_reader(timer.fd, on_tick)
            timer.arm(first)
        else:
            thread.start()
        try:
            if not await _wait(finished, window_start - time.perf_counter()):
                cpu_start = _cpu()
                await finished.wait()
                cpu_end = _cpu()
            deadline = time.perf_counter() + settings.drain_s
            while (tasks or waiting) and time.perf_counter() < deadline and not stop.is_set():
                await asyncio.sleep(0.01)
        finally:
            stop.set()
            if timer is not None:
                loop.remove_reader(timer.fd)
                timer.close()
            elif thread.is_alive():
                thread.join(timeout=5)
            for task in list(tasks):
                task.cancel()
    run = LoadRun(records, window_start, window_end, requested_rate=rate, scheduled=scheduled, cut_off=liveness.down)
    run.notes += recorder.error_notes()
    if run.cut_off:
        run.window_end = max(window_start, min(window_end, max((r.done for r in records), default=window_start)))
    if cpu_start is not None:
        run.loop_cpu_seconds = cpu_end[0] - cpu_start[0]
        run.process_cpu_seconds = cpu_end[1] - cpu_start[1]
    run.safety_cap_hits = cap_hits
    unanswered = count - len(records)
    if unanswered and not run.cut_off:
        run.notes.append(f"{unanswered} requests unanswered after a {settings.drain_s:g} s drain")
    return run
