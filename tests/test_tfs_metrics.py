"""The local server's metrics as TF Serving records them, read back by the scraper over gRPC and REST points."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest

from serve_bench.export import BatchingParams
from serve_bench.metrics import MetricsSnapshot, breakdown, scrape
from tests._servers import ServerThread, local_server

PAGE = "/monitoring/prometheus/metrics"


@pytest.fixture(scope="module")
def server(models_dir):
    with local_server(models_dir) as running:
        yield running


def _images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, 64, 64, 3)).astype(np.float32)


def _request(images: np.ndarray, tf, input_name: str = "images"):
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.inputs[input_name].CopyFrom(tf.make_tensor_proto(images))
    return request


def _predict(running: ServerThread, request) -> object:
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(running.grpc_target) as channel:
        return prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=60)


def _http(url: str, body: dict | None = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=60) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _snapshot(running: ServerThread) -> MetricsSnapshot:
    snapshot, why = asyncio.run(scrape(running.rest_url + PAGE, "tiny"))
    assert snapshot is not None, why
    return snapshot


def _page(running: ServerThread) -> str:
    with urllib.request.urlopen(running.rest_url + PAGE, timeout=30) as response:
        return str(response.read().decode())


def _value(page: str, line_start: str) -> float:
    """The value of the one sample line starting with ``line_start`` (0 when absent)."""
    found = [float(line.rsplit(" ", 1)[1]) for line in page.splitlines() if line.startswith(line_start + " ")]
    assert len(found) <= 1
    return found[0] if found else 0.0


def _mean(before: str, after: str, family: str) -> float:
    """µs per observation of histogram ``family`` (``name{labels}``) between two pages: Δ_sum / Δ_count."""
    name, labels = family.split("{", 1)
    count = _value(after, f"{name}_count{{{labels}") - _value(before, f"{name}_count{{{labels}")
    assert count > 0, family
    return (_value(after, f"{name}_sum{{{labels}") - _value(before, f"{name}_sum{{{labels}")) / count


def test_grpc_predicts_are_labelled_predict_grpc_and_timed_only_when_ok(server, tf):
    """prediction_service_impl.cc:52-59: request_latency{API="Predict",entrypoint="GRPC"} for OK calls only,
    request_count for every call by status; predict_util.cc:108-115: runtime_latency{API="Predict",runtime="TF1"}."""
    page_before, before = _page(server), _snapshot(server)
    for i in range(3):
        _predict(server, _request(_images(1, seed=i), tf))
    with pytest.raises(grpc.RpcError) as info:
        _predict(server, _request(_images(1), tf, input_name="pixels"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    page = _page(server)
    latency = ':tensorflow:serving:request_latency_count{model_name="tiny",API="Predict",entrypoint="GRPC"}'
    runtime = ':tensorflow:serving:runtime_latency_count{model_name="tiny",API="Predict",runtime="TF1"}'
    refused = ':tensorflow:serving:request_count{model_name="tiny",status="INVALID_ARGUMENT"}'
    assert _value(page, latency) - _value(page_before, latency) == 3
    assert _value(page, runtime) - _value(page_before, runtime) == 3
    assert _value(page, refused) - _value(page_before, refused) == 1
    assert 'API="predict",entrypoint="GRPC"' not in page

    view = breakdown(before, _snapshot(server), entrypoint="GRPC")
    assert view.requests == 4 and view.errors == 1 and view.tf_calls == 3 and not view.batching
    assert view.request_us_mean is not None and view.runtime_us_mean is not None
    assert view.request_us_mean >= view.runtime_us_mean > 0
    # the means again, from the raw sample lines of the two pages (the test's own parser, not the scraper's)
    request_mean = _mean(page_before, page, latency.replace("_count{", "{"))
    runtime_mean = _mean(page_before, page, runtime.replace("_count{", "{"))
    assert view.request_us_mean == pytest.approx(request_mean) and view.runtime_us_mean == pytest.approx(runtime_mean)
    assert view.compute_us_mean == pytest.approx(runtime_mean)  # no batching: the Run is the compute
    assert view.overhead_us_mean == pytest.approx(request_mean - runtime_mean)


def test_rest_predicts_use_the_verb_and_health_checks_do_not_count_as_requests(server):
    """http_server.cc:194-201: REST records request_latency with API = the URL verb ("predict"; "" for the
    model-status and metadata GETs) and request_count for every request, GETs included."""
    page_before, before = _page(server), _snapshot(server)
    body = {"instances": _images(1).tolist()}
    assert _http(f"{server.rest_url}/v1/models/tiny:predict", body) == 200
    assert _http(f"{server.rest_url}/v1/models/tiny:predict", body) == 200
    for _ in range(3):
        assert _http(f"{server.rest_url}/v1/models/tiny") == 200  # a health check
    assert _http(f"{server.rest_url}/v1/models/tiny/metadata") == 200
    assert _http(f"{server.rest_url}/v1/models/nope") == 404
    page = _page(server)
    verb = ':tensorflow:serving:request_latency_count{model_name="tiny",API="predict",entrypoint="REST"}'
    gets = ':tensorflow:serving:request_latency_count{model_name="tiny",API="",entrypoint="REST"}'
    ok = ':tensorflow:serving:request_count{model_name="tiny",status="OK"}'
    missing = ':tensorflow:serving:request_count{model_name="nope",status="NOT_FOUND"}'
    assert _value(page, verb) - _value(page_before, verb) == 2
    assert _value(page, gets) - _value(page_before, gets) == 4
    assert _value(page, ok) - _value(page_before, ok) == 6
    assert _value(page, missing) - _value(page_before, missing) == 1

    after = _snapshot(server)
    rest = breakdown(before, after, entrypoint="REST")
    assert rest.requests == 2 and rest.errors == 0 and rest.other_requests == 4
    assert rest.request_us_mean is not None and rest.request_us_mean >= (rest.runtime_us_mean or 0) > 0
    assert breakdown(before, after, entrypoint="GRPC").requests == 0


def test_batching_runtime_includes_the_queue(models_dir, tf):
    """With --enable_batching, runtime_latency times the batching session's Run per request
    (predict_util.cc:108-115 around BatchingSession::Run), so it includes the queueing; wrapped_run_count
    counts the batches (batching_session.cc:810). The scraper's compute is runtime minus queueing."""
    params = BatchingParams(max_batch_size=8, batch_timeout_micros=200_000, num_batch_threads=1)
    with local_server(models_dir, batching=params, warmup=False) as running:
        page_before, before = _page(running), _snapshot(running)
        requests = [_request(_images(1, seed=i), tf) for i in range(4)]

        async def send() -> None:
            from tensorflow_serving.apis import prediction_service_pb2_grpc

            async with grpc.aio.insecure_channel(running.grpc_target) as channel:
                stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
                await asyncio.gather(*(stub.Predict(r, timeout=60) for r in requests))

        asyncio.run(send())
        stats = running.batch_stats()
        page = _page(running)
        view = breakdown(before, _snapshot(running), entrypoint="GRPC")
    runs = _value(page, ":tensorflow:serving:batching_session:wrapped_run_count{}")
    assert runs == stats.batches < 4
    assert (
        _value(page, ':tensorflow:serving:runtime_latency_count{model_name="tiny",API="Predict",runtime="TF1"}') == 4
    )  # one per request, not one per batch
    assert view.batching and view.tf_calls == stats.batches and view.requests == 4
    assert view.queue_us_mean is not None and view.runtime_us_mean is not None and view.compute_us_mean is not None
    assert view.runtime_us_mean >= view.queue_us_mean > 0
    # the means again, from the raw sample lines of the two pages (the test's own parser, not the scraper's)
    queue_mean = _mean(page_before, page, ':tensorflow:serving:batching_session:queuing_latency{thread_pool_name=""}')
    runtime_mean = _mean(
        page_before, page, ':tensorflow:serving:runtime_latency{model_name="tiny",API="Predict",runtime="TF1"}'
    )
    assert view.queue_us_mean == pytest.approx(queue_mean) and view.runtime_us_mean == pytest.approx(runtime_mean)
    assert view.compute_us_mean == pytest.approx(runtime_mean - queue_mean)
    assert view.processed_batch_mean == pytest.approx(np.mean(stats.processed_sizes))
    assert view.input_batch_mean == pytest.approx(1.0)


def test_large_request_is_split_and_answered_whole(models_dir, tf, reference):
    """enable_large_batch_splitting with max_execution_batch_size 4: a request of 10 runs as batches of
    4, 4 and 2 (input_split_metadata.cc) and its answer is the pieces concatenated in order."""
    params = BatchingParams(
        max_batch_size=16,
        batch_timeout_micros=0,
        num_batch_threads=1,
        enable_large_batch_splitting=True,
        max_execution_batch_size=4,
    )
    with local_server(models_dir, batching=params, warmup=False) as running:
        before = _snapshot(running)
        images = _images(10, seed=7)
        response = _predict(running, _request(images, tf))
        features = tf.make_ndarray(response.outputs["features"])  # type: ignore[attr-defined]
        np.testing.assert_allclose(features, reference(images), rtol=1e-5, atol=1e-6)
        assert sorted(running.batch_stats().processed_sizes) == [2, 4, 4]
        view = breakdown(before, _snapshot(running), entrypoint="GRPC")
    assert view.requests == 1 and view.tf_calls == 3
    assert view.input_batch_mean == pytest.approx(10) and view.processed_batch_mean == pytest.approx(10 / 3)


def test_page_is_what_prometheus_tools_read(server, tf):
    """The page parses with prometheus_client as TF Serving's does (no HELP lines, TYPE per family)."""
    from prometheus_client.parser import text_string_to_metric_families

    _predict(server, _request(_images(1), tf))
    page = _page(server)
    assert not re.search(r"^# HELP", page, re.M)
    families = {f.name: f.type for f in text_string_to_metric_families(page)}
    assert families[":tensorflow:serving:request_latency"] == "histogram"
    assert families[":tensorflow:serving:request_count"] == "counter"
