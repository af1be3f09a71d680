"""Open Inference Protocol (KServe v2) tensors: datatypes, raw bytes, the REST body in JSON or binary.

Shared by the v2 gRPC and REST transports; neither gRPC nor aiohttp is imported here, so the
framing is tested without a server. What the wire looks like follows Triton's
``docs/protocol/extension_binary_data.md`` and ``src/http_server.cc`` (server repository) and
tritonclient's ``serialize_byte_tensor``: numbers are little-endian in row-major order, BYTES
elements are each a 4-byte little-endian length followed by the bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from serve_bench.client._base import SignatureInfo, TensorInfo
from serve_bench.codec import DTYPE_TO_NUMPY, NUMPY_TO_DTYPE, CodecError, gc_paused, json_numbers

__all__ = [
    "BINARY_EXTENSION",
    "DATATYPES",
    "HEADER_LENGTH",
    "RestBody",
    "datatype_of",
    "decode_rest_response",
    "encode_rest_request",
    "from_raw",
    "listed_versions",
    "pack_bytes",
    "signatures",
    "to_raw",
    "unpack_bytes",
]

# The server metadata's "extensions" entry that says the binary REST framing is understood
# (extension_binary_data.md: "a server that supports it reports binary_tensor_data").
BINARY_EXTENSION = "binary_tensor_data"
# The HTTP header giving the JSON part's length in a binary request or response (src/common.h).
HEADER_LENGTH = "Inference-Header-Content-Length"

# v2 datatype -> numpy dtype. TF DataType numbers come from codec.NUMPY_TO_DTYPE, so a v2 FP32
# is DT_FLOAT and BYTES is DT_STRING by construction.
DATATYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(object),
}
if 14 in DTYPE_TO_NUMPY:  # DT_BFLOAT16, when ml_dtypes is installed (codec decides)
    DATATYPES["BF16"] = DTYPE_TO_NUMPY[14]
_BY_NUMPY = {v: k for k, v in DATATYPES.items() if k != "BYTES"}
# The wire's byte order (little-endian) per datatype, made once: from_raw runs once per output of every
# answer, inside the measured latency, where numpy's small-call costs (a new dtype, np.prod of a tuple)
# came to ~70 µs per answer in a closed loop with cold caches (measured against Triton, 2-core VM).
_WIRE_DTYPES = {k: v.newbyteorder("<") for k, v in DATATYPES.items() if k != "BYTES"}


# numpy kinds sent as BYTES: objects, bytes, str, and numpy 2's variable-width StringDType ("T")
_BYTES_KINDS = ("O", "S", "U", "T")


def datatype_of(array: np.ndarray) -> str:
    """The v2 datatype name for a numpy array (strings and objects are BYTES)."""
    if array.dtype.kind in _BYTES_KINDS:
        return "BYTES"
    name = _BY_NUMPY.get(array.dtype.newbyteorder("=") if array.dtype.byteorder == ">" else array.dtype)
    if name is None:
        raise CodecError(f"numpy dtype {array.dtype} has no Open Inference Protocol datatype")
    return name


def _tensor_info(datatype: str, shape: Iterable[int]) -> TensorInfo:
    np_dtype = DATATYPES.get(datatype)  # BYTES is numpy's object dtype, DT_STRING's
    # DT_INVALID for a datatype serve-bench does not know: Client.check then refuses any array for it
    number = NUMPY_TO_DTYPE[np_dtype] if np_dtype is not None else 0
    return TensorInfo(number, tuple(int(d) for d in shape))


def signatures(
    inputs: Iterable[tuple[str, str, Iterable[int]]], outputs: Iterable[tuple[str, str, Iterable[int]]]
) -> dict[str, SignatureInfo]:
    """A v2 model's metadata as the one signature it has, ``serving_default``.

    The Open Inference Protocol has no signatures: a model has one set of inputs and outputs,
    given as ``(name, datatype, shape)`` triples, -1 for a variable dimension. Metadata listing no
    inputs (MLServer when model-settings.json declares none and the runtime sets none) gives no
    signature, so the client sends requests unchecked rather than refusing every input.
    """
    given = [(name, _tensor_info(datatype, shape)) for name, datatype, shape in inputs]
    if not given:
        return {}
    returned = {name: _tensor_info(datatype, shape) for name, datatype, shape in outputs}
    return {"serving_default": SignatureInfo("serving_default", dict(given), returned)}


def listed_versions(listed: Iterable[str], asked: int | None) -> dict[int, str]:
    """version number -> the string v2 names it by (v2 versions are strings, TF Serving's ints).

    The version the client asked for, else the numeric versions the metadata lists, else ``{0: ""}``:
    a model whose server lists none (MLServer without ``versions`` in model-settings.json).
    """
    if asked is not None:
        return {asked: str(asked)}
    return {int(v): v for v in listed if v.isdigit()} or {0: ""}


# --- raw bytes: gRPC raw_input_contents / raw_output_contents and binary REST ---------------------


def pack_bytes(values: Iterable[Any]) -> bytes:
    """BYTES elements as tritonclient's serialize_byte_tensor writes them: <u32 length><bytes>, ..."""
    parts = []
    for value in values:
        data = value.encode() if isinstance(value, str) else value
        if not isinstance(data, bytes | bytearray | memoryview):
            raise CodecError(f"a BYTES element must be bytes or str, got {type(value).__name__}")
        parts.append(len(data).to_bytes(4, "little"))
        parts.append(bytes(data))
    return b"".join(parts)


def unpack_bytes(buffer: bytes | memoryview, count: int) -> np.ndarray:
    """``count`` length-prefixed BYTES elements as a flat object array (one Python bytes per element)."""
    view = memoryview(buffer)
    # a list that grows as elements are read, not count slots up front: a count is the sender's word, and
    # BYTES of shape [2**40] with a 5-byte buffer asked for 8 TB before the first element was read
    items: list[bytes] = []
    offset = 0
    for i in range(count):  # each element is its own Python object: a loop per element is inherent
        if offset + 4 > len(view):
            raise CodecError(f"BYTES tensor ends after {i} of {count} elements")
        size = int.from_bytes(view[offset : offset + 4], "little")
        offset += 4
        if offset + size > len(view):
            raise CodecError(f"BYTES element {i} claims {size} bytes; only {len(view) - offset} remain")
        items.append(bytes(view[offset : offset + size]))
        offset += size
    if offset != len(view):
        raise CodecError(f"BYTES tensor has {len(view) - offset} bytes after its {count} elements")
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def to_raw(array: np.ndarray) -> bytes:
    """An array's raw form: little-endian row-major numbers, or length-prefixed BYTES."""
    if array.dtype.kind in _BYTES_KINDS:
        return pack_bytes(array.reshape(-1).tolist())
    datatype_of(array)  # refuses dtypes the protocol has no name for
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()


def from_raw(buffer: bytes | memoryview, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Raw bytes as an array of ``shape``: a view of the buffer for numbers (no copy, no loop)."""
    count = math.prod(shape)
    if datatype == "BYTES":
        return unpack_bytes(buffer, count).reshape(shape)
    np_dtype = _WIRE_DTYPES.get(datatype)
    if np_dtype is None:
        raise CodecError(f"unsupported datatype {datatype!r}")
    expected = count * np_dtype.itemsize
    if len(buffer) != expected:
        raise CodecError(f"{datatype} tensor of shape {list(shape)} needs {expected} bytes, got {len(buffer)}")
    return np.frombuffer(buffer, dtype=np_dtype).reshape(shape)


# --- REST ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestBody:
    """An encoded ``/infer`` body; ``json_length`` is set when binary tensors follow the JSON."""

    body: bytes
    json_length: int | None

    def __len__(self) -> int:  # bytes on the wire, for PreparedRequest.nbytes
        return len(self.body)


def _json_data(array: np.ndarray) -> Any:
    if array.dtype.kind in _BYTES_KINDS:
        values = []
        for value in array.reshape(-1).tolist():
            if isinstance(value, bytes):
                try:
                    value = value.decode()
                except UnicodeDecodeError:
                    raise CodecError(
                        "a BYTES value is not UTF-8 text, which JSON cannot carry; send it with binary=True"
                    ) from None
            values.append(value)
        return values
    if array.dtype.name == "bfloat16":  # orjson writes every other numeric numpy dtype v2 has
        raise CodecError("BF16 cannot be written as JSON numbers; send it with binary=True")
    return np.ascontiguousarray(array).reshape(-1)  # orjson writes numpy arrays natively


def encode_rest_request(inputs: dict[str, np.ndarray], binary: bool) -> RestBody:
    """A ``POST /v2/models/{m}/infer`` body.

    binary: the JSON header names each input with ``"parameters": {"binary_data_size": n}`` and the
    raw tensors follow it, in input order; ``"binary_data_output": true`` asks for every output in
    binary too (http_server.cc reads it as a request parameter). Otherwise every tensor is JSON.
    """
    tensors = []
    blobs = []
    for name, array in inputs.items():
        tensor: dict[str, Any] = {"name": name, "datatype": datatype_of(array), "shape": list(array.shape)}
        if binary:
            raw = to_raw(array)
            tensor["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            tensor["data"] = _json_data(array)
        tensors.append(tensor)
    header: dict[str, Any] = {"inputs": tensors}
    if binary:
        header["parameters"] = {"binary_data_output": True}
    encoded = orjson.dumps(header, option=orjson.OPT_SERIALIZE_NUMPY)
    if not binary:
        return RestBody(encoded, None)
    return RestBody(encoded + b"".join(blobs), len(encoded))


def _json_array(data: Any, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    np_dtype = DATATYPES.get(datatype)
    if np_dtype is None:
        raise CodecError(f"unsupported datatype {datatype!r}")
    if datatype == "BYTES":
        flat = np.asarray(data, dtype=object).reshape(-1)
        out = np.empty(flat.size, dtype=object)
        out[:] = [v.encode() if isinstance(v, str) else v for v in flat.tolist()]
        return out.reshape(shape)
    try:
        return json_numbers(data, np_dtype).reshape(shape)
    except (CodecError, ValueError) as exc:  # ValueError: not the shape's number of elements
        raise CodecError(f"cannot read the data as {datatype} of shape {list(shape)}: {exc}") from None


def decode_rest_response(body: bytes, json_length: int | None) -> dict[str, np.ndarray]:
    """An ``/infer`` response's outputs: JSON ``data``, or binary parts after the JSON header
    (an output with ``"parameters": {"binary_data_size": n}`` takes the next n bytes)."""
    view = memoryview(body)
    header_end = len(view) if json_length is None else json_length
    if header_end > len(view):
        raise CodecError(f"{HEADER_LENGTH} is {json_length} but the body has {len(view)} bytes")
    with gc_paused():
        header = orjson.loads(view[:header_end])
    if not isinstance(header, dict) or not isinstance(header.get("outputs"), list):
        raise CodecError("the response holds no 'outputs' list")
    offset = header_end
    outputs = {}
    for output in header["outputs"]:
        # the server's words, checked before they are used: anything malformed is a CodecError
        if not isinstance(output, dict):
            raise CodecError(f"an output is {type(output).__name__}, not an object")
        parameters = output.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise CodecError(f"output {output.get('name')!r}: parameters is {type(parameters).__name__}, not an object")
        shape = tuple(int(d) for d in output.get("shape", ()))
        datatype = output.get("datatype", "")
        size = parameters.get("binary_data_size")
        if size is not None:
            if offset + size > len(view):
                raise CodecError(
                    f"output {output.get('name')!r} claims {size} binary bytes; {len(view) - offset} remain"
                )
            outputs[output["name"]] = from_raw(view[offset : offset + size], datatype, shape)
            offset += size
        else:
            with gc_paused():
                outputs[output["name"]] = _json_array(output.get("data", []), datatype, shape)
    return outputs
