"""The REST predict body parser (server/_json_tensor.py) under structured fuzzing (issue 34, item 3), and
the position a parse error names (item 8).

TF Serving parses a body with rapidjson (util/json_tensor.cc:476-490, ParseJson) and refuses it with
"JSON Parse error: <GetParseError_En> at offset: <GetErrorOffset>"; a number past DBL_MAX is
kParseErrorNumberTooBig, raised at ``startOffset``, the byte where the number begins
(rapidjson include/rapidjson/reader.h:1479 and 1671/1723, ParseNumber), worded "Number too big to be
stored in double." (include/rapidjson/error/en.h:57).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serve_bench.server._errors import ServingError
from serve_bench.server._json_runs import FAST_RUN_BYTES
from serve_bench.server._json_tensor import parse_predict_body
from tests._fuzz import fuzz_settings, json_signature, json_tensor

FUZZ = fuzz_settings(150, 2000)
TOO_BIG = "JSON Parse error: Number too big to be stored in double. at offset: "


def _error(body: bytes) -> str:
    with pytest.raises(ServingError) as caught:
        parse_predict_body(body, json_signature)
    assert caught.value.code == "INVALID_ARGUMENT"
    return caught.value.message


# --- item 8: a number past DBL_MAX is refused at its own offset in the body -----------------------------


def test_a_number_too_big_names_its_offset_in_a_short_body() -> None:
    body = b'{"signature_name": "any", "inputs": [[1.5, 2], [3, 1e999]]}'
    assert _error(body) == TOO_BIG + str(body.index(b"1e999"))


def test_a_number_too_big_inside_a_long_run_names_its_offset_in_the_body() -> None:
    """A run of numbers past 64 KiB is parsed apart from the rest, slice by slice: the offset it named was
    inside its slice ("line 1 column 6 (char 5) ... at byte 0 of it"), now the body's."""
    row = ", ".join(["1.5"] * 30_000)
    body = ('{"signature_name": "any", "inputs": [[' + row + ", -1e999, 2.0]]}").encode()
    assert len(body) > FAST_RUN_BYTES
    assert _error(body) == TOO_BIG + str(body.index(b"-1e999"))


def test_an_error_after_a_long_run_names_its_offset_in_the_body() -> None:
    """The rest of the body is parsed with each run cut out: its offsets are mapped back past the runs."""
    row = ", ".join(["2"] * 30_000)
    body = ('{"signature_name": "any", "inputs": [[' + row + ']], "x": [1, 1e400]}').encode()
    assert _error(body) == TOO_BIG + str(body.index(b"1e400"))


def test_a_number_too_big_after_nan_is_refused_as_rapidjson_does() -> None:
    """NaN makes the parser fall back to Python's json (rapidjson reads NaN: kParseNanAndInfFlag), which
    reads 1e999 as inf; rapidjson refuses it, and so does the fallback, at its offset."""
    body = b'{"signature_name": "any", "inputs": [NaN, 1, 1e999]}'
    assert _error(body) == TOO_BIG + str(body.index(b"1e999"))


def test_offsets_count_bytes_not_characters() -> None:
    """rapidjson's offset is a byte offset; orjson's position counts characters."""
    body = '{"signature_name": "any", "inputs": [1e999], "note": "é"}'.encode()
    assert _error(body) == TOO_BIG + str(body.index(b"1e999"))
    body = '{"note": "ééé", "signature_name": "any", "inputs": [1e999]}'.encode()
    assert _error(body) == TOO_BIG + str(body.index(b"1e999"))


@FUZZ
@given(
    before=st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=30),
    number=st.sampled_from(["1e999", "-2e308", "1" + "0" * 400, "9e99999"]),
    long=st.booleans(),
)
def test_any_number_too_big_is_named_at_its_offset(before: list[float], number: str, long: bool) -> None:
    """Property: wherever the first number past DBL_MAX sits, short body or long run, the error names it."""
    values = [repr(v) for v in before] * (3000 if long else 1)
    text = ", ".join([*values, number]) if values else number
    body = ('{"signature_name": "any", "inputs": [' + text + "]}").encode()
    assert _error(body) == TOO_BIG + str(body.index(number.encode()))


# --- item 3: structured bodies, every answer within the parser's contract -------------------------------

_scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.fixed_dictionaries({"b64": st.sampled_from(["eQ==", "eQ", "!!", "", "AAAA"])}),
)


def _regular(scalar: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Nested lists that are mostly regular (what a client sends), sometimes ragged."""
    return st.recursive(
        scalar,
        lambda inner: st.one_of(
            st.integers(0, 4).flatmap(lambda n: inner.map(lambda v: [v] * n)),
            st.lists(inner, max_size=4),
        ),
        max_leaves=40,
    )


_values = _regular(_scalars)
_names = st.sampled_from(["", "serving_bytes", "pair", "any", "half", "bools", "x"])
_aliases = st.sampled_from(["a", "b", "images", "x", "h", "t", "u", "z"])
_bodies = st.fixed_dictionaries(
    {},
    optional={
        "signature_name": st.one_of(_names, _scalars),
        "instances": st.one_of(
            st.lists(_values, max_size=4),
            st.lists(st.dictionaries(_aliases, _values, max_size=3), max_size=3),
            _values,
        ),
        "inputs": st.one_of(_values, st.dictionaries(_aliases, _values, max_size=3)),
    },
)


def _dump(body: dict[str, Any]) -> bytes:
    return json.dumps(body, allow_nan=True).encode()


@FUZZ
@given(body=_bodies)
def test_structured_bodies_are_answered_or_refused_within_the_contract(body: dict[str, Any]) -> None:
    """Invariants (tests/_fuzz.py): INVALID_ARGUMENT, UNIMPLEMENTED or NOT_FOUND with a message, or arrays
    for exactly the signature's inputs with no more elements than the body has bytes."""
    json_tensor(_dump(body))


@FUZZ
@given(body=_bodies, cut=st.integers(0, 10_000), junk=st.binary(max_size=6))
def test_cut_and_spliced_bodies_stay_within_the_contract(body: dict[str, Any], cut: int, junk: bytes) -> None:
    raw = _dump(body)
    cut = cut % (len(raw) + 1)
    json_tensor(raw[:cut] + junk + raw[cut:])
    json_tensor(raw[:cut])


@settings(max_examples=12, deadline=10_000, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 3),
    width=st.sampled_from([6000, 11_000]),
    fault=st.sampled_from(["", "]", ",", "[", "x", "1e999", "true", '"s"', "1.5.5", "--1", "[1]"]),
    where=st.floats(0, 1),
    signature=st.sampled_from(["any", "", "pair"]),
)
def test_long_runs_of_numbers_with_a_fault_stay_within_the_contract(
    rows: int, width: int, fault: str, where: float, signature: str
) -> None:
    """Bodies past 64 KiB take the run path (_json_runs.py): a fault anywhere in the run is refused within
    the contract, never an exception of numpy's or orjson's own."""
    numbers = [str(i % 97) for i in range(rows * width)]
    position = int(where * (len(numbers) - 1))
    numbers[position] = fault + numbers[position] if fault else numbers[position]
    matrix = [numbers[r * width : (r + 1) * width] for r in range(rows)]
    text = "[" + ", ".join("[" + ", ".join(row) + "]" for row in matrix) + "]"
    key = "inputs" if signature != "pair" else "instances"
    json_tensor(('{"signature_name": "' + signature + '", "' + key + '": ' + text + "}").encode())


@FUZZ
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes_stay_within_the_contract(raw: bytes) -> None:
    json_tensor(raw)


def test_the_element_bound_holds_for_a_dense_body() -> None:
    """The allocation invariant's arithmetic: a body of n one-digit numbers makes n elements, never more."""
    body = ('{"signature_name": "any", "inputs": [' + ",".join(["1"] * 40_000) + "]}").encode()
    parsed = parse_predict_body(body, json_signature)
    assert parsed.inputs["x"].size == 40_000 < len(body)
    assert math.isclose(float(parsed.inputs["x"].sum()), 40_000)


def test_an_integer_past_64_bits_beside_nan_is_read_as_rapidjson_reads_it() -> None:
    """Found by the live fuzzing (tests/test_fuzz_live.py): with NaN in the body the parser falls back to
    Python's json, which reads -9223372036854775809 as an int no 64-bit type holds; the refusal's debug
    string (orjson) then raised TypeError, a 500 with no JSON. rapidjson reads such an integer as a double
    (reader.h ParseNumber), and so does the fallback now."""
    body = b'{"inputs": {}, "instances": [{"a": -9223372036854775809, "b": NaN}]}'
    message = _error(body)
    assert "-9.223372036854776e+18" in message and "expecting only one of 'inputs' or 'instances'" in message
    parsed = parse_predict_body(b'{"signature_name": "any", "inputs": [NaN, 18446744073709551616]}', json_signature)
    assert parsed.inputs["x"][1] == 2.0**64


def test_a_malformed_number_beside_nan_and_a_number_too_big_is_refused_at_the_number() -> None:
    """Found by atheris (make fuzz): with NaN in the body and a number past DBL_MAX, the search for that
    number's offset read '99999999998e999999999999e999999' as one token and float() raised ValueError out
    of the parser. Numbers are now found by JSON's own grammar: the first one past DBL_MAX is named."""
    body = b'{"signature_name": "any", "inputs": [NaN, 99999999998e999999999999e999999]}'
    assert _error(body) == TOO_BIG + str(body.index(b"99999999998e"))
