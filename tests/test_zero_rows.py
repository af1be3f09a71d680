"""A request of zero rows under batching (issue 34, item 2): answered at once, as with batching off.

TF Serving's BatchingSession accepts a task whose 0th dimension is 0: ComputeTensorBatchSize refuses
only a scalar input and inputs of unequal 0th sizes (tensorflow_serving/batching/batching_util.h:82-110),
and Run schedules the task (batching_session.cc:443-455). The queue it is scheduled on, TF 2.21's
(tensorflow/core/kernels/batching_util/shared_batch_scheduler.h, as the tensorflow wheel pinned here
ships it), counts an open batch's rows, not its tasks: PeekBatchPriorityImpl returns "not schedulable"
while they sum to 0 (lines 1416-1445), whatever the timeout and even once the queue is closed. So in
TF Serving a zero-row request waits until a request with rows joins its batch, past its deadline, and
the local server did the same. Nothing is gained by queueing no work: the local server runs it in-line,
as BatchingSession runs a request it does not batch (batching_session.cc:411-431), and answers what it
answers with batching off. This is a deliberate difference from TF Serving, named here.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from serve_bench.export import BatchingParams
from serve_bench.server._batching import BatchScheduler
from serve_bench.server._metrics import Metrics
from tests._servers import ServerThread, local_server
from tests.test_batching_unit import FakeModel
from tests.test_server_hostile import PREDICT, _message

AT_ONCE_S = 10.0  # an answer, not a deadline: the call's own deadline is three times longer
DEADLINE_S = 30.0


async def test_a_zero_row_task_is_run_at_once_with_nothing_else_queued() -> None:
    """With a batch timeout of a minute and no other request, zero rows come back at once, from one run of
    the model on zero rows that is not counted as a batch."""
    model = FakeModel()
    params = BatchingParams(max_batch_size=8, batch_timeout_micros=60_000_000, num_batch_threads=1)
    scheduler = BatchScheduler(model, params, Metrics())
    try:
        started = time.perf_counter()
        out = await asyncio.wait_for(scheduler.submit({"x": np.zeros((0, 1), np.float32)}, 0), AT_ONCE_S)
        assert time.perf_counter() - started < AT_ONCE_S
        assert out["y"].shape == (0, 1)
        assert model.calls == [0]
        assert scheduler.stats.batches == 0 and scheduler.stats.tasks == 0
    finally:
        await scheduler.drain()
        scheduler.close()


class RowsGatedModel(FakeModel):
    """The fake model, held at its gate only by a batch that has rows."""

    def __call__(self, inputs):
        if len(inputs["x"]):
            return super().__call__(inputs)
        self.calls.append(0)
        return {"y": inputs["x"] * 2}


async def test_a_zero_row_task_does_not_wait_for_a_busy_batch_thread() -> None:
    """While the only batch thread is held inside the model, zero rows are still answered: they never
    take a batch thread, so they neither wait behind batches nor delay them."""
    model = RowsGatedModel()
    params = BatchingParams(max_batch_size=8, batch_timeout_micros=0, num_batch_threads=1)
    scheduler = BatchScheduler(model, params, Metrics())
    try:
        model.gate.clear()
        held = asyncio.ensure_future(scheduler.submit({"x": np.ones((2, 1), np.float32)}, 2))
        assert await asyncio.to_thread(model.entered.wait, 30)
        empty = await asyncio.wait_for(scheduler.submit({"x": np.zeros((0, 1), np.float32)}, 0), AT_ONCE_S)
        assert empty["y"].shape == (0, 1) and not held.done()
        model.gate.set()
        assert (await held)["y"].tolist() == [[2.0], [2.0]]
    finally:
        model.gate.set()
        await scheduler.drain()
        scheduler.close()


# --- over the wire: gRPC and REST, batching on and off ------------------------------------------


@pytest.fixture(scope="module")
def unbatched(models_dir: Path) -> Iterator[ServerThread]:
    with local_server(models_dir) as running:
        yield running


@pytest.fixture(scope="module")
def batched(models_dir: Path) -> Iterator[ServerThread]:
    """The default batching parameters, as `--enable_batching` without a file (batch_timeout_micros 0)."""
    with local_server(models_dir, batching=BatchingParams()) as running:
        yield running


def _grpc_zero_rows(server: ServerThread, payload: str) -> tuple[str, str]:
    """(code, details) of a gRPC Predict of zero rows: images [0,64,64,3] or image_bytes [0]."""
    request = _message("tensorflow.serving.PredictRequest")()
    request.model_spec.name = "tiny"
    if payload == "float":
        tensor = request.inputs["images"]
        tensor.dtype = 1  # DT_FLOAT
        shape: tuple[int, ...] = (0, 64, 64, 3)
    else:
        request.model_spec.signature_name = "serving_bytes"
        tensor = request.inputs["image_bytes"]
        tensor.dtype = 7  # DT_STRING
        shape = (0,)
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    response_type = _message("tensorflow.serving.PredictResponse")
    with grpc.insecure_channel(server.grpc_target) as channel:
        call = channel.unary_unary(
            PREDICT, request_serializer=lambda m: m.SerializeToString(), response_deserializer=response_type.FromString
        )
        try:
            response = call(request, timeout=DEADLINE_S)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details() or ""
    shapes = {name: [d.size for d in t.tensor_shape.dim] for name, t in response.outputs.items()}
    return "OK", json.dumps(shapes, sort_keys=True)


def _rest_zero_rows(server: ServerThread) -> tuple[str, str]:
    """(HTTP status, body) of a REST predict of zero rows: ``image_bytes`` as an empty list (JSON cannot
    say [0,64,64,3]: an empty list of float images is the shape [0], refused by the signature's rank)."""
    body = json.dumps({"signature_name": "serving_bytes", "inputs": {"image_bytes": []}}).encode()
    request = urllib.request.Request(f"{server.rest_url}/v1/models/tiny:predict", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
            return str(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return str(exc.code), exc.read().decode()


def _tasks_batched(server: ServerThread, signature: str) -> int:
    """Tasks the server's queue for ``signature`` has put in batches (0 before it has a queue)."""
    queues = server.server.core._schedulers
    return sum(q.stats.tasks for (name, _, sig), q in queues.items() if name == "tiny" and sig == signature)


def _answer(server: ServerThread, route: str) -> tuple[tuple[str, str], float]:
    started = time.perf_counter()
    answer = _rest_zero_rows(server) if route == "rest" else _grpc_zero_rows(server, route.split("-")[1])
    return answer, time.perf_counter() - started


@pytest.mark.parametrize("route", ["grpc-float", "grpc-jpeg", "rest"])
def test_zero_rows_are_answered_at_once_and_as_without_batching(
    unbatched: ServerThread, batched: ServerThread, route: str
) -> None:
    """The same request to a server without batching and to one with TF Serving's default batching: both
    answer within seconds, the same status and words (it used to be DEADLINE_EXCEEDED with batching), and
    the batched server then serves a request with rows and forms no batch for the empty one."""
    signature = "serving_default" if route == "grpc-float" else "serving_bytes"
    off, off_s = _answer(unbatched, route)
    batched_before = _tasks_batched(batched, signature)
    on, on_s = _answer(batched, route)
    assert off_s < AT_ONCE_S and off[0] != "DEADLINE_EXCEEDED", off
    assert on_s < AT_ONCE_S and on[0] != "DEADLINE_EXCEEDED", (on, on_s)
    assert on == off
    assert _tasks_batched(batched, signature) == batched_before  # zero rows never joined a batch
    # alive afterwards: a request with rows is batched and answered
    body = json.dumps({"instances": np.zeros((1, 64, 64, 3)).tolist()}).encode()
    request = urllib.request.Request(f"{batched.rest_url}/v1/models/tiny:predict", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
        assert response.status == 200 and len(json.loads(response.read())["predictions"]) == 1
