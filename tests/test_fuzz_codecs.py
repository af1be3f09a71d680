"""gRPC TensorProto decoding (codec.from_tensor_proto, with the server's element cap) and the KServe v2
response codec (client/_v2_codec.py) under structured fuzzing (issue 34, item 3). Invariants:
tests/_fuzz.py. What the fuzzing found is pinned at the end, each with its fix; shapes whose element count
overflows int64 (item 5) are fuzzed too, now that from_tensor_proto refuses them as TensorShape::IsValid does.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from serve_bench import _protos
from serve_bench.client._v2_codec import decode_rest_response, unpack_bytes
from serve_bench.codec import DTYPE_TO_NUMPY, CodecError, from_tensor_proto
from tests._fuzz import MAX_ELEMENTS, fuzz_settings, tensor_proto, v2_response

FUZZ = fuzz_settings(150, 2000)
_DTYPES = st.one_of(st.sampled_from(sorted(DTYPE_TO_NUMPY)), st.integers(0, 30))
_DIM = st.one_of(st.integers(0, 6), st.sampled_from([2**20, 2**31, 2**40, -1, -(2**40)]))


@st.composite
def _tensors(draw: st.DrawFn) -> bytes:
    tensor = _protos.message("tensorflow.TensorProto")()
    tensor.dtype = draw(_DTYPES)
    # shapes past 2**63 - 1 elements (item 5) among them, and now and then past numpy's 64 or TF's 254 dimensions
    shape = draw(st.lists(_DIM, max_size=5) | st.lists(st.integers(0, 2), min_size=60, max_size=260))
    if draw(st.booleans()):
        tensor.tensor_shape.unknown_rank = draw(st.booleans())
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    kind = draw(st.sampled_from(["float", "int", "int64", "string", "half", "bool", "double", "content", "none"]))
    count = draw(st.integers(0, 8))
    if kind == "float":
        tensor.float_val.extend(draw(st.lists(st.floats(width=32), min_size=count, max_size=count)))
    elif kind == "int":
        tensor.int_val.extend(draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=count, max_size=count)))
    elif kind == "int64":
        tensor.int64_val.extend(draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=count, max_size=count)))
    elif kind == "string":
        tensor.string_val.extend(draw(st.lists(st.binary(max_size=5), min_size=count, max_size=count)))
    elif kind == "half":
        tensor.half_val.extend(draw(st.lists(st.integers(0, 2**16 - 1), min_size=count, max_size=count)))
    elif kind == "bool":
        tensor.bool_val.extend(draw(st.lists(st.booleans(), min_size=count, max_size=count)))
    elif kind == "double":
        tensor.double_val.extend(draw(st.lists(st.floats(), min_size=count, max_size=count)))
    elif kind == "content":
        tensor.tensor_content = draw(st.binary(max_size=64))
    request = _protos.message("tensorflow.serving.PredictRequest")()
    request.model_spec.name = "m"
    request.inputs["x"].CopyFrom(tensor)
    return bytes(request.SerializeToString())


@FUZZ
@given(data=_tensors())
def test_tensor_protos_decode_or_are_refused_with_codec_error(data: bytes) -> None:
    tensor_proto(data)


@FUZZ
@given(data=_tensors(), cut=st.integers(0, 200), junk=st.binary(max_size=8))
def test_damaged_request_bytes_decode_or_are_refused(data: bytes, cut: int, junk: bytes) -> None:
    cut %= len(data) + 1
    tensor_proto(data[:cut] + junk + data[cut:])


# --- the v2 /infer response codec --------------------------------------------------------------------

_DATATYPES = st.sampled_from(["FP32", "FP64", "INT32", "INT64", "UINT8", "BOOL", "BYTES", "FP16", "BF16", "X"])
_JSON = st.recursive(
    st.one_of(st.integers(-(2**40), 2**40), st.floats(allow_nan=False), st.text(max_size=4), st.booleans(), st.none()),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=20,
)
_OUTPUT = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["y", "z"]), _JSON),
        "datatype": st.one_of(_DATATYPES, _JSON),
        "shape": st.one_of(st.lists(st.one_of(st.integers(-2, 5), st.sampled_from([2**20, 2**40])), max_size=3), _JSON),
        "data": _JSON,
        "parameters": st.one_of(
            st.fixed_dictionaries({"binary_data_size": st.one_of(st.integers(-4, 40), _JSON)}), _JSON
        ),
    },
)


@FUZZ
@given(
    header=st.one_of(st.fixed_dictionaries({"outputs": st.lists(_OUTPUT, max_size=3)}), _JSON),
    tail=st.binary(max_size=48),
    declare=st.booleans(),
)
# found by this test: parameters or an output that is not an object raised AttributeError out of the client
@example(header={"outputs": [{"parameters": 1}]}, tail=b"", declare=False)
@example(header={"outputs": [3]}, tail=b"", declare=False)
# found by this test: a value its INT32 cannot hold raised OverflowError out of the client
@example(header={"outputs": [{"datatype": "INT32", "data": 2147483648.0}]}, tail=b"", declare=False)
def test_v2_responses_decode_or_are_refused(header: Any, tail: bytes, declare: bool) -> None:
    head = json.dumps(header).encode()
    length = len(head) if declare else 0xFFFF
    v2_response(length.to_bytes(2, "little") + head + tail)


@FUZZ
@given(data=st.binary(max_size=200))
def test_arbitrary_v2_response_bytes_are_refused(data: bytes) -> None:
    v2_response(data)


# --- what the fuzzing found ----------------------------------------------------------------------------


def test_a_bytes_output_with_a_huge_shape_is_refused_before_anything_is_allocated() -> None:
    """Found writing the v2 fuzz target (what may decode_rest_response allocate?): an output declared BYTES
    of shape [2**40] with a 5-byte binary part made unpack_bytes allocate an object array of 2**40 slots
    (8 TB) before reading a byte. Each element needs its bytes in the buffer: the array now grows as they are
    read, and a count the buffer cannot hold ends at its first missing element."""
    header = {"outputs": [{"name": "y", "datatype": "BYTES", "shape": [2**40], "parameters": {"binary_data_size": 5}}]}
    head = json.dumps(header).encode()
    with pytest.raises(CodecError, match="ends after 1 of 1099511627776"):
        decode_rest_response(head + b"\x01\x00\x00\x00a", len(head))
    with pytest.raises(CodecError, match="ends after 0 of"):
        unpack_bytes(b"", 2**40)
    assert unpack_bytes(b"\x01\x00\x00\x00a", 1).tolist() == [b"a"]


@pytest.mark.parametrize(
    ("shape", "refused"),
    [
        ((2**62, 4), r"\[4611686018427387904, 4\] is too large \(more than 2\*\*63 - 1 entries\)"),
        ((9223372036854775807, 64, 64, 3), "is too large"),
        ((2**32, 2**32), "is too large"),
        ((3, 0, 2**63 - 1), r"has no elements, but its non-zero dimensions hold more than 2\*\*63 - 1 bytes"),
    ],
    ids=["wraps-to-0", "issue-5", "2**64", "zero-dim-and-huge"],
)
def test_an_overflowing_shape_is_a_codec_error(shape: tuple[int, ...], refused: str) -> None:
    """Found by the TensorProto fuzzing, as issue 34 item 5 reported over gRPC: a shape whose element count
    overflows int64 passed the element cap (its count wrapped) and numpy then raised its own ValueError
    ("array is too big", "cannot reshape array of size 0"). Now refused as TensorShape::IsValid refuses it
    (tensorflow/core/framework/tensor_shape.cc:77-94 at 395d450: the running product of the dimensions, in
    order, past 2**63 - 1), with IsValidShape's words (:129-131). [3, 0, 2**63 - 1] is a valid empty tensor
    to TensorFlow (a zero ends the count) that numpy cannot represent: refused for that reason."""
    tensor = _protos.message("tensorflow.TensorProto")()
    tensor.dtype = 1
    for size in shape:
        tensor.tensor_shape.dim.add(size=size)
    tensor.float_val.append(1.0)
    with pytest.raises(CodecError, match=refused):
        from_tensor_proto(tensor, max_elements=MAX_ELEMENTS)


def test_the_element_cap_holds_for_a_declared_shape() -> None:
    tensor = _protos.message("tensorflow.TensorProto")()
    tensor.dtype = 1
    tensor.tensor_shape.dim.add(size=MAX_ELEMENTS + 1)
    with pytest.raises(CodecError, match="more than"):
        from_tensor_proto(tensor, max_elements=MAX_ELEMENTS)
    tensor.tensor_shape.dim[0].size = 4
    assert np.array_equal(from_tensor_proto(tensor, max_elements=MAX_ELEMENTS), np.zeros(4, np.float32))
