"""predict_stream's logic with the in-memory transport: flushing, backpressure, failures."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from serve_bench.client import BatchFailed, Client, FakeTransport, Unavailable, predict_stream
from serve_bench.client._fake import image_signature
from serve_bench.client._pipeline import StreamStats


def _client(handler, delay=0.0) -> tuple[Client, FakeTransport]:
    transport = FakeTransport(handler, delay=delay, signatures=image_signature(4, 4, 2))
    client = Client(transport, "fake")
    client.signatures = transport.signatures
    return client, transport


def _double(inputs):
    return {"features": inputs["images"][:, 0, 0, :2] * 2}


def _frame(i: int) -> np.ndarray:
    return np.full((4, 4, 3), i, np.float32)


async def test_partial_batch_flushes_after_max_delay():
    client, transport = _client(_double)

    async def slow_frames():
        for i in range(3):
            yield _frame(i)
            await asyncio.sleep(0.2)  # longer than max_delay: each frame goes alone

    results = [r async for r in predict_stream(client, slow_frames(), batch_size=8, max_delay_ms=30)]
    assert [r.count for r in results] == [1, 1, 1]
    assert [r.outputs["features"][0, 0] for r in results] == [0, 2, 4]


async def test_slow_server_slows_the_reader():
    client, transport = _client(_double, delay=0.05)
    read_times = []

    def frames():
        for i in range(40):
            read_times.append(time.perf_counter())
            yield _frame(i)

    stats = StreamStats()
    results = [r async for r in predict_stream(client, frames(), batch_size=2, max_delay_ms=1000, max_in_flight=2,
                                              stats=stats)]
    assert sum(r.count for r in results) == 40
    assert transport.peak_in_flight <= 2 and stats.peak_in_flight <= 2
    # 20 batches, 2 at a time, 50 ms each: the reader was held back to roughly the server's pace
    assert read_times[-1] - read_times[0] > 0.3


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
    results = [r async for r in predict_stream(client, [_frame(i) for i in range(12)], batch_size=4,
                                              on_error="skip")]
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
