"""The Open Inference Protocol (KServe v2) client against real Triton 2.51 and real MLServer 1.7.1.

Nothing is faked: the servers come from serve_bench.servers (the servers' own environment,
``make servers-env``); without that environment these tests skip with one line. Source
citations name each project's HEAD in /work/.mirror, newer than the versions run here
(Triton server e1db8a6, core 73aad7c, common 83adf7c; MLServer a325e52); what is asserted
was also seen from the versions run.
"""

from __future__ import annotations

import time
import types

import numpy as np
import orjson
import pytest

from serve_bench.client import (
    ConnectError,
    InvalidArgument,
    NotFound,
    ServeBenchError,
    ServerError,
    SignatureInfo,
    TensorInfo,
    Unavailable,
    connect,
)
from serve_bench.client._errors import error_for_grpc, error_for_http
from serve_bench.client._v2_codec import (
    DATATYPES,
    decode_rest_response,
    encode_rest_request,
    from_raw,
    pack_bytes,
    signatures,
    to_raw,
    unpack_bytes,
)
from serve_bench.client._v2_grpc import decode_infer_response, encode_infer_request, message
from serve_bench.codec import CodecError, dtype_name
from serve_bench.errors import UserError
from serve_bench.stats import InvalidTarget, Target, parse_target
from tests.conftest import _servers_env_or_skip, free_port

TINY = {
    "serving_default": SignatureInfo(
        "serving_default", {"images": TensorInfo(1, (-1, 64, 64, 3))}, {"features": TensorInfo(1, (-1, 32))}
    )
}


def _images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 255, (n, 64, 64, 3)).astype(np.float32)


def _servers_or_skip() -> None:
    _servers_env_or_skip()


@pytest.fixture(scope="module")
def v2_triton(request):
    _servers_or_skip()
    return request.getfixturevalue("triton")  # tests/conftest.py: real Triton serving `tiny`


@pytest.fixture(scope="module")
def v2_mlserver(request):
    _servers_or_skip()
    return request.getfixturevalue("mlserver")  # tests/conftest.py: real MLServer serving `tiny`


# (server fixture, URL attribute, connect options, binary expected after open)
TRANSPORTS = {
    "triton-grpc": ("v2_triton", "grpc_url", {}, None),
    "triton-http-binary": ("v2_triton", "http_url", {}, True),
    "triton-http-json": ("v2_triton", "http_url", {"binary": False}, False),
    "mlserver-grpc": ("v2_mlserver", "grpc_url", {}, None),
    "mlserver-http": ("v2_mlserver", "http_url", {}, False),  # no binary extension: JSON chosen
}


@pytest.fixture(params=sorted(TRANSPORTS))
def target(request):
    fixture, attribute, options, binary = TRANSPORTS[request.param]
    server = request.getfixturevalue(fixture)
    return getattr(server, attribute), options, binary


# --- against the real servers ----------------------------------------------------------------------


async def test_predict_equals_in_process(target, reference):
    """Both servers answer what in-process TensorFlow computes, over gRPC (raw_input_contents, as
    tritonclient sends) and REST: binary where the server lists ``binary_tensor_data`` in GET /v2
    (Triton: core src/server.cc:93; server docs/protocol/extension_binary_data.md:35), JSON where
    it does not (MLServer: extensions default to [] in mlserver/settings.py:207, and its /infer
    parses the whole body as JSON, mlserver/rest/requests.py:31)."""
    url, options, binary = target
    async with connect(url, "tiny", **options) as client:
        assert getattr(client.transport, "binary", None) is binary
        images = _images(3, seed=1)
        prepared = client.prepare({"images": images})
        if binary is not None:
            assert (prepared.payload.json_length is not None) is binary
        if binary:  # the answer came back binary too ("binary_data_output": true)
            _, json_length = await client.transport.send(prepared, 30)
            assert json_length is not None
        response = await client.predict_prepared(prepared)
        features = response.outputs["features"]
        assert features.dtype == np.float32 and features.shape == (3, 32)
        np.testing.assert_allclose(features, reference(images), rtol=1e-5, atol=1e-6)
        again = await client.predict_prepared(prepared)  # a prepared request is reusable
        np.testing.assert_array_equal(again.outputs["features"], features)


async def test_triton_metadata_is_one_signature_and_status_is_ready(v2_triton):
    """GET /v2/models/tiny and gRPC ModelMetadata (common protobuf/grpc_service.proto,
    ModelMetadataResponse) become one SignatureInfo, serving_default, with TF DataType numbers
    (FP32 -> DT_FLOAT = 1) and -1 for the batch dimension; GET /v2 and ServerMetadata name the
    server. ModelReady / GET .../ready answer the status of each listed version."""
    for url in (v2_triton.grpc_url, v2_triton.http_url):
        async with connect(url, "tiny") as client:
            assert client.signatures == TINY
            assert client.transport.server_identity == "triton/2.51.0"
            assert (await client.status()).versions == {1: "AVAILABLE"}
        async with connect(url, "tiny", version=1) as client:
            assert (await client.status()).versions == {1: "AVAILABLE"}


async def test_mlserver_names_itself_and_is_ready(v2_mlserver):
    """MLServer's GET /v2 and ServerMetadata say ``mlserver`` and its version
    (mlserver/handlers/dataplane.py:69-74); a ready model is AVAILABLE. Its metadata lists no
    versions unless model-settings.json does (mlserver/model.py:259-266), so the one
    status is reported under version 0."""
    for url in (v2_mlserver.grpc_url, v2_mlserver.http_url):
        async with connect(url, "tiny") as client:
            assert client.transport.server_identity == "mlserver/1.7.1"
            assert list((await client.status()).versions.values()) == ["AVAILABLE"]


async def test_unknown_model_is_not_found(target):
    """Triton: core model_lifecycle.cc:343-345 NOT_FOUND "'m' is not found", prefixed
    "Request for unknown model: " (model_repository_manager.cc:1286), HTTP 404
    (server http_server.cc:109-110) and gRPC NOT_FOUND (src/grpc/grpc_utils.cc:95-96).
    MLServer: ModelNotFound is 404 (mlserver/errors.py:20-26) and NOT_FOUND
    (mlserver/grpc/utils.py:12-17)."""
    url, options, _ = target
    with pytest.raises(NotFound, match="no_such_model"):
        await connect(url, "no_such_model", **options)


async def test_unknown_version_is_not_found(v2_triton):
    """Triton: "'tiny' version 7 is not found" (core model_lifecycle.cc:349-354), NOT_FOUND."""
    for url in (v2_triton.grpc_url, v2_triton.http_url):
        with pytest.raises(NotFound, match="version 7"):
            await connect(url, "tiny", version=7)


TRITON_REFUSALS = {
    # core src/infer_request.cc:1124: "inference input 'images' data-type is 'BYTES', but model 'tiny' expects 'FP32'"
    "bytes-for-fp32": (np.array([b"abc"], dtype=object), "data-type is 'BYTES'"),
    # core src/infer_request.cc:1176: "unexpected shape for input 'images' for model 'tiny'. Expected [-1,64,64,3], ..."
    "shape": (np.zeros((1, 2, 2, 3), np.float32), r"unexpected shape for input 'images'.*Expected \[-1,64,64,3\]"),
}


@pytest.mark.parametrize("case", sorted(TRITON_REFUSALS))
@pytest.mark.parametrize("attribute, binary", [("grpc_url", None), ("http_url", True), ("http_url", False)])
async def test_triton_refuses_wrong_inputs_with_its_message(v2_triton, attribute, binary, case):
    """Sent unchecked (no metadata), a wrong dtype or shape is Triton's INVALID_ARG: HTTP 400
    (server http_server.cc:116-120) and gRPC INVALID_ARGUMENT (src/grpc/grpc_utils.cc:97-98),
    both InvalidArgument here, carrying Triton's own words."""
    url = getattr(v2_triton, attribute)
    array, words = TRITON_REFUSALS[case]
    async with connect(url, "tiny", fetch_metadata=False, binary=binary) as client:
        assert getattr(client.transport, "binary", None) is binary
        with pytest.raises(InvalidArgument, match=words) as info:
            await client.predict({"images": array})
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("transport", ["mlserver-grpc", "mlserver-http"])
async def test_mlserver_refuses_a_wrong_dtype_as_invalid_argument(request, transport):
    """MLServer maps an MLServerError with status 400 to HTTP 400 and INVALID_ARGUMENT
    (mlserver/errors.py:5-8, mlserver/grpc/utils.py:12-17); any other exception a runtime
    raises becomes HTTP 500 / INTERNAL (mlserver/grpc/utils.py:41-50)."""
    fixture, attribute, options, _ = TRANSPORTS[transport]
    url = getattr(request.getfixturevalue(fixture), attribute)
    async with connect(url, "tiny", fetch_metadata=False, **options) as client:
        with pytest.raises(InvalidArgument, match="BYTES"):
            await client.predict({"images": np.array([b"abc"], dtype=object)})


async def test_without_metadata_rest_sends_json_which_every_server_reads(v2_mlserver, reference):
    """Before the server's extensions are known, binary=None sends JSON: MLServer refuses the binary
    framing (its /infer parses the whole body as JSON, mlserver/rest/requests.py:31)."""
    async with connect(v2_mlserver.http_url, "tiny", fetch_metadata=False) as client:
        images = _images(1, seed=4)
        assert client.transport.binary is False
        np.testing.assert_allclose(
            (await client.predict({"images": images}))["features"], reference(images), rtol=1e-5, atol=1e-6
        )


async def test_wrong_inputs_refused_before_sending(v2_triton):
    """With the metadata learnt, the client refuses a wrong name, dtype or shape itself."""
    async with connect(v2_triton.grpc_url, "tiny") as client:
        for inputs, words in (
            ({"pixels": _images(1)}, "pixels"),
            ({"images": _images(1).astype(np.float64)}, "float64"),
            ({"images": np.zeros((1, 32, 32, 3), np.float32)}, "shape"),
        ):
            with pytest.raises(InvalidArgument, match=words):
                client.prepare(inputs)


async def test_serving_bytes_on_a_v2_target_is_one_clear_line(v2_triton):
    """v2 has no signatures: asking for serving_bytes says to serve that graph as a model of its own."""
    with pytest.raises(InvalidArgument, match="tiny_bytes") as info:
        await connect(v2_triton.http_url, "tiny", signature="serving_bytes")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("scheme", ["v2+grpc", "v2+http"])
async def test_server_not_running_is_connect_error_naming_the_url(scheme):
    url = f"{scheme}://127.0.0.1:{free_port()}"
    started = time.perf_counter()
    with pytest.raises(ConnectError) as info:
        await connect(url, "tiny", timeout=3)
    assert time.perf_counter() - started < 5
    assert url in str(info.value)


@pytest.mark.parametrize(
    "url, words",
    [
        ("v2+grpc://", "has no host"),
        ("v2+http://:8000", "has no host"),
        ("v2+grpc://localhost:port", "not a valid URL"),
        ("v2+http://localhost:99999", "not a valid URL"),
        ("v2+http://[::1", "not a valid URL"),
        ("v2://localhost:8000", "unknown scheme"),
        ("v2+grpcs://localhost:8001", "unknown scheme"),
        ("v2+http://localhost:8000/v2/models/tiny/infer", "has a path"),
    ],
)
def test_bad_url_is_one_clear_error(url, words):
    """A malformed target fails in connect() itself, before any socket, with one line naming it: the user's
    error to fix (a UserError, exit 2), not a network error (not a ServeBenchError)."""
    with pytest.raises(InvalidTarget, match=words) as info:
        connect(url, "tiny")
    assert isinstance(info.value, UserError) and not isinstance(info.value, ServeBenchError)
    assert "\n" not in str(info.value) and url in str(info.value)


def test_parse_target_defaults():
    def parts(url: str) -> tuple[str, str, int]:
        address = parse_target(url)
        return address.scheme, address.host, address.port

    assert parts("v2+grpc://h") == ("v2+grpc", "h", 8001)
    assert parts("v2+http://h") == ("v2+http", "h", 8000)
    assert parts("V2+HTTPS://h:9") == ("v2+https", "h", 9)
    assert parts("grpc://h") == ("grpc", "h", 8500)  # TF Serving's unchanged
    assert parts("http://h") == ("http", "h", 8501)


# --- without a server ------------------------------------------------------------------------------


def test_target_protocol_from_the_url():
    assert Target("a", "v2+grpc://h:8001").protocol == "v2-grpc"
    assert Target("a", "v2+http://h:8000").protocol == "v2-rest"
    assert Target("a", "v2+https://h").protocol == "v2-rest"
    assert Target("a", "grpc://h:8500").protocol == "grpc"
    assert Target("a", "http://h:8501").protocol == "rest"
    assert Target("a", "v2+http://h", protocol="rest").protocol == "rest"  # a stated protocol wins


def test_the_verdict_prefers_tf_serving_grpc_then_v2_grpc():
    from serve_bench.report._analysis import _device_pick

    def t(name, protocol):
        return types.SimpleNamespace(name=name, device="cpu", protocol=protocol, best=object())

    rest, v2_rest, v2_grpc, grpc = t("r", "rest"), t("vr", "v2-rest"), t("vg", "v2-grpc"), t("g", "grpc")
    assert _device_pick([rest, v2_rest, v2_grpc, grpc], "cpu") is grpc
    assert _device_pick([v2_rest, v2_grpc], "cpu") is v2_grpc
    assert _device_pick([v2_rest, rest], "cpu") is v2_rest


@pytest.mark.parametrize("datatype", sorted(DATATYPES))
def test_each_v2_datatype_is_the_tf_dtype_of_the_same_name(datatype):
    """FP32 -> DT_FLOAT, BYTES -> DT_STRING, INT64 -> DT_INT64, ...: the numbers come from codec."""
    number = signatures([("x", datatype, [-1])], [])["serving_default"].inputs["x"].dtype
    expected = {"FP32": "DT_FLOAT", "FP64": "DT_DOUBLE", "FP16": "DT_HALF", "BF16": "DT_BFLOAT16", "BYTES": "DT_STRING"}
    assert dtype_name(number) == expected.get(datatype, f"DT_{datatype}")


def test_metadata_without_inputs_gives_no_signature():
    """A model whose metadata lists no inputs (MLServer without declared inputs) is sent unchecked."""
    assert signatures([], [("features", "FP32", [-1, 32])]) == {}


def test_binary_rest_framing_round_trip_with_bytes():
    """The request as extension_binary_data.md (server docs, lines 43-79) frames it: JSON, then each
    input's raw bytes in order, sized by "binary_data_size"; BYTES as <u32 little-endian length><bytes>.
    The response: outputs with "binary_data_size" take the next bytes after the JSON header,
    the others carry JSON "data"."""
    floats = np.arange(6, dtype=np.float32).reshape(2, 3)
    strings = np.array([b"\xff\xd8jpeg", b"", "text"], dtype=object)
    body = encode_rest_request({"images": floats, "image_bytes": strings}, binary=True)
    header = orjson.loads(body.body[: body.json_length])
    assert header["parameters"] == {"binary_data_output": True}
    sizes = [t["parameters"]["binary_data_size"] for t in header["inputs"]]
    assert [t["datatype"] for t in header["inputs"]] == ["FP32", "BYTES"]
    assert [t["shape"] for t in header["inputs"]] == [[2, 3], [3]]
    assert sizes == [24, (4 + 6) + 4 + (4 + 4)] and len(body) == body.json_length + sum(sizes)
    blob = body.body[body.json_length :]
    np.testing.assert_array_equal(from_raw(blob[:24], "FP32", (2, 3)), floats)
    assert from_raw(blob[24:], "BYTES", (3,)).tolist() == [b"\xff\xd8jpeg", b"", b"text"]

    # a response as http_server.cc writes it (4278-4290): binary outputs first-to-last after the JSON
    out_header = (
        b'{"outputs":[{"name":"features","datatype":"FP32","shape":[2,3],"parameters":{"binary_data_size":24}},'
        b'{"name":"labels","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":13}},'
        b'{"name":"scores","datatype":"INT64","shape":[2],"data":[7,8]}]}'
    )
    response = out_header + to_raw(floats) + pack_bytes([b"abc", "de"])
    decoded = decode_rest_response(response, len(out_header))
    np.testing.assert_array_equal(decoded["features"], floats)
    assert decoded["labels"].tolist() == [b"abc", b"de"]
    assert decoded["scores"].dtype == np.int64 and decoded["scores"].tolist() == [7, 8]


def test_json_rest_request_and_response():
    body = encode_rest_request({"images": np.ones((1, 2), np.float32), "names": np.array(["a"])}, binary=False)
    assert body.json_length is None
    header = orjson.loads(body.body)
    assert header["inputs"][0] == {"name": "images", "datatype": "FP32", "shape": [1, 2], "data": [1.0, 1.0]}
    assert header["inputs"][1]["data"] == ["a"] and "parameters" not in header
    decoded = decode_rest_response(b'{"outputs":[{"name":"y","datatype":"BYTES","shape":[1],"data":["z"]}]}', None)
    assert decoded["y"].tolist() == [b"z"]
    with pytest.raises(CodecError, match="binary=True"):  # JSON cannot carry a JPEG's bytes
        encode_rest_request({"image_bytes": np.array([b"\xff\xd8"], dtype=object)}, binary=False)


@pytest.mark.parametrize(
    "raw, count, words",
    [
        (b"\x05\x00\x00\x00abc", 1, "claims 5 bytes"),
        (b"\x01\x00\x00\x00a\x00", 1, "after its 1 elements"),
        (b"\x01\x00\x00\x00a", 2, "ends after 1 of 2"),
    ],
)
def test_truncated_bytes_tensors_are_refused(raw, count, words):
    with pytest.raises(CodecError, match=words):
        unpack_bytes(raw, count)
    assert unpack_bytes(pack_bytes([b"a"] * count), count).tolist() == [b"a"] * count


def test_raw_numbers_are_little_endian_row_major():
    array = np.array([[1, 2], [3, 4]], dtype=">i4")  # big-endian in memory: sent little-endian
    assert to_raw(array) == np.array([1, 2, 3, 4], "<i4").tobytes()
    with pytest.raises(CodecError, match="needs 16 bytes"):
        from_raw(b"\x00" * 12, "INT32", (2, 2))


def test_grpc_request_and_both_response_forms():
    """ModelInferRequest carries each input's bytes in raw_input_contents, in input order (common
    protobuf/grpc_service.proto, raw_input_contents). A response is read from raw_output_contents
    (Triton; MLServer when the request was raw, mlserver/grpc/servicers.py:115-116) or from the
    typed contents (InferTensorContents), without a loop per value."""
    floats = _images(2)
    raw = encode_infer_request("tiny", 3, {"images": floats, "ids": np.array([b"x", b"yz"], dtype=object)})
    request = message("ModelInferRequest").FromString(raw)
    assert request.model_name == "tiny" and request.model_version == "3"
    assert [(t.name, t.datatype, list(t.shape)) for t in request.inputs] == [
        ("images", "FP32", [2, 64, 64, 3]),
        ("ids", "BYTES", [2]),
    ]
    assert request.raw_input_contents[0] == floats.tobytes() and request.raw_input_contents[1] == pack_bytes(
        [b"x", b"yz"]
    )

    response = message("ModelInferResponse")()
    response.outputs.add(name="features", datatype="FP32", shape=[2, 3])
    response.outputs.add(name="labels", datatype="BYTES", shape=[1])
    response.raw_output_contents.extend([to_raw(np.arange(6, dtype=np.float32)), pack_bytes([b"cat"])])
    decoded = decode_infer_response(response.SerializeToString())
    np.testing.assert_array_equal(decoded["features"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert decoded["labels"].tolist() == [b"cat"]

    typed = message("ModelInferResponse")()
    features = typed.outputs.add(name="features", datatype="FP32", shape=[2, 3])
    features.contents.fp32_contents.extend([0.5] * 6)
    counts = typed.outputs.add(name="counts", datatype="UINT8", shape=[2])
    counts.contents.uint_contents.extend([1, 255])
    decoded = decode_infer_response(typed.SerializeToString())
    assert decoded["features"].dtype == np.float32 and decoded["features"].shape == (2, 3)
    assert decoded["counts"].dtype == np.uint8 and decoded["counts"].tolist() == [1, 255]


def test_the_shipped_messages_agree_with_mlservers_field_by_field():
    """The descriptor serve-bench ships (stripped from Triton's grpc_service.proto) and MLServer's own
    (mlserver/grpc/dataplane_pb2.py, read without importing it) give every field serve-bench uses the
    same number, name, type and label; the two protos differ only where MLServer lacks InferParameter's
    double_param and uint64_param, which serve-bench never sends."""
    from google.protobuf import descriptor_pb2

    from serve_bench._protos import _serialized_descriptor
    from serve_bench.client._v2_descriptor import SERIALIZED
    from serve_bench.errors import UserError
    from serve_bench.servers import servers_env

    try:
        dataplane = servers_env().site_packages / "mlserver" / "grpc" / "dataplane_pb2.py"
    except UserError:
        _servers_env_or_skip()
        raise
    theirs = descriptor_pb2.FileDescriptorProto.FromString(_serialized_descriptor(str(dataplane)))
    ours = descriptor_pb2.FileDescriptorProto.FromString(SERIALIZED)

    def fields(file):
        def walk(messages, prefix):
            for m in messages:
                for f in m.field:
                    yield (prefix + m.name, f.number), (f.name, f.type, f.label, f.type_name)
                yield from walk(m.nested_type, f"{prefix}{m.name}.")

        return dict(walk(file.message_type, ""))

    mine, mlserver = fields(ours), fields(theirs)
    assert {k: v for k, v in mine.items() if k in mlserver} == {k: mlserver[k] for k in mine if k in mlserver}
    assert set(mine) - set(mlserver) == {("InferParameter", 4), ("InferParameter", 5)}


def test_the_servers_words_decide_where_their_codes_say_less():
    """Triton with --model-namespacing: INVALID_ARG "Request for unknown model: 'm' is not found"
    (core model_repository_manager.cc:1296-1299) is NotFound. MLServer's ModelNotReady, 400 /
    INVALID_ARGUMENT (mlserver/errors.py:29-34), is Unavailable: retry later."""
    url = "v2+grpc://h:8001"
    unknown = "Request for unknown model: 'm' is not found"
    assert type(error_for_grpc("INVALID_ARGUMENT", unknown, url)) is NotFound
    assert type(error_for_http(400, unknown, url)) is NotFound
    assert type(error_for_http(400, "Model tiny is not ready yet.", url)) is Unavailable
    assert type(error_for_grpc("INVALID_ARGUMENT", "Model tiny with version 1 is not ready yet.", url)) is Unavailable
    assert type(error_for_http(400, "input 'images' has datatype BYTES", url)) is InvalidArgument
    assert type(error_for_http(500, "Internal Server Error", url)) is ServerError


def test_error_text_is_the_servers_words_on_one_line():
    """What an error says: Triton's and MLServer's {"error": ...}, FastAPI's {"detail": [...]} (MLServer's
    422 for a body it cannot parse), a bare traceback's last line (MLServer's 500s), else the first line."""
    from serve_bench.client._http import _error_text

    assert _error_text(b'{"error":"Model tiny not found"}') == "Model tiny not found"
    assert _error_text(b'{"detail":[{"msg":"JSON decode error"},{"msg":"x"}]}') == "JSON decode error; x"
    assert _error_text(b"Traceback (most recent call last):\n  File a.py\nUnicodeDecodeError: bad\n") == (
        "UnicodeDecodeError: bad"
    )
    assert _error_text(b"Internal Server Error") == "Internal Server Error"


@pytest.mark.parametrize("server_fixture", ["v2_triton", "v2_mlserver"])
async def test_tf_serving_api_over_grpc_against_an_open_inference_protocol_port_is_refused_at_connect(
    server_fixture, request
):
    """``grpc://`` (TF Serving's API) at Triton's or MLServer's gRPC port. Neither registers TF Serving's
    PredictionService: Triton's front end registers ``inference.GRPCInferenceService`` and gRPC's health service
    (triton-inference-server/server e1db8a6, src/grpc/grpc_server.cc:2306-2307; the service: common 83adf7c,
    protobuf/grpc_service.proto:40), MLServer its own copy of it (SeldonIO/MLServer a325e52,
    proto/dataplane.proto:11, registered alone beside its ModelRepositoryService in mlserver/grpc/server.py:77-82),
    so GetModelMetadata answers UNIMPLEMENTED, and so would every Predict of a point. The client took that for a
    TF Serving-API server without metadata and connected unchecked: ``bench`` then measured a whole point of
    UNIMPLEMENTED errors. Now it asks the protocol's ServerMetadata and, where that answers, refuses in one line
    naming the server and v2+grpc://."""
    server = request.getfixturevalue(server_fixture)
    url = server.grpc_url.replace("v2+grpc://", "grpc://", 1)
    with pytest.raises(ConnectError) as caught:
        await connect(url, "tiny")
    assert str(caught.value) == (
        f"{url}: the server there serves the Open Inference Protocol ({_IDENTITY[server_fixture]}), not TF Serving's "
        f"API (GetModelMetadata: UNIMPLEMENTED); for Triton's or MLServer's API use {server.grpc_url}"
    )


_IDENTITY = {"v2_triton": "triton/2.51.0", "v2_mlserver": "mlserver/1.7.1"}


@pytest.mark.parametrize("server_fixture", ["v2_triton", "v2_mlserver"])
async def test_tf_serving_api_over_rest_against_an_open_inference_protocol_port_is_refused_at_connect(
    server_fixture, request
):
    """``http://`` (TF Serving's API) at Triton's or MLServer's HTTP port: both answer 404 for
    ``GET /v1/models/tiny/metadata``, which TF Serving answers for a model it does not serve, and the client said
    "HTTP 404: Not Found" as if the model were missing. The protocol's server metadata, ``GET /v2``, answers there
    (name, version, extensions: Triton server e1db8a6, src/http_server.cc:4913-4915 to HandleServerMetadata at
    :2201; MLServer a325e52, mlserver/rest/app.py:154 to mlserver/rest/endpoints.py:81), so the client now refuses
    in one line naming the server and v2+http://."""
    server = request.getfixturevalue(server_fixture)
    url = server.http_url.replace("v2+http://", "http://", 1)
    with pytest.raises(ConnectError) as caught:
        await connect(url, "tiny")
    assert str(caught.value) == (
        f"{url}: the server there serves the Open Inference Protocol ({_IDENTITY[server_fixture]}), not TF Serving's "
        f"API (GET /v1/models/tiny/metadata: HTTP 404); for Triton's or MLServer's API use {server.http_url}"
    )
