"""numpy <-> TensorProto and numpy <-> TF Serving's REST JSON, without TensorFlow.

Shared by the client (encode requests, decode responses) and the local server
(the reverse), so both sides agree on every dtype by construction.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from serve_bench import _protos

__all__ = [
    "DTYPE_TO_NUMPY",
    "NUMPY_TO_DTYPE",
    "CodecError",
    "array_to_json_value",
    "dtype_name",
    "element_count",
    "from_tensor_proto",
    "gc_paused",
    "json_numbers",
    "json_value_to_array",
    "proto_shape",
    "to_tensor_proto",
]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building or reading a JSON tensor: it is tens of thousands of
    nested lists, none cyclic, and full collections over them cost up to ~180 ms per request."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class CodecError(ValueError):
    """A tensor that cannot be converted; the message says what is wrong."""


# tensorflow.DataType numbers (types.proto) for the dtypes an image model uses.
DTYPE_TO_NUMPY: dict[int, np.dtype[Any]] = {
    1: np.dtype(np.float32),  # DT_FLOAT
    2: np.dtype(np.float64),  # DT_DOUBLE
    3: np.dtype(np.int32),  # DT_INT32
    4: np.dtype(np.uint8),  # DT_UINT8
    5: np.dtype(np.int16),  # DT_INT16
    6: np.dtype(np.int8),  # DT_INT8
    7: np.dtype(object),  # DT_STRING
    9: np.dtype(np.int64),  # DT_INT64
    10: np.dtype(np.bool_),  # DT_BOOL
    17: np.dtype(np.uint16),  # DT_UINT16
    19: np.dtype(np.float16),  # DT_HALF
    22: np.dtype(np.uint32),  # DT_UINT32
    23: np.dtype(np.uint64),  # DT_UINT64
    8: np.dtype(np.complex64),  # DT_COMPLEX64
    18: np.dtype(np.complex128),  # DT_COMPLEX128
}
try:  # bfloat16 has no numpy type of its own; ml_dtypes (installed with TensorFlow) provides one
    import ml_dtypes

    DTYPE_TO_NUMPY[14] = np.dtype(ml_dtypes.bfloat16)  # DT_BFLOAT16
except ImportError:  # a client without it refuses DT_BFLOAT16 tensors by name
    pass
NUMPY_TO_DTYPE: dict[np.dtype[Any], int] = {v: k for k, v in DTYPE_TO_NUMPY.items()}
DT_STRING = 7

# Which typed repeated field carries each dtype when tensor_content is empty.
_VALUE_FIELD = {
    1: "float_val",
    2: "double_val",
    3: "int_val",
    4: "int_val",
    5: "int_val",
    6: "int_val",
    7: "string_val",
    9: "int64_val",
    10: "bool_val",
    17: "int_val",
    19: "half_val",
    22: "uint32_val",
    23: "uint64_val",
    8: "scomplex_val",  # real, imaginary, real, ... as floats
    18: "dcomplex_val",
    14: "half_val",  # bfloat16 bits, like DT_HALF's
}
_HALF_BITS = (14, 19)  # dtypes whose uint16 bit patterns travel in half_val's int32s


def dtype_name(dtype: int) -> str:
    try:
        return _protos.enum_name("tensorflow.DataType", dtype)
    except KeyError:
        return f"DataType({dtype})"


def _tensor_proto_class() -> Any:
    return _protos.message("tensorflow.TensorProto")


# Fixed-width value fields (field number, little-endian numpy type): their packed wire form is
# the raw array bytes, so they are filled by parsing one packed record (a memcpy inside upb)
# instead of extend(), which boxes every value: 29 us vs 1.7 ms for 65536 floats.
_PACKED_FIXED = {1: (5, "<f4"), 2: (6, "<f8"), 8: (9, "<f4"), 18: (12, "<f8")}
_PACKED_BOOL = 11  # bool_val: varints of 0/1 are single bytes, so the packed form is the uint8 array


def _fill_packed(proto: Any, field_number: int, body: bytes) -> None:
    proto.MergeFromString(_protos.varint((field_number << 3) | 2) + _protos.varint(len(body)) + body)


def _fill_typed_values(proto: Any, dtype: int, array: np.ndarray) -> None:
    """The values as Tensor::AsProtoField writes them (tensorflow/core/framework/tensor.cc):
    one typed field per dtype, every element, half and bfloat16 as their uint16 bits in half_val,
    complex numbers as (real, imaginary) pairs."""
    flat = np.ascontiguousarray(array.reshape(-1))
    if flat.size == 0:
        return
    if dtype in _PACKED_FIXED:
        number, wire_type = _PACKED_FIXED[dtype]
        parts = flat.view(flat.real.dtype) if flat.dtype.kind == "c" else flat  # complex: (re, im) pairs
        _fill_packed(proto, number, np.ascontiguousarray(parts, dtype=wire_type).tobytes())
    elif dtype == 10:  # DT_BOOL
        _fill_packed(proto, _PACKED_BOOL, np.ascontiguousarray(flat, dtype=np.uint8).tobytes())
    elif dtype in _HALF_BITS:
        proto.half_val.extend(flat.view(np.uint16).tolist())
    else:
        getattr(proto, _VALUE_FIELD[dtype]).extend(flat.tolist())


def to_tensor_proto(array: Any, out: Any = None, *, typed_fields: bool = False) -> Any:
    """Encode a numpy array into a TensorProto (``out`` if given, else a new one).

    Numbers go into ``tensor_content`` (what clients send), or, with ``typed_fields=True``,
    into the typed value fields (``float_val``, ``int64_val``, ...) as TF Serving answers
    Predict (``AsProtoField`` in servables/tensorflow/predict_util.cc). Strings always go into
    ``string_val``.
    """
    proto = out if out is not None else _tensor_proto_class()()
    array = np.asarray(array)
    if array.dtype.kind in ("U", "S", "O"):
        proto.dtype = DT_STRING
        values = [v.encode() if isinstance(v, str) else bytes(v) for v in array.reshape(-1).tolist()]
        proto.string_val.extend(values)
    else:
        dtype = NUMPY_TO_DTYPE.get(array.dtype.newbyteorder("=") if array.dtype.byteorder == ">" else array.dtype)
        if dtype is None:
            raise CodecError(f"unsupported numpy dtype {array.dtype}")
        proto.dtype = dtype
        if typed_fields:
            _fill_typed_values(proto, dtype, array.astype(array.dtype.newbyteorder("="), copy=False))
        else:
            proto.tensor_content = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    for size in array.shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


_MAX_DIMS = 254  # TensorShape::MaxDimensions()
_NUMPY_MAX_DIMS = 64 if int(np.__version__.split(".")[0]) >= 2 else 32  # NPY_MAXDIMS (64 since numpy 2.0)
_INT64_MAX = (1 << 63) - 1
_INT64 = 1 << 64


def proto_shape(proto: Any) -> tuple[int, ...]:
    """The declared shape of a TensorProto, read without touching its values.

    Lets a server check a request's shape against the signature before anything is allocated.
    Refuses, with CodecError, what Tensor::FromProto refuses through TensorShape::IsValid
    (tensorflow/core/framework/tensor_shape.cc:77-94 at 395d450): more than 254 dimensions (MaxDimensions(),
    tensor_shape.h:63), a negative dimension, or dimensions whose running product passes 2**63 - 1
    (MultiplyWithoutOverflow, in the order they are declared: a zero dimension ends the count, so
    [3, 0, 2**63 - 1] is valid). ``unknown_rank`` is ignored, as TensorShape (unlike
    PartialTensorShape) ignores it there.
    """
    dims = proto.tensor_shape.dim
    if len(dims) > _MAX_DIMS:
        raise CodecError(f"tensor shape has {len(dims)} dimensions, more than the {_MAX_DIMS} TensorFlow allows")
    shape = tuple([d.size for d in dims])
    count = 1
    for size in shape:
        if size < 0:
            raise CodecError(f"tensor shape {list(shape)} has a negative dimension")
        count *= size
        if count > _INT64_MAX:  # IsValidShape's words (tensor_shape.cc:129-131)
            raise CodecError(f"tensor shape {list(shape)} is too large (more than 2**63 - 1 entries)")
    return shape


def element_count(shape: tuple[int, ...]) -> int:
    """The elements of ``shape`` as ``int(np.prod(shape, dtype=np.int64))`` counts them, wrapping past 2**63
    as int64 arithmetic does, at a tenth of its cost (numpy's reduction costs ~3 µs a call, per request).
    Exact for every shape proto_shape returns, which never counts past 2**63 - 1."""
    count = math.prod(shape)
    if -(1 << 63) <= count < 1 << 63:
        return count
    return (count + (1 << 63)) % _INT64 - (1 << 63)


def _empty(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """A tensor of no elements. TensorFlow takes any valid shape with a zero dimension, [3, 0, 2**63 - 1]
    too; numpy holds one only while its other dimensions' bytes stay within 2**63 - 1."""
    if math.prod([size for size in shape if size]) * dtype.itemsize > _INT64_MAX:
        raise CodecError(
            f"tensor shape {list(shape)} has no elements, but its non-zero dimensions hold more than "
            "2**63 - 1 bytes, past what numpy can represent"
        )
    return np.empty(shape, dtype=dtype)


def _typed_values(proto: Any, dtype: int, np_dtype: np.dtype[Any]) -> np.ndarray:
    field = getattr(proto, _VALUE_FIELD[dtype])
    if dtype == DT_STRING:
        array = np.empty(len(field), dtype=object)
        array[:] = list(field)
        return array
    # upb's repeated scalar fields implement __array__ (one memcpy); np.asarray uses it and
    # falls back to iterating on other protobuf backends. 20 us vs 2.8 ms via list() for
    # 65536 floats (benchmarks/client_decode.py).
    values = np.asarray(field)
    if dtype in _HALF_BITS:  # half / bfloat16 bits carried in int32s
        return values.astype(np.uint16).view(np_dtype)
    if np_dtype.kind == "c":  # (re, im) pairs; an odd trailing part is ignored, as tensor.cc counts pairs
        part = np.float32 if np_dtype == np.complex64 else np.float64
        return values[: values.size // 2 * 2].astype(part).view(np_dtype)
    return values.astype(np_dtype, copy=False)


def from_tensor_proto(
    proto: Any, *, max_elements: int | None = None, tensor_content: bytes | memoryview | None = None
) -> np.ndarray:
    """Decode a TensorProto as TensorFlow's Tensor::FromProto does (tensor.cc).

    ``tensor_content`` must hold exactly the shape's bytes. Otherwise the typed field of the
    dtype is read: extra values are ignored, fewer values are padded with the last one, no
    values means zeros (empty strings). ``max_elements`` refuses a declared shape larger than
    that before allocating anything. Raises CodecError naming what is wrong.

    Pass ``tensor_content`` when it was read from ``proto`` already: protobuf copies a bytes field
    at every read (1 MB of InceptionV3 input: 23 µs), and the result is a view of these bytes (a memoryview
    of the bytes received will do: the local server passes one).
    """
    dtype = DTYPE_TO_NUMPY.get(proto.dtype)
    if dtype is None:
        raise CodecError(f"unsupported tensor dtype {dtype_name(proto.dtype)}")
    shape = proto_shape(proto)
    if len(shape) > _NUMPY_MAX_DIMS:
        raise CodecError(
            f"tensor shape has {len(shape)} dimensions; TensorFlow allows {_MAX_DIMS}, numpy at most {_NUMPY_MAX_DIMS}"
        )
    count = element_count(shape)
    if max_elements is not None and count > max_elements:
        raise CodecError(f"tensor shape {list(shape)} holds {count} elements, more than the {max_elements} allowed")
    content = proto.tensor_content if tensor_content is None else tensor_content
    if content and proto.dtype == DT_STRING:
        # TF's own encoders (AsProtoField, make_tensor_proto) put strings in string_val
        raise CodecError("a DT_STRING tensor in tensor_content is not supported; send the values in string_val")
    if content:
        expected = count * dtype.itemsize
        if len(content) != expected:
            raise CodecError(
                f"tensor_content has {len(content)} bytes; shape {list(shape)} "
                f"of {dtype_name(proto.dtype)} needs {expected}"
            )
        return np.frombuffer(content, dtype=dtype.newbyteorder("<")).reshape(shape)
    if count == 0:
        return _empty(shape, dtype)
    values = _typed_values(proto, proto.dtype, dtype)
    if values.size >= count:
        return values[:count].reshape(shape)
    if values.size == 0:
        filler: Any = b"" if proto.dtype == DT_STRING else 0
        return np.full(shape, filler, dtype=dtype)
    padded = np.empty(count, dtype=dtype)
    padded[: values.size] = values
    padded[values.size :] = values[-1]
    return padded.reshape(shape)


def _decode_strings(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) != {"b64"}:
            raise CodecError(f'a binary value must be {{"b64": "..."}}, got keys {sorted(value)}')
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, TypeError, ValueError) as exc:
            raise CodecError(f"'b64' value is not valid base64: {exc}") from None
    if isinstance(value, list):
        return [_decode_strings(v) for v in value]
    if isinstance(value, str):
        return value.encode()
    raise CodecError(f'expected a string or {{"b64": ...}}, got {type(value).__name__}')


def json_value_to_array(value: Any, dtype: int) -> np.ndarray:
    """A REST JSON value (nested lists) to an array of the signature's dtype."""
    if dtype == DT_STRING:
        return np.array(_decode_strings(value), dtype=object)
    np_dtype = DTYPE_TO_NUMPY.get(dtype)
    if np_dtype is None:
        raise CodecError(f"unsupported dtype {dtype_name(dtype)}")
    try:
        return json_numbers(value, np_dtype)
    except CodecError as exc:
        raise CodecError(f"cannot read the values as {dtype_name(dtype)}: {exc}") from None


def json_numbers(value: Any, np_dtype: np.dtype[Any]) -> np.ndarray:
    """JSON numbers (nested lists) as an array of ``np_dtype``; CodecError with numpy's words for a value that is
    not a number or that the dtype cannot hold (refused as json_tensor.cc refuses an int32's, not wrapped around)."""
    try:
        with np.errstate(over="raise"):  # a NaN or inf bound for an int raises by itself
            return np.asarray(value, dtype=np_dtype)
    except (TypeError, ValueError, OverflowError, FloatingPointError) as exc:
        raise CodecError(str(exc).splitlines()[0]) from None


def array_to_json_value(array: np.ndarray, binary: bool = False) -> Any:
    """An array as REST JSON: nested lists; strings as text, or ``{"b64": ...}`` when binary."""
    if array.dtype == object or array.dtype.kind in ("S", "U"):

        def convert(v: Any) -> Any:
            if isinstance(v, bytes):
                if binary:
                    return {"b64": base64.b64encode(v).decode()}
                return v.decode(errors="replace")
            return v

        flat = [convert(v) for v in array.reshape(-1).tolist()]
        return np.asarray(flat, dtype=object).reshape(array.shape).tolist() if array.ndim else flat[0]
    return array  # orjson serializes numpy arrays natively (OPT_SERIALIZE_NUMPY)
