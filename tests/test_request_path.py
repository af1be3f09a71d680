"""The local server's request path kept cheap without changing what it answers (issue 31 item 4).

Each speed-up of the gRPC Predict path (benchmarks/server_overhead.py measures them) has its guard
here: a count computed without numpy equal to numpy's, even where int64 wraps; a request's
tensor_content read once; the worker threads that replaced run_in_executor keeping
ThreadPoolExecutor's semantics; the C heap keeping a request's buffers for the next.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from serve_bench.codec import element_count, from_tensor_proto, to_tensor_proto
from serve_bench.server._core import _Workers
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
    decoded = GrpcService(_Core())._decode_inputs(_Request({"images": counting}), b"", None, {"images": images.shape})  # type: ignore[arg-type]
    assert counting.content_reads == 1
    assert np.array_equal(decoded["images"], images)


def test_a_large_requests_tensor_content_is_a_view_of_the_bytes_received():
    """From 256 KiB on the request is parsed without its tensor_content and each input decoded as a view
    of the bytes gRPC gave: protobuf copied the content when parsing and again when it was read."""
    from serve_bench import _protos
    from serve_bench.client._grpc import encode_predict_request
    from serve_bench.server._grpc import Received, _parser

    images = np.random.default_rng(0).uniform(0, 255, (1, 299, 299, 3)).astype(np.float32)
    data = encode_predict_request("m", None, "serving_default", {"images": images})
    received = _parser(_protos.message("tensorflow.serving.PredictRequest"), True)(data)
    assert isinstance(received, Received) and received.spans is not None
    assert received.message.inputs["images"].tensor_content == b""  # left out of the parse
    decoded = GrpcService(_Core())._decode_inputs(  # type: ignore[arg-type]
        received.message, data, received.spans, {"images": images.shape}
    )
    assert np.array_equal(decoded["images"], images)
    assert np.shares_memory(decoded["images"], np.frombuffer(data, np.uint8))


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_workers_answer_results_and_exceptions():
    async def main() -> None:
        workers = _Workers(2, "predict")
        try:
            assert await workers.run(lambda a, b: a + b, 2, 3) == 5
            with pytest.raises(KeyError, match="boom"):
                await workers.run(lambda: {}["boom"])
        finally:
            workers.close()

    _run(main())


def test_workers_run_up_to_their_size_at_once_and_no_more():
    size = 3
    inside, most, lock = 0, 0, threading.Lock()
    release = threading.Event()

    def job() -> None:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        release.wait(10)
        with lock:
            inside -= 1

    async def main() -> None:
        workers = _Workers(size, "predict")
        try:
            runs = [workers.run(job) for _ in range(size + 2)]
            for _ in range(200):  # until the pool is full
                if inside == size:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            assert inside == size  # the other two wait for a thread
            release.set()
            await asyncio.gather(*runs)
            assert len(workers._threads) == size
        finally:
            workers.close()

    _run(main())
    assert most == size


def test_a_run_cancelled_before_it_starts_is_not_run():
    """As a ThreadPoolExecutor's work item whose future was cancelled: the model never sees the request
    (and runtime_latency never counts it)."""
    ran: list[str] = []
    release = threading.Event()

    async def main() -> None:
        workers = _Workers(1, "predict")
        try:
            busy = workers.run(release.wait, 10)
            queued = workers.run(ran.append, "queued")
            queued.cancel()
            release.set()
            await busy
            assert await workers.run(ran.append, "later") is None
        finally:
            workers.close()

    _run(main())
    assert ran == ["later"]


def test_close_finishes_queued_runs_and_then_refuses_new_ones():
    done: list[int] = []

    async def main() -> None:
        workers = _Workers(1, "predict")
        for number in range(3):
            workers.run(done.append, number)
        workers.close()  # as ThreadPoolExecutor.shutdown(wait=True)
        assert done == [0, 1, 2]
        with pytest.raises(RuntimeError, match="after shutdown"):
            workers.run(done.append, 3)

    _run(main())


_HEAP_PROBE = """
import ctypes, sys

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
if not hasattr(libc, "mallinfo2"):
    print("no mallinfo2"); sys.exit(0)
libc.mallinfo2.restype = MallInfo2
from serve_bench.server._core import keep_request_buffers
if sys.argv[1] == "kept":
    assert keep_request_buffers()
before = libc.mallinfo2().hblks
block = bytearray(24 << 20)  # a request's tensor: InceptionV3 at batch 8 is 8.6 MB, held three times
mapped = libc.mallinfo2().hblks - before
del block
print(mapped, libc.mallinfo2().arena >= 24 << 20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_the_heap_keeps_a_requests_buffers_for_the_next():
    """By default glibc maps a block of 24 MB on its own and unmaps it when freed, so the next request's
    block arrives as fresh pages, each faulted in (InceptionV3: 3.6 ms per image served on a 2-core VM
    instead of 1.2 ms). Kept: the block comes from the heap, and the heap keeps it once freed."""
    lines = {}
    for mode in ("default", "kept"):
        done = subprocess.run([sys.executable, "-c", _HEAP_PROBE, mode], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        lines[mode] = done.stdout.split()
    if lines["kept"] == ["no", "mallinfo2"]:
        pytest.skip("the C library has no mallinfo2 (not glibc 2.33+)")
    assert lines["default"] == ["1", "False"]  # mapped on its own, gone once freed
    assert lines["kept"] == ["0", "True"]
