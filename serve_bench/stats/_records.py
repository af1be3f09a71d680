"""One record per request: what the load generators produce and everything else consumes."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["OK", "RequestRecord"]

OK = "OK"


class RequestRecord(NamedTuple):
    """Times are time.perf_counter() seconds (CLOCK_MONOTONIC: comparable across processes)."""

    intended: float  # when the request was due (open loop: its scheduled time; closed loop: its send)
    sent: float  # when it was handed to the transport
    done: float  # when the response was fully received and decoded
    status: str  # "OK" or the error's status (gRPC code name or HTTP status)
    items: int  # images in the request
    nbytes: int  # request size on the wire
    decode_seconds: float  # time spent decoding the response (inside done - sent)
    # the client's error class (a ServeBenchError subclass; stats does not import the client) or None when OK:
    # callers test the class (issubclass(record.error, ConnectError)), never the status text
    error: type[Exception] | None = None
