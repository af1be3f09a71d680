"""MLServer's metrics page -> one point's ServerView.

What the figures mean follows MLServer 1.7.1's own sources (the installed wheel, the version
measured here; SeldonIO/MLServer at a 1.7.2-era HEAD is the same in these places), and the
names were checked on real 1.7.1 pages (tests/data/mlserver_1.7.1_*):

* ``model_infer_request_success`` / ``_failure`` (counters) and ``model_infer_request_duration``
  (a Summary, seconds), labelled ``model``/``version`` (mlserver/handlers/dataplane.py:42-56):
  the data plane's infer call, timed from the model lookup through ``predict`` (the
  adaptive-batching queue, the worker process and the model) to the response middleware,
  failures included; success is counted before the answer leaves (dataplane.py:179-194).
  ``version`` is what the request named: "None" on REST and "" on gRPC when it named none.
* The front end: REST through starlette_exporter's middleware (mlserver/rest/app.py:220-231,
  ``rest_server_request_duration_seconds`` by method, path template and status, observed
  after the response was sent), gRPC through MLServer's port of py-grpc-prometheus
  (mlserver/grpc/server.py:47-50, grpc/interceptors.py:72-130: ``grpc_server_handling_seconds``
  and ``grpc_server_handled_total`` by method). Neither carries the model's name.
* ``parallel_request_queue`` (a histogram, no labels; mlserver/parallel/dispatcher.py:41-75)
  is observed once per message sent to the worker processes: with adaptive batching one per
  merged batch (the batcher wraps the dispatching ``predict``, mlserver/server.py:73-79), plus
  load and first-metadata messages.
* ``batch_request_queue`` (histogram, ``model_name``/``model_version``) is observed once per
  request entering the adaptive batcher, with the queue's length then
  (mlserver/batching/adaptive.py:35, 65-68): its count is the requests batched; its values
  are not batch sizes.
* Both are on the page only when the server runs worker processes (``parallel_workers`` >= 1,
  the default, settings.py:37): with 0 it serves prometheus_client's default registry
  (mlserver/metrics/prometheus.py:50-57), without MLServer's own (recorded:
  tests/data/mlserver_1.7.1_workers0_*). A model whose own ``parallel_workers`` is 0 runs in
  the main process and adds no worker call.
* Nothing times the batching queue apart from the model, splits compute, or counts rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from serve_bench.metrics._exposition import samples
from serve_bench.stats import ServerView

__all__ = ["MLServerSnapshot", "mlserver_breakdown", "parse_mlserver"]

_MODEL = "model_infer_request_"
_PREFIXES = (_MODEL, "rest_server_", "grpc_server_", "parallel_request_queue", "batch_request_queue")
# TYPE lines that say the page is MLServer's even before any infer (a fresh page has no model_infer_*)
_MARKERS = tuple(f"# TYPE {name}" for name in ("model_infer_request_", "parallel_request_queue", "batch_request_queue"))
_INFER_METHOD = "ModelInfer"


@dataclass(frozen=True)
class MLServerSnapshot:
    """One reading of MLServer's page for one model (front-end and worker figures are server-wide)."""

    values: dict[str, float] = field(default_factory=dict)
    present: frozenset[str] = frozenset()  # front ends seen: "rest", "grpc"
    families: int = 0

    def get(self, name: str) -> float:
        return self.values.get(name, 0.0)


def _is_infer_path(path: str) -> bool:
    # starlette_exporter labels the route template: /v2/models/{model_name}[/versions/{model_version}]/infer
    return path.endswith("/infer")


def _front_end(name: str, labels: dict[str, str]) -> tuple[str, str] | None:
    """(front end, figure) a front-end sample adds to, or None; figure: infer_count/_sum, infer_ok, other_ok."""
    if name.startswith("rest_server_"):
        if labels.get("app_name") != "mlserver":
            return None
        infer = labels.get("method") == "POST" and _is_infer_path(labels.get("path", ""))
        if name == "rest_server_request_duration_seconds_count" and infer:
            return "rest", "infer_count"
        if name == "rest_server_request_duration_seconds_sum" and infer:
            return "rest", "infer_sum"
        if name == "rest_server_requests_total" and labels.get("status_code", "").startswith("2"):
            return "rest", "infer_ok" if infer else "other_ok"
        return None
    infer = labels.get("grpc_method") == _INFER_METHOD
    if name == "grpc_server_handling_seconds_count" and infer:
        return "grpc", "infer_count"
    if name == "grpc_server_handling_seconds_sum" and infer:
        return "grpc", "infer_sum"
    if name == "grpc_server_handled_total" and labels.get("grpc_code") == "OK":
        return "grpc", "infer_ok" if infer else "other_ok"
    return None


def parse_mlserver(text: str, model: str | None) -> MLServerSnapshot:
    """The model's figures (summed over its versions) and the server-wide ones; ``model`` None: every model."""
    values: dict[str, float] = {}
    present: set[str] = set()
    families = sum(1 for line in text.splitlines() if line.startswith(_MARKERS))
    if 'app_name="mlserver"' in text:  # starlette_exporter's label (rest/app.py:223): MLServer's page too
        families += 1

    def add(key: str, value: float) -> None:
        values[key] = values.get(key, 0.0) + value

    for name, labels, value in samples(text, _PREFIXES):
        if name.startswith(_MODEL):
            if model is None or labels.get("model") == model:
                add(name[len(_MODEL) :], value)
        elif name == "parallel_request_queue_count":
            add("executions", value)
        elif name == "batch_request_queue_count":
            if model is None or labels.get("model_name") == model:
                add("batched", value)
        elif (where := _front_end(name, labels)) is not None:
            present.add(where[0])
            add(f"{where[0]}_{where[1]}", value)
    return MLServerSnapshot(values, frozenset(present), families)


def settled(before: MLServerSnapshot, after: MLServerSnapshot, answered_ok: int, entrypoint: str) -> bool:
    """True when ``after`` counts every request the client got an OK answer for: the data plane
    counts before answering, the REST middleware only after the answer went out."""
    ok = after.get("success_total") - before.get("success_total")
    front = "grpc" if entrypoint == "GRPC" else "rest"
    if front in after.present:
        ok = min(ok, after.get(f"{front}_infer_ok") - before.get(f"{front}_infer_ok"))
    return ok >= answered_ok


def _mean_us(before: MLServerSnapshot, after: MLServerSnapshot, total: str, count: str) -> float | None:
    n = after.get(count) - before.get(count)
    return (after.get(total) - before.get(total)) / n * 1e6 if n > 0 else None


def mlserver_breakdown(before: MLServerSnapshot, after: MLServerSnapshot, entrypoint: str = "") -> ServerView:
    """Server-side view of one point from two readings of MLServer's page; ``entrypoint`` "GRPC" or
    "REST" picks the front end whose time is the request's ("" : the data plane's time only)."""
    names = sorted(set(before.values) | set(after.values))
    delta = {name: after.get(name) - before.get(name) for name in names}
    went_down = sorted(name for name, value in delta.items() if value < 0)
    if went_down:
        return ServerView.unavailable(
            f"MLServer's counters went down during the point ({', '.join(went_down)}): "
            "it or a worker restarted, so this point has no server-side figures"
        )
    ok, errors = delta.get("success_total", 0.0), delta.get("failure_total", 0.0)
    requests = ok + errors
    runtime = _mean_us(before, after, "duration_sum", "duration_count")
    front = {"GRPC": "grpc", "REST": "rest"}.get(entrypoint, "")
    request = _mean_us(before, after, f"{front}_infer_sum", f"{front}_infer_count") if front else None
    notes = [
        "MLServer times the adaptive-batching queue and the model together (runtime): no queue, compute "
        "or compute split; its executions are every call to its workers (all models) and count requests, not rows",
    ]
    front_count = delta.get(f"{front}_infer_count", 0.0)
    if front and front_count != requests and request is not None:
        notes.append(
            f"{front_count:.0f} infer calls reached the {front.upper()} front end against {requests:.0f} for this "
            "model: the front end's time (request) covers them all (its metrics carry no model name)"
        )
    executions = delta.get("executions")  # absent from both pages without worker processes
    if executions is None or (executions == 0 and requests):
        executions = None
        notes.append(
            "no executions: MLServer counts calls to its worker processes only, and this model ran in its "
            "main process (parallel_workers 0)"
        )
    per_execution = requests / executions if executions else None
    return ServerView(
        entrypoint=entrypoint,
        requests=requests,
        errors=errors,
        other_requests=delta.get(f"{front}_other_ok", 0.0) if front else 0.0,
        request_us_mean=request,
        runtime_us_mean=runtime,
        overhead_us_mean=max(0.0, request - runtime) if request is not None and runtime is not None else None,
        batching=delta.get("batched", 0.0) > 0,
        notes=tuple(notes),
        source="mlserver",
        executions=executions,
        requests_per_execution=per_execution,
    )
