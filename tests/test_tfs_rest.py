"""The local server's REST API against TF Serving's source, request by request.

Every case cites the TF Serving file (tensorflow/serving HEAD) whose behaviour it checks:
which JSON bodies util/json_tensor.cc accepts and refuses, with its messages; how
model_servers/http_rest_api_util.cc parses URLs; which HTTP status http_server.cc gives each
status code; what the answers look like.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from tests._servers import local_server


@pytest.fixture(scope="module")
def server(models_dir):
    with local_server(models_dir) as running:
        yield running


def _call(server, path: str, body: bytes | None = None, method: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        server.rest_url + path, data=body, method=method or ("POST" if body is not None else "GET")
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _predict(server, body: object, path: str = "/v1/models/tiny:predict") -> tuple[int, dict]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return _call(server, path, raw)


def _image(value: float = 1.0, size: int = 64) -> list:
    return np.full((size, 64, 3), value, np.float32).tolist()


def _jpeg() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.full((64, 64, 3), 128, np.uint8)).save(out, format="JPEG")
    return out.getvalue()


# --- bodies refused, each with json_tensor.cc's own words ---------------------------------


@pytest.mark.parametrize(
    "body, message",
    [
        # json_tensor.cc:474 ParseJson
        (b"", "JSON Parse error: The document is empty"),
        # json_tensor.cc:499 ParseJson: the top level must be an object
        (b"[1,2]", "JSON Value: [1,2] Is not object"),
        # json_tensor.cc:281 FormatSignatureError
        (
            {"signature_name": 100},
            'JSON Value: {"signature_name":100} not formatted correctly. '
            "'signature_name' key must be a string value.",
        ),
        # json_tensor.cc:676-680: both keys
        (
            {"instances": [1], "inputs": [1]},
            'JSON Value: {"instances":[1],"inputs":[1]} Not formatted correctly '
            "expecting only one of 'inputs' or 'instances' keys to exist ",
        ),
        # json_tensor.cc:683-685
        ({"instances": 5}, "JSON Value: {\"instances\":5} Expecting 'instances' to be an list/array"),
        # json_tensor.cc:687-689: an empty instances list (batch 0 over REST)
        ({"instances": []}, "JSON Value: {\"instances\":[]} No values in 'instances' array"),
        # json_tensor.cc:704
        ({"signature_name": ""}, "Missing 'inputs' or 'instances' key"),
        # http_rest_api_handler.cc:236-238 GetInfoMap
        ({"signature_name": "nope", "instances": [1]}, 'Serving signature name: "nope" not found in signature def'),
        # json_tensor.cc:262 TypeError, DataTypeString names ("float")
        ({"inputs": [True]}, "JSON Value: true Type: True is not of expected type: float"),
        ({"inputs": {"images": [["a"]]}}, 'JSON Value: "a" Type: String is not of expected type: float'),
        ({"inputs": [{"a": 1}]}, 'JSON Value: {"a":1} Type: Object is not of expected type: float'),
        # json_tensor.cc:413-427 FillTensorProto: ragged lists and values at the wrong depth
        ({"inputs": [[1, 2], [3]]}, "Encountered list at unexpected size: 1 at level: 1 expected size: 2"),
        ({"inputs": [[1, [2]]]}, "Encountered list at unexpected level: 2 expected < 2"),
        ({"inputs": [[[1], 2]]}, "JSON Value: 2 found at incorrect level: 3 in the JSON DOM. Expected at level: 3"),
        # json_tensor.cc:632-637 FillTensorMapFromInputsMap: a named input missing from the object
        ({"inputs": {"pixels": [[0]]}}, "Missing named input: images in 'inputs' object."),
        # json_tensor.cc:548-600 FillTensorMapFromInstancesList: rows of unequal size, mixed rows
        (
            {"instances": [_image(), _image(size=63)]},
            "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
            "Expecting tensor size: 12288 but got: 12096",
        ),
        ({"instances": [{"images": _image()}, _image()]}, "Expecting object but got list at item 1 of input list"),
        (
            {"instances": [_image(), {"images": _image()}]},
            "Expecting value/list but got object at item 1 of input list",
        ),
        (
            {"instances": [{"images": _image(), "extra": 1}]},
            "Failed to process element: 0 key: extra of 'instances' list. Error: INVALID_ARGUMENT: "
            "JSON object: does not have named input: extra",
        ),
    ],
    ids=[
        "empty",
        "not-object",
        "signature-type",
        "both-keys",
        "instances-type",
        "instances-empty",
        "no-key",
        "signature",
        "bool",
        "string",
        "object",
        "ragged",
        "deep-list",
        "shallow-value",
        "missing-name",
        "row-sizes",
        "row-mix-1",
        "row-mix-2",
        "row-extra-name",
    ],
)
def test_refused_bodies_answer_400_with_tf_serving_message(server, body, message):
    """Each refused body answers 400 (http_server.cc:56 INVALID_ARGUMENT -> BAD_REQUEST) with
    {"error": message} as json_tensor.cc:1129 MakeJsonFromStatus writes it."""
    code, answer = _predict(server, body)
    assert (code, answer) == (400, {"error": message})


def test_malformed_json_is_a_parse_error(server):
    """util/json_tensor.cc:486-489: a body that is not JSON is "JSON Parse error: ..." (400)."""
    code, answer = _predict(server, b"instances = [1, 2]")
    assert code == 400 and answer["error"].startswith("JSON Parse error: ")


def test_b64_values(server):
    """util/json_tensor.cc:356-389: {"b64": ...} is a binary string for DT_STRING inputs; a bad one
    is "Unable to base64 decode"; an object of other keys in a row is read as named inputs."""
    sig = {"signature_name": "serving_bytes"}
    good = base64.b64encode(_jpeg()).decode()
    code, answer = _predict(server, {**sig, "instances": [{"b64": good}, {"b64": good}]})
    assert code == 200 and np.asarray(answer["predictions"]).shape == (2, 32)
    code, answer = _predict(server, {**sig, "instances": [{"b64": "not base64!"}]})
    assert (code, answer["error"]) == (
        400,
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: Unable to base64 decode",
    )
    code, answer = _predict(server, {**sig, "instances": [{"b64": 5}]})
    assert (code, answer["error"]) == (
        400,
        "Failed to process element: 0 key: b64 of 'instances' list. Error: "
        "INVALID_ARGUMENT: JSON object: does not have named input: b64",
    )
    code, answer = _predict(server, {**sig, "inputs": {"b64": good}})  # a plain b64 value as the single input
    assert code == 400 and "shape []" in answer["error"]  # a scalar: serve-bench's own check (docs/local-server.md)


def test_all_four_ways_of_naming_a_single_input_agree(server, reference):
    """util/json_tensor.cc:520-648: with one input, rows may be plain or named, columns a plain
    value or an object; names the signature lacks in an "inputs" object are ignored (its loop
    only looks up the signature's names). Rows answer "predictions", columns "outputs", and a
    single output is written without its name (json_tensor.cc:1000-1048)."""
    images = np.random.default_rng(3).integers(0, 256, size=(2, 64, 64, 3)).astype(np.float32)
    want = reference(images)
    rows = images.tolist()
    for body, key in [
        ({"instances": rows}, "predictions"),
        ({"instances": [{"images": r} for r in rows]}, "predictions"),
        ({"inputs": rows}, "outputs"),
        ({"inputs": {"images": rows, "not_an_input": 1}}, "outputs"),
    ]:
        code, answer = _predict(server, body)
        assert code == 200 and list(answer) == [key]
        np.testing.assert_allclose(np.asarray(answer[key], np.float32), want, rtol=1e-5, atol=1e-6)


def test_rest_ignores_output_filter(server):
    """FillPredictRequestFromJson (util/json_tensor.cc:656-705) reads only signature_name,
    instances and inputs; REST has no output_filter, so even "output_filter": 5 is ignored."""
    code, answer = _predict(server, {"instances": [_image()], "output_filter": 5})
    assert code == 200 and np.asarray(answer["predictions"]).shape == (1, 32)


def test_deeply_nested_strings_are_a_tensor_parsing_error(server):
    """1000-deep nested strings to serving_bytes: json_tensor.cc fills a rank-1000 tensor that
    Tensor::FromProto refuses (254 dimensions at most), so GetInputValues
    (tensorflow/cc/saved_model/util.cc) answers "tensor parsing error: <alias>": 400, not 500."""
    body = '{"signature_name": "serving_bytes", "instances": ' + "[" * 1000 + '"x"' + "]" * 1000 + "}"
    code, answer = _predict(server, body.encode())
    assert (code, answer) == (400, {"error": "tensor parsing error: image_bytes"})


def test_tensorflow_errors_give_the_ops_cause(server):
    """A bad JPEG fails inside the graph; TF Serving (a Session run) reports the op's message
    with its code (servables/tensorflow/predict_util.cc:109-111 returns Session::Run's status),
    not TF2's "Graph execution error:" wrapper."""
    code, answer = _predict(
        server, {"signature_name": "serving_bytes", "instances": [{"b64": base64.b64encode(b"not a jpeg").decode()}]}
    )
    assert code == 400
    assert answer["error"].startswith("Unknown image file format.") and "Graph execution error" not in answer["error"]


# --- URLs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, status, message",
    [
        # http_rest_api_util.cc:31: the version must be ASCII digits; "²" (%C2%B2) does not match
        (
            "POST",
            "/v1/models/tiny/versions/%C2%B2:predict",
            400,
            "Malformed request: POST /v1/models/tiny/versions/%C2%B2:predict",
        ),
        # http_rest_api_util.cc:117-119: digits that do not fit an int64
        (
            "GET",
            "/v1/models/tiny/versions/99999999999999999999",
            400,
            "Failed to convert version: 99999999999999999999 to numeric.",
        ),
        # http_rest_api_handler.cc:187-188
        ("GET", "/v1/models", 400, "Missing model name in request."),
        # http_rest_api_handler.cc:74-75: anything the regexes do not match (handler_test.cc:183-257)
        ("GET", "/v1/foo", 400, "Malformed request: GET /v1/foo"),
        ("POST", "/v1/models/tiny/metadata", 400, "Malformed request: POST /v1/models/tiny/metadata"),
        ("GET", "/v1/models/tiny:predict", 400, "Malformed request: GET /v1/models/tiny:predict"),
        ("PUT", "/v1/models/tiny", 400, "Malformed request: PUT /v1/models/tiny"),
        # the regex is case-insensitive but the verb is compared as written (http_rest_api_handler.cc:86-96)
        ("POST", "/v1/models/tiny:PREDICT", 400, "Malformed request: POST /v1/models/tiny:PREDICT"),
        # core/server_core.cc / basic_manager.cc: NOT_FOUND -> 404 (http_server.cc:60)
        ("POST", "/v1/models/nope:predict", 404, "Servable not found for request: Latest(nope)"),
        ("POST", "/v1/models/tiny/versions/9:predict", 404, "Servable not found for request: Specific(tiny, 9)"),
        # model_servers/server_core.cc:890: an unknown label is INVALID_ARGUMENT
        ("POST", "/v1/models/tiny/labels/stable:predict", 400, "Unrecognized servable version label: stable"),
        # get_model_status_impl.cc:88-90, 97-99
        ("GET", "/v1/models/tiny/versions/9", 404, "Could not find version 9 of model tiny"),
        ("GET", "/v1/models/nope", 404, "Could not find any versions of model nope"),
    ],
    ids=[
        "unicode-version",
        "version-overflow",
        "no-model",
        "v1-foo",
        "post-metadata",
        "get-predict",
        "put",
        "verb-case",
        "model",
        "version",
        "label",
        "status-version",
        "status-model",
    ],
)
def test_urls(server, method, path, status, message):
    body = b'{"instances": [1]}' if method in ("POST", "PUT") else None
    code, answer = _call(server, path, body, method)
    assert (code, answer) == (status, {"error": message})


def test_url_case_and_percent_encoding(server):
    """http_rest_api_util.cc:31-34 match "(?i)"; the model name and label are %-decoded
    (DecodeArg, http_rest_api_util.cc:109-129)."""
    code, answer = _call(server, "/V1/MODELS/ti%6Ey/VERSIONS/1")
    assert code == 200 and answer["model_version_status"][0]["version"] == "1"
    code, answer = _predict(server, {"instances": [_image()]}, "/v1/Models/tiny/Versions/1:predict")
    assert code == 200 and np.asarray(answer["predictions"]).shape == (1, 32)


# --- what GETs answer -----------------------------------------------------------------------


def test_status_json_as_tf_serving_prints_it(server):
    """ToJsonString(GetModelStatusResponse) (http_rest_api_util.cc:133-145; expected output in
    http_rest_api_handler_test.cc:455-470): version as a string, error_code "OK"; a version label
    is not looked at by GetModelStatus (get_model_status_impl.cc:80-110)."""
    want = {
        "model_version_status": [
            {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        ]
    }
    assert _call(server, "/v1/models/tiny") == (200, want)
    assert _call(server, "/v1/models/tiny/labels/anything") == (200, want)


def test_metadata_json_as_tf_serving_prints_it(server, models_dir):
    """ToJsonString(GetModelMetadataResponse) (http_rest_api_util.cc:147-201): model_spec with
    proto names and empty fields printed, then {"signature_def": SignatureDefMap}; each
    SignatureDef printed by protobuf's JSON printer, here checked against that printer."""
    from google.protobuf import json_format

    from serve_bench import _protos

    code, answer = _call(server, "/v1/models/tiny/metadata")
    assert code == 200
    assert answer["model_spec"] == {"name": "tiny", "signature_name": "", "version": "1"}
    saved = _protos.message("tensorflow.SavedModel").FromString(
        (models_dir / "tiny" / "1" / "saved_model.pb").read_bytes()
    )
    defs = saved.meta_graphs[0].signature_def
    for key in ("serving_default", "serving_bytes"):
        want = json_format.MessageToDict(
            defs[key], preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        assert answer["metadata"]["signature_def"]["signature_def"][key] == want
    images = answer["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]["images"]
    assert images["dtype"] == "DT_FLOAT" and [d["size"] for d in images["tensor_shape"]["dim"]] == [
        "-1",
        "64",
        "64",
        "3",
    ]


def test_nesting_past_the_parsers_limit_is_a_parse_error(server):
    """serve-bench's documented difference (docs/local-server.md): rapidjson parses iteratively
    (util/json_tensor.cc:480 kParseIterativeFlag) and has no depth limit; the local server's
    parser stops at 1024 levels, which answers 400 "JSON Parse error: ...", never 500."""
    body = b'{"instances": ' + b"[" * 1100 + b"1" + b"]" * 1100 + b"}"
    code, answer = _predict(server, body)
    assert code == 400 and answer["error"].startswith("JSON Parse error: ")


def test_long_number_runs_follow_the_same_rules(server, reference):
    """Bodies whose arrays are long runs of numbers (>= 64 KiB, parsed by numpy slices rather
    than as Python objects) answer exactly as util/json_tensor.cc:392-434 FillTensorProto
    would: the same values, and for a ragged array the same message."""
    images = np.random.default_rng(9).uniform(0, 255, size=(3, 64, 64, 3)).astype(np.float32)
    body = json.dumps({"instances": images.tolist()}).encode()
    assert len(body) > 3 * 64 * 1024
    code, answer = _predict(server, body)
    assert code == 200
    np.testing.assert_allclose(np.asarray(answer["predictions"], np.float32), reference(images), rtol=1e-5, atol=1e-5)
    ragged = images.tolist()
    ragged[1] = ragged[1][:63]
    code, answer = _predict(server, json.dumps({"inputs": ragged}).encode())
    assert (code, answer) == (400, {"error": "Encountered list at unexpected size: 63 at level: 1 expected size: 64"})
    bad = body.replace(b"]]]", b"]]],[[[1.5.5]]]", 1)  # a malformed number inside a long run
    code, answer = _predict(server, bad)
    assert code == 400 and answer["error"].startswith("JSON Parse error")


def test_cors_preflight(server):
    """model_servers/http_server.cc:167-175: OPTIONS succeeds when an Origin header names an
    http(s) origin, else FAILED_PRECONDITION (400) "Origin header is missing in CORS preflight"."""
    request = urllib.request.Request(
        server.rest_url + "/v1/models/tiny:predict", method="OPTIONS", headers={"Origin": "https://example.org"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
    code, answer = _call(server, "/v1/models/tiny:predict", None, "OPTIONS")
    assert (code, answer) == (400, {"error": "Origin header is missing in CORS preflight"})


def test_answers_write_non_finite_floats_as_tf_serving():
    """util/json_tensor.cc:163-167 WriteDecimal writes NaN, Infinity and -Infinity (not null),
    and whole floats with ".0" (:159-161). A logic test of the answer writer: no small model
    here produces non-finite features."""
    import orjson

    from serve_bench.server._rest import _outputs_json

    features = np.array([[1.0, np.nan], [np.inf, -np.inf]], np.float32)
    row = orjson.dumps(_outputs_json({"features": features}, row_format=True), option=orjson.OPT_SERIALIZE_NUMPY)
    assert row == b'{"predictions":[[1.0,NaN],[Infinity,-Infinity]]}'
    column = orjson.dumps(
        _outputs_json({"a": features[:1], "b": np.ones((1, 2), np.float32)}, row_format=False),
        option=orjson.OPT_SERIALIZE_NUMPY,
    )
    assert column == b'{"outputs":{"a":[[1.0,NaN]],"b":[[1.0,1.0]]}}'


@pytest.mark.parametrize(
    "body, message",
    [
        # json_tensor.cc:525-530
        (
            {"instances": [[1.0]]},
            "instances is a plain list, but expecting list of objects as multiple input tensors "
            "required as per tensorinfo_map",
        ),
        # json_tensor.cc:612-616
        (
            {"inputs": [[1.0]]},
            "inputs is a plain value/list, but expecting an object as multiple input tensors "
            "required as per tensorinfo_map",
        ),
        # json_tensor.cc:573-579: each instance names every input
        (
            {"instances": [{"a": [1.0], "b": "x"}, {"a": [2.0]}]},
            "Failed to process element: 1 of 'instances' list. JSON object: {\"a\":[2.0]} keys must be equal to: a,b",
        ),
        # json_tensor.cc:463-468: instances of one name disagree
        (
            {"instances": [{"a": [1.0], "b": "x"}, {"a": [2.0, 3.0], "b": "y"}]},
            "Failed to process element: 1 key: a of 'instances' list. Error: INVALID_ARGUMENT: "
            "Expecting tensor size: 1 but got: 2",
        ),
        # json_tensor.cc:632-637
        ({"inputs": {"a": [[1.0]]}}, "Missing named input: b in 'inputs' object."),
    ],
    ids=["rows-plain", "columns-plain", "row-keys", "row-sizes", "column-missing"],
)
def test_two_input_signatures(body, message):
    """A signature with two inputs (float "a", string "b"), read by the body parser alone (a
    logic test: the small exported models have one input each)."""
    from serve_bench.server._errors import ServingError
    from serve_bench.server._json_tensor import parse_predict_body
    from serve_bench.server._runtime import Signature, TensorSpec

    signature = Signature(
        "serving_default", {"a": TensorSpec("a", 1, (-1, -1)), "b": TensorSpec("b", 7, (-1,))}, {}, None
    )
    with pytest.raises(ServingError) as info:
        parse_predict_body(json.dumps(body).encode(), lambda name: signature)
    assert (info.value.code, info.value.message) == ("INVALID_ARGUMENT", message)
    good = parse_predict_body(
        b'{"instances": [{"a": [1.5], "b": "x"}, {"b": {"b64": "eQ=="}, "a": [2]}]}', lambda name: signature
    )
    assert good.row_format and good.inputs["a"].tolist() == [[1.5], [2.0]] and good.inputs["b"].tolist() == [b"x", b"y"]


def test_nan_and_infinity_are_read(server, reference):
    """util/json_tensor.cc:480 parses with kParseNanAndInfFlag: NaN and Infinity are numbers in
    requests, and the answer equals in-process TF on the same pixels. (Writing them back is
    test_answers_write_non_finite_floats_as_tf_serving: the tiny model's features stay finite.)"""
    image = np.full((64, 64, 3), 7.0, np.float32)
    text = json.dumps({"inputs": [image.tolist()]}).replace("7.0", "NaN", 1).replace("7.0", "Infinity", 1)
    request = urllib.request.Request(server.rest_url + "/v1/models/tiny:predict", data=text.encode())
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())  # Python's json reads NaN/Infinity back
    image[0, 0, 0], image[0, 0, 1] = np.nan, np.inf
    want = reference(image[None])
    got = np.asarray(answer["outputs"], np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-5, atol=1e-6)
