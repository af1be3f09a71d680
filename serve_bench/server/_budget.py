"""The memory that requests' tensors may hold at once, shared by the REST and gRPC front ends.

TF Serving has no such bound (it allocates whatever a request declares, tensor.cc FromProto);
serve-bench keeps one so that a few hostile requests cannot take the machine's memory.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import threading

__all__ = ["COST_FACTOR", "TRIM_AFTER_BYTES", "MemoryBudget", "release_freed_memory", "trim_soon"]

# A body's bytes, then at most about twice that while it is parsed (see _json_tensor); a gRPC
# tensor's declared bytes, TensorFlow's copy of them and the run's own tensors.
COST_FACTOR = 3


class MemoryBudget:
    """Bytes that request bodies and decoded tensors may hold at once, across all requests.

    A request reserves what it will hold before allocating it; past the budget it is refused
    (retry later) or, when it could never fit, refused for good.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0
        self._lock = threading.Lock()

    def try_take(self, amount: int) -> bool:
        with self._lock:
            if self.held + amount > self.total:
                return False
            self.held += amount
            return True

    def give(self, amount: int) -> None:
        with self._lock:
            self.held -= amount


def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_TRIM = _malloc_trim()
# Below this a request's memory is not worth a trim (it takes a few milliseconds).
TRIM_AFTER_BYTES = 32 << 20


def release_freed_memory() -> None:
    """Hand memory freed by finished requests back to the OS.

    glibc keeps freed heap and thread-arena pages for reuse, so a server that parsed two 200 MB
    bodies would stay hundreds of MB larger for good; malloc_trim(0) returns every free page of
    every arena. A no-op where the C library has no malloc_trim (musl, macOS).
    """
    if _TRIM is not None:
        _TRIM(0)


# A trim waits this long after a large request ends: by then its connection's buffers are freed too.
_TRIM_DELAY_S = 0.5
_pending: dict[asyncio.AbstractEventLoop, asyncio.TimerHandle] = {}


def trim_soon(loop: asyncio.AbstractEventLoop) -> None:
    """Run release_freed_memory on a worker thread shortly, once for any number of calls meanwhile."""

    def run() -> None:
        _pending.pop(loop, None)
        loop.run_in_executor(None, release_freed_memory)

    if loop not in _pending:
        _pending[loop] = loop.call_later(_TRIM_DELAY_S, run)
