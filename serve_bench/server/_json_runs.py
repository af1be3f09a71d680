"""Long runs of numbers in a REST body, read without making a Python object per number.

A run (64 KiB or more of digits, signs, dots, exponents, commas, brackets and spaces, outside
any string) that forms one regular array is cut out of the body; its shape comes from its
brackets (checked against the pattern that shape must print as) and its values are parsed
by orjson in 2 MB slices, each turned at once into its part of one numpy array. A run that is
not one regular array is left to the JSON parser, so its errors are worded exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import orjson

from serve_bench.codec import DTYPE_TO_NUMPY
from serve_bench.server._errors import ServingError, invalid
from serve_bench.server._runtime import MAX_RANK, tf_type_name

__all__ = [
    "FAST_RUN_BYTES",
    "RUN_KEY",
    "TOO_BIG",
    "Run",
    "body_offset",
    "checked_ints",
    "cut_runs",
    "orjson_offset",
    "parse_error",
    "run_values",
    "type_error",
]

FAST_RUN_BYTES = 64 * 1024
# Where a run was cut out, the parser reads {RUN_KEY: index}; "\u0000" keeps the key apart
# from any real input name.
RUN_KEY = "\x00serve-bench-run"
_MARKER = b'{"\\u0000serve-bench-run":%d}'
_SLICE_BYTES = 2 << 20  # ~250k numbers: their Python objects (~8 MB) live one slice at a time
_NUMERIC_RUN = re.compile(rb"[0-9eE.+\-,\[\]\s]{%d,}" % FAST_RUN_BYTES)
_TOKEN = re.compile(rb"[^\[\],\s]+")
_WHITESPACE = b" \t\n\r"
# Every character of a number becomes "0"; runs of "0" are then collapsed to one per number.
_NUMBER_TO_ZEROS = bytes.maketrans(b"0123456789eE.+-", b"0" * 15)
_BRACKETS_TO_SPACES = bytes.maketrans(b"[]", b"  ")
# Adjacent tokens that no valid JSON array of numbers holds (after numbers became "0").
_BAD_PAIRS = (b",]", b"[,", b",,", b"][", b"0[", b"]0", b"00")
_INT32_TYPES = {3, 4, 5, 6, 17}  # DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_UINT16: IsInt() in json_tensor.cc:305


@dataclass(frozen=True)
class Run:
    """A big array of numbers cut out of the body: where it is and the shape its brackets give."""

    raw: bytes | bytearray
    start: int
    end: int
    shape: tuple[int, ...]

    @property
    def text(self) -> memoryview:
        return memoryview(self.raw)[self.start : self.end]

    def has_any(self, chars: bytes) -> bool:
        return any(self.raw.find(bytes([c]), self.start, self.end) >= 0 for c in chars)

    def first_value(self) -> str:
        match = _TOKEN.search(self.raw, self.start, self.end)
        return match.group().decode(errors="replace") if match else ""


def type_error(shown: str, json_type: str, dtype: int) -> Exception:
    """TypeError() in json_tensor.cc:262."""
    return invalid(f"JSON Value: {shown} Type: {json_type} is not of expected type: {tf_type_name(dtype)}")


# orjson's words for a number past DBL_MAX: rapidjson refuses it at the same place, the number's first
# byte (reader.h ParseNumber, kParseErrorNumberTooBig at startOffset), in other words (error/en.h)
TOO_BIG = {"number is infinity when parsed as double": "Number too big to be stored in double."}
_RAPIDJSON_WORDS = TOO_BIG  # orjson's words -> rapidjson's, where both parsers refuse at the same place


def parse_error(orjson_message: str, offset: int) -> ServingError:
    """ "JSON Parse error: <what> at offset: <byte in the body>", as ParseJson (util/json_tensor.cc:486-489)
    words rapidjson's error; ``offset`` must already be the body's, not a slice's or the skeleton's."""
    words = _RAPIDJSON_WORDS.get(orjson_message, orjson_message)
    return invalid(f"JSON Parse error: {words} at offset: {offset}")


def orjson_offset(exc: orjson.JSONDecodeError) -> int:
    """The byte offset of orjson's error in what it parsed (its ``pos`` counts characters; rapidjson's
    GetErrorOffset counts bytes)."""
    try:
        return len(exc.doc[: exc.pos].encode())
    except (TypeError, UnicodeEncodeError):
        return int(exc.pos)


def body_offset(skeleton_offset: int, runs: list[Run]) -> int:
    """The body's offset of a byte of the skeleton ``cut_runs`` returned: each marker before it stood for
    its run's bytes; an offset inside a marker is its run's first byte."""
    shift = 0
    for index, run in enumerate(runs):
        marker_start = run.start - shift
        marker_end = marker_start + len(_MARKER % index)
        if skeleton_offset < marker_start:
            break
        if skeleton_offset < marker_end:
            return run.start
        shift += (run.end - run.start) - (marker_end - marker_start)
    return skeleton_offset + shift


def cut_runs(raw: bytes | bytearray) -> tuple[bytes | bytearray, list[Run]]:
    """The body with each long, well-formed run of numbers outside strings replaced by a marker."""
    if len(raw) < FAST_RUN_BYTES:
        return raw, []
    view = memoryview(raw)
    pieces: list[bytes | memoryview] = []
    runs: list[Run] = []
    done = 0
    escapes = b"\\" in raw
    for match in _NUMERIC_RUN.finditer(raw):
        start, end = match.span()
        start = raw.find(b"[", start, end)
        end = raw.rfind(b"]", start, end) + 1 if start >= 0 else -1
        if start < 0 or end - start < FAST_RUN_BYTES:
            continue
        if escapes or raw.count(b'"', 0, start) % 2:  # maybe inside a string: leave it to the parser
            continue
        text = view[start:end]
        extra = raw.count(b"]", start, end) - raw.count(b"[", start, end)
        while extra > 0 and end > start:  # closers of enclosing lists caught in the run
            end = raw.rindex(b"]", start, end - 1) + 1
            extra -= 1
            text = view[start:end]
        shape = _run_shape(text)
        if shape is None:  # not one regular array: the parser and the exact checks handle it
            continue
        pieces.append(view[done:start])
        pieces.append(_MARKER % len(runs))
        runs.append(Run(raw, start, end, shape))
        done = end
    if not runs:
        return raw, []
    pieces.append(view[done:])
    return b"".join(pieces), runs


def _run_shape(text: memoryview) -> tuple[int, ...] | None:
    """The shape of a dense array of numbers, from its brackets; None unless it is one well-formed,
    regular array (every list at a level as long as the first, all numbers at the deepest level)."""
    marked = _collapse_numbers(text)
    if not marked.startswith(b"[") or not marked.endswith(b"]") or any(p in marked for p in _BAD_PAIRS):
        return None
    bare = marked.replace(b",", b"")
    del marked
    rank = len(bare) - len(bare.lstrip(b"["))
    if rank > MAX_RANK:
        return None
    innermost = bare.index(b"]") - rank
    if innermost == 0 and rank > 1:
        return None  # empty inner lists: rare, and the exact path words their errors
    dims = [innermost]
    child = b"[" + b"0" * innermost + b"]"
    for level in range(rank - 2, -1, -1):
        position, count = level + 1, 0
        while bare.startswith(child, position):
            count += 1
            position += len(child)
        dims.append(count)
        child = b"[" + child * count + b"]"
    if child != bare:
        return None
    return tuple(reversed(dims))


def _collapse_numbers(text: memoryview) -> bytes:
    """The run with each number as one "0" and no whitespace (so "[1.5, 20]" gives "[0,0]"),
    made slice by slice with numpy (re.sub would cost a Python call per number)."""
    pieces: list[bytes] = []
    previous_zero = False
    for start in range(0, len(text), _SLICE_BYTES):
        chars = np.frombuffer(
            bytes(text[start : start + _SLICE_BYTES]).translate(_NUMBER_TO_ZEROS, _WHITESPACE), np.uint8
        )
        if not chars.size:
            continue
        zero = chars == 48
        keep = np.ones(chars.size, dtype=bool)
        keep[1:] = ~(zero[1:] & zero[:-1])
        keep[0] = not (zero[0] and previous_zero)
        previous_zero = bool(zero[-1])
        pieces.append(chars[keep].tobytes())
    return b"".join(pieces)


def run_values(run: Run, dtype: int) -> np.ndarray:
    """A run's numbers as an array of ``dtype``, parsed by numpy slice by slice into the result."""
    count = int(np.prod(run.shape, dtype=np.int64))
    np_dtype = DTYPE_TO_NUMPY[dtype]
    integer = np_dtype.kind in "iu"
    if integer and run.has_any(b".eE"):
        raise type_error(_first_non_int(run), "Number", dtype)
    parse_as = np.dtype(np.int64) if integer else np_dtype
    out = np.empty(count, dtype=parse_as)
    text, filled, start = run.text, 0, 0
    while start < len(text):
        stop = min(start + _SLICE_BYTES, len(text))
        if stop < len(text):  # cut at a comma so no number is split
            comma = bytes(text[stop - 256 : stop]).rfind(b",")
            stop = stop - 256 + comma if comma >= 0 else stop
        piece = b"[" + bytes(text[start:stop]).translate(_BRACKETS_TO_SPACES) + b"]"
        try:
            values = np.asarray(orjson.loads(piece), dtype=parse_as)
        except orjson.JSONDecodeError as exc:
            # piece[0] is the "[" added above: piece offset p is body offset run.start + start + p - 1
            raise parse_error(exc.msg, run.start + start + max(0, exc.pos - 1)) from None
        except (ValueError, TypeError, OverflowError) as exc:
            raise invalid(f"JSON Parse error: {str(exc).splitlines()[0]} at offset: {run.start + start}") from None
        del piece
        if filled + values.size > count:
            raise invalid("JSON Parse error: Invalid value. (more numbers than the brackets hold)")
        out[filled : filled + values.size] = values
        filled += values.size
        start = stop + 1
    if filled != count:
        raise invalid("JSON Parse error: Invalid value. (fewer numbers than the brackets hold)")
    if integer:
        out = checked_ints(out, dtype, run.first_value)
    return out.reshape(run.shape)


def _first_non_int(run: Run) -> str:
    for match in _TOKEN.finditer(run.raw, run.start, run.end):
        token = match.group()
        if any(c in token for c in b".eE"):
            return token.decode(errors="replace")
    return run.first_value()


def checked_ints(values: np.ndarray, dtype: int, first: Callable[[], str]) -> np.ndarray:
    """int64 values to ``dtype`` with the range test rapidjson's IsInt/IsUint/IsUint64 make."""
    if values.size:
        low, high = int(values.min()), int(values.max())
        if dtype in _INT32_TYPES and (low < -(2**31) or high >= 2**31):
            raise type_error(str(low if low < -(2**31) else high), "Number", dtype)
        if dtype in (22, 23) and low < 0:  # DT_UINT32 / DT_UINT64 need IsUint
            raise type_error(str(low), "Number", dtype)
        if dtype == 22 and high >= 2**32:
            raise type_error(str(high), "Number", dtype)
    # C-style narrowing, as the int_val -> uint8/int16/int8 tensor conversion does
    return values.astype(DTYPE_TO_NUMPY[dtype], copy=False)
