"""Where each input's ``tensor_content`` lies in a serialized PredictRequest, read off the wire format.

Reading ``tensor_content`` from a parsed message copies it (protobuf hands out a new ``bytes`` at every
read): at InceptionV3 batch 256, 275 MB into fresh pages per request. A view of the bytes gRPC gave
costs nothing, so the server walks the request's wire format once to find each content's offset.
"""

from __future__ import annotations

from serve_bench._protos import varint

__all__ = ["content_spans", "split_contents"]

# PredictRequest: inputs = 2 (map<string, TensorProto>); a map entry: key = 1, value = 2; TensorProto:
# tensor_content = 4 (tensorflow_serving/apis/predict.proto, tensorflow/core/framework/tensor.proto).
_INPUTS, _KEY, _VALUE, _CONTENT = 2, 1, 2, 4


class _Odd(Exception):
    """Wire data the walk does not follow (groups, truncation); the caller reads the parsed message instead."""


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Odd
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """(field number, wire type, start, end, tag's start) of each field in data[start:end]; for wire
    type 2 the span is the payload's, for the others the value's encoding."""
    fields = []
    pos = start
    while pos < end:
        tag_start = pos
        tag, pos = _read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, after = _read_varint(data, pos)
        elif wire == 1:
            after = pos + 8
        elif wire == 5:
            after = pos + 4
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            after = pos + size
        else:  # groups (3, 4) and invalid wire types
            raise _Odd
        if after > end:
            raise _Odd
        fields.append((number, wire, pos, after, tag_start))
        pos = after
    return fields


def _entry_fields(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """A map entry's fields: its key and value, each length-prefixed. Anything else in an entry (an unknown
    field, a key sent as a varint) makes upb keep the whole entry as an unknown field of the request rather
    than merge it into the map, so the walk leaves such a request to protobuf's parse (_Odd)."""
    fields = _fields(data, start, end)
    if any(number not in (_KEY, _VALUE) or wire != 2 for number, wire, *_ in fields):
        raise _Odd
    return fields


def _length_prefixed(number: int, body: bytes) -> bytes:
    """A wire-type-2 field, re-encoded (tag and length as shortest varints: the same parse)."""
    return varint(number << 3 | 2) + varint(len(body)) + body


def split_contents(data: bytes) -> tuple[bytes, dict[str, tuple[int, int]]] | None:
    """``data`` with every input's ``tensor_content`` left out (a request protobuf parses without
    copying them), and where the content each input holds lies in ``data`` (content_spans); None
    where the walk meets something it does not follow."""
    spans = content_spans(data)
    if not spans:  # nothing to leave out (values in float_val, say): protobuf's own parse is the cheaper one
        return None
    try:
        parts = []
        for number, wire, start, end, tag_start in _fields(data, 0, len(data)):
            if number != _INPUTS or wire != 2:
                parts.append(data[tag_start:end])
                continue
            entry = []
            for e_number, _, e_start, e_end, e_tag in _entry_fields(data, start, end):
                if e_number != _VALUE:
                    entry.append(data[e_tag:e_end])
                    continue
                value = [
                    data[t_tag:t_end]
                    for t_number, t_wire, _, t_end, t_tag in _fields(data, e_start, e_end)
                    if t_number != _CONTENT or t_wire != 2
                ]
                entry.append(_length_prefixed(_VALUE, b"".join(value)))
            parts.append(_length_prefixed(_INPUTS, b"".join(entry)))
    except _Odd:
        return None
    return b"".join(parts), spans


def content_spans(data: bytes) -> dict[str, tuple[int, int]] | None:
    """Each input alias -> (offset, length) of the ``tensor_content`` its parsed TensorProto holds, for
    the inputs that hold one; None where the walk meets something it does not follow.

    Follows protobuf's merge rules, as the parser that produced the message did: of map entries with
    the same key the last one wins whole; within an entry the value's occurrences merge, so the last
    ``tensor_content`` among them wins; within a TensorProto the last occurrence of a field wins.
    """
    try:
        spans: dict[str, tuple[int, int] | None] = {}
        for number, wire, start, end, _ in _fields(data, 0, len(data)):
            if number != _INPUTS or wire != 2:
                continue
            key = b""
            span: tuple[int, int] | None = None
            for e_number, _, e_start, e_end, _ in _entry_fields(data, start, end):
                if e_number == _KEY:
                    key = data[e_start:e_end]
                else:
                    for t_number, t_wire, t_start, t_end, _ in _fields(data, e_start, e_end):
                        if t_number == _CONTENT and t_wire == 2:
                            span = (t_start, t_end - t_start)
            spans[key.decode("utf-8", "strict")] = span
    except (_Odd, UnicodeDecodeError):
        return None
    return {alias: span for alias, span in spans.items() if span is not None and span[1]}
