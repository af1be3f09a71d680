"""Server-side batching with TF Serving's semantics (BasicBatchScheduler + BatchingSession).

* Requests join the open batch until it would exceed ``max_batch_size``; then a
  new batch opens. A batch is processed when a batch thread is free and the
  batch is full or its oldest request has waited ``batch_timeout_micros``.
* At most ``max_enqueued_batches`` batches wait (the open one included); past
  that a request is refused with UNAVAILABLE, so memory stays bounded.
* A request larger than ``max_batch_size`` is refused with INVALID_ARGUMENT.
* With ``allowed_batch_sizes`` the merged batch is padded up to the next
  allowed size (with copies of its first row) and the padding is sliced off.

The queue lives on the event loop; TensorFlow runs on ``num_batch_threads``
worker threads, so the loop never blocks on it.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from serve_bench.server._config import BatchingParams
from serve_bench.server._errors import ServingError, invalid
from serve_bench.server._metrics import Metrics

__all__ = ["BatchScheduler", "BatchStats"]

RunFn = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass
class _Task:
    inputs: dict[str, np.ndarray]
    size: int
    enqueued: float
    future: asyncio.Future[dict[str, np.ndarray]]


@dataclass
class _Batch:
    opened: float
    tasks: list[_Task] = field(default_factory=list)
    size: int = 0
    closed: bool = False


@dataclass
class BatchStats:
    """Counts for tests and benchmarks; the metrics endpoint has the same figures."""

    batches: int = 0
    tasks: int = 0
    rejected_full: int = 0
    processed_sizes: list[int] = field(default_factory=list)


class BatchScheduler:
    def __init__(self, run: RunFn, params: BatchingParams, metrics: Metrics) -> None:
        self._run = run
        self.params = params
        self._metrics = metrics
        self._queue: deque[_Batch] = deque()
        self._idle_threads = params.num_batch_threads
        self._executor = ThreadPoolExecutor(params.num_batch_threads, thread_name_prefix=params.thread_pool_name)
        self._timer: asyncio.TimerHandle | None = None
        self._in_flight: set[asyncio.Task[None]] = set()
        self.stats = BatchStats()

    async def submit(self, inputs: dict[str, np.ndarray], size: int) -> dict[str, np.ndarray]:
        params = self.params
        if size > params.max_batch_size:
            raise invalid(f"Task size {size} is larger than maximum input batch size {params.max_batch_size}")
        now = time.perf_counter()
        tail = self._queue[-1] if self._queue else None
        if tail is None or tail.closed or tail.size + size > params.max_batch_size:
            if tail is not None:
                tail.closed = True
            if len(self._queue) >= params.max_enqueued_batches:
                self.stats.rejected_full += 1
                raise ServingError("UNAVAILABLE", "The batch scheduling queue to which this task was submitted is full")
            tail = _Batch(opened=now)
            self._queue.append(tail)
        loop = asyncio.get_running_loop()
        task = _Task(inputs, size, now, loop.create_future())
        tail.tasks.append(task)
        tail.size += size
        if tail.size >= params.max_batch_size:
            tail.closed = True
        self._metrics.observe("batching_session:input_batch_size", size)
        self._schedule()
        return await task.future

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        loop = asyncio.get_running_loop()
        timeout = self.params.batch_timeout_micros / 1e6
        while self._idle_threads and self._queue:
            head = self._queue[0]
            deadline = head.opened + timeout
            if not head.closed and time.perf_counter() < deadline:
                self._timer = loop.call_at(loop.time() + (deadline - time.perf_counter()), self._schedule)
                return
            self._queue.popleft()
            head.closed = True
            self._idle_threads -= 1
            job = loop.create_task(self._process(head))
            self._in_flight.add(job)
            job.add_done_callback(self._in_flight.discard)

    async def _process(self, batch: _Batch) -> None:
        loop = asyncio.get_running_loop()
        try:
            started = time.perf_counter()
            for task in batch.tasks:
                self._metrics.observe("batching_session:queuing_latency", (started - task.enqueued) * 1e6,
                                      (self.params.thread_pool_name,))
            try:
                outputs = await loop.run_in_executor(self._executor, self._run_merged, batch)
            except ServingError as exc:
                for task in batch.tasks:
                    if not task.future.done():
                        task.future.set_exception(ServingError(exc.code, exc.message))
                return
            except Exception as exc:  # a TensorFlow failure must not strand the waiting requests
                for task in batch.tasks:
                    if not task.future.done():
                        task.future.set_exception(ServingError("INTERNAL", str(exc) or type(exc).__name__))
                return
            offset = 0
            for task in batch.tasks:
                if not task.future.done():  # the client may have gone away
                    task.future.set_result({k: v[offset:offset + task.size] for k, v in outputs.items()})
                offset += task.size
        finally:
            self._idle_threads += 1
            self._schedule()

    def _padded_size(self, size: int) -> int:
        allowed = self.params.allowed_batch_sizes
        if not allowed:
            return size
        return allowed[bisect.bisect_left(allowed, size)]

    def _run_merged(self, batch: _Batch) -> dict[str, np.ndarray]:
        """On a batch thread: concatenate, pad, run once, drop the padding."""
        names = batch.tasks[0].inputs.keys()
        for task in batch.tasks[1:]:
            if task.inputs.keys() != names:
                raise invalid("requests in one batch must send the same inputs")
        padded = self._padded_size(batch.size)
        padding = padded - batch.size
        merged: dict[str, np.ndarray] = {}
        for name in names:
            parts = [task.inputs[name] for task in batch.tasks]
            if padding:
                first = parts[0][:1]
                parts.append(np.repeat(first, padding, axis=0))
            try:
                merged[name] = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
            except ValueError as exc:
                raise invalid(f"input '{name}' cannot be batched: {exc}") from exc
        self._metrics.observe("batching_session:processed_batch_size", padded)
        self._metrics.observe("batching_session:padding_size", padding, (str(padded),))
        self._metrics.inc("batching_session:wrapped_run_count")
        self.stats.batches += 1
        self.stats.tasks += len(batch.tasks)
        self.stats.processed_sizes.append(padded)
        outputs = self._run(merged)
        if padding:
            outputs = {k: v[: batch.size] for k, v in outputs.items()}
        return outputs

    async def drain(self) -> None:
        """Wait until every queued and running batch has finished (shutdown)."""
        while self._queue or self._in_flight:
            if self._queue and self._idle_threads:
                self._queue[0].closed = True  # no more waiting for the timeout
                self._schedule()
            await asyncio.sleep(0.005)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._executor.shutdown(wait=True)
