"""The Open Inference Protocol (KServe v2) codec (client/_v2_codec.py): datatypes, versions, raw BYTES,
the JSON and binary REST bodies, and the exact words of every refusal.

The spec is the protocol's text, kserve/kserve docs/predict-api/v2/required_api.md at aaac4e294, and
Triton's binary extension, triton-inference-server/server docs/protocol/extension_binary_data.md and
src/common.h at v2.51.0. Every expected byte string and shape is worked out by hand in a comment.
"""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from serve_bench.client._v2_codec import (
    DATATYPES,
    HEADER_LENGTH,
    datatype_of,
    decode_rest_response,
    encode_rest_request,
    from_raw,
    listed_versions,
    pack_bytes,
    signatures,
    to_raw,
    unpack_bytes,
)
from serve_bench.codec import CodecError


def test_metadata_gives_one_signature_named_serving_default_with_each_tensors_dtype_and_shape():
    """$metadata_tensor = {name, datatype, shape} with -1 for a variable dimension (required_api.md,
    "Model Metadata"); a datatype serve-bench does not know is DT_INVALID (0), so no array fits it."""
    (signature,) = signatures([("x", "FP32", [-1, 32]), ("q", "FP8", [4])], [("y", "INT64", [-1])]).values()
    assert signature.name == "serving_default"
    assert signature.inputs["x"].shape == (-1, 32) and signature.inputs["x"].dtype == 1  # DT_FLOAT
    assert signature.inputs["q"].dtype == 0 and signature.inputs["q"].shape == (4,)
    assert signature.outputs["y"].shape == (-1,) and signature.outputs["y"].dtype == 9  # DT_INT64
    # BYTES is DT_STRING (7); datatypes are upper case (required_api.md's tensor data types), so "bytes" is not one
    (texts,) = signatures([("s", "BYTES", [-1]), ("t", "bytes", [-1])], []).values()
    assert (texts.inputs["s"].dtype, texts.inputs["t"].dtype) == (7, 0)


def test_a_model_is_asked_for_the_version_given_else_the_numeric_versions_it_lists():
    """The metadata's "versions": [$string, ...] is optional (required_api.md:145-161); v2 names versions by strings."""
    assert listed_versions(["1", "2"], 3) == {3: "3"}
    assert listed_versions(["1", "3", "latest"], None) == {1: "1", 3: "3"}
    # none listed, or none numeric (MLServer without versions in model-settings.json): the unnamed version
    assert listed_versions([], None) == {0: ""}
    assert listed_versions(["latest"], None) == {0: ""}


def test_numpy_dtypes_name_their_v2_datatypes_and_others_are_refused_by_name():
    # numpy bytes ("S") and str ("U") arrays are BYTES as object arrays are
    assert datatype_of(np.array([b"ab"])) == "BYTES" and datatype_of(np.array(["ab"])) == "BYTES"
    # ... and so are numpy 2's variable-width strings, written as the same length-prefixed bytes
    strings = np.array(["ab", "c"], dtype=np.dtypes.StringDType())
    assert datatype_of(strings) == "BYTES" and to_raw(strings) == b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"
    assert datatype_of(np.zeros(1, ">f4")) == "FP32"  # big-endian in memory is still FP32
    assert all(datatype_of(np.zeros(1, dtype)) == name for name, dtype in DATATYPES.items() if name != "BYTES")
    with pytest.raises(CodecError, match=r"^numpy dtype complex64 has no Open Inference Protocol datatype$"):
        datatype_of(np.zeros(1, np.complex64))


def test_bytes_elements_are_length_prefixed_and_a_damaged_tensor_is_refused_with_its_numbers():
    """tritonclient's serialize_byte_tensor: each element <u32 little-endian length><bytes>."""
    # b"" is 00 00 00 00 and nothing else; b"ab", "c" is 02 00 00 00 'a' 'b' 01 00 00 00 'c'
    assert pack_bytes([b""]) == b"\x00\x00\x00\x00"
    assert pack_bytes([b"ab", "c"]) == b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"
    assert unpack_bytes(b"\x00\x00\x00\x00", 1).tolist() == [b""]  # an empty last element fits exactly
    with pytest.raises(CodecError, match=r"^a BYTES element must be bytes or str, got int$"):
        pack_bytes([b"a", 7])
    # 4 length bytes claim 5 but 3 follow (7 bytes in all, 4 read)
    with pytest.raises(CodecError, match=r"^BYTES element 0 claims 5 bytes; only 3 remain$"):
        unpack_bytes(b"\x05\x00\x00\x00abc", 1)
    # one element of 1 byte takes 5 of the 6 bytes: 1 left over
    with pytest.raises(CodecError, match=r"^BYTES tensor has 1 bytes after its 1 elements$"):
        unpack_bytes(b"\x01\x00\x00\x00a\x00", 1)


def test_raw_form_of_strings_and_of_tensors_of_several_dimensions():
    # numpy "S" and "U" arrays are sent as BYTES: the same bytes as the object array's
    expected = b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"
    assert to_raw(np.array([b"ab", b"c"])) == expected
    assert to_raw(np.array(["ab", "c"])) == expected
    # a 2 x 2 BYTES tensor in row-major order: a b c d, one byte each
    square = np.array([[b"a", b"b"], [b"c", b"d"]], dtype=object)
    raw = b"".join(b"\x01\x00\x00\x00" + c for c in (b"a", b"b", b"c", b"d"))
    assert to_raw(square) == raw
    back = from_raw(raw, "BYTES", (2, 2))
    assert back.shape == (2, 2) and back.tolist() == [[b"a", b"b"], [b"c", b"d"]]
    with pytest.raises(CodecError, match=r"^unsupported datatype 'FP8'$"):
        from_raw(b"\x00", "FP8", (1,))


def test_json_bodies_carry_flat_row_major_data_and_refuse_what_json_cannot_carry():
    """JSON tensor data is row-major, flattened or nested (required_api.md:414-441); fp16 and bf16 have
    no standard JSON form (:426-429), BF16 is refused, not guessed."""
    body = encode_rest_request({"s": np.array([[b"a"], [b"b"]]), "u": np.array([["x", "y"]])}, binary=False)
    inputs = orjson.loads(body.body)["inputs"]
    assert inputs == [
        {"name": "s", "datatype": "BYTES", "shape": [2, 1], "data": ["a", "b"]},
        {"name": "u", "datatype": "BYTES", "shape": [1, 2], "data": ["x", "y"]},
    ]
    with pytest.raises(
        CodecError, match=r"^a BYTES value is not UTF-8 text, which JSON cannot carry; send it with binary=True$"
    ):
        encode_rest_request({"b": np.array([b"\xff"], dtype=object)}, binary=False)
    bf16 = DATATYPES.get("BF16")
    if bf16 is not None:  # ml_dtypes installed
        with pytest.raises(CodecError, match=r"^BF16 cannot be written as JSON numbers; send it with binary=True$"):
            encode_rest_request({"h": np.zeros(2, bf16)}, binary=False)


def _outputs(*outputs: dict[str, object]) -> bytes:
    return orjson.dumps({"outputs": list(outputs)})


def test_json_outputs_take_their_datatype_and_shape_from_the_response():
    """A flat FP32 [2, 3] is float32 of shape (2, 3), not float64; UINT8 is uint8; nested BYTES data
    ([["a"], ["b"]] for [2, 1]) is read like flat data; an element that is not text is kept as the server
    wrote it (each element "may be an integer, floating-point number, string or boolean",
    required_api.md:422-424); a BYTES value ending in NUL keeps its NUL (numpy's str arrays would drop it)."""
    body = _outputs(
        {"name": "f", "datatype": "FP32", "shape": [2, 3], "data": [0.5, 1, 2, 3, 4, 5]},
        {"name": "u", "datatype": "UINT8", "shape": [2], "data": [1, 255]},
        {"name": "s", "datatype": "BYTES", "shape": [2, 1], "data": [["a"], ["b"]]},
        {"name": "n", "datatype": "BYTES", "shape": [2], "data": [1, "a\u0000"]},
        {"name": "e", "datatype": "FP32", "shape": [0]},  # no data: an empty tensor
    )
    out = decode_rest_response(body, None)
    assert out["f"].dtype == np.float32 and out["f"].shape == (2, 3) and out["f"][0].tolist() == [0.5, 1, 2]
    assert out["u"].dtype == np.uint8 and out["u"].tolist() == [1, 255]
    assert out["s"].shape == (2, 1) and out["s"].tolist() == [[b"a"], [b"b"]]
    assert out["n"].tolist() == [1, b"a\x00"]
    assert out["e"].dtype == np.float32 and out["e"].shape == (0,)


def test_a_response_the_codec_cannot_read_is_refused_with_what_is_wrong():
    def refused(body: bytes, json_length: int | None = None) -> str:
        with pytest.raises(CodecError) as caught:
            decode_rest_response(body, json_length)
        return str(caught.value)

    assert refused(b"{}") == "the response holds no 'outputs' list"
    assert refused(b'{"outputs":[[1]]}') == "an output is list, not an object"
    assert refused(b'{"outputs":[{"name":"y","parameters":[1]}]}') == "output 'y': parameters is list, not an object"
    assert refused(_outputs({"name": "y", "shape": [1], "data": [1]})) == "unsupported datatype ''"
    assert refused(_outputs({"name": "y", "datatype": "FP8", "shape": [1], "data": [1]})) == (
        "unsupported datatype 'FP8'"
    )
    assert refused(_outputs({"name": "y", "datatype": "FP32", "shape": [2], "data": [1, 2, 3]})).startswith(
        "cannot read the data as FP32 of shape [2]: "
    )
    # a value its datatype cannot hold (INT32 tops out at 2**31 - 1, UINT8 at 255, FP32 near 3.4e38) is refused,
    # not wrapped around; the largest that fits is read
    for datatype, value in (("INT32", 2**31), ("INT32", 3e9), ("UINT8", 256), ("UINT8", -1), ("FP32", 1e39)):
        assert refused(_outputs({"name": "y", "datatype": datatype, "shape": [1], "data": [value]})).startswith(
            f"cannot read the data as {datatype} of shape [1]: "
        ), (datatype, value)
    fits = decode_rest_response(_outputs({"name": "y", "datatype": "INT32", "shape": [1], "data": [2**31 - 1]}), None)
    assert fits["y"].tolist() == [2**31 - 1]
    # the header length (src/common.h:42) past the end of an 11-byte body
    assert refused(b'{"outputs"}', 100) == f"{HEADER_LENGTH} is 100 but the body has 11 bytes"
    assert HEADER_LENGTH == "Inference-Header-Content-Length"
    # an output claiming 24 binary bytes (extension_binary_data.md:53-58) where 8 follow the header
    header = _outputs({"name": "y", "datatype": "FP32", "shape": [6], "parameters": {"binary_data_size": 24}})
    assert refused(header + bytes(8), len(header)) == "output 'y' claims 24 binary bytes; 8 remain"
