"""The local server's request parsers fuzzed over the wire (issue 34, item 3): gRPC PredictRequests with
any tensors (codec.from_tensor_proto and the server's validation, through Predict) and REST predict
bodies, to a server with TF Serving's default batching. Invariants: every answer is OK or one of the
documented codes (DESIGN.md: NOT_FOUND, INVALID_ARGUMENT, UNAVAILABLE; RESOURCE_EXHAUSTED past the memory
budget, FAILED_PRECONDITION from the batcher) with words, REST statuses are TF Serving's mapping of those,
and the server answers a good request afterwards. The gRPC tensors include shapes whose element count
overflows int64 (item 5), refused as TF Serving refuses them (the last test). A REST body cannot declare
one: its shape is its nesting, and every element costs at least a byte of a body under --max_body_bytes.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from serve_bench import _protos
from serve_bench.export import BatchingParams
from tests._fuzz import fuzz_settings
from tests._servers import ServerThread, local_server
from tests.test_fuzz_codecs import _tensors
from tests.test_fuzz_json_tensor import _bodies
from tests.test_server_hostile import PREDICT

LIVE = fuzz_settings(60, 20_000)
GRPC_CODES = {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION"}
# http_server.cc ToHTTPStatusCode of the codes above (RESOURCE_EXHAUSTED is 429; 413 and 503 are the
# local server's body limit and parse budget)
REST_STATUSES = {200, 400, 404, 413, 429, 503, 412}


@pytest.fixture(scope="module")
def server(models_dir: Path) -> Iterator[ServerThread]:
    with local_server(models_dir, batching=BatchingParams()) as running:
        yield running


@pytest.fixture(scope="module")
def channel(server: ServerThread) -> Iterator[Any]:
    with grpc.insecure_channel(server.grpc_target) as opened:
        yield opened


def _predict(channel: Any, request: bytes) -> tuple[str, str]:
    call = channel.unary_unary(PREDICT, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        call(request, timeout=60)
    except grpc.RpcError as exc:
        return exc.code().name, exc.details() or ""
    return "OK", ""


def _good_request() -> bytes:
    request = _protos.message("tensorflow.serving.PredictRequest")()
    request.model_spec.name = "tiny"
    from serve_bench.codec import to_tensor_proto

    to_tensor_proto(np.zeros((1, 64, 64, 3), np.float32), request.inputs["images"])
    return bytes(request.SerializeToString())


def _alive(channel: Any, server: ServerThread) -> None:
    assert _predict(channel, _good_request()) == ("OK", "")
    with urllib.request.urlopen(f"{server.rest_url}/v1/models/tiny", timeout=30) as response:
        assert response.status == 200


@st.composite
def _requests(draw: st.DrawFn) -> bytes:
    request = _protos.message("tensorflow.serving.PredictRequest")()
    request.model_spec.name = draw(st.sampled_from(["tiny", "tiny", "tiny", "nope", ""]))
    request.model_spec.signature_name = draw(st.sampled_from(["", "serving_default", "serving_bytes", "x"]))
    if draw(st.booleans()):
        request.model_spec.version.value = draw(st.sampled_from([1, 1, 2, -1]))
    for _ in range(draw(st.integers(0, 2))):
        sent = _protos.message("tensorflow.serving.PredictRequest").FromString(draw(_tensors()))
        tensor = sent.inputs["x"]
        if draw(st.booleans()):  # often the model's own shape, so the fuzzing reaches the model and batcher
            del tensor.tensor_shape.dim[:]
            for size in (draw(st.integers(0, 3)), 64, 64, 3):
                tensor.tensor_shape.dim.add(size=size)
            tensor.dtype = draw(st.sampled_from([1, 1, 2, 7]))
        request.inputs[draw(st.sampled_from(["images", "image_bytes", "x"]))].CopyFrom(tensor)
    return bytes(request.SerializeToString())


@LIVE
@given(request=_requests())
def test_grpc_predict_answers_within_the_documented_codes(channel: Any, request: bytes) -> None:
    code, details = _predict(channel, request)
    assert code in GRPC_CODES, (code, details)
    assert code == "OK" or details, code


def _post(server: ServerThread, body: bytes, path: str = "/v1/models/tiny:predict") -> int:
    request = urllib.request.Request(server.rest_url + path, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        answer = json.loads(exc.read() or b"{}")
        assert exc.code == 404 or answer.get("error"), (exc.code, answer)
        return int(exc.code)


@LIVE
@given(
    body=_bodies,
    path=st.sampled_from(["/v1/models/tiny:predict", "/v1/models/tiny/versions/1:predict", "/v1/models/nope:predict"]),
)
def test_rest_predict_answers_within_the_documented_statuses(
    server: ServerThread, body: dict[str, Any], path: str
) -> None:
    for images in (body, {**body, "instances": np.zeros((1, 64, 64, 3)).tolist()} if "instances" in body else body):
        status = _post(server, json.dumps(images, allow_nan=True).encode(), path)
        assert status in REST_STATUSES, status


def test_the_server_is_alive_after_the_fuzzing(channel: Any, server: ServerThread) -> None:
    """Runs after the two above in file order (module-scoped server): a good request over each protocol."""
    _alive(channel, server)


@pytest.mark.parametrize("dtype", [1, 2], ids=["float", "double-the-wrong-dtype"])
def test_an_overflowing_shape_over_grpc_is_invalid_argument(channel: Any, server: ServerThread, dtype: int) -> None:
    """Issue 34 item 5 as the fuzzing meets it over the wire: [9223372036854775807, 64, 64, 3] with one
    float_val skipped the size check (its element count wrapped) and was answered UNKNOWN ("Unexpected
    ValueError"). TF Serving parses each input with Tensor::FromProto in GetInputValues
    (tensorflow/cc/saved_model/util.cc:73-77 at f3b55a2, from servables/tensorflow/predict_util.cc:129 at
    9d981c5), which fails on TensorShape::IsValid (tensor_shape.cc:77-94: more than 2**63 - 1 elements), and
    answers INVALID_ARGUMENT "tensor parsing error: images" before the Session checks the dtype: so a wrong
    dtype gets the same answer. The reason in parentheses is the local server's; the server stays up."""
    request = _protos.message("tensorflow.serving.PredictRequest")()
    request.model_spec.name = "tiny"
    tensor = request.inputs["images"]
    tensor.dtype = dtype
    for size in (9223372036854775807, 64, 64, 3):
        tensor.tensor_shape.dim.add(size=size)
    tensor.float_val.append(0.5)
    code, details = _predict(channel, bytes(request.SerializeToString()))
    _alive(channel, server)
    assert (code, details) == (
        "INVALID_ARGUMENT",
        "tensor parsing error: images (tensor shape [9223372036854775807, 64, 64, 3] is too large "
        "(more than 2**63 - 1 entries))",
    )
