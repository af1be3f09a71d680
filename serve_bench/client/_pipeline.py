"""predict_stream: frames in, features out, in order, with bounded memory.

A batch is sent when it holds ``batch_size`` frames or its oldest frame has
waited ``max_delay_ms``. At most ``max_in_flight`` batches are outstanding
(sent, or answered but not yet taken by the caller): when the server or the
caller is slow, reading frames pauses instead of memory growing.

A frame source that is a plain (sync) iterator, such as a video decoder, is
read on a worker thread, so decoding overlaps with requests in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from serve_bench.client._client import Client
from serve_bench.client._errors import ServeBenchError

__all__ = ["BatchResult", "BatchFailed", "StreamStats", "predict_stream"]


@dataclass(frozen=True)
class BatchResult:
    first_index: int  # index of the batch's first frame in the stream
    count: int
    outputs: dict[str, np.ndarray] | None  # None when the batch failed (on_error="skip")
    latency_seconds: float
    error: ServeBenchError | None = None

    @property
    def indices(self) -> range:
        return range(self.first_index, self.first_index + self.count)


class BatchFailed(ServeBenchError):
    """A batch failed; ``indices`` are the frames it covered. The cause is chained."""

    def __init__(self, indices: range, cause: ServeBenchError) -> None:
        super().__init__(f"batch of frames {indices.start}..{indices.stop - 1} failed: {cause}",
                         status=cause.status, url=cause.url)
        self.indices = indices


@dataclass
class StreamStats:
    batches_sent: int = 0
    frames_sent: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0


_END = object()


async def _frames(source: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(source, AsyncIterable):
        async for frame in source:
            yield frame
        return
    iterator = iter(source)
    sentinel = object()
    while True:
        frame = await asyncio.to_thread(next, iterator, sentinel)
        if frame is sentinel:
            return
        yield frame


async def predict_stream(
    client: Client,
    frames: Iterable[Any] | AsyncIterable[Any],
    batch_size: int,
    max_delay_ms: float = 50.0,
    max_in_flight: int = 4,
    *,
    input_name: str | None = None,
    on_error: Literal["raise", "skip"] = "raise",
    stats: StreamStats | None = None,
) -> AsyncIterator[BatchResult]:
    """Yield one BatchResult per batch, in input order."""
    if batch_size < 1 or max_in_flight < 1 or max_delay_ms < 0:
        raise ValueError("batch_size and max_in_flight must be >= 1 and max_delay_ms >= 0")
    if on_error not in ("raise", "skip"):
        raise ValueError("on_error must be 'raise' or 'skip'")
    if input_name is None:
        info = client.signature_info
        if info is not None and len(info.inputs) != 1:
            raise ValueError(f"signature has inputs {sorted(info.inputs)}; name one with input_name=")
        input_name = next(iter(info.inputs)) if info is not None else "images"
    stats = stats if stats is not None else StreamStats()
    slots = asyncio.Semaphore(max_in_flight)
    ordered: asyncio.Queue[Any] = asyncio.Queue()

    async def send(first: int, batch: list[Any]) -> BatchResult:
        started = time.perf_counter()
        try:
            outputs = await client.predict({input_name: np.stack(batch)})
        except ServeBenchError as exc:
            if on_error == "raise":
                raise BatchFailed(range(first, first + len(batch)), exc) from exc
            return BatchResult(first, len(batch), None, time.perf_counter() - started, exc)
        return BatchResult(first, len(batch), outputs, time.perf_counter() - started)

    async def flush(first: int, batch: list[Any]) -> None:
        await slots.acquire()  # backpressure: the reader waits here
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        stats.batches_sent += 1
        stats.frames_sent += len(batch)
        await ordered.put(asyncio.ensure_future(send(first, batch)))

    async def produce() -> None:
        source = _frames(frames).__aiter__()
        batch: list[Any] = []
        first = index = 0
        oldest = 0.0
        pending: asyncio.Future[Any] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(source.__anext__())
                timeout = None
                if batch:
                    timeout = max(0.0, oldest + max_delay_ms / 1000 - time.perf_counter())
                done, _ = await asyncio.wait({pending}, timeout=timeout)
                if not done:  # the oldest frame has waited long enough
                    await flush(first, batch)
                    batch, first = [], index
                    continue
                try:
                    frame = pending.result()
                except StopAsyncIteration:
                    break
                finally:
                    if pending.done():
                        pending = None
                if not batch:
                    oldest = time.perf_counter()
                    first = index
                batch.append(frame)
                index += 1
                if len(batch) >= batch_size:
                    await flush(first, batch)
                    batch = []
            if batch:
                await flush(first, batch)
            await ordered.put(_END)
        except BaseException as exc:
            if pending is not None:
                pending.cancel()
            await ordered.put(exc)
            if not isinstance(exc, Exception):
                raise

    producer = asyncio.ensure_future(produce())
    try:
        while True:
            item = await ordered.get()
            if item is _END:
                break
            if isinstance(item, BaseException):
                raise item
            try:
                result = await item
            finally:
                stats.in_flight -= 1
                slots.release()
            yield result
    finally:
        producer.cancel()
        while not ordered.empty():
            leftover = ordered.get_nowait()
            if isinstance(leftover, asyncio.Future):
                leftover.cancel()
