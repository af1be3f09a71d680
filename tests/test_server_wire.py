"""server/_wire.py finds each input's tensor_content where protobuf's own parse finds it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serve_bench import _protos
from serve_bench._protos import varint as _varint
from serve_bench.client._grpc import encode_predict_request
from serve_bench.server._wire import content_spans, split_contents


def _tensor(content: bytes) -> bytes:
    proto = _protos.message("tensorflow.TensorProto")(dtype=1, tensor_content=content)
    return proto.SerializeToString()


def _entry(key: bytes, value: bytes, extra: bytes = b"") -> bytes:
    """An ``inputs`` map entry (PredictRequest field 2): key, value, then ``extra`` fields inside the entry."""
    body = b"\x0a" + bytes([len(key)]) + key + b"\x12" + _varint(len(value)) + value + extra
    return b"\x12" + _varint(len(body)) + body


def _keyless(value: bytes, extra: bytes = b"") -> bytes:
    body = b"\x12" + _varint(len(value)) + value + extra
    return b"\x12" + _varint(len(body)) + body


def _agrees(data: bytes) -> None:
    """Every alias the parse holds: the span's bytes are its tensor_content (none where that is empty)."""
    parsed = _protos.message("tensorflow.serving.PredictRequest").FromString(data)
    spans = content_spans(data)
    assert spans is not None
    if not spans:  # no content to leave out: the request is left to protobuf's parse
        assert split_contents(data) is None
        assert not any(tensor.tensor_content for tensor in parsed.inputs.values())
        return
    for alias, tensor in parsed.inputs.items():
        offset, size = spans.get(alias, (0, 0))
        assert data[offset : offset + size] == tensor.tensor_content, alias
    assert set(spans) <= set(parsed.inputs)
    split = split_contents(data)
    assert split is not None
    stripped = _protos.message("tensorflow.serving.PredictRequest").FromString(split[0])
    assert split[1] == spans
    for alias in list(stripped.inputs):
        assert stripped.inputs[alias].tensor_content == b""
        offset, size = spans.get(alias, (0, 0))
        stripped.inputs[alias].tensor_content = data[offset : offset + size]
    assert stripped == parsed  # all else as parsed from the whole request


def test_what_the_client_sends() -> None:
    images = np.arange(2 * 5 * 5 * 3, dtype=np.float32).reshape(2, 5, 5, 3)
    _agrees(encode_predict_request("m", 3, "serving_default", {"images": images, "k": np.zeros(0, np.int64)}))


@pytest.mark.parametrize(
    "data",
    [
        # the same key twice: the last entry wins whole, though it has no content
        _entry(b"x", _tensor(b"abcd")) + _entry(b"x", _tensor(b"")),
        _entry(b"x", _tensor(b"")) + _entry(b"x", _tensor(b"efgh")),
        # one entry's value sent in two parts: they merge, the last content wins
        _entry(b"x", _tensor(b"abcd") + _tensor(b"efgh")),
        _entry(b"x", _tensor(b"abcd") + b"\x08\x01"),
        # a key missing: the empty alias
        _keyless(_tensor(b"abcd")),
        # unknown fields at each level, and output_filter beside
        b"\x1a\x01y\xa0\x06\x07" + _entry(b"x", b"\xa0\x06\x07" + _tensor(b"abcd")),
    ],
)
def test_protobuf_merge_rules(data: bytes) -> None:
    _agrees(data)


def test_an_entry_with_a_field_besides_key_and_value_is_left_to_the_parse() -> None:
    """upb does not merge a map entry holding any other field (here field 3, as a varint or empty; or the value
    sent as a varint): the whole entry becomes an unknown field of the request, and an earlier entry of its key stands.
    The walk took the later entry: BBBB decoded under AAAA's dtype and shape, for requests over 256 KiB alone."""
    request = _protos.message("tensorflow.serving.PredictRequest")
    for odd in (b"\x18\x01", b"\x10\x01", b"\x1a\x00"):  # field 3 as a varint; the value as one; field 3 empty
        data = _entry(b"x", _tensor(b"AAAA")) + _entry(b"x", _tensor(b"BBBB"), odd)
        assert request.FromString(data).inputs["x"].tensor_content == b"AAAA"
        assert content_spans(data) is None and split_contents(data) is None


def test_groups_and_truncation_are_left_to_the_parse() -> None:
    for data in (b"\x12\x03\x0b\x0c\x00", b"\x12\x05\x0a\x01"):  # a group inside an entry; an entry too long
        assert content_spans(data) is None
        assert split_contents(data) is None


_PARTS = st.sampled_from(
    [
        b"",
        b"\x08\x01",  # dtype
        b"\xa0\x06\x07",  # an unknown varint field
        b"\x22\x00",  # an empty tensor_content
        b"\x22\x04abcd",
        b"\x22\x02ef",
        b"\x2d\x00\x00\x80\x3f",  # float_val 1.0, fixed32
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"x", b"y", b""]),
            st.lists(st.lists(_PARTS, max_size=4), min_size=1, max_size=3),
            st.sampled_from([b"", b"", b"", b"\x18\x01", b"\x1a\x00"]),  # now and then a field an entry may not hold
        ),
        max_size=5,
    )
)
def test_any_mix_of_entries_agrees_with_protobuf(entries: list[tuple[bytes, list[list[bytes]], bytes]]) -> None:
    """Entries of a few keys (repeated, keyless), each value sent in one to three parts of TensorProto fields
    (contents of several sizes, empty, none; other fields between), now and then an entry with a field besides
    key and value: wherever protobuf's merge rules put the last word, the walk finds the same content and the
    stripped parse the same everything else, or (an odd entry anywhere) it leaves the request to protobuf."""
    data = b"".join(
        _entry(key, b"".join(map(b"".join, parts)), odd) if key else _keyless(b"".join(map(b"".join, parts)), odd)
        for key, parts, odd in entries
    )
    if any(odd for *_, odd in entries):
        assert content_spans(data) is None and split_contents(data) is None
    else:
        _agrees(data)
