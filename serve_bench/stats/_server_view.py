"""The server-side view of one point, from the server's Prometheus metrics (a scrape before and after it).

Owner: H1b (metrics). Produced by ``serve_bench.metrics`` (``breakdown`` for TF Serving and
the local server, ``server_breakdown`` for any server it reads: Triton, MLServer too); embedded
in a Point as ``Point.server``. Field names that meant the same thing in schema-1 points
(queue_us_mean, compute_us_mean, ...) keep their names. Fields added later default to
None/empty, so a point written before them reads as it was written.
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
    nothing for that figure (or does not record it at all). ``source`` says whose
    page the figures come from: "" TF Serving (and the local server, which writes
    TF Serving's page), "triton", "mlserver".

    How each is derived from TF Serving's metrics:

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

    From Triton's (``nv_inference_*``, per model, all its versions; core ``src/infer_stats.cc``):

    * ``requests`` = ``request_success`` + ``request_failure`` (every reason); ``errors`` =
      the failures. Malformed requests refused before they reach the scheduler (a shape
      that does not fit the data, seen on 2.51) are in neither: answered, never counted.
    * ``request_us_mean``: ``request_duration_us`` per successful request, from the core
      receiving the request (after the HTTP/gRPC front end parsed it) to its statistics
      being reported after the response was sent; Triton times no front end.
    * ``queue_us_mean``: ``queue_duration_us`` per request (scheduler queue to execution).
    * ``compute_us_mean`` = ``compute_input_us_mean`` + ``compute_infer_us_mean`` +
      ``compute_output_us_mean``, each per request; a request batched with others is
      charged its whole execution's time.
    * ``runtime_us_mean`` = queue + compute; ``overhead_us_mean`` = request minus that
      (time in the core outside the queue and the model).
    * ``executions``: model executions (``exec_count``); ``processed_batch_mean``: rows
      per execution (``inference_count`` / ``exec_count``); ``input_batch_mean``: rows per
      request; ``requests_per_execution``: successful requests per execution;
      ``batching``: executions merged requests (fewer executions than requests).
    * ``batch_executions``: (executed batch size, executions) over the point, from
      Triton's statistics API (``/v2/models/{m}/stats`` ``batch_stats``) when reachable.
    * ``precision``: Triton adds each request's durations in whole microseconds
      (truncated), so each mean is low by less than 1 µs: 1 µs over the request mean.

    From MLServer's (``model_infer_request_*`` per model, all versions; the front end's
    ``rest_server_*`` or ``grpc_server_*``; ``parallel_request_queue``; ``batch_request_queue``):

    * ``requests`` = ``model_infer_request_success`` + ``_failure``; ``errors`` = the failures.
    * ``request_us_mean``: the front end's time per infer call (REST: the middleware's
      ``rest_server_request_duration_seconds`` for POST ``…/infer``; gRPC:
      ``grpc_server_handling_seconds`` of ``ModelInfer``), every status, every model.
    * ``runtime_us_mean``: ``model_infer_request_duration`` (the data plane's infer: the
      adaptive-batching queue, the worker process and the model together).
    * ``overhead_us_mean``: request minus runtime (parsing, encoding, the front end).
    * ``executions``: calls into the worker processes (``parallel_request_queue``
      observations: one per adaptive batch, server-wide; None when the model runs in the
      main process, ``parallel_workers`` 0); ``requests_per_execution``: requests per
      execution; ``batching``: the model's adaptive batcher queued requests
      (``batch_request_queue``, also absent without worker processes).
    * Not told by MLServer: queue and compute apart, the compute split, rows per
      execution, per-batch-size counts (the view's ``notes`` say so).
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
    # added with Triton and MLServer (absent from older points: the defaults)
    source: str = ""  # "" TF Serving's page (or the local server's), "triton", "mlserver"
    compute_input_us_mean: float | None = None
    compute_infer_us_mean: float | None = None
    compute_output_us_mean: float | None = None
    executions: float | None = None
    requests_per_execution: float | None = None
    batch_executions: tuple[tuple[int, int], ...] = ()  # (executed batch size, executions), by size

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
        """One line: "server 10.2 ms = queue 3.0 + compute 6.0 + overhead 1.2; server batch 7.8 (padding 3%)".

        Triton's reads "…; executed batch 6.1" (rows per execution); MLServer's, which times
        no queue or compute apart, "server 9.1 ms = runtime 8.4 + overhead 0.7; executed batch
        2.5 requests" (it counts requests, not rows, per execution).
        """
        if not self.available:
            return f"server metrics unavailable ({self.reason})" if self.reason else ""
        parts: list[str] = []
        if self.request_us_mean is not None:
            text = f"server {self.request_us_mean / 1000:.1f} ms"
            split: list[tuple[str, float | None]] = [("queue", self.queue_us_mean), ("compute", self.compute_us_mean)]
            if self.queue_us_mean is None and self.compute_us_mean is None:
                split = [("runtime", self.runtime_us_mean)]  # MLServer times the two together
            pieces = [
                (name, value) for name, value in (*split, ("overhead", self.overhead_us_mean)) if value is not None
            ]
            if pieces:
                text += " = " + " + ".join(f"{name} {value / 1000:.1f}" for name, value in pieces)
            parts.append(text)
        if self.processed_batch_mean:
            text = f"{'server' if not self.source else 'executed'} batch {self.processed_batch_mean:.1f}"
            if self.padding_share:
                text += f" (padding {self.padding_share:.0%})"
            parts.append(text)
        elif self.requests_per_execution:
            parts.append(f"executed batch {self.requests_per_execution:.1f} requests")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerView:
        """Read to_dict()'s output, or a schema-1 ``server`` object (unknown keys are dropped,
        missing ones take their defaults)."""
        values: dict[str, Any] = {}
        for spec in dataclasses.fields(cls):
            if spec.name not in data:
                continue
            value = data[spec.name]
            if spec.name == "notes":
                value = tuple(str(v) for v in value or ())
            elif spec.name == "batch_executions":
                value = tuple((int(size), int(count)) for size, count in value or ())
            elif spec.name in ("available", "batching"):
                value = bool(value)
            elif spec.name in ("reason", "entrypoint", "source"):
                value = str(value)
            elif value is not None:
                value = float(value)
            values[spec.name] = value
        return cls(**values)
