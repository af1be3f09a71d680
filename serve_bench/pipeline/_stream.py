"""One stream: frames from a source, through predict_stream, timed end to end.

The frame source (a video decoder, or frames replayed from memory) runs on its
own thread and may run at most ``capacity`` frames ahead of what the stream has
taken. When predict_stream stops taking frames (all ``max_in_flight`` batches
outstanding), the source blocks; that blocked time is the decoder being held
back by back-pressure. The time with no request in flight is the server
waiting for frames. Each request is recorded by the load engine's recorder
(``load.RecordingClient``), so a stream's records are read by the one analysis.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from serve_bench.client import Client, predict_stream
from serve_bench.load import RecordingClient
from serve_bench.stats import RequestRecord

__all__ = ["StreamRun", "busy_seconds", "run_stream"]

_END = object()


class _Feeder:
    """Runs a sync source on a thread, at most ``capacity`` items ahead of the consumer."""

    def __init__(self, source: Iterable[Any], capacity: int) -> None:
        self._source = source
        self._room = threading.Semaphore(capacity)
        self._stop = threading.Event()
        self.held_seconds = 0.0
        self.ready_at: list[float] = []  # when each item came out of the source
        self.started = 0.0

    def _work(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
        def hand_over(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: the consumer gave up
                self._stop.set()

        try:
            for item in self._source:
                ready = time.perf_counter()
                if not self._room.acquire(blocking=False):
                    while not self._room.acquire(timeout=0.05):
                        if self._stop.is_set():
                            return
                    self.held_seconds += time.perf_counter() - ready
                if self._stop.is_set():
                    return
                self.ready_at.append(ready)
                hand_over((item,))
        except BaseException as exc:
            hand_over(exc)
        else:
            hand_over(_END)

    async def items(self) -> AsyncIterator[Any]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.started = time.perf_counter()
        thread = threading.Thread(target=self._work, args=(loop, queue), name="frame-source", daemon=True)
        thread.start()
        try:
            while True:
                got = await queue.get()
                if got is _END:
                    return
                if isinstance(got, BaseException):
                    raise got
                self._room.release()
                yield got[0]
        finally:
            self._stop.set()


@dataclass
class StreamRun:
    """What one stream did; times are time.perf_counter() seconds."""

    batch_size: int
    max_in_flight: int
    started: float  # the source began
    ended: float  # the last result was taken
    ready_at: np.ndarray  # per frame: when the source gave it out
    done_at: np.ndarray  # per frame: when its features reached the caller
    records: list[RequestRecord]
    held_seconds: float
    request_bytes: int
    response_bytes: int
    encode_seconds: float
    failed_frames: int = 0
    features: np.ndarray | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def frames(self) -> int:
        return len(self.done_at) - self.failed_frames

    @property
    def duration(self) -> float:
        return max(self.ended - self.started, 1e-9)

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.duration

    @property
    def server_idle_seconds(self) -> float:
        return max(0.0, self.duration - busy_seconds(self.records, self.started, self.ended))


def busy_seconds(records: list[RequestRecord], start: float, end: float) -> float:
    """Length of the union of the requests' [sent, done] intervals within [start, end]."""
    total = 0.0
    reach = start
    for record in sorted(records, key=lambda r: r.sent):
        lo, hi = max(record.sent, reach), min(record.done, end)
        if hi > lo:
            total += hi - lo
        reach = max(reach, record.done)
    return total


async def run_stream(
    client: Client,
    source: Iterable[Any],
    batch_size: int,
    max_in_flight: int,
    *,
    max_delay_ms: float = 50.0,
    capacity: int | None = None,
    output_name: str | None = None,
    keep_features: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> StreamRun:
    """Stream ``source`` through ``client`` with predict_stream and time it.

    Failed batches are counted (``failed_frames``) and the stream goes on; their
    rows in ``features`` are NaN. ``on_progress(frames_done)`` is called after each batch.
    """
    recorder = RecordingClient(client)  # the load engine's recorder: one record per request
    feeder = _Feeder(source, capacity if capacity is not None else batch_size)
    done_at: list[float] = []
    parts: list[np.ndarray | int] = []
    failed = 0
    errors: list[str] = []
    async for result in predict_stream(
        recorder, feeder.items(), batch_size, max_delay_ms, max_in_flight, on_error="skip"
    ):
        now = time.perf_counter()
        done_at.extend([now] * result.count)
        if on_progress is not None:
            on_progress(len(done_at))
        if result.outputs is None:
            failed += result.count
            if len(errors) < 5:
                errors.append(str(result.error))
            parts.append(result.count)
            continue
        if keep_features:
            name = output_name or ("features" if "features" in result.outputs else next(iter(result.outputs)))
            parts.append(np.asarray(result.outputs[name], dtype=np.float32))
    ended = time.perf_counter()
    features = _assemble(parts) if keep_features else None
    return StreamRun(
        batch_size,
        max_in_flight,
        feeder.started,
        ended,
        np.array(feeder.ready_at[: len(done_at)]),
        np.array(done_at),
        recorder.records,
        feeder.held_seconds,
        sum(r.nbytes for r in recorder.records),
        recorder.received_nbytes,
        recorder.encode_seconds,
        failed,
        features,
        errors,
    )


def _assemble(parts: list[np.ndarray | int]) -> np.ndarray:
    arrays = [p for p in parts if isinstance(p, np.ndarray)]
    width = arrays[0].shape[1:] if arrays else (0,)
    return (
        np.concatenate([p if isinstance(p, np.ndarray) else np.full((p, *width), np.nan, np.float32) for p in parts])
        if parts
        else np.zeros((0, *width), np.float32)
    )
