"""Where each input's ``tensor_content`` lies in a serialized PredictRequest, read off the wire format.

Reading ``tensor_content`` from a parsed message copies it (protobuf hands out a new ``bytes`` at every
read): at InceptionV3 batch 256, 275 MB into fresh pages per request. A view of the bytes gRPC gave
costs nothing, so the server walks the request's wire format once to find each content's offset.
"""

from __future__ import annotations

__all__ = ["content_spans"]

# PredictRequest: inputs = 2 (map<string, TensorProto>); a map entry: key = 1, value = 2; TensorProto:
# tensor_content = 4 (tensorflow_serving/apis/predict.proto, tensorflow/core/framework/tensor.proto).
_INPUTS, _KEY, _VALUE, _CONTENT = 2, 1, 2, 4


class _Odd(Exception):
    """Wire data the walk does not follow (groups, truncation); the caller reads the parsed message instead."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
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


def _fields(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each field in data[start:end]; for wire type 2 the
    span is the payload's, for the others the value's encoding."""
    fields = []
    pos = start
    while pos < end:
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, after = _varint(data, pos)
        elif wire == 1:
            after = pos + 8
        elif wire == 5:
            after = pos + 4
        elif wire == 2:
            size, pos = _varint(data, pos)
            after = pos + size
        else:  # groups (3, 4) and invalid wire types
            raise _Odd
        if after > end:
            raise _Odd
        fields.append((number, wire, pos, after))
        pos = after
    return fields


def content_spans(data: bytes) -> dict[str, tuple[int, int]] | None:
    """Each input alias -> (offset, length) of the ``tensor_content`` its parsed TensorProto holds, for
    the inputs that hold one; None where the walk meets something it does not follow.

    Follows protobuf's merge rules, as the parser that produced the message did: of map entries with
    the same key the last one wins whole; within an entry the value's occurrences merge, so the last
    ``tensor_content`` among them wins; within a TensorProto the last occurrence of a field wins.
    """
    try:
        spans: dict[str, tuple[int, int] | None] = {}
        for number, wire, start, end in _fields(data, 0, len(data)):
            if number != _INPUTS or wire != 2:
                continue
            key = b""
            span: tuple[int, int] | None = None
            for e_number, e_wire, e_start, e_end in _fields(data, start, end):
                if e_number == _KEY and e_wire == 2:
                    key = data[e_start:e_end]
                elif e_number == _VALUE and e_wire == 2:
                    for t_number, t_wire, t_start, t_end in _fields(data, e_start, e_end):
                        if t_number == _CONTENT and t_wire == 2:
                            span = (t_start, t_end - t_start)
            spans[key.decode("utf-8", "strict")] = span
    except (_Odd, UnicodeDecodeError):
        return None
    return {alias: span for alias, span in spans.items() if span is not None and span[1]}
