"""The server-side view of one point, from the server's Prometheus metrics (a scrape before and after it).

Owner: H1b (metrics). Produced by ``serve_bench.metrics.breakdown``; embedded in a
Point as ``Point.server``. Field names that meant the same thing in schema-1
points (queue_us_mean, compute_us_mean, ...) keep their names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["IMPRECISE", "ServerView"]

IMPRECISE = 0.01  # a mean known to worse than ±1% (from 6-significant-digit sums) is flagged


@dataclass(frozen=True)
class ServerView:
    """Where the server's time went during a point, and how big its batches were.

    Times are means over the point in microseconds; None when the server recorded
    nothing for that figure. How each is derived from TF Serving's metrics:

    * ``requests`` = predict requests that succeeded (``request_latency`` count for
      ``API="Predict", entrypoint="GRPC"`` and/or ``API="predict", entrypoint="REST"``)
      + ``errors`` (``request_count`` with a status other than OK, whatever the call).
    * ``other_requests``: OK requests that were not predicts (REST model-status and
      metadata GETs, health checks); they never count as requests.
    * ``request_us_mean``: the predict requests' ``request_latency`` mean.
    * ``runtime_us_mean``: ``runtime_latency`` (API="Predict"), which TF Serving times
      around the session's Run; with batching that Run includes the batching queue.
    * ``queue_us_mean``: ``batching_session:queuing_latency`` mean (per batched task).
    * ``compute_us_mean``: runtime minus queueing when batching is on, else runtime.
    * ``overhead_us_mean``: request minus runtime (parsing, validation, encoding).
    * ``tf_calls``: batches run (``wrapped_run_count``) with batching, else runtime calls.
    * ``precision``: the largest relative uncertainty of a mean above that comes from
      TF Serving writing running sums with six significant digits.
    """

    available: bool = True
    reason: str = ""  # why not available
    entrypoint: str = ""  # "GRPC", "REST", or "" (both counted)
    requests: float = 0.0
    errors: float = 0.0
    other_requests: float = 0.0
    request_us_mean: float | None = None
    runtime_us_mean: float | None = None
    queue_us_mean: float | None = None
    compute_us_mean: float | None = None
    overhead_us_mean: float | None = None
    batching: bool = False
    tf_calls: float = 0.0
    input_batch_mean: float | None = None
    processed_batch_mean: float | None = None
    padding_share: float | None = None
    precision: float = 0.0
    notes: tuple[str, ...] = ()

    @classmethod
    def unavailable(cls, reason: str) -> ServerView:
        return cls(available=False, reason=reason)

    @property
    def imprecise(self) -> bool:
        return self.precision > IMPRECISE

    def flags(self) -> tuple[str, ...]:
        flags: list[str] = []
        if not self.available:
            flags.append("server metrics unavailable")
        if self.errors:
            flags.append("server errors")
        if self.imprecise:
            flags.append("server metrics imprecise")
        return tuple(flags)

    def describe(self) -> str:
        """One line: "server 10.2 ms = queue 3.0 + compute 6.0 + overhead 1.2; batch 7.8 (padding 3%)"."""
        if not self.available:
            return f"server metrics unavailable ({self.reason})" if self.reason else ""
        parts: list[str] = []
        if self.request_us_mean is not None:
            text = f"server {self.request_us_mean / 1000:.1f} ms"
            pieces = [
                (name, value)
                for name, value in (
                    ("queue", self.queue_us_mean),
                    ("compute", self.compute_us_mean),
                    ("overhead", self.overhead_us_mean),
                )
                if value is not None
            ]
            if pieces:
                text += " = " + " + ".join(f"{name} {value / 1000:.1f}" for name, value in pieces)
            parts.append(text)
        if self.processed_batch_mean:
            text = f"server batch {self.processed_batch_mean:.1f}"
            if self.padding_share:
                text += f" (padding {self.padding_share:.0%})"
            parts.append(text)
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerView:
        """Read to_dict()'s output, or a schema-1 ``server`` object (unknown keys are dropped)."""
        values: dict[str, Any] = {}
        for spec in dataclasses.fields(cls):
            if spec.name not in data:
                continue
            value = data[spec.name]
            if spec.name == "notes":
                value = tuple(str(v) for v in value or ())
            elif spec.name in ("available", "batching"):
                value = bool(value)
            elif spec.name in ("reason", "entrypoint"):
                value = str(value)
            elif value is not None:
                value = float(value)
            values[spec.name] = value
        return cls(**values)
