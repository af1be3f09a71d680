"""numpy <-> TensorProto and numpy <-> TF Serving's REST JSON, without TensorFlow.

Shared by the client (encode requests, decode responses) and the local server
(the reverse), so both sides agree on every dtype by construction.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
from collections.abc import Iterator
from typing import Any

import numpy as np

from serve_bench import _protos

__all__ = [
    "DTYPE_TO_NUMPY",
    "NUMPY_TO_DTYPE",
    "CodecError",
    "dtype_name",
    "to_tensor_proto",
    "from_tensor_proto",
    "json_value_to_array",
    "array_to_json_value",
    "gc_paused",
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
    1: np.dtype(np.float32),   # DT_FLOAT
    2: np.dtype(np.float64),   # DT_DOUBLE
    3: np.dtype(np.int32),     # DT_INT32
    4: np.dtype(np.uint8),     # DT_UINT8
    5: np.dtype(np.int16),     # DT_INT16
    6: np.dtype(np.int8),      # DT_INT8
    7: np.dtype(object),       # DT_STRING
    9: np.dtype(np.int64),     # DT_INT64
    10: np.dtype(np.bool_),    # DT_BOOL
    17: np.dtype(np.uint16),   # DT_UINT16
    19: np.dtype(np.float16),  # DT_HALF
    22: np.dtype(np.uint32),   # DT_UINT32
    23: np.dtype(np.uint64),   # DT_UINT64
}
NUMPY_TO_DTYPE: dict[np.dtype[Any], int] = {v: k for k, v in DTYPE_TO_NUMPY.items()}
DT_STRING = 7

# Which typed repeated field carries each dtype when tensor_content is empty.
_VALUE_FIELD = {
    1: "float_val", 2: "double_val", 3: "int_val", 4: "int_val", 5: "int_val", 6: "int_val",
    7: "string_val", 9: "int64_val", 10: "bool_val", 17: "int_val", 19: "half_val",
    22: "uint32_val", 23: "uint64_val",
}


def dtype_name(dtype: int) -> str:
    try:
        return _protos.enum_name("tensorflow.DataType", dtype)
    except KeyError:
        return f"DataType({dtype})"


def _tensor_proto_class() -> Any:
    return _protos.message("tensorflow.TensorProto")


def to_tensor_proto(array: Any, out: Any = None) -> Any:
    """Encode a numpy array: ``tensor_content`` for numbers, ``string_val`` for strings."""
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
        proto.tensor_content = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    for size in array.shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


def from_tensor_proto(proto: Any) -> np.ndarray:
    """Decode ``tensor_content`` or the typed value fields (a single value broadcasts, as in TF)."""
    dtype = DTYPE_TO_NUMPY.get(proto.dtype)
    if dtype is None:
        raise CodecError(f"unsupported tensor dtype {dtype_name(proto.dtype)}")
    if proto.tensor_shape.unknown_rank:
        raise CodecError("tensor has unknown rank")
    shape = tuple(int(d.size) for d in proto.tensor_shape.dim)
    if any(s < 0 for s in shape):
        raise CodecError(f"tensor shape {list(shape)} has a negative dimension")
    count = int(np.prod(shape, dtype=np.int64))
    if proto.dtype == DT_STRING:
        values = list(proto.string_val)
        array = np.empty(len(values), dtype=object)
        array[:] = values
    elif proto.tensor_content:
        expected = count * dtype.itemsize
        if len(proto.tensor_content) != expected:
            raise CodecError(
                f"tensor_content has {len(proto.tensor_content)} bytes; shape {list(shape)} "
                f"of {dtype_name(proto.dtype)} needs {expected}"
            )
        return np.frombuffer(proto.tensor_content, dtype=dtype.newbyteorder("<")).reshape(shape)
    else:
        field = getattr(proto, _VALUE_FIELD[proto.dtype])
        if proto.dtype == 19:  # DT_HALF: IEEE half bits carried in int32s
            array = np.asarray(list(field), dtype=np.uint16).view(np.float16)
        else:
            array = np.asarray(list(field), dtype=dtype)
    if array.size == count:
        return array.reshape(shape)
    if array.size == 1:
        return np.broadcast_to(array, shape).copy()
    if array.size == 0 and count == 0:
        return array.reshape(shape)
    raise CodecError(f"tensor holds {array.size} values but its shape {list(shape)} needs {count}")


def _decode_strings(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) != {"b64"}:
            raise CodecError(f"a binary value must be {{\"b64\": \"...\"}}, got keys {sorted(value)}")
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, TypeError, ValueError) as exc:
            raise CodecError(f"'b64' value is not valid base64: {exc}") from None
    if isinstance(value, list):
        return [_decode_strings(v) for v in value]
    if isinstance(value, str):
        return value.encode()
    raise CodecError(f"expected a string or {{\"b64\": ...}}, got {type(value).__name__}")


def json_value_to_array(value: Any, dtype: int) -> np.ndarray:
    """A REST JSON value (nested lists) to an array of the signature's dtype."""
    if dtype == DT_STRING:
        return np.array(_decode_strings(value), dtype=object)
    np_dtype = DTYPE_TO_NUMPY.get(dtype)
    if np_dtype is None:
        raise CodecError(f"unsupported dtype {dtype_name(dtype)}")
    try:
        return np.asarray(value, dtype=np_dtype)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"cannot read the values as {dtype_name(dtype)}: {str(exc).splitlines()[0]}") from None


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
