"""The local server against TF Serving's own Python API (stubs, protos, make_tensor_proto)."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serve_bench.export import BatchingParams
from tests._servers import local_server


@pytest.fixture(scope="module")
def server(models_dir):
    with local_server(models_dir) as running:
        yield running


def _images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, 64, 64, 3)).astype(np.float32)


def _stub(target: str):
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    channel = grpc.insecure_channel(target)
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _predict_request(images, tf, model="tiny", signature="", **spec):
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    if signature:
        request.model_spec.signature_name = signature
    for key, value in spec.items():
        if key == "version":
            request.model_spec.version.value = value
        elif key == "version_label":
            request.model_spec.version_label = value
    request.inputs["images"].CopyFrom(tf.make_tensor_proto(images))
    return request


def _http(url: str, body: bytes | None = None, method: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, method=method or ("POST" if body is not None else "GET"))
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# --- predictions equal in-process TensorFlow --------------------------------


def test_grpc_predict_equals_in_process(server, tf, reference):
    """Outputs fill float_val, not tensor_content, as RunPredict's default kAsProtoField does
    (tensorflow_serving/servables/tensorflow/predict_util.cc:177-182, 204), and the response's
    model_spec names the default signature and the version served (util.cc:261 MakeModelSpec)."""
    images = _images(3)
    response = _stub(server.grpc_target).Predict(_predict_request(images, tf), timeout=30)
    features = tf.make_ndarray(response.outputs["features"])
    np.testing.assert_allclose(features, reference(images), rtol=1e-5, atol=1e-6)
    assert response.model_spec.name == "tiny" and response.model_spec.version.value == 1
    out = response.outputs["features"]
    assert not out.tensor_content and len(out.float_val) == 3 * 32
    np.testing.assert_array_equal(np.array(out.float_val, np.float32).reshape(3, 32), features)
    assert response.model_spec.signature_name == "serving_default"


def test_grpc_accepts_typed_value_fields(server, tf, reference):
    from tensorflow_serving.apis import predict_pb2

    images = _images(1, seed=3)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    tensor = request.inputs["images"]
    tensor.dtype = 1
    for d in images.shape:
        tensor.tensor_shape.dim.add(size=d)
    tensor.float_val.extend(images.reshape(-1).tolist())
    response = _stub(server.grpc_target).Predict(request, timeout=30)
    np.testing.assert_allclose(tf.make_ndarray(response.outputs["features"]), reference(images), rtol=1e-5, atol=1e-6)


def test_grpc_serving_bytes_signature(server, tf, reference):
    import io

    from PIL import Image
    from tensorflow_serving.apis import predict_pb2

    images = _images(2, seed=5)
    pngs = []
    for image in images:
        buf = io.BytesIO()
        Image.fromarray(image.astype(np.uint8)).save(buf, format="PNG")
        pngs.append(buf.getvalue())
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.model_spec.signature_name = "serving_bytes"
    request.inputs["image_bytes"].CopyFrom(tf.make_tensor_proto(pngs))
    response = _stub(server.grpc_target).Predict(request, timeout=30)
    np.testing.assert_allclose(tf.make_ndarray(response.outputs["features"]), reference(images), rtol=1e-4, atol=1e-5)


def test_rest_row_and_columnar_equal_in_process(server, reference):
    images = _images(2, seed=1)
    expected = reference(images)
    status, body = _http(
        f"{server.rest_url}/v1/models/tiny:predict", json.dumps({"instances": images.tolist()}).encode()
    )
    assert status == 200
    np.testing.assert_allclose(np.array(body["predictions"]), expected, rtol=1e-5, atol=1e-6)
    status, body = _http(
        f"{server.rest_url}/v1/models/tiny/versions/1:predict",
        json.dumps({"signature_name": "serving_default", "inputs": {"images": images.tolist()}}).encode(),
    )
    assert status == 200
    np.testing.assert_allclose(np.array(body["outputs"]), expected, rtol=1e-5, atol=1e-6)


def test_rest_b64_strings(server, reference):
    import io

    from PIL import Image

    image = _images(1, seed=9)
    buf = io.BytesIO()
    Image.fromarray(image[0].astype(np.uint8)).save(buf, format="PNG")
    payload = {"signature_name": "serving_bytes", "instances": [{"b64": base64.b64encode(buf.getvalue()).decode()}]}
    status, body = _http(f"{server.rest_url}/v1/models/tiny:predict", json.dumps(payload).encode())
    assert status == 200, body
    np.testing.assert_allclose(np.array(body["predictions"]), reference(image), rtol=1e-4, atol=1e-5)


def test_output_filter(server, tf):
    request = _predict_request(_images(1), tf)
    request.output_filter.append("features")
    response = _stub(server.grpc_target).Predict(request, timeout=30)
    assert list(response.outputs) == ["features"]
    request.output_filter[:] = ["nope"]
    with pytest.raises(grpc.RpcError) as info:
        _stub(server.grpc_target).Predict(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# --- metadata and status as TF Serving shapes them ----------------------------


def test_grpc_metadata_and_status(server):
    from tensorflow_serving.apis import (
        get_model_metadata_pb2,
        get_model_status_pb2,
        model_service_pb2_grpc,
    )

    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = "tiny"
    request.metadata_field.append("signature_def")
    response = _stub(server.grpc_target).GetModelMetadata(request, timeout=30)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    default = signature_map.signature_def["serving_default"]
    assert default.inputs["images"].dtype == 1
    assert [d.size for d in default.inputs["images"].tensor_shape.dim] == [-1, 64, 64, 3]
    assert [d.size for d in default.outputs["features"].tensor_shape.dim] == [-1, 32]
    assert "serving_bytes" in signature_map.signature_def
    assert response.model_spec.version.value == 1

    status_request = get_model_status_pb2.GetModelStatusRequest()
    status_request.model_spec.name = "tiny"
    channel = grpc.insecure_channel(server.grpc_target)
    status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(status_request, timeout=30)
    assert [(s.version, s.state) for s in status.model_version_status] == [
        (1, get_model_status_pb2.ModelVersionStatus.AVAILABLE)
    ]


def test_rest_metadata_and_status(server):
    status, body = _http(f"{server.rest_url}/v1/models/tiny")
    assert status == 200
    assert body == {
        "model_version_status": [
            {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        ]
    }
    status, body = _http(f"{server.rest_url}/v1/models/tiny/versions/1/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": "tiny", "signature_name": "", "version": "1"}
    inputs = body["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
    assert inputs["images"]["dtype"] == "DT_FLOAT"


def test_other_methods_are_unimplemented(server):
    from tensorflow_serving.apis import classification_pb2

    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "tiny"
    with pytest.raises(grpc.RpcError) as info:
        _stub(server.grpc_target).Classify(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


# --- bad input, each as TF Serving reports it -------------------------------


@pytest.mark.parametrize(
    "mutate, code",
    [
        (lambda r: setattr(r.model_spec, "name", "nope"), grpc.StatusCode.NOT_FOUND),
        (lambda r: r.model_spec.version.__setattr__("value", 7), grpc.StatusCode.NOT_FOUND),
        # model_servers/server_core.cc:890: an unknown label is INVALID_ARGUMENT
        (lambda r: setattr(r.model_spec, "version_label", "stable"), grpc.StatusCode.INVALID_ARGUMENT),
        (lambda r: setattr(r.model_spec, "signature_name", "nope"), grpc.StatusCode.FAILED_PRECONDITION),
        (lambda r: r.inputs["pixels"].CopyFrom(r.inputs.pop("images")), grpc.StatusCode.INVALID_ARGUMENT),
        (lambda r: setattr(r.inputs["images"], "dtype", 2), grpc.StatusCode.INVALID_ARGUMENT),  # bytes no longer match
        (lambda r: r.inputs["images"].tensor_shape.dim[1].__setattr__("size", 32), grpc.StatusCode.INVALID_ARGUMENT),
    ],
    ids=["model", "version", "label", "signature", "input-name", "dtype", "shape"],
)
def test_grpc_bad_requests(server, tf, mutate, code):
    request = _predict_request(_images(1), tf)
    mutate(request)
    with pytest.raises(grpc.RpcError) as info:
        _stub(server.grpc_target).Predict(request, timeout=30)
    assert info.value.code() == code
    assert info.value.details()


def test_grpc_wrong_dtype_and_shape_with_consistent_bytes(server, tf):
    request = _predict_request(_images(1).astype(np.float64), tf)
    with pytest.raises(grpc.RpcError) as info:
        _stub(server.grpc_target).Predict(request, timeout=30)
    # DirectSession's feed check wording, which TF Serving passes through
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "Expects arg[0] to be float but double is provided"
    request = _predict_request(np.zeros((1, 32, 32, 3), np.float32), tf)
    with pytest.raises(grpc.RpcError) as info:
        _stub(server.grpc_target).Predict(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "shape" in info.value.details()


@pytest.mark.parametrize(
    "path, body, status, words",
    [
        ("/v1/models/nope:predict", {"instances": [[0]]}, 404, "nope"),
        ("/v1/models/tiny/versions/9:predict", {"instances": [[0]]}, 404, "9"),
        ("/v1/models/tiny:predict", {"signature_name": "nope", "instances": [[0]]}, 400, "nope"),
        (
            "/v1/models/tiny:predict",
            {"inputs": {"pixels": [[0]]}},
            400,
            "Missing named input: images in 'inputs' object.",
        ),
        (
            "/v1/models/tiny:predict",
            {"inputs": {"images": [["a"]]}},
            400,
            'JSON Value: "a" Type: String is not of expected type: float',
        ),
        ("/v1/models/tiny:predict", {"inputs": {"images": [[1.0, 2.0]]}}, 400, "shape"),
        ("/v1/models/tiny:predict", {"instance": []}, 400, "instances"),
        (
            "/v1/models/tiny:predict",
            {"signature_name": "serving_bytes", "instances": [{"b64": "not base64!"}]},
            400,
            "base64",
        ),
    ],
    ids=["model", "version", "signature", "input-name", "dtype", "shape", "no-inputs", "b64"],
)
def test_rest_bad_requests(server, path, body, status, words):
    code, answer = _http(server.rest_url + path, json.dumps(body).encode())
    assert code == status
    assert words in answer["error"]


def test_rest_malformed_json_and_unknown_path(server):
    code, answer = _http(f"{server.rest_url}/v1/models/tiny:predict", b"{not json")
    assert code == 400 and "JSON" in answer["error"]
    code, answer = _http(f"{server.rest_url}/v1/models/tiny:explode", b"{}")
    # http_rest_api_handler.cc:74: a path its regexes do not match is INVALID_ARGUMENT, so 400
    assert code == 400 and answer["error"] == "Malformed request: POST /v1/models/tiny:explode"


def test_rest_body_over_limit(models_dir):
    with local_server(models_dir, max_body_bytes=10_000) as running:
        body = json.dumps({"instances": _images(1).tolist()}).encode()
        code, answer = _http(f"{running.rest_url}/v1/models/tiny:predict", body)
        assert code == 413 and "limit" in answer["error"]


# --- batching -----------------------------------------------------------------


async def _concurrent_grpc(target: str, requests: list, timeout: float = 60):
    from serve_bench import _protos

    response_type = _protos.message("tensorflow.serving.PredictResponse")
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(
            "/tensorflow.serving.PredictionService/Predict",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        return await asyncio.gather(*(call(r, timeout=timeout) for r in requests), return_exceptions=True)


def _metric(text: str, name: str, sample_suffix: str = "") -> dict:
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name + sample_suffix:
                values[tuple(sorted(sample.labels.items()))] = sample.value
    return values


def test_concurrent_batch_one_requests_share_tensorflow_calls(models_dir, tf, reference):
    params = BatchingParams(
        max_batch_size=16, batch_timeout_micros=200_000, max_enqueued_batches=10, num_batch_threads=1
    )
    with local_server(models_dir, batching=params) as running:
        images = _images(16, seed=4)
        requests = [_predict_request(images[i : i + 1], tf) for i in range(16)]
        responses = asyncio.run(_concurrent_grpc(running.grpc_target, requests))
        for i, response in enumerate(responses):
            assert not isinstance(response, Exception), response
            np.testing.assert_allclose(
                tf.make_ndarray(response.outputs["features"]), reference(images[i : i + 1]), rtol=1e-5, atol=1e-6
            )
        stats = running.batch_stats()
        assert stats.tasks == 16 and stats.batches < 16
        text = _http_text(f"{running.rest_url}/monitoring/prometheus/metrics")
        processed = _metric(text, ":tensorflow:serving:batching_session:processed_batch_size", "_count")
        processed_sum = _metric(text, ":tensorflow:serving:batching_session:processed_batch_size", "_sum")
        # every request passed through, in fewer (larger) TensorFlow calls than requests
        assert sum(processed_sum.values()) >= 16
        assert sum(processed.values()) == stats.batches < 16
        assert (
            _metric(text, ":tensorflow:serving:request_count", "_total")[(("model_name", "tiny"), ("status", "OK"))]
            >= 16
        )


def _http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def test_full_queue_answers_unavailable(models_dir, tf):
    params = BatchingParams(max_batch_size=1, batch_timeout_micros=0, max_enqueued_batches=1, num_batch_threads=1)
    with local_server(models_dir, models=("tiny",), batching=params) as running:
        requests = [_predict_request(_images(1), tf) for _ in range(40)]
        results = asyncio.run(_concurrent_grpc(running.grpc_target, requests))
        codes = [r.code() if isinstance(r, grpc.aio.AioRpcError) else "OK" for r in results]
        assert "OK" in codes
        assert grpc.StatusCode.UNAVAILABLE in codes
        assert set(codes) <= {"OK", grpc.StatusCode.UNAVAILABLE}


def test_padding_to_allowed_batch_sizes(models_dir, tf, reference):
    params = BatchingParams(
        max_batch_size=8, batch_timeout_micros=0, num_batch_threads=1, allowed_batch_sizes=(2, 4, 8)
    )
    with local_server(models_dir, batching=params) as running:
        images = _images(3, seed=2)
        response = _stub(running.grpc_target).Predict(_predict_request(images, tf), timeout=30)
        features = tf.make_ndarray(response.outputs["features"])
        assert features.shape == (3, 32)
        np.testing.assert_allclose(features, reference(images), rtol=1e-5, atol=1e-6)
        assert running.batch_stats().processed_sizes == [4]
        text = _http_text(f"{running.rest_url}/monitoring/prometheus/metrics")
        padding = _metric(text, ":tensorflow:serving:batching_session:padding_size", "_sum")
        assert padding == {(("execution_batch_size", "4"),): 1.0}

        too_big = _predict_request(_images(9), tf)
        with pytest.raises(grpc.RpcError) as info:
            _stub(running.grpc_target).Predict(too_big, timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "larger than maximum" in info.value.details()


def test_metrics_parse_with_prometheus_client(server, tf):
    _stub(server.grpc_target).Predict(_predict_request(_images(1), tf), timeout=30)
    text = _http_text(f"{server.rest_url}/monitoring/prometheus/metrics")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families[":tensorflow:serving:request_latency"].type == "histogram"
    assert families[":tensorflow:serving:runtime_latency"].type == "histogram"
    latency = _metric(text, ":tensorflow:serving:request_latency", "_count")
    # gRPC is labelled API="Predict" (tensorflow_serving/model_servers/prediction_service_impl.cc:53)
    assert latency[(("API", "Predict"), ("entrypoint", "GRPC"), ("model_name", "tiny"))] >= 1


def test_warmup_records_are_replayed_at_load(server):
    servable = server.server.core.registry.get("tiny")
    assert servable.warmup_replayed == 2  # the fixture exported warm-up batch sizes 1 and 4
