"""BatchScheduler logic with a fake model on the real batch threads.

The tests never wait a fixed time for the batch thread: the fake model says when a thread has
entered it, and holds it there until the test opens its gate.
"""

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
    def __init__(self) -> None:
        self.calls: list[int] = []
        self.entered = threading.Event()  # set by the batch thread when a batch reaches the model
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, inputs):
        self.entered.set()
        self.gate.wait(30)
        x = inputs["x"]
        self.calls.append(len(x))
        return {"y": x * 2}


def _x(n: int, start: int = 0) -> dict:
    return {"x": np.arange(start, start + n, dtype=np.float32).reshape(n, 1)}


async def _thread_holds_a_batch(model: FakeModel) -> None:
    """Until a batch thread is inside the model (its own signal), the loop free meanwhile."""
    assert await asyncio.to_thread(model.entered.wait, 30), "no batch reached the model"


async def _together(scheduler: BatchScheduler, *requests: tuple[dict, int]) -> list:
    """Queue every request, then close the queue so the open batch goes at once: the requests share a
    batch whatever the machine's speed (a short batch timeout would split them when the loop stalls)."""
    jobs = asyncio.gather(*(scheduler.submit(inputs, size) for inputs, size in requests), return_exceptions=True)
    await asyncio.sleep(0)  # one loop turn: every submit has queued its task (submit does not await before)
    await scheduler.drain()
    return await jobs


async def test_requests_merge_and_results_return_in_order():
    model = FakeModel()
    scheduler = BatchScheduler(
        model, BatchingParams(max_batch_size=8, batch_timeout_micros=200_000, num_batch_threads=1), Metrics()
    )
    # the six submits run in one loop turn; 200 ms leaves room for a stalled process between them
    results = await asyncio.gather(*(scheduler.submit(_x(1, i), 1) for i in range(6)))
    assert model.calls == [6]  # one call, waited for the timeout
    for i, result in enumerate(results):
        assert result["y"].tolist() == [[2.0 * i]]
    scheduler.close()


async def test_full_batch_goes_without_waiting_for_timeout():
    model = FakeModel()
    scheduler = BatchScheduler(
        model, BatchingParams(max_batch_size=4, batch_timeout_micros=10_000_000, num_batch_threads=1), Metrics()
    )
    started = time.perf_counter()
    await asyncio.gather(*(scheduler.submit(_x(1, i), 1) for i in range(4)))
    assert time.perf_counter() - started < 2
    assert model.calls == [4]
    scheduler.close()


async def test_queue_bound_rejects_with_unavailable():
    model = FakeModel()
    model.gate.clear()  # the first batch blocks its thread
    scheduler = BatchScheduler(
        model,
        BatchingParams(max_batch_size=2, batch_timeout_micros=0, max_enqueued_batches=2, num_batch_threads=1),
        Metrics(),
    )
    running = asyncio.ensure_future(scheduler.submit(_x(2), 2))  # taken by the thread
    await _thread_holds_a_batch(model)
    queued = [asyncio.ensure_future(scheduler.submit(_x(2), 2)) for _ in range(2)]  # fills two batches
    await asyncio.sleep(0)  # one loop turn: both submits ran up to their await
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
    scheduler = BatchScheduler(
        model,
        BatchingParams(max_batch_size=8, batch_timeout_micros=0, num_batch_threads=1, allowed_batch_sizes=(1, 4, 8)),
        Metrics(),
    )
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
    model = FakeModel()
    model.gate.clear()  # the model runs until the loop lets it finish
    scheduler = BatchScheduler(model, BatchingParams(max_batch_size=4, num_batch_threads=1), Metrics())
    job = asyncio.ensure_future(scheduler.submit(_x(1), 1))
    await _thread_holds_a_batch(model)  # the loop waits on the thread: it would hang here if the model ran on it
    for _ in range(10):
        await asyncio.sleep(0)
    assert not job.done()  # the loop kept turning while the TensorFlow call was still running
    model.gate.set()
    assert (await job)["y"].tolist() == [[0.0]]
    scheduler.close()


# --- TF Serving's queue rules, large-batch splitting and the batching metrics -------------------------------------

from serve_bench.server._batching import split_sizes  # noqa: E402


@pytest.mark.parametrize(
    "size, room, limit, expected",
    [
        (10, 0, 4, [4, 4, 2]),
        (10, 3, 4, [3, 4, 3]),
        (8, 0, 4, [4, 4]),
        (5, 1, 4, [1, 4]),
        (2, 3, 4, [2]),
    ],
)
def test_split_sizes_follow_input_split_metadata(size, room, limit, expected):
    """tensorflow/core/kernels/batching_util/input_split_metadata.cc:60-81 (generate_task_sizes): the open
    batch's room first, then pieces of the execution batch size, then the remainder."""
    assert split_sizes(size, room, limit) == expected


async def test_large_request_is_split_across_batches_and_reassembled():
    """enable_large_batch_splitting: a task larger than the open batch's room is split
    (shared_batch_scheduler.h ScheduleWithoutOrEagerSplitImpl) and the outputs concatenated in order
    (batching_session.cc SplitInputTask's barrier)."""
    model = FakeModel()
    params = BatchingParams(
        max_batch_size=16,
        batch_timeout_micros=0,
        num_batch_threads=1,
        enable_large_batch_splitting=True,
        max_execution_batch_size=4,
    )
    scheduler = BatchScheduler(model, params, Metrics())
    result = await scheduler.submit(_x(10, 100), 10)
    assert sorted(model.calls) == [2, 4, 4] and max(model.calls) <= 4
    assert result["y"].ravel().tolist() == [2.0 * (100 + i) for i in range(10)]
    assert scheduler.stats.split_requests == 1
    scheduler.close()


async def test_split_pieces_fill_the_open_batch_first():
    """The first piece takes the room left in the open batch (input_split_metadata.cc:40-45)."""
    model = FakeModel()
    model.gate.clear()  # hold the thread so batches stay queued
    params = BatchingParams(
        max_batch_size=16,
        batch_timeout_micros=10_000_000,
        num_batch_threads=1,
        enable_large_batch_splitting=True,
        max_execution_batch_size=4,
    )
    scheduler = BatchScheduler(model, params, Metrics())
    first = asyncio.ensure_future(scheduler.submit(_x(1, 0), 1))
    await asyncio.sleep(0)  # one loop turn: the first task is in the open batch
    second = asyncio.ensure_future(scheduler.submit(_x(6, 10), 6))  # 3 join the open batch, then 3
    await _thread_holds_a_batch(model)  # the full batch (1 + 3) went to the thread; the last 3 wait
    model.gate.set()
    await scheduler.drain()
    a, b = await first, await second
    assert model.calls == [4, 3]
    assert a["y"].ravel().tolist() == [0.0] and b["y"].ravel().tolist() == [2.0 * (10 + i) for i in range(6)]
    scheduler.close()


async def test_without_splitting_oversized_task_is_invalid_with_tf_wording():
    """shared_batch_scheduler.h ValidateBatchTaskQueueCapacity: "Task size %d is larger than maximum input
    batch size %d" (INVALID_ARGUMENT), checked against max_batch_size, splitting or not."""
    params = BatchingParams(max_batch_size=8, enable_large_batch_splitting=True, max_execution_batch_size=4)
    scheduler = BatchScheduler(FakeModel(), params, Metrics())
    with pytest.raises(ServingError) as info:
        await scheduler.submit(_x(9), 9)
    assert info.value.code == "INVALID_ARGUMENT"
    assert info.value.message == "Task size 9 is larger than maximum input batch size 8"
    scheduler.close()


async def test_queue_full_message_without_splitting():
    """Without splitting the queue is full when the task does not fit the open batch and
    max_enqueued_batches batches exist, the open one included (shared_batch_scheduler.h, the loose check)."""
    model = FakeModel()
    model.gate.clear()
    params = BatchingParams(
        max_batch_size=2, batch_timeout_micros=10_000_000, max_enqueued_batches=2, num_batch_threads=1
    )
    scheduler = BatchScheduler(model, params, Metrics())
    running = asyncio.ensure_future(scheduler.submit(_x(2), 2))  # full: taken by the thread
    await _thread_holds_a_batch(model)
    queued = [asyncio.ensure_future(scheduler.submit(_x(1), 1)) for _ in range(4)]  # two batches of 2
    await asyncio.sleep(0)  # one loop turn: the four submits ran up to their await
    with pytest.raises(ServingError) as info:
        await scheduler.submit(_x(1), 1)
    assert info.value.code == "UNAVAILABLE"
    assert info.value.message == (
        "The batch scheduling queue to which this task was submitted is full; "
        "currently 2 batches enqueued and max_enqueued_batches is 2"
    )
    model.gate.set()
    await scheduler.drain()
    await asyncio.gather(running, *queued)
    scheduler.close()


async def test_queue_capacity_with_splitting_counts_rows():
    """With splitting the capacity is (max_enqueued_batches - batches) x execution size + room in the open
    batch (shared_batch_scheduler.h SchedulingCapacityInternal), and the refusal names the figures."""
    model = FakeModel()
    model.gate.clear()
    params = BatchingParams(
        max_batch_size=16,
        batch_timeout_micros=10_000_000,
        max_enqueued_batches=2,
        num_batch_threads=1,
        enable_large_batch_splitting=True,
        max_execution_batch_size=4,
    )
    scheduler = BatchScheduler(model, params, Metrics())
    running = asyncio.ensure_future(scheduler.submit(_x(4), 4))
    await _thread_holds_a_batch(model)  # the queue is one empty open batch: capacity 2*4 - 4 + 4 = 8
    queued = asyncio.ensure_future(scheduler.submit(_x(5), 5))  # 4 + 1: two batches, capacity now 3
    await asyncio.sleep(0)  # one loop turn: that submit ran up to its await
    with pytest.raises(ServingError) as info:
        await scheduler.submit(_x(4), 4)
    assert info.value.code == "UNAVAILABLE"
    assert "task size is 4 but scheduling capacity is only 3" in info.value.message
    model.gate.set()
    await scheduler.drain()
    await asyncio.gather(running, queued)
    scheduler.close()


async def test_max_enqueued_batches_zero_means_one_without_splitting():
    """SharedBatchScheduler::AddQueue rewrites max_enqueued_batches 0 to 1 when splitting is off."""
    scheduler = BatchScheduler(
        FakeModel(), BatchingParams(max_batch_size=4, max_enqueued_batches=0, num_batch_threads=1), Metrics()
    )
    result = await scheduler.submit(_x(2), 2)
    assert result["y"].shape == (2, 1)
    scheduler.close()


async def test_batching_metrics_as_batching_session_records_them():
    """input_batch_size once per input tensor (batching_session.cc:470-482 ComputeInputSize), queuing_latency
    per task with an empty thread-pool label (:765-768, CreateBatchingSession passes ""), padding and processed
    size before the merge (:494-506), wrapped_run_count after every Run, failed or not (:810)."""

    def two_inputs(inputs):
        return {"y": inputs["x"] + inputs["z"]}

    metrics = Metrics()
    scheduler = BatchScheduler(
        two_inputs,
        BatchingParams(
            max_batch_size=8, batch_timeout_micros=10_000_000, num_batch_threads=1, allowed_batch_sizes=(4, 8)
        ),
        metrics,
    )
    inputs = [{"x": np.ones((1, 1), np.float32) * i, "z": np.zeros((1, 1), np.float32)} for i in range(3)]
    assert not any(isinstance(r, BaseException) for r in await _together(scheduler, *((x, 1) for x in inputs)))
    page = metrics.render()
    assert ":tensorflow:serving:batching_session:input_batch_size_count{} 6" in page  # 3 requests x 2 inputs
    assert ':tensorflow:serving:batching_session:queuing_latency_count{thread_pool_name=""} 3' in page
    assert ":tensorflow:serving:batching_session:processed_batch_size_sum{} 4" in page
    assert ':tensorflow:serving:batching_session:padding_size_sum{execution_batch_size="4"} 1' in page
    assert ":tensorflow:serving:batching_session:wrapped_run_count{} 1" in page
    scheduler.close()

    def broken(inputs):
        raise RuntimeError("no")

    failing = BatchScheduler(broken, BatchingParams(max_batch_size=4, num_batch_threads=1), metrics)
    with pytest.raises(ServingError):
        await failing.submit(_x(1), 1)
    assert ":tensorflow:serving:batching_session:wrapped_run_count{} 2" in metrics.render()
    failing.close()


async def test_padding_repeats_the_first_row_of_the_last_task():
    """batching_session.cc:549-561: the padding rows copy the first row of the batch's last task."""
    seen = []

    def model(inputs):
        seen.append(inputs["x"].ravel().tolist())
        return {"y": inputs["x"]}

    scheduler = BatchScheduler(
        model,
        BatchingParams(
            max_batch_size=8, batch_timeout_micros=10_000_000, num_batch_threads=1, allowed_batch_sizes=(8,)
        ),
        Metrics(),
    )
    await _together(scheduler, (_x(2, 0), 2), (_x(3, 10), 3))
    assert seen == [[0.0, 1.0, 10.0, 11.0, 12.0, 10.0, 10.0, 10.0]]
    scheduler.close()


async def test_batch_timed_out_in_the_queue_is_not_run():
    """batching_session.cc:744-775: when every task of a batch waited past its RunOptions deadline (the gRPC
    deadline) the batch is not run: RESOURCE_EXHAUSTED "Run() timeout exceeded while waiting in batching queue".
    A batch with one task still in time runs whole."""
    model = FakeModel()
    model.gate.clear()
    scheduler = BatchScheduler(
        model, BatchingParams(max_batch_size=1, batch_timeout_micros=0, num_batch_threads=1), Metrics()
    )
    blocker = asyncio.ensure_future(scheduler.submit(_x(1), 1))
    await _thread_holds_a_batch(model)
    late = asyncio.ensure_future(scheduler.submit(_x(1), 1, timeout=0.01))
    patient = asyncio.ensure_future(scheduler.submit(_x(1), 1, timeout=30))
    await asyncio.sleep(0)  # one loop turn: both are queued, their deadlines set from their submit time
    queued = time.perf_counter()
    while time.perf_counter() < queued + 0.01:  # the clock, not another thread, passes the late one's deadline
        await asyncio.sleep(0.001)
    model.gate.set()
    await blocker
    with pytest.raises(ServingError) as info:
        await late
    assert info.value.code == "RESOURCE_EXHAUSTED"
    assert info.value.message == "Run() timeout exceeded while waiting in batching queue"
    assert (await patient)["y"].shape == (1, 1)
    assert model.calls == [1, 1]
    scheduler.close()


async def test_queues_share_one_pool_of_batch_threads_round_robin():
    """tensorflow_model_server has one SharedBatchScheduler for all models (saved_model_bundle_factory.cc:95-100)
    with a queue per signature; num_batch_threads is the total, and free threads visit queues in turn
    (shared_batch_scheduler.h GetNextWorkItem_Locked)."""
    from serve_bench.server._batching import BatchThreads

    params = BatchingParams(max_batch_size=1, batch_timeout_micros=0, num_batch_threads=1)
    threads = BatchThreads(params)
    order: list[str] = []
    running = threading.Semaphore(1)  # fails the test if two batches ever run at once

    def model(name):
        def run(inputs):
            assert running.acquire(blocking=False), "two batches ran at once on a pool of one thread"
            time.sleep(0.01)
            order.append(name)
            running.release()
            return {"y": inputs["x"]}

        return run

    a = BatchScheduler(model("a"), params, Metrics(), threads)
    b = BatchScheduler(model("b"), params, Metrics(), threads)
    await asyncio.gather(*(a.submit(_x(1), 1) for _ in range(3)), *(b.submit(_x(1), 1) for _ in range(3)))
    assert sorted(order) == ["a", "a", "a", "b", "b", "b"]
    assert order[1:5] in (["b", "a", "b", "a"], ["a", "b", "a", "b"])  # alternating once both queues hold work
    a.close()
    b.close()
    assert threads.executor._shutdown  # the last queue closed the shared pool


async def test_variable_length_inputs_refused_or_padded_as_batching_session():
    """batching_session.cc:533-545: different shapes beyond dim 0 are FAILED_PRECONDITION with padding off;
    with pad_variable_length_inputs they are padded after each dimension with the tensor's first value
    (batching_util.cc:73-100 PadTensor, CalculateMaxDimSizes)."""
    seen = []

    def model(inputs):
        seen.append(inputs["x"].copy())
        return {"y": inputs["x"][:, :1]}

    short = {"x": np.array([[7.0, 8.0]], np.float32)}
    long = {"x": np.array([[1.0, 2.0, 3.0]], np.float32)}
    strict = BatchScheduler(
        model, BatchingParams(max_batch_size=4, batch_timeout_micros=10_000_000, num_batch_threads=1), Metrics()
    )
    results = await _together(strict, (short, 1), (long, 1))
    assert all(isinstance(r, ServingError) and r.code == "FAILED_PRECONDITION" for r in results)
    assert "padding is turned off. Set pad_variable_length_inputs to true" in str(results[0])
    strict.close()

    padding = BatchScheduler(
        model,
        BatchingParams(
            max_batch_size=4, batch_timeout_micros=10_000_000, num_batch_threads=1, pad_variable_length_inputs=True
        ),
        Metrics(),
    )
    first, second = await _together(padding, (short, 1), (long, 1))
    assert seen[-1].tolist() == [[7.0, 8.0, 7.0], [1.0, 2.0, 3.0]]
    assert first["y"].tolist() == [[7.0]] and second["y"].tolist() == [[1.0]]
    padding.close()
