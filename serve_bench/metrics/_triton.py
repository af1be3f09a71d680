"""Triton Inference Server's metrics page (and its statistics API) -> one point's ServerView.

What the figures mean follows Triton's sources. Lines cite triton-inference-server/core at
84868f1 (2024-09-20, the main-branch commit nearest before 2.51's r24.10 branch; the core
mirror here holds no r24.10, its HEAD is a 2026 one, newer than the 2.51 measured here, and
src/infer_stats.cc is identical there), server at tag v2.51.0, python_backend at a2564ea
(2024-10-08). The 2.51 pages recorded in tests/data agree with all of it.

* Every ``nv_inference_*`` figure used here is a cumulative counter labelled
  ``model``/``version`` (src/metric_model_reporter.cc:195-246), incremented when a
  request's statistics are reported, not sampled: only the GPU/CPU/pinned-memory gauges
  are polled on an interval (src/metrics.cc:386-425).
* Per successful request (src/infer_stats.cc:104-132): ``request_success`` +1,
  ``inference_count`` + the request's rows, and ``request_duration_us``,
  ``queue_duration_us``, ``compute_{input,infer,output}_duration_us`` + that request's
  durations in whole microseconds (``ns / 1000``, truncated). Every request of a batch is
  reported with the execution's timestamps (src/backend_model_instance.cc:967-982), so
  each is charged the whole execution's compute time.
* Per failed request: ``request_failure{reason}`` +1 (REJECTED, CANCELED, BACKEND, OTHER;
  src/infer_stats.cc:58-73), no duration.
* Per execution (src/infer_stats.cc:401-433): ``exec_count`` +1, and the statistics API's
  ``batch_stats`` entry of that execution's batch size +1 (src/tritonserver.cc:3076-3108).
* ``request_duration`` starts when the core receives the request (src/server.cc:545, after
  the HTTP/gRPC front end parsed it) and ends when its statistics are reported
  (src/infer_request.cc:1424-1443); ``queue_duration`` runs from entering the dynamic
  batcher (src/dynamic_batch_scheduler.cc:199) to the execution's start.
* The Python backend reports statistics after it sent the responses (python_backend
  src/pb_metric_reporter.cc:44-79, a destructor at the end of the scope opened at
  src/python_be.cc:2300; responses go out inside ProcessRequests, :1459-1477), so a client
  can hold its last answer before the counters include it: :func:`settled` says when the
  "after" reading has caught up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from serve_bench.metrics._exposition import fetch_text, samples
from serve_bench.stats import ServerView

__all__ = ["TritonSnapshot", "TritonStats", "parse_triton", "parse_triton_stats", "read_triton", "triton_breakdown"]

PREFIX = "nv_inference_"
_COUNTERS = (
    "request_success",
    "count",
    "exec_count",
    "request_duration_us",
    "queue_duration_us",
    "compute_input_duration_us",
    "compute_infer_duration_us",
    "compute_output_duration_us",
)


@dataclass(frozen=True)
class TritonStats:
    """The statistics API's counts for one model (all its versions): /v2/models/{m}/stats."""

    inference_count: int = 0
    execution_count: int = 0
    success_count: int = 0
    batches: dict[int, int] = field(default_factory=dict)  # executed batch size -> executions

    @property
    def executed_rows(self) -> int:
        return sum(size * count for size, count in self.batches.items())


@dataclass(frozen=True)
class TritonSnapshot:
    """One reading of Triton: the model's counters from the metrics page, and its statistics."""

    counters: dict[str, float] = field(default_factory=dict)  # name without the prefix -> value
    failures: dict[str, float] = field(default_factory=dict)  # request_failure by reason
    families: int = 0  # nv_inference_* TYPE lines on the page
    stats: TritonStats | None = None
    stats_problem: str = ""  # why ``stats`` is None ("" when it was not asked for)

    def get(self, name: str) -> float:
        return self.counters.get(name, 0.0)


def parse_triton(text: str, model: str | None) -> TritonSnapshot:
    """The model's ``nv_inference_*`` counters, summed over its versions (``model`` None: every model)."""
    counters: dict[str, float] = {}
    failures: dict[str, float] = {}
    families = sum(1 for line in text.splitlines() if line.startswith("# TYPE " + PREFIX))
    for name, labels, value in samples(text, (PREFIX,)):
        if model is not None and labels.get("model") != model:
            continue
        short = name[len(PREFIX) :]
        if short == "request_failure":
            reason = labels.get("reason", "")
            failures[reason] = failures.get(reason, 0.0) + value
        elif short in _COUNTERS:
            counters[short] = counters.get(short, 0.0) + value
    return TritonSnapshot(counters, failures, families)


def parse_triton_stats(data: Any, model: str) -> TritonStats:
    """The statistics API's answer (JSON already parsed) for ``model``, summed over its versions.

    The shape is server src/http_server.cc HandleModelStats serialising core
    src/tritonserver.cc TRITONSERVER_ServerModelStatistics: ``model_stats[]`` with
    ``inference_count``, ``execution_count``, ``inference_stats.success.count`` and
    ``batch_stats[] = {batch_size, compute_infer: {count, ns}, …}``.
    """
    inference = execution = success = 0
    batches: dict[int, int] = {}
    for entry in data.get("model_stats", []):
        if entry.get("name") != model:
            continue
        inference += int(entry.get("inference_count", 0))
        execution += int(entry.get("execution_count", 0))
        success += int(entry.get("inference_stats", {}).get("success", {}).get("count", 0))
        for batch in entry.get("batch_stats", []):
            # one count per execution, written under each of compute_input/infer/output
            size, count = int(batch["batch_size"]), int(batch["compute_infer"]["count"])
            batches[size] = batches.get(size, 0) + count
    return TritonStats(inference, execution, success, batches)


async def read_stats(stats_url: str, model: str, timeout: float) -> tuple[TritonStats | None, str]:
    text, why = await fetch_text(stats_url, timeout, "Triton's statistics API")
    if text is None:
        return None, why
    try:
        return parse_triton_stats(json.loads(text), model), ""
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"Triton's statistics API {stats_url} answered something unreadable ({exc})"


async def read_triton(
    text: str, url: str, model: str, stats_url: str, timeout: float
) -> tuple[TritonSnapshot | None, str]:
    """A fetched metrics page (and, when ``stats_url``, the statistics API read just after it)."""
    snapshot = parse_triton(text, model)
    if not snapshot.families:
        return None, f"metrics endpoint {url} has no Triton metrics (nv_inference_*)"
    if not stats_url:
        return snapshot, ""
    stats, problem = await read_stats(stats_url, model, timeout)
    return TritonSnapshot(snapshot.counters, snapshot.failures, snapshot.families, stats, problem), ""


def settled(before: TritonSnapshot, after: TritonSnapshot, answered_ok: int) -> bool:
    """True when ``after`` counts every request the client got an OK answer for, and every
    execution of them: the successes are in, and the statistics API (read after the page) saw no
    execution the page missed and no successful row left unexecuted."""
    if after.get("request_success") - before.get("request_success") < answered_ok:
        return False
    if before.stats is None or after.stats is None:
        return True
    executions = after.stats.execution_count - before.stats.execution_count
    rows = after.stats.inference_count - before.stats.inference_count
    executed_rows = after.stats.executed_rows - before.stats.executed_rows
    return executions == after.get("exec_count") - before.get("exec_count") and executed_rows >= rows


_STATS_COUNTS = ("inference_count", "execution_count", "success_count")  # TritonStats' cumulative counts


def _per_batch_size(before: TritonStats, after: TritonStats) -> tuple[tuple[int, int], ...]:
    sizes = sorted(set(before.batches) | set(after.batches))
    counts = ((size, after.batches.get(size, 0) - before.batches.get(size, 0)) for size in sizes)
    return tuple((size, count) for size, count in counts if count)


def triton_breakdown(before: TritonSnapshot, after: TritonSnapshot, entrypoint: str = "") -> ServerView:
    """Server-side view of one point from two readings of Triton (``entrypoint`` is noted only:
    Triton counts requests by model, not by the protocol they came in)."""
    delta = {name: after.get(name) - before.get(name) for name in _COUNTERS}
    reasons = sorted(set(before.failures) | set(after.failures))
    failed = {r: after.failures.get(r, 0.0) - before.failures.get(r, 0.0) for r in reasons}
    went_down = sorted(name for name, value in (*delta.items(), *failed.items()) if value < 0)
    if before.stats is not None and after.stats is not None:  # the statistics API's counts start again too
        went_down += [
            f"{n} (statistics API)" for n in _STATS_COUNTS if getattr(after.stats, n) < getattr(before.stats, n)
        ]
        went_down += [f"executions at batch size {b}" for b, n in _per_batch_size(before.stats, after.stats) if n < 0]
    if went_down:
        return ServerView.unavailable(
            f"Triton's counters went down during the point ({', '.join(went_down)}): "
            "it restarted or reloaded the model, so this point has no server-side figures"
        )
    ok, errors = delta["request_success"], sum(failed.values())
    executions = delta["exec_count"]
    notes: list[str] = []
    if errors:
        notes.append("Triton's failures by reason: " + ", ".join(f"{r} {n:.0f}" for r, n in failed.items() if n))

    def per_request(name: str) -> float | None:
        return delta[name] / ok if ok else None

    request = per_request("request_duration_us")
    queue = per_request("queue_duration_us")
    split = [per_request(f"compute_{part}_duration_us") for part in ("input", "infer", "output")]
    compute = sum(v for v in split if v is not None) if ok else None
    runtime = queue + compute if queue is not None and compute is not None else None
    batch_executions: tuple[tuple[int, int], ...] = ()
    if before.stats is not None and after.stats is not None:
        batch_executions = _per_batch_size(before.stats, after.stats)
        counted = sum(count for _, count in batch_executions)
        if counted != executions:
            notes.append(
                f"Triton's statistics API counted {counted} executions by batch size, its metrics page "
                f"{executions:.0f}: a batch was being reported between the two readings"
            )
    elif after.stats_problem or before.stats_problem:
        notes.append(f"no executions by batch size: {after.stats_problem or before.stats_problem}")
    return ServerView(
        entrypoint=entrypoint,
        requests=ok + errors,
        errors=errors,
        request_us_mean=request,
        runtime_us_mean=runtime,
        queue_us_mean=queue,
        compute_us_mean=compute,
        overhead_us_mean=max(0.0, request - runtime) if request is not None and runtime is not None else None,
        batching=0 < executions < ok,
        input_batch_mean=delta["count"] / ok if ok else None,
        processed_batch_mean=delta["count"] / executions if executions else None,
        # whole microseconds per request, truncated: each mean is low by less than 1 µs
        precision=1.0 / request if request else 0.0,
        notes=tuple(notes),
        source="triton",
        compute_input_us_mean=split[0],
        compute_infer_us_mean=split[1],
        compute_output_us_mean=split[2],
        executions=executions,
        requests_per_execution=ok / executions if executions else None,
        batch_executions=batch_executions,
    )
