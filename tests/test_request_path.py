"""The local server's request path kept cheap without changing what it answers (issue 31 item 4).

Each speed-up of the gRPC Predict path (benchmarks/server_overhead.py measures them) has its guard
here: a count computed without numpy equal to numpy's, even where int64 wraps; a request's
tensor_content read once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from serve_bench.codec import element_count, from_tensor_proto, to_tensor_proto
from serve_bench.server._grpc import GrpcService


@pytest.mark.parametrize(
    "shape",
    [(), (0,), (1, 64, 64, 3), (5400, 64, 64, 3), (2**51, 64, 64, 3), (2**52 + 1, 64, 64, 3), (2**62, 4), (3**40,)],
)
def test_element_count_is_numpys_int64_product(shape):
    """The count the server checks against its caps is np.prod's, wrapping past 2**63 as int64 does (a
    hostile shape's count wraps the same as before, so what the server answers it is unchanged)."""
    assert element_count(shape) == int(np.prod(shape, dtype=np.int64))


def test_from_tensor_proto_decodes_the_content_it_is_given():
    proto = to_tensor_proto(np.zeros((2, 3), np.float32))
    content = np.arange(6, dtype="<f4").tobytes()
    decoded = from_tensor_proto(proto, tensor_content=content)
    assert decoded.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert np.shares_memory(decoded, np.frombuffer(content, np.uint8))  # a view: no copy of its own


class _CountingTensor:
    """A TensorProto that counts the reads of tensor_content (protobuf copies the bytes at each one)."""

    def __init__(self, tensor: Any) -> None:
        self._tensor = tensor
        self.content_reads = 0

    @property
    def tensor_content(self) -> bytes:
        self.content_reads += 1
        return bytes(self._tensor.tensor_content)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tensor, name)


class _Request:
    def __init__(self, inputs: dict[str, Any]) -> None:
        self.inputs = inputs


class _Core:
    class config:  # what GrpcService reads of ServerConfig
        max_body_bytes = 256 << 20


@pytest.mark.parametrize("values", ["tensor_content", "float_val"])
def test_a_requests_tensor_content_is_read_once(values):
    """InceptionV3 at batch 8 sends 8.6 MB: each read of tensor_content copied it (0.26 ms), and decoding
    read it five times."""
    images = np.random.default_rng(0).uniform(0, 255, (2, 4, 4, 3)).astype(np.float32)
    tensor = to_tensor_proto(images, typed_fields=values == "float_val")
    counting = _CountingTensor(tensor)
    decoded = GrpcService(_Core())._decode_inputs(_Request({"images": counting}), {"images": images.shape})  # type: ignore[arg-type]
    assert counting.content_reads == 1
    assert np.array_equal(decoded["images"], images)
