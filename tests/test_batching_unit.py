"""BatchScheduler logic with a fake model (a real thread that sleeps): deterministic timing."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from serve_bench.server._batching import BatchScheduler
from serve_bench.server._config import BatchingParams
from serve_bench.server._errors import ServingError
from serve_bench.server._metrics import Metrics


class FakeModel:
    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.calls: list[int] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, inputs):
        self.gate.wait(5)
        time.sleep(self.seconds)
        x = inputs["x"]
        self.calls.append(len(x))
        return {"y": x * 2}


def _x(n: int, start: int = 0) -> dict:
    return {"x": np.arange(start, start + n, dtype=np.float32).reshape(n, 1)}


async def test_requests_merge_and_results_return_in_order():
    model = FakeModel()
    scheduler = BatchScheduler(model, BatchingParams(max_batch_size=8, batch_timeout_micros=50_000,
                                                     num_batch_threads=1), Metrics())
    results = await asyncio.gather(*(scheduler.submit(_x(1, i), 1) for i in range(6)))
    assert model.calls == [6]  # one call, waited for the timeout
    for i, result in enumerate(results):
        assert result["y"].tolist() == [[2.0 * i]]
    scheduler.close()


async def test_full_batch_goes_without_waiting_for_timeout():
    model = FakeModel()
    scheduler = BatchScheduler(model, BatchingParams(max_batch_size=4, batch_timeout_micros=10_000_000,
                                                     num_batch_threads=1), Metrics())
    started = time.perf_counter()
    await asyncio.gather(*(scheduler.submit(_x(1, i), 1) for i in range(4)))
    assert time.perf_counter() - started < 2
    assert model.calls == [4]
    scheduler.close()


async def test_queue_bound_rejects_with_unavailable():
    model = FakeModel()
    model.gate.clear()  # the first batch blocks its thread
    scheduler = BatchScheduler(model, BatchingParams(max_batch_size=2, batch_timeout_micros=0,
                                                     max_enqueued_batches=2, num_batch_threads=1), Metrics())
    running = asyncio.ensure_future(scheduler.submit(_x(2), 2))  # taken by the thread
    await asyncio.sleep(0.05)
    queued = [asyncio.ensure_future(scheduler.submit(_x(2), 2)) for _ in range(2)]  # fills two batches
    await asyncio.sleep(0)
    with pytest.raises(ServingError) as info:
        await scheduler.submit(_x(1), 1)
    assert info.value.code == "UNAVAILABLE"
    model.gate.set()
    await asyncio.gather(running, *queued)
    assert scheduler.stats.rejected_full == 1
    scheduler.close()


async def test_oversized_request_is_invalid_argument():
    scheduler = BatchScheduler(FakeModel(), BatchingParams(max_batch_size=4), Metrics())
    with pytest.raises(ServingError) as info:
        await scheduler.submit(_x(5), 5)
    assert info.value.code == "INVALID_ARGUMENT"
    scheduler.close()


async def test_padding_to_allowed_sizes_and_slicing():
    model = FakeModel()
    scheduler = BatchScheduler(model, BatchingParams(max_batch_size=8, batch_timeout_micros=0, num_batch_threads=1,
                                                     allowed_batch_sizes=(1, 4, 8)), Metrics())
    result = await scheduler.submit(_x(3, 10), 3)
    assert model.calls == [4]
    assert result["y"].tolist() == [[20.0], [22.0], [24.0]]
    scheduler.close()


async def test_model_failure_reaches_every_waiting_request():
    def broken(inputs):
        raise RuntimeError("kernel exploded")

    scheduler = BatchScheduler(broken, BatchingParams(max_batch_size=4, batch_timeout_micros=20_000), Metrics())
    results = await asyncio.gather(*(scheduler.submit(_x(1), 1) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, ServingError) and r.code == "INTERNAL" for r in results)
    scheduler.close()


async def test_event_loop_stays_responsive_while_model_runs():
    model = FakeModel(seconds=0.3)
    scheduler = BatchScheduler(model, BatchingParams(max_batch_size=4, num_batch_threads=1), Metrics())
    job = asyncio.ensure_future(scheduler.submit(_x(1), 1))
    ticks = 0
    while not job.done():
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks >= 10  # the loop kept running during the 0.3 s TensorFlow call
    scheduler.close()
