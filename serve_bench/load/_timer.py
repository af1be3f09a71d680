"""A precise one-shot timer the event loop can wait on: Linux's timerfd, through ctypes.

asyncio's own timers wake the loop through epoll's timeout, which selectors round
up to whole milliseconds, so a send due at t goes out up to 1 ms late. A timerfd
armed for t (absolute CLOCK_MONOTONIC, the clock behind time.perf_counter on Linux)
becomes readable at t to the kernel's timer precision, and the loop watches it
like a socket: one wake-up, no helper thread, no hand-over of the GIL.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import sys

__all__ = ["PreciseTimer", "precise_timer"]

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = 0o4000
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1
_PR_SET_TIMERSLACK = 29
_PR_GET_TIMERSLACK = 30


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class PreciseTimer:
    """A timerfd: ``arm(when)`` with a time.perf_counter() value; ``fd`` turns readable then."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._libc = libc
        self.fd = int(libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC))
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        # the kernel adds the thread's timer slack (50 µs by default) to every wake-up: ask
        # for 1 ns while the timer lives, and give the thread its own slack back on close()
        self._slack = int(libc.prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0))
        libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)

    def arm(self, when: float) -> None:
        fraction, whole = math.modf(max(when, 1e-9))
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(int(whole), max(1, int(fraction * 1e9))))
        if self._libc.timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) < 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def clear(self) -> None:
        """Consume the expiry so the descriptor stops being readable."""
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass

    def close(self) -> None:
        os.close(self.fd)
        if self._slack > 0:
            self._libc.prctl(_PR_SET_TIMERSLACK, self._slack, 0, 0, 0)


def precise_timer() -> PreciseTimer | None:
    """A PreciseTimer where the platform has timerfd (Linux), else None (callers fall back to a thread)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return PreciseTimer(ctypes.CDLL(name, use_errno=True))
    except (OSError, AttributeError):
        return None
