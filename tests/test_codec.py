"""serve_bench.codec: TensorProto encoding and decoding as TensorFlow and TF Serving do it.

TF Serving answers Predict with ``Tensor::AsProtoField`` (tensorflow_serving/servables/tensorflow/
predict_util.cc:177-182, selected by RunPredict at :204), which writes every value into the typed
field of the dtype (``float_val``, ``int_val``, ``half_val`` ...) and never ``tensor_content``. It
reads request tensors with ``Tensor::FromProto`` (tensorflow/core/framework/tensor.cc, called from
servables/tensorflow/tfrt_predict_util.cc:83 and by the Session's feed). TensorFlow itself is the
oracle here: ``tf.io.parse_tensor`` runs that same C++ ``Tensor::FromProto`` on our bytes.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest

from serve_bench import _protos
from serve_bench.codec import (
    DTYPE_TO_NUMPY,
    CodecError,
    from_tensor_proto,
    json_value_to_array,
    proto_shape,
    to_tensor_proto,
)

TensorProto = _protos.message("tensorflow.TensorProto")

# Which typed field tensor.cc's ProtoHelper<T> uses for each dtype (types.proto numbers).
_EXPECTED_FIELD = {
    1: "float_val",
    2: "double_val",
    3: "int_val",
    4: "int_val",
    5: "int_val",
    6: "int_val",
    8: "scomplex_val",
    9: "int64_val",
    10: "bool_val",
    14: "half_val",
    18: "dcomplex_val",
    17: "int_val",
    19: "half_val",
    22: "uint32_val",
    23: "uint64_val",
}
_NUMERIC = sorted(_EXPECTED_FIELD)
_VALUE_FIELDS = (
    "float_val",
    "double_val",
    "int_val",
    "string_val",
    "int64_val",
    "bool_val",
    "half_val",
    "uint32_val",
    "uint64_val",
    "scomplex_val",
    "dcomplex_val",
)


def _sample(dtype: int, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    np_dtype = DTYPE_TO_NUMPY[dtype]
    rng = np.random.default_rng(seed)
    if np_dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np_dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype)
    if np_dtype.kind == "f" or np_dtype.name == "bfloat16":
        values = rng.standard_normal(shape).astype(np_dtype)
        if values.size >= 3:  # the odd floats survive too: NaN, -0.0, inf
            values.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
        return values
    info = np.iinfo(np_dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=np_dtype, endpoint=True)


def _set_fields(proto: Any) -> list[str]:
    return [name for name in _VALUE_FIELDS if len(getattr(proto, name))] + (
        ["tensor_content"] if proto.tensor_content else []
    )


def _same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal values (NaN equals NaN); bfloat16, which numpy's testing cannot compare, by its bits."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.name == "bfloat16":
        np.testing.assert_array_equal(actual.view(np.uint16), expected.view(np.uint16))
    else:
        np.testing.assert_array_equal(actual, expected)


def _tf_parse(tf: Any, proto: Any) -> np.ndarray:
    """TensorFlow's own Tensor::FromProto on the serialized proto."""
    out_type = tf.dtypes.as_dtype(proto.dtype)
    return tf.io.parse_tensor(proto.SerializeToString(), out_type=out_type).numpy()


@pytest.mark.parametrize("dtype", _NUMERIC)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4), (1, 2048)])
def test_typed_fields_are_the_ones_as_proto_field_writes(tf, dtype, shape):
    """to_tensor_proto(typed_fields=True) writes what Tensor::AsProtoField writes (tensor.cc
    ToProtoField, called at tensorflow_serving/servables/tensorflow/predict_util.cc:179): dtype,
    shape, every value in the dtype's field (half as uint16 bits), no tensor_content; an empty
    tensor has no values. TF's FromProto reads it back to the same array, and so do we."""
    array = _sample(dtype, shape)
    proto = to_tensor_proto(array, typed_fields=True)
    assert proto.dtype == dtype
    assert tuple(d.size for d in proto.tensor_shape.dim) == shape
    assert _set_fields(proto) == ([_EXPECTED_FIELD[dtype]] if array.size else [])
    if dtype in (14, 19):  # half and bfloat16: their bits, one per int32
        assert list(proto.half_val) == array.reshape(-1).view(np.uint16).tolist()
    if dtype in (8, 18):  # complex: real and imaginary parts interleaved
        assert len(getattr(proto, _EXPECTED_FIELD[dtype])) == 2 * array.size
    _same(_tf_parse(tf, proto), array)
    _same(from_tensor_proto(TensorProto.FromString(proto.SerializeToString())), array)


@pytest.mark.parametrize("dtype", _NUMERIC)
def test_tensor_content_round_trip_agrees_with_tensorflow(tf, dtype):
    """tensor_content is the little-endian array bytes (tensor.cc Helper<T>::Encode/Decode), what
    TF's own tf.make_tensor_proto sends for numpy arrays; a big-endian array is converted."""
    array = _sample(dtype, (3, 5), seed=1)
    proto = to_tensor_proto(array)
    assert _set_fields(proto) == ["tensor_content"]
    _same(_tf_parse(tf, proto), array)
    _same(from_tensor_proto(proto), array)
    if array.dtype.itemsize > 1:
        swapped = to_tensor_proto(array.astype(array.dtype.newbyteorder(">")))
        assert swapped.tensor_content == proto.tensor_content


def test_what_tf_make_tensor_proto_sends_decodes(tf):
    """Requests built like TF Serving's example clients (tf.make_tensor_proto, as in
    tensorflow_serving/example/resnet_client_grpc.py) decode to the same arrays."""
    for value in (
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.float32(2.5),
        [b"a", b"bc"],
        np.array([[1, 2]], dtype=np.int64),
        np.zeros((0, 3), np.float32),
    ):
        proto = TensorProto.FromString(tf.make_tensor_proto(value).SerializeToString())
        np.testing.assert_array_equal(from_tensor_proto(proto), np.asarray(value, dtype=None))


def _typed(dtype: int, values: list[Any], shape: tuple[int, ...]) -> Any:
    proto = TensorProto(dtype=dtype)
    getattr(proto, _EXPECTED_FIELD.get(dtype, "string_val")).extend(values)
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


@pytest.mark.parametrize(
    "dtype, values, shape",
    [
        (1, [1.5], (2, 3)),  # one value: every element (tf.fill-like constants)
        (1, [1.0, 2.0], (5,)),  # fewer values: the rest repeat the last
        (3, [], (2, 2)),  # no values: zeros
        (9, [1, 2, 3, 4, 5], (2,)),  # more values: the first ones, the rest ignored
        (10, [True], (3,)),
        (19, [np.float16(0.5).view(np.uint16).item()], (2,)),
        (7, [b"x"], (3,)),  # strings pad the same way
        (7, [], (2,)),  # no strings: empty strings
        (8, [1.0, 2.0, 3.0], (2,)),  # complex: whole (re, im) pairs count, the odd part is ignored
    ],
)
def test_value_count_rules_follow_tensor_from_proto(tf, dtype, values, shape):
    """Tensor::FromProto fills a tensor from a typed field with fewer or more values than the
    shape (tensor.cc FromProtoField: copy min(n, in_n), pad with the last value, zeros when
    there is none): our decode equals TensorFlow's on the same bytes."""
    proto = _typed(dtype, values, shape)
    ours = from_tensor_proto(proto)
    theirs = _tf_parse(tf, proto)
    assert ours.shape == theirs.shape == shape
    if dtype == 7:
        assert ours.dtype == object and list(ours.reshape(-1)) == list(theirs.reshape(-1))
    else:
        np.testing.assert_array_equal(ours, theirs)


def test_strings_decode_as_object_array_of_bytes(tf):
    """string_val carries DT_STRING in both directions (tensor.cc ProtoHelper<tstring>); bytes
    are kept as bytes, with NULs and non-UTF-8."""
    array = np.array([[b"\x00\xff", b""], [b"jpeg", "text"]], dtype=object)
    proto = to_tensor_proto(array, typed_fields=True)
    assert _set_fields(proto) == ["string_val"]
    decoded = from_tensor_proto(proto)
    assert decoded.dtype == object and decoded.shape == (2, 2)
    assert decoded.tolist() == [[b"\x00\xff", b""], [b"jpeg", b"text"]]
    assert _tf_parse(tf, proto).tolist() == decoded.tolist()


def test_bad_protos_are_refused_with_what_is_wrong():
    """Tensor::FromProto refuses a tensor_content of the wrong size (tensor.cc Helper<T>::Decode)
    and TensorShape::IsValid a negative dimension; unsupported dtypes are named."""
    short = to_tensor_proto(np.zeros((2, 3), np.float32))
    short.tensor_content = short.tensor_content[:-4]
    with pytest.raises(CodecError, match="tensor_content has 20 bytes; shape \\[2, 3\\] of DT_FLOAT needs 24"):
        from_tensor_proto(short)
    negative = _typed(1, [1.0], (-1, 2))
    with pytest.raises(CodecError, match="negative dimension"):
        from_tensor_proto(negative)
    strings = TensorProto(dtype=7, tensor_content=b"\x01a")
    strings.tensor_shape.dim.add(size=1)
    with pytest.raises(CodecError, match="DT_STRING tensor in tensor_content is not supported"):
        from_tensor_proto(strings)
    with pytest.raises(CodecError, match="DT_QINT8"):
        from_tensor_proto(TensorProto(dtype=11))
    with pytest.raises(CodecError, match="unsupported numpy dtype datetime64"):
        to_tensor_proto(np.zeros(2, "datetime64[s]"))


_SHAPES = [
    (2, 3),
    # Large valid shapes end in a zero here: TensorFlow would allocate one that is not empty.
    (2**63 - 1, 1, 0),  # the running product reaches 2**63 - 1, the most it may
    (2**62, 2, 0),  # 2**63: one past it
    (2**62, 4),  # 2**64, which wraps to 0
    (9223372036854775807, 64, 64, 3),  # issue 34 item 5's request
    (2**32, 2**32),
    (2**63 - 1, 2, 0),  # the zero comes too late: the running product has overflowed
    (0, 5, 7),
    (3, 0, 2**63 - 1),  # valid to TensorFlow; numpy cannot hold it
    (0, 2**61 - 1),  # float32: 2**63 - 4 bytes in its non-zero dimensions, which numpy holds
    (0, 2**61),  # one more element: 2**63 bytes
    (1,) * 254,
    (1,) * 255,
]


@pytest.mark.parametrize("shape", _SHAPES, ids=[str(len(s)) + ":" + "x".join(map(str, s[:4])) for s in _SHAPES])
def test_a_shape_is_refused_when_tensorflow_refuses_it(tf, shape):
    """Issue 34 item 5: the shapes TensorFlow's Tensor::FromProto refuses (TensorShape::IsValid,
    tensorflow/core/framework/tensor_shape.cc:77-94 at 395d450: more than 254 dimensions, or a running
    product of the dimensions, in order, past 2**63 - 1) are the ones proto_shape refuses, with
    IsValidShape's words (:129-131); tf.io.parse_tensor runs that FromProto. A valid shape with a zero
    dimension is an empty tensor, unless numpy cannot represent it (its other dimensions' bytes past
    2**63 - 1), which from_tensor_proto refuses on its own account, as it does more than numpy's 64 dimensions."""
    proto = _typed(1, [1.0], shape)
    try:
        tf_shape = tuple(tf.io.parse_tensor(proto.SerializeToString(), out_type=tf.float32).shape)
    except tf.errors.InvalidArgumentError:
        tf_shape = None
    if tf_shape is None:
        with pytest.raises(CodecError, match=r"is too large \(more than 2\*\*63 - 1 entries\)|more than the 254"):
            proto_shape(proto)
        return
    assert proto_shape(proto) == tf_shape == shape
    if len(shape) > 64:  # numpy 2's NPY_MAXDIMS
        with pytest.raises(CodecError, match="has 254 dimensions; TensorFlow allows 254, numpy at most 64"):
            from_tensor_proto(proto)
    elif 0 in shape and math.prod(d for d in shape if d) * 4 > 2**63 - 1:
        with pytest.raises(CodecError, match="has no elements, but its non-zero dimensions hold more than"):
            from_tensor_proto(proto)
    elif math.prod(shape) <= 6:
        assert from_tensor_proto(proto).shape == shape


def test_an_unknown_rank_is_ignored_as_tensorflow_ignores_it(tf):
    """TensorShape::IsValid refuses unknown_rank only for a PartialTensorShape (tensor_shape.cc:81, kIsPartial);
    Tensor::FromProto builds a TensorShape, which reads the dimensions as they are."""
    proto = _typed(1, [1.0, 2.0], (1, 2))
    proto.tensor_shape.unknown_rank = True
    assert tf.io.parse_tensor(proto.SerializeToString(), out_type=tf.float32).shape == (1, 2)
    assert proto_shape(proto) == (1, 2)
    assert from_tensor_proto(proto).tolist() == [[1.0, 2.0]]


def test_max_elements_refuses_a_huge_declared_shape_before_allocating():
    """A 38-byte request may declare 300 million floats (issue 10): proto_shape reads the shape
    without the values and max_elements refuses it before any allocation."""
    proto = _typed(1, [1.0], (300_000_000,))
    assert len(proto.SerializeToString()) < 40
    assert proto_shape(proto) == (300_000_000,)
    with pytest.raises(CodecError, match="holds 300000000 elements, more than the 1000 allowed"):
        from_tensor_proto(proto, max_elements=1000)
    assert from_tensor_proto(_typed(1, [1.0], (10,)), max_elements=10).shape == (10,)


def test_float_val_decode_is_not_the_per_value_python_path():
    """Decoding float_val must not box every value (issue 10: it is what real TF Serving sends).
    Baseline measured in the same test: tensor_content decode of the same [32, 2048] response.
    On this 2-core VM float_val took 0.51-0.61x tensor_content's time over 10 runs while other
    jobs ran; the old per-value path (list(field)) took ~90x. A 10x bound separates them."""
    array = np.random.default_rng(0).standard_normal((32, 2048)).astype(np.float32)
    typed = TensorProto.FromString(to_tensor_proto(array, typed_fields=True).SerializeToString())
    content = TensorProto.FromString(to_tensor_proto(array).SerializeToString())

    def best_of(proto: Any) -> float:
        times = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(20):
                from_tensor_proto(proto)
            times.append(time.perf_counter() - start)
        return min(times)

    np.testing.assert_array_equal(from_tensor_proto(typed), array)
    typed_s, content_s = best_of(typed), best_of(content)
    assert typed_s < 10 * content_s, f"float_val decode {typed_s:.4f}s vs tensor_content {content_s:.4f}s"


def test_a_rest_value_its_dtype_cannot_hold_is_refused_not_wrapped_around():
    """A REST response's int32 of 2**31 cannot be held: TF Serving's own JSON reader refuses such a value
    (tensorflow_serving/util/json_tensor.cc:303-309, AddValueToTensor: rapidjson's IsInt() is false past
    INT32_MAX), and so does the client, in one line, instead of raising numpy's OverflowError. A float past
    float32's 3.4e38 cannot be what a float32 tensor held either, so a response carrying one is refused too."""
    for dtype, value in ((3, [2**31]), (3, [3e9]), (4, [256]), (1, [1e39])):  # DT_INT32, DT_UINT8, DT_FLOAT
        with pytest.raises(CodecError, match=r"^cannot read the values as DT_\w+: "):
            json_value_to_array(value, dtype)
    assert json_value_to_array([2**31 - 1], 3).tolist() == [2**31 - 1]
