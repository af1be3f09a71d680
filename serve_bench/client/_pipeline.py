"""predict_stream: frames in, features out, in order, with bounded memory.

At most ``max_in_flight`` batches are outstanding (sent, or answered but not
yet taken by the caller). When a slot is free, a batch is sent as soon as it
holds ``batch_size`` frames or its oldest frame has waited ``max_delay_ms``:
that bound applies while the server keeps up. When no slot is free, the batch
keeps filling up to ``batch_size`` and goes out when a slot frees; a full batch
with no free slot pauses the reading, so memory stays bounded when the server
or the caller is slow.

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

__all__ = ["BatchFailed", "BatchResult", "StreamStats", "predict_stream"]


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
        super().__init__(
            f"batch of frames {indices.start}..{indices.stop - 1} failed: {cause}", status=cause.status, url=cause.url
        )
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
    if batch_size < 1 or max_in_flight < 1 or not max_delay_ms >= 0:  # "not >=" also refuses NaN
        raise ValueError("batch_size and max_in_flight must be >= 1 and max_delay_ms >= 0")
    if on_error not in ("raise", "skip"):
        raise ValueError("on_error must be 'raise' or 'skip'")
    if input_name is None:
        info = client.signature_info
        if info is not None and len(info.inputs) != 1:
            raise ValueError(f"signature has inputs {sorted(info.inputs)}; name one with input_name=")
        input_name = next(iter(info.inputs)) if info is not None else "images"
    stats = stats if stats is not None else StreamStats()
    delay_s = max_delay_ms / 1000
    free_slots = max_in_flight
    slot_freed = asyncio.Event()
    ordered: asyncio.Queue[Any] = asyncio.Queue()  # holds at most max_in_flight batches plus the end marker

    async def send(first: int, batch: list[Any]) -> BatchResult:
        started = time.perf_counter()
        try:
            outputs = await client.predict({input_name: np.stack(batch)})
        except ServeBenchError as exc:
            if on_error == "raise":
                raise BatchFailed(range(first, first + len(batch)), exc) from exc
            return BatchResult(first, len(batch), None, time.perf_counter() - started, exc)
        return BatchResult(first, len(batch), outputs, time.perf_counter() - started)

    def flush(first: int, batch: list[Any]) -> None:
        nonlocal free_slots
        free_slots -= 1
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        stats.batches_sent += 1
        stats.frames_sent += len(batch)
        ordered.put_nowait(asyncio.ensure_future(send(first, batch)))

    async def produce() -> None:
        # A batch goes out when a slot is free and it is full, or its oldest frame has
        # waited max_delay_ms, or the stream ended. With no free slot the batch keeps
        # filling: a partial batch sent the moment a slot frees would waste the slot on
        # fewer frames while the next frames are already here. A full batch with no free
        # slot stops the reading, which bounds memory.
        source = _frames(frames).__aiter__()
        batch: list[Any] = []
        first = index = 0
        oldest = 0.0
        ended = False
        pending: asyncio.Future[Any] | None = None
        slot_waiter: asyncio.Future[Any] | None = None
        try:
            while True:
                now = time.perf_counter()
                due = bool(batch) and (len(batch) >= batch_size or ended or now >= oldest + delay_s)
                if due and free_slots > 0:
                    flush(first, batch)
                    batch, first = [], index
                    continue
                if ended and not batch:
                    break
                if not ended and pending is None and len(batch) < batch_size:
                    pending = asyncio.ensure_future(source.__anext__())
                waits: set[asyncio.Future[Any]] = {pending} if pending is not None else set()
                timeout = None
                if due:  # back-pressured: wait for a slot (and keep reading while the batch has room)
                    slot_freed.clear()
                    slot_waiter = asyncio.ensure_future(slot_freed.wait())
                    waits.add(slot_waiter)
                elif batch:
                    timeout = max(0.0, oldest + delay_s - now)
                await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if slot_waiter is not None:
                    slot_waiter.cancel()
                    slot_waiter = None
                if pending is None or not pending.done():
                    continue
                try:
                    frame = pending.result()
                except StopAsyncIteration:
                    ended = True
                    continue
                finally:
                    pending = None
                if not batch:
                    oldest = time.perf_counter()
                    first = index
                batch.append(frame)
                index += 1
            ordered.put_nowait(_END)
        except BaseException as exc:
            for future in (pending, slot_waiter):
                if future is not None:
                    future.cancel()
            ordered.put_nowait(exc)
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
                free_slots += 1
                slot_freed.set()
            yield result
    finally:
        producer.cancel()
        while not ordered.empty():
            leftover = ordered.get_nowait()
            if isinstance(leftover, asyncio.Future):
                leftover.cancel()
