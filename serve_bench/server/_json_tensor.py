"""A REST predict body to input arrays, as TF Serving's util/json_tensor.cc reads it.

Accepts and refuses what ``FillPredictRequestFromJson`` does, with its messages. Large
arrays of numbers are never turned into Python objects (see _json_runs): parsing costs
about the result's size plus a fraction of the body, not the ~16x of Python floats in lists.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from serve_bench.codec import DT_STRING, DTYPE_TO_NUMPY, gc_paused
from serve_bench.server._errors import ServingError, invalid
from serve_bench.server._json_runs import (
    RUN_KEY,
    TOO_BIG,
    Run,
    body_offset,
    checked_ints,
    cut_runs,
    orjson_offset,
    parse_error,
    run_values,
    type_error,
)
from serve_bench.server._runtime import MAX_RANK, Signature, tf_type_name

__all__ = ["ParseBudgetExceeded", "PredictBody", "object_cost", "parse_predict_body"]

_KIND_OK = {"f": "iuf", "i": "iu", "u": "iu", "b": "b"}


@dataclass(frozen=True)
class PredictBody:
    """A parsed predict body: which signature, which format, the inputs as arrays."""

    signature_name: str
    row_format: bool  # "instances" (answer "predictions") vs "inputs" (answer "outputs")
    inputs: dict[str, np.ndarray]


class ParseBudgetExceeded(Exception):
    """Parsing this body as Python objects needs more memory than the server may lend it now."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"parsing needs {needed} more bytes")
        self.needed = needed


def object_cost(text: bytes | bytearray) -> int:
    """Bytes the JSON parser's Python objects may take for ``text`` (what is left once long runs of
    numbers are cut out): ~72 bytes per element (object, list slot or dict entry), counted from
    separators, plus the text itself for strings."""
    return (text.count(b",") + text.count(b":") + 1) * 72 + len(text)


def parse_predict_body(
    raw: bytes | bytearray, get_signature: Callable[[str], Signature], reserve: Callable[[int], bool] = lambda n: True
) -> PredictBody:
    """Parse ``raw`` as FillPredictRequestFromJson (util/json_tensor.cc:656-705) does.

    ``get_signature(name)`` resolves the signature (raising the ServingError for an unknown
    model, version or signature), called once ``signature_name`` is read. When what is left
    for the JSON parser would cost more than twice the body as Python objects, the excess is
    asked of ``reserve(bytes)`` first; False raises ParseBudgetExceeded.
    """
    if not raw:
        raise invalid("JSON Parse error: The document is empty")  # json_tensor.cc:474
    skeleton, runs = cut_runs(raw)
    excess = object_cost(skeleton) - 2 * len(raw)
    if excess > 0 and not reserve(excess):
        raise ParseBudgetExceeded(excess)
    with gc_paused():
        try:
            doc = orjson.loads(skeleton)
        except orjson.JSONDecodeError as exc:
            error = parse_error(exc.msg, body_offset(orjson_offset(exc), runs))
            if exc.msg in TOO_BIG:  # orjson stops at the first fault, as rapidjson: a NaN before it would be it
                raise error from None
            doc = _parse_non_finite(skeleton, error, runs)
        del skeleton
        if not isinstance(doc, dict):
            raise invalid(f"JSON Value: {_debug(doc, runs)} Is not object")  # json_tensor.cc:499
        name = doc.get("signature_name", "")
        if not isinstance(name, str):  # json_tensor.cc:281 FormatSignatureError
            raise invalid(
                f"JSON Value: {_debug(doc, runs)} not formatted correctly. 'signature_name' key must be a string value."
            )
        signature = get_signature(name)
        if not signature.inputs:
            raise invalid(f"Failed to get input map for signature: {name or 'DEFAULT'}")
        if "instances" in doc:
            if "inputs" in doc:
                raise invalid(
                    f"JSON Value: {_debug(doc, runs)} Not formatted correctly expecting only one of "
                    "'inputs' or 'instances' keys to exist "
                )
            instances = _resolve(doc["instances"], runs)
            if not isinstance(instances, (list, Run)):
                raise invalid(f"JSON Value: {_debug(doc, runs)} Expecting 'instances' to be an list/array")
            if _length(instances) == 0:
                raise invalid(f"JSON Value: {_debug(doc, runs)} No values in 'instances' array")
            return PredictBody(name, True, _from_instances(instances, signature, runs))
        if "inputs" in doc:
            return PredictBody(name, False, _from_inputs(doc["inputs"], signature, runs))
        raise invalid("Missing 'inputs' or 'instances' key")  # json_tensor.cc:704


# --- the exact (Python object) path ------------------------------------------


def _parse_non_finite(text: bytes | bytearray, error: ServingError, runs: list[Run]) -> Any:
    """rapidjson reads NaN, Infinity and -Infinity (json_tensor.cc:480 kParseNanAndInfFlag);
    orjson does not, Python's json does: used only when orjson failed on such a body. Python's json
    reads a number past DBL_MAX as inf, which rapidjson refuses: that is refused here too."""
    if b"NaN" not in text and b"Infinity" not in text:
        raise error
    try:
        return json.loads(text, parse_float=_finite, parse_int=_finite_int)
    except _TooBig:
        raise parse_error(next(iter(TOO_BIG)), body_offset(_first_too_big(text), runs)) from None
    except (ValueError, RecursionError):
        raise error from None


class _TooBig(ValueError):
    pass


def _finite(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise _TooBig(literal)
    return value


def _finite_int(literal: str) -> int | float:
    """An integer as rapidjson reads it: int64 or uint64 when it fits, else a double (reader.h ParseNumber
    goes on in double past uint64), past DBL_MAX refused; orjson reads them the same way."""
    value = int(literal)
    if -(2**63) <= value < 2**64:
        return value
    as_double = float(literal)
    if math.isinf(as_double):
        raise _TooBig(literal)
    return as_double


# a JSON string or number (RFC 8259's grammar), to find the first number past DBL_MAX outside strings
_STRING_OR_NUMBER = re.compile(rb'"(?:[^"\\]|\\.)*"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?')


def _first_too_big(text: bytes | bytearray) -> int:
    for match in _STRING_OR_NUMBER.finditer(text):
        token = match.group()
        if not token.startswith(b'"') and math.isinf(float(token)):
            return match.start()
    return 0


def _length(value: Any) -> int:
    return value.shape[0] if isinstance(value, Run) else len(value)


def _debug(value: Any, runs: list[Run]) -> str:
    """JsonValueToDebugString (json_tensor.cc:230): compact JSON, cut near 256 bytes."""

    def default(obj: Any) -> Any:
        if isinstance(obj, Run):
            return _run_fragment(obj)
        raise TypeError

    text = orjson.dumps(_with_runs(value, runs), default=default).decode(errors="replace")
    return text if len(text) <= 256 else text[:256]


def _with_runs(value: Any, runs: list[Run]) -> Any:
    """``value`` with each cut-out run back in place of its marker (the client's JSON, not ours)."""
    resolved = _resolve(value, runs)
    if isinstance(resolved, Run):
        return _run_fragment(resolved)
    if isinstance(resolved, dict):
        return {key: _with_runs(item, runs) for key, item in resolved.items()}
    if isinstance(resolved, list):
        return [_with_runs(item, runs) for item in resolved]
    return resolved


def _run_fragment(run: Run) -> orjson.Fragment:
    """The start of a run as compact JSON: enough for a message cut at 256 bytes."""
    compact, start = b"", run.start
    while len(compact) < 512 and start < run.end:
        stop = min(start + 4096, run.end)
        compact += run.raw[start:stop].translate(None, b" \t\n\r")
        start = stop
    return orjson.Fragment(compact)


def _json_type(value: Any) -> str:
    """JsonTypeString (json_tensor.cc:95)."""
    if value is None:
        return "Null"
    if value is True:
        return "True"
    if value is False:
        return "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, str):
        return "String"
    return "Number"


def _resolve(value: Any, runs: list[Run]) -> Any:
    if isinstance(value, dict) and len(value) == 1 and RUN_KEY in value:
        index = value[RUN_KEY]
        if isinstance(index, int) and 0 <= index < len(runs):
            return runs[index]
    return value


def _is_b64(value: Any) -> bool:
    """IsValBase64Object (json_tensor.cc:356): exactly one key, "b64", holding a string."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _dense_shape(value: Any, runs: list[Run]) -> list[int]:
    """GetDenseTensorShape (json_tensor.cc:344): sizes along the first element at each level."""
    dims: list[int] = []
    while True:
        value = _resolve(value, runs)
        if isinstance(value, Run):
            dims.extend(value.shape)
            return dims
        if not isinstance(value, list):
            return dims
        dims.append(len(value))
        if not value:
            return dims
        value = value[0]


def _to_array(value: Any, alias: str, dtype: int, runs: list[Run]) -> np.ndarray:
    """One JSON value as the tensor FillTensorProto (json_tensor.cc:392) would build."""
    value = _resolve(value, runs)
    if isinstance(value, Run):
        if dtype not in DTYPE_TO_NUMPY or dtype in (DT_STRING, 10):
            raise type_error(value.first_value(), "Number", dtype)
        return run_values(value, dtype)
    dims = _dense_shape(value, runs)
    if len(dims) > MAX_RANK:  # Tensor::FromProto refuses it: GetInputValues' message
        raise invalid(f"tensor parsing error: {alias}")
    np_dtype = DTYPE_TO_NUMPY.get(dtype)
    if np_dtype is None:
        raise ServingError("UNIMPLEMENTED", f"Conversion of JSON Value to type: {tf_type_name(dtype)}")  # :336
    if dtype != DT_STRING and not _contains(value, runs):
        fast = _numbers_fast(value, dims, dtype, np_dtype)
        if fast is not None:
            return fast
    flat: list[Any] = []
    _fill(value, 0, dims, dtype, flat, runs)
    if dtype == DT_STRING:
        array = np.empty(len(flat), dtype=object)
        array[:] = flat
        return array.reshape(dims)
    if np_dtype.kind in "iu":
        return checked_ints(np.asarray(flat, dtype=np.int64), dtype, lambda: "").reshape(dims)
    return np.asarray(flat, dtype=np_dtype).reshape(dims)


def _contains(value: Any, runs: list[Run]) -> bool:
    """Whether cut-out runs sit inside this (list) value; then the exact walk stitches them."""
    return bool(runs) and isinstance(value, list) and RUN_KEY.encode()[1:] in orjson.dumps(value)


def _numbers_fast(value: Any, dims: list[int], dtype: int, np_dtype: np.dtype[Any]) -> np.ndarray | None:
    """numpy's own conversion when it gives exactly what the exact walk would; None to walk."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            inferred = np.asarray(value)
    except (ValueError, TypeError, Warning):
        return None
    if list(inferred.shape) != dims or inferred.dtype.kind not in _KIND_OK.get(np_dtype.kind, ""):
        return None
    if inferred.dtype.kind != "b" and inferred.dtype.kind in "iuf" and _has_bool(value):
        return None  # numpy would read true as 1; TF Serving refuses a bool where a number goes
    if np_dtype.kind in "iu":
        return checked_ints(inferred.astype(np.int64), dtype, lambda: "")
    with np.errstate(over="ignore"):  # past float32/half range is inf, as rapidjson's GetFloat() casts it
        return inferred.astype(np_dtype, copy=False)


def _has_bool(value: Any) -> bool:
    dumped = orjson.dumps(value)
    return b"true" in dumped or b"false" in dumped


def _fill(value: Any, level: int, dims: list[int], dtype: int, out: list[Any], runs: list[Run]) -> None:
    """FillTensorProto (json_tensor.cc:392-434), with its messages."""
    value = _resolve(value, runs)
    rank = len(dims)
    if isinstance(value, Run):
        if level + len(value.shape) != rank or list(value.shape) != dims[level:]:
            raise invalid(
                f"Encountered list at unexpected size: {value.shape[0]} at level: {level} "
                f"expected size: {dims[level] if level < rank else 0}"
            )
        out.extend(run_values(value, dtype).reshape(-1).tolist())
        return
    if not isinstance(value, list):
        if level != rank:
            raise invalid(
                f"JSON Value: {_debug(value, runs)} found at incorrect level: {level + 1} in the JSON DOM. "
                f"Expected at level: {rank}"
            )
        out.append(_scalar(value, dtype, runs))
        return
    if level >= rank:
        raise invalid(f"Encountered list at unexpected level: {level} expected < {rank}")
    if len(value) != dims[level]:
        raise invalid(
            f"Encountered list at unexpected size: {len(value)} at level: {level} expected size: {dims[level]}"
        )
    for item in value:
        _fill(item, level + 1, dims, dtype, out, runs)


def _scalar(value: Any, dtype: int, runs: list[Run]) -> Any:
    """AddValueToTensor (json_tensor.cc:289) / JsonDecodeBase64Object (json_tensor.cc:375)."""
    if isinstance(value, dict):
        if dtype != DT_STRING:
            raise type_error(_debug(value, runs), "Object", dtype)
        if not _is_b64(value):
            raise invalid(f"JSON Value: {_debug(value, runs)} not formatted correctly for base64 data")
        try:
            return _b64decode(value["b64"])
        except ValueError:
            raise invalid("Unable to base64 decode") from None
    if dtype == DT_STRING:
        if not isinstance(value, str):
            raise type_error(_debug(value, runs), _json_type(value), dtype)
        return value.encode()
    if dtype == 10:
        if not isinstance(value, bool):
            raise type_error(_debug(value, runs), _json_type(value), dtype)
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise type_error(_debug(value, runs), _json_type(value), dtype)
    if DTYPE_TO_NUMPY[dtype].kind in "iu" and not isinstance(value, int):
        raise type_error(_debug(value, runs), "Number", dtype)
    return value


def _b64decode(text: str) -> bytes:
    """absl::Base64Unescape: standard alphabet; padding optional."""
    data = text.encode()
    try:
        return base64.b64decode(data + b"=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(str(exc)) from None


def _from_inputs(value: Any, signature: Signature, runs: list[Run]) -> dict[str, np.ndarray]:
    """FillTensorMapFromInputsMap (json_tensor.cc:603-648)."""
    value = _resolve(value, runs)
    specs = signature.inputs
    if not isinstance(value, dict) or _is_b64(value):
        if len(specs) > 1:
            raise invalid(
                "inputs is a plain value/list, but expecting an object as multiple input tensors "
                "required as per tensorinfo_map"
            )
        ((alias, spec),) = specs.items()
        return {alias: _to_array(value, alias, spec.dtype, runs)}
    arrays: dict[str, np.ndarray] = {}
    for alias in sorted(specs):
        if alias not in value:
            raise invalid(f"Missing named input: {alias} in 'inputs' object.")
        arrays[alias] = _to_array(value[alias], alias, specs[alias].dtype, runs)
    # names beyond the signature's are ignored here, as TF Serving's loop only looks up its own
    return arrays


def _from_instances(instances: Any, signature: Signature, runs: list[Run]) -> dict[str, np.ndarray]:
    """FillTensorMapFromInstancesList (json_tensor.cc:520-600)."""
    specs = signature.inputs
    if isinstance(instances, Run):
        if len(specs) > 1:
            raise invalid(
                "instances is a plain list, but expecting list of objects as multiple input tensors "
                "required as per tensorinfo_map"
            )
        ((alias, spec),) = specs.items()
        return {alias: _to_array(instances, alias, spec.dtype, runs)}
    first = _resolve(instances[0], runs)
    if not isinstance(first, dict) and len(specs) > 1:
        raise invalid(
            "instances is a plain list, but expecting list of objects as multiple input tensors "
            "required as per tensorinfo_map"
        )
    objects = isinstance(first, dict) and not _is_b64(first)
    names = sorted(specs)
    rows: dict[str, list[np.ndarray]] = {}
    for index, element in enumerate(instances):
        element = _resolve(element, runs)
        is_object = isinstance(element, dict) and not _is_b64(element)
        if objects:
            if not is_object:
                raise invalid(f"Expecting object but got list at item {index} of input list")
            for name, item in element.items():
                _add_item(rows, item, name, specs, index, runs, named=True)
            if sorted(element) != names:
                raise invalid(
                    f"Failed to process element: {index} of 'instances' list. JSON object: "
                    f"{_debug(element, runs)} keys must be equal to: {','.join(names)}"
                )
        else:
            if is_object:
                raise invalid(f"Expecting value/list but got object at item {index} of input list")
            _add_item(rows, element, names[0], specs, index, runs, named=False)
    return {name: np.stack(items) for name, items in rows.items()}


def _add_item(
    rows: dict[str, list[np.ndarray]],
    item: Any,
    name: str,
    specs: dict[str, Any],
    index: int,
    runs: list[Run],
    *,
    named: bool,
) -> None:
    """AddInstanceItem (json_tensor.cc:441-470): each instance of a name has the first one's shape."""
    where = (
        f"Failed to process element: {index} key: {name} of 'instances' list."
        if named
        else f"Failed to process element: {index} of 'instances' list."
    )
    try:
        if name not in specs:
            raise invalid(f"JSON object: does not have named input: {name}")
        array = _to_array(item, name, specs[name].dtype, runs)
        if len(array.shape) + 1 > MAX_RANK:
            raise invalid(f"tensor parsing error: {name}")
        seen = rows.setdefault(name, [])
        if seen and seen[0].size != array.size:
            raise invalid(f"Expecting tensor size: {seen[0].size} but got: {array.size}")
        if seen and seen[0].shape != array.shape:
            raise invalid(f"Expecting shape {_shape_text(seen[0].shape)} but got: {_shape_text(array.shape)}")
        seen.append(array)
    except ServingError as exc:
        if exc.message.startswith("tensor parsing error"):
            raise
        raise invalid(f"{where} Error: {exc.code}: {exc.message}") from None


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
