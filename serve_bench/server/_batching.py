"""Server-side batching with TF Serving's semantics (SharedBatchScheduler queue + BatchingSession).

What follows TF Serving (tensorflow/core/kernels/batching_util/shared_batch_scheduler.h,
tensorflow_serving/batching/batching_session.cc):

* The queue is a deque of batches whose last one is open. A task joins the open
  batch unless it would push it past the execution batch size
  (``max_execution_batch_size`` with splitting on, else ``max_batch_size``);
  then the open batch closes and a new one opens.
* A batch thread takes the oldest closed batch; when only the open batch is
  left, it takes it once it is full or its first task has waited
  ``batch_timeout_micros``.
* A task larger than ``max_batch_size`` is INVALID_ARGUMENT. Without splitting, a
  task that does not fit the open batch when ``max_enqueued_batches`` batches
  exist (the open one included) is UNAVAILABLE; with splitting, a task larger
  than the remaining capacity (free batches x execution size + room in the open
  batch) is UNAVAILABLE.
* With ``enable_large_batch_splitting`` a task that does not fit the open batch
  is split: first the room left in the open batch, then pieces of the execution
  batch size, then the remainder (input_split_metadata.cc). Each piece queues on
  its own; the request's outputs are the pieces' outputs concatenated in order.
* One difference, on purpose: a task of zero rows is run at once, in-line, not queued. TF's
  queue never schedules an open batch whose tasks hold no rows (``_run_alone``), so in TF Serving
  such a request waits for one with rows; here it gets the answer batching off gives.
* With ``allowed_batch_sizes`` a batch is padded with copies of its first row up
  to the lowest allowed size not below it, and the padding is sliced off.

The queue lives on the event loop; TensorFlow runs on ``num_batch_threads``
worker threads, so the loop never blocks on it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from serve_bench.server._config import BatchingParams
from serve_bench.server._errors import ServingError, invalid
from serve_bench.server._metrics import Metrics

__all__ = ["BatchScheduler", "BatchStats", "BatchThreads", "split_sizes"]

RunFn = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]

# BatchingSession passes an empty thread pool name to the queuing_latency metric when
# tensorflow_model_server builds it (batching_session.cc:984-987, CreateBatchingSession).
QUEUING_LABEL = ""


@dataclass
class _Task:
    inputs: dict[str, np.ndarray]
    size: int
    enqueued: float
    future: asyncio.Future[dict[str, np.ndarray]]
    deadline: float | None = None  # perf_counter time; None: no timeout


@dataclass
class _Batch:
    opened: float = 0.0
    tasks: list[_Task] = field(default_factory=list)
    size: int = 0


@dataclass
class BatchStats:
    """Counts for tests and benchmarks; the metrics endpoint has the same figures."""

    batches: int = 0
    tasks: int = 0
    rejected_full: int = 0
    split_requests: int = 0
    processed_sizes: list[int] = field(default_factory=list)


def split_sizes(task_size: int, open_batch_room: int, limit: int) -> list[int]:
    """How TF Serving splits a task: the open batch's room, then ``limit``-sized pieces, then the rest.

    Follows tensorflow/core/kernels/batching_util/input_split_metadata.cc (generate_task_sizes).
    """
    sizes: list[int] = []
    remaining = task_size
    if open_batch_room > 0:
        head = min(open_batch_room, remaining)
        sizes.append(head)
        remaining -= head
    while remaining > 0:
        piece = min(limit, remaining)
        sizes.append(piece)
        remaining -= piece
    return sizes


class BatchThreads:
    """The server's one pool of batch threads, shared by every queue (model version x signature).

    tensorflow_model_server builds one SharedBatchScheduler for all models
    (servables/tensorflow/saved_model_bundle_factory.cc:95-100) and adds a queue per
    signature; a free thread takes work from the queues in turn, round-robin
    (shared_batch_scheduler.h GetNextWorkItem_Locked).
    """

    def __init__(self, params: BatchingParams) -> None:
        params.validate()  # a server with parameters TF Serving refuses does not start (BatchingParametersError)
        self.size = params.num_batch_threads
        self.idle = params.num_batch_threads
        self.executor = ThreadPoolExecutor(params.num_batch_threads, thread_name_prefix=params.thread_pool_name)
        self.queues: list[BatchScheduler] = []
        self._next = 0

    def schedule(self) -> None:
        """Give free threads batches, visiting the queues round-robin; arm each queue's timeout."""
        while self.idle and self.queues:
            for attempt in range(len(self.queues)):
                queue = self.queues[(self._next + attempt) % len(self.queues)]
                batch = queue._next_batch()
                if batch is not None:
                    self._next = (self._next + attempt + 1) % len(self.queues)
                    self.idle -= 1
                    queue._launch(batch)
                    break
            else:
                break
        for queue in self.queues:
            queue._arm_timer(bool(self.idle))

    def close(self) -> None:
        self.executor.shutdown(wait=True)


class BatchScheduler:
    """One queue: TF Serving's per-signature queue on the shared batch threads (its own when none given)."""

    def __init__(
        self, run: RunFn, params: BatchingParams, metrics: Metrics, threads: BatchThreads | None = None
    ) -> None:
        self._run = run
        self.params = params.validate()
        self._limit = params.execution_batch_size
        self._capacity = params.queue_capacity_batches
        self._metrics = metrics
        self._batches: deque[_Batch] = deque([_Batch()])  # the last one is open, as in TF's queue
        self._own_threads = threads is None
        self._threads = threads if threads is not None else BatchThreads(params)
        self._threads.queues.append(self)
        self._timer: asyncio.TimerHandle | None = None
        self._in_flight: set[asyncio.Task[None]] = set()
        self._closing = False
        self.stats = BatchStats()

    async def submit(
        self, inputs: dict[str, np.ndarray], size: int, timeout: float | None = None
    ) -> dict[str, np.ndarray]:
        """Queue one request of ``size`` rows; its outputs come back when its batch (or batches) ran.

        ``timeout`` (seconds; the gRPC deadline TF Serving passes as RunOptions.timeout_in_ms): a batch whose
        every task waited past its deadline in the queue is not run and fails with RESOURCE_EXHAUSTED.
        """
        params = self.params
        for _ in inputs:  # BatchingSession::ComputeInputSize records one sample per input tensor
            self._metrics.observe("batching_session:input_batch_size", size)
        if size > params.max_batch_size:
            raise invalid(f"Task size {size} is larger than maximum input batch size {params.max_batch_size}")
        if size == 0:
            return await self._run_alone(inputs)
        self._check_capacity(size)
        now = time.perf_counter()
        deadline = now + timeout if timeout is not None and timeout > 0 else None
        loop = asyncio.get_running_loop()
        room = self._limit - self._batches[-1].size
        if size <= room or not params.enable_large_batch_splitting:
            pieces = [size]
        else:
            pieces = split_sizes(size, room, self._limit)
            self.stats.split_requests += 1
        tasks: list[_Task] = []
        offset = 0
        for piece in pieces:
            part = inputs if len(pieces) == 1 else {k: v[offset : offset + piece] for k, v in inputs.items()}
            offset += piece
            task = _Task(part, piece, now, loop.create_future(), deadline)
            tail = self._batches[-1]
            if tail.size + piece > self._limit:
                tail = self._start_new_batch()
            if not tail.tasks:
                tail.opened = now
            tail.tasks.append(task)
            tail.size += piece
            tasks.append(task)
        self._schedule()
        if len(tasks) == 1:
            return await tasks[0].future
        return await _gather_pieces(tasks)

    async def _run_alone(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A task of zero rows, run at once as the unbatched session runs it.

        TF 2.21's queue never schedules an open batch whose tasks hold no rows
        (shared_batch_scheduler.h:1443-1445, PeekBatchPriorityImpl): in TF Serving such a request
        waits until a request with rows joins its batch, past any deadline, and blocks the queue's
        close. Nothing is gained by queueing no work, so it runs in-line, as BatchingSession runs a
        request it does not batch (batching_session.cc:411-431), on a thread of its own: the answer
        is the one the server gives with batching off.
        """
        try:
            return await asyncio.get_running_loop().run_in_executor(None, self._run, inputs)
        except ServingError:
            raise
        except Exception as exc:  # as _process: a TensorFlow failure is INTERNAL, never a lost request
            message = str(exc) or type(exc).__name__
            del exc  # keep no traceback (and with it the request's tensors) alive
            raise ServingError("INTERNAL", message) from None

    def _check_capacity(self, size: int) -> None:
        tail = self._batches[-1]
        if self.params.enable_large_batch_splitting:
            free = (self._capacity - len(self._batches)) * self._limit + (self._limit - tail.size)
            if size > free:
                self.stats.rejected_full += 1
                raise ServingError(
                    "UNAVAILABLE",
                    f"The batch scheduling queue to which this task was submitted is full; task size is {size} but "
                    f"scheduling capacity is only {free} (num_enqueued_batches={len(self._batches)}, "
                    f"max_enqueued_batches={self._capacity}, open_batch_size={tail.size}, "
                    f"max_execution_batch_size={self._limit})",
                )
            return
        # TF keeps this looser check (against max_batch_size) for backward compatibility
        if tail.size + size > self.params.max_batch_size and len(self._batches) >= self._capacity:
            self.stats.rejected_full += 1
            raise ServingError(
                "UNAVAILABLE",
                f"The batch scheduling queue to which this task was submitted is full; currently "
                f"{len(self._batches)} batches enqueued and max_enqueued_batches is {self._capacity}",
            )

    def _start_new_batch(self) -> _Batch:
        batch = _Batch()
        self._batches.append(batch)
        return batch

    def _next_batch(self) -> _Batch | None:
        """Queue::ScheduleBatch: the oldest closed batch, or the open one once full or timed out."""
        if len(self._batches) == 1:
            open_batch = self._batches[0]
            if open_batch.size == 0:
                return None
            due = open_batch.opened + self.params.batch_timeout_micros / 1e6
            if self._closing or open_batch.size >= self._limit or time.perf_counter() >= due:
                self._start_new_batch()
        if len(self._batches) >= 2:
            return self._batches.popleft()
        return None

    def _schedule(self) -> None:
        self._threads.schedule()

    def _launch(self, batch: _Batch) -> None:
        job = asyncio.get_running_loop().create_task(self._process(batch))
        self._in_flight.add(job)
        job.add_done_callback(self._in_flight.discard)

    def _arm_timer(self, threads_free: bool) -> None:
        """Wake the pool when the open batch's timeout falls due (only useful while a thread is free)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        open_batch = self._batches[-1]
        if threads_free and len(self._batches) == 1 and open_batch.size:
            loop = asyncio.get_running_loop()
            wait = open_batch.opened + self.params.batch_timeout_micros / 1e6 - time.perf_counter()
            self._timer = loop.call_at(loop.time() + max(0.0, wait), self._schedule)

    async def _process(self, batch: _Batch) -> None:
        loop = asyncio.get_running_loop()
        try:
            dequeued = time.perf_counter()
            for task in batch.tasks:  # BatchingSession::ProcessBatch, per task, whole microseconds
                self._metrics.observe(
                    "batching_session:queuing_latency", int((dequeued - task.enqueued) * 1e6), (QUEUING_LABEL,)
                )
            if all(task.deadline is not None and task.deadline <= dequeued for task in batch.tasks):
                # batching_session.cc:744-775: not run when every task timed out in the queue
                _fail(batch, "RESOURCE_EXHAUSTED", "Run() timeout exceeded while waiting in batching queue")
                return
            try:
                outputs = await loop.run_in_executor(self._threads.executor, self._run_merged, batch)
            except ServingError as exc:
                _fail(batch, exc.code, exc.message)
                return
            except Exception as exc:  # a TensorFlow failure must not strand the waiting requests
                _fail(batch, "INTERNAL", str(exc) or type(exc).__name__)
                return
            offset = 0
            for task in batch.tasks:
                if not task.future.done():  # the client may have gone away
                    task.future.set_result({k: v[offset : offset + task.size] for k, v in outputs.items()})
                offset += task.size
        finally:
            self._threads.idle += 1
            self._schedule()

    def _padded_size(self, size: int) -> int:
        """batching_util.cc RoundToLowestAllowedBatchSize: the first allowed size >= size, else size."""
        for allowed in self.params.allowed_batch_sizes:
            if allowed >= size:
                return allowed
        return size

    def _run_merged(self, batch: _Batch) -> dict[str, np.ndarray]:
        """On a batch thread: concatenate, pad, run once, drop the padding."""
        names = batch.tasks[0].inputs.keys()
        padded = self._padded_size(batch.size)
        padding = padded - batch.size
        # BatchingSession::MergeInputTensors records these before merging
        self._metrics.observe("batching_session:padding_size", padding, (str(padded),))
        self._metrics.observe("batching_session:processed_batch_size", padded)
        for task in batch.tasks[1:]:
            if task.inputs.keys() != names:
                raise invalid("requests in one batch must send the same inputs")
        merged: dict[str, np.ndarray] = {}
        for name in names:
            parts = _same_shapes(
                name, [task.inputs[name] for task in batch.tasks], self.params.pad_variable_length_inputs
            )
            if padding:
                parts.append(np.repeat(parts[-1][:1], padding, axis=0))
            merged[name] = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        self.stats.batches += 1
        self.stats.tasks += len(batch.tasks)
        self.stats.processed_sizes.append(padded)
        try:
            outputs = self._run(merged)
        finally:
            self._metrics.inc("batching_session:wrapped_run_count")  # counted whether Run succeeded or not
        if padding:
            outputs = {k: v[: batch.size] for k, v in outputs.items()}
        return outputs

    async def drain(self) -> None:
        """Wait until every queued and running batch has finished (shutdown)."""
        self._closing = True  # a closed queue schedules its open batch at once, as Queue::closed_ does
        while len(self._batches) > 1 or self._batches[0].size or self._in_flight:
            self._schedule()
            await asyncio.sleep(0.005)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self in self._threads.queues:
            self._threads.queues.remove(self)
        if self._own_threads or not self._threads.queues:
            self._threads.close()


def _same_shapes(name: str, parts: list[np.ndarray], pad: bool) -> list[np.ndarray]:
    """One input's tensors from the batch's tasks, made mergeable as BatchingSession::MergeInputTensors does
    (batching_session.cc:518-548): equal beyond dimension 0, or with pad_variable_length_inputs padded after
    each dimension to the batch's largest size with the tensor's own first value (batching_util.cc:73-100)."""
    if len(parts) == 1 or all(p.shape[1:] == parts[0].shape[1:] and p.ndim == parts[0].ndim for p in parts):
        return parts
    if not pad:
        raise ServingError(
            "FAILED_PRECONDITION",
            f"Tensors with name '{name}' from different tasks have different shapes and padding is turned off. "
            "Set pad_variable_length_inputs to true, or ensure that all tensors with the same name have equal "
            "dimensions starting with the first dim.",
        )
    if any(p.ndim != parts[0].ndim for p in parts):
        raise invalid(f"input '{name}': tasks disagree on the rank; only dimension sizes can be padded")
    if not 1 <= parts[0].ndim <= 6:
        raise invalid("Only tensors with rank from 1 to 6 can be padded.")
    widest = [max(p.shape[d] for p in parts) for d in range(parts[0].ndim)]
    padded: list[np.ndarray] = []
    for part in parts:
        extra = [(0, 0)] + [(0, widest[d] - part.shape[d]) for d in range(1, part.ndim)]
        if not any(after for _, after in extra):
            padded.append(part)
        elif part.size == 0:
            raise invalid("Got empty tensor in batch of non-empty tensors.")
        else:
            padded.append(np.pad(part, extra, mode="constant", constant_values=part.flat[0]))
    return padded


def _fail(batch: _Batch, code: str, message: str) -> None:
    for task in batch.tasks:
        if not task.future.done():
            task.future.set_exception(ServingError(code, message))


async def _gather_pieces(tasks: list[_Task]) -> dict[str, np.ndarray]:
    """The outputs of a split request: each output's pieces concatenated in order (SplitInputTask's barrier)."""
    results = await asyncio.gather(*(task.future for task in tasks), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    parts = [r for r in results if isinstance(r, dict)]
    return {name: np.concatenate([part[name] for part in parts], axis=0) for name in parts[0]}
