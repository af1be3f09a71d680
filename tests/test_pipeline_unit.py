"""predict_stream's logic with the in-memory transport: flushing, backpressure, failures."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from serve_bench.client import BatchFailed, Client, FakeTransport, Unavailable, fake_client, predict_stream
from serve_bench.client._fake import image_signature
from serve_bench.client._pipeline import StreamStats


def _client(handler, delay=0.0) -> tuple[Client, FakeTransport]:
    transport = FakeTransport(handler, delay=delay, signatures=image_signature(4, 4, 2))
    client = fake_client(transport)
    return client, transport


def _double(inputs):
    return {"features": inputs["images"][:, 0, 0, :2] * 2}


def _frame(i: int) -> np.ndarray:
    return np.full((4, 4, 3), i, np.float32)


class _Server:
    """A fake server whose answers the test releases one by one; remembers each batch's frame numbers."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self._answers: list[tuple[asyncio.Future[dict[str, np.ndarray]], dict[str, np.ndarray]]] = []

    def __call__(self, inputs: dict[str, np.ndarray]) -> asyncio.Future[dict[str, np.ndarray]]:
        self.batches.append([int(v) for v in inputs["images"][:, 0, 0, 0]])
        answer: asyncio.Future[dict[str, np.ndarray]] = asyncio.get_running_loop().create_future()
        self._answers.append((answer, _double(inputs)))
        return answer

    def release(self, call: int) -> None:
        future, outputs = self._answers[call]
        future.set_result(outputs)


class _Frames:
    """An async frame source the test feeds; ``asked`` counts how often the reader asked for a frame."""

    _END = None

    def __init__(self) -> None:
        self.queue: asyncio.Queue[np.ndarray | None] = asyncio.Queue()
        self.asked = 0

    def give(self, *numbers: int) -> None:
        for n in numbers:
            self.queue.put_nowait(_frame(n))

    def end(self) -> None:
        self.queue.put_nowait(self._END)

    async def __aiter__(self):
        while True:
            self.asked += 1
            frame = await self.queue.get()
            if frame is None:
                return
            yield frame


async def _until(condition, what: str) -> None:
    """Let the event loop run until ``condition()`` holds (a state, not a time, decides)."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def _settle() -> None:
    for _ in range(200):  # plenty of loop turns for anything that would happen without new input
        await asyncio.sleep(0)


def _collect(stream) -> tuple[list, asyncio.Task]:
    results: list = []

    async def run() -> None:
        async for result in stream:
            results.append(result)

    return results, asyncio.ensure_future(run())


async def test_back_pressured_batch_keeps_filling_instead_of_going_out_partial():
    # max_delay_ms=0: an idle server gets each frame at once; a busy one gets what piled up, in one batch
    server = _Server()
    client, _ = _client(server)
    frames = _Frames()
    results, task = _collect(predict_stream(client, frames, batch_size=4, max_delay_ms=0, max_in_flight=1))
    frames.give(0)
    await _until(lambda: len(server.batches) == 1, "first frame sent while the server is idle")
    assert server.batches == [[0]]
    for n in (1, 2, 3):  # one at a time, each long past max_delay before the next comes
        frames.give(n)
        await _until(lambda: frames.asked == n + 2, f"frame {n} read while the one slot is busy")
        await _settle()
    assert server.batches == [[0]]  # the oldest waited past max_delay, but no slot: no partial batch went out
    server.release(0)
    await _until(lambda: len(server.batches) == 2, "the batch sent when the slot freed")
    assert server.batches[1] == [1, 2, 3]
    frames.end()
    server.release(1)
    await task
    assert [r.first_index for r in results] == [0, 1]
    assert [list(r.outputs["features"][:, 0]) for r in results] == [[0], [2, 4, 6]]


async def test_full_batch_with_no_free_slot_pauses_the_reader():
    server = _Server()
    client, transport = _client(server)
    frames = _Frames()
    stats = StreamStats()
    results, task = _collect(predict_stream(client, frames, batch_size=2, max_delay_ms=0, max_in_flight=1, stats=stats))
    frames.give(0, 1, 2, 3, 4)  # all available at once
    await _until(lambda: frames.asked >= 3, "reading resumed")
    await _settle()
    # frame 0 went alone (idle server); [1, 2] is full and waits for the slot; frame 3 stays unread
    assert server.batches == [[0]]
    assert frames.asked == 3
    server.release(0)
    await _until(lambda: len(server.batches) == 2, "second batch")
    assert server.batches[1] == [1, 2]
    frames.end()
    for call in range(1, 3):
        await _until(lambda: len(server.batches) > call, f"batch {call + 1}")
        server.release(call)
    await task
    assert server.batches == [[0], [1, 2], [3, 4]]
    assert [r.count for r in results] == [1, 2, 2]
    assert transport.peak_in_flight == 1 and stats.peak_in_flight == 1


async def test_idle_server_gets_a_partial_batch_after_max_delay():
    # the stream pauses after frame 0 and never resumes until frame 0 was sent: only the
    # max_delay timer can have sent it (the outcome does not depend on how long it took)
    server = _Server()
    client, _ = _client(server)
    frames = _Frames()
    results, task = _collect(predict_stream(client, frames, batch_size=8, max_delay_ms=5, max_in_flight=2))
    frames.give(0)
    await asyncio.wait_for(_until_async(lambda: len(server.batches) == 1), timeout=30)
    assert server.batches == [[0]]
    frames.give(1, 2)
    frames.end()
    server.release(0)
    await _until(lambda: len(server.batches) == 2, "the rest at the end of the stream")
    server.release(1)
    await task
    assert server.batches == [[0], [1, 2]]
    assert [r.first_index for r in results] == [0, 1]


async def test_stream_end_flushes_without_waiting_for_max_delay():
    server = _Server()
    client, _ = _client(server)
    frames = _Frames()
    results, task = _collect(predict_stream(client, frames, batch_size=8, max_delay_ms=3_600_000, max_in_flight=2))
    frames.give(0, 1, 2)
    frames.end()
    await _until(lambda: len(server.batches) == 1, "flush at the end of the stream")
    server.release(0)
    await task
    assert server.batches == [[0, 1, 2]] and [r.count for r in results] == [3]


async def _until_async(condition) -> None:
    while not condition():
        await asyncio.sleep(0.001)


async def test_bad_settings_are_refused():
    client, _ = _client(_double)
    for kwargs in (
        {"batch_size": 0},
        {"batch_size": 2, "max_in_flight": 0},
        {"batch_size": 2, "max_delay_ms": float("nan")},
        {"batch_size": 2, "max_delay_ms": -1},
    ):
        with pytest.raises(ValueError):
            async for _ in predict_stream(client, [_frame(0)], **kwargs):
                pass


async def test_failed_batch_names_its_frames_fail_fast():
    calls = 0

    def flaky(inputs):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Unavailable("queue full", status="UNAVAILABLE")
        return _double(inputs)

    client, _ = _client(flaky)
    seen = []
    with pytest.raises(BatchFailed) as info:
        async for result in predict_stream(client, [_frame(i) for i in range(20)], batch_size=4, max_in_flight=1):
            seen.append(result.first_index)
    assert seen == [0, 4]
    assert info.value.indices == range(8, 12)
    assert isinstance(info.value.__cause__, Unavailable)


async def test_failed_batch_skip_mode_keeps_going():
    def flaky(inputs):
        if inputs["images"][0, 0, 0, 0] == 4:
            raise Unavailable("queue full", status="UNAVAILABLE")
        return _double(inputs)

    client, _ = _client(flaky)
    results = [r async for r in predict_stream(client, [_frame(i) for i in range(12)], batch_size=4, on_error="skip")]
    assert [r.first_index for r in results] == [0, 4, 8]
    assert results[1].outputs is None and list(results[1].indices) == [4, 5, 6, 7]
    assert isinstance(results[1].error, Unavailable)
    assert results[2].outputs is not None


async def test_reader_error_reaches_the_caller():
    client, _ = _client(_double)

    def frames():
        yield _frame(0)
        raise OSError("decoder broke")

    with pytest.raises(OSError, match="decoder broke"):
        async for _ in predict_stream(client, frames(), batch_size=4):
            pass
