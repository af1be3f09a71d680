"""Scrape TF Serving's Prometheus page (the local server writes the same page) and explain one point.

Histograms and counters are cumulative, so a point's server-side figures are the
difference between a scrape before and a scrape after it (:func:`breakdown`).

What the page holds follows TF Serving's sources:
* ``request_latency`` is recorded for OK requests only, labelled
  ``API="Predict", entrypoint="GRPC"`` for gRPC (model_servers/prediction_service_impl.cc:52)
  and with the URL verb, ``API="predict", entrypoint="REST"``, for REST (model_servers/http_server.cc:194);
  REST GETs (status, metadata) record ``API=""``.
* ``request_count`` counts every request by status, REST GETs included (http_server.cc:201),
  so it does not count predicts; only its non-OK cells are used, as errors.
* ``runtime_latency`` is timed around the session's Run (servables/tensorflow/predict_util.cc:108);
  with ``--enable_batching`` that is the batching session, so it includes the queueing.
* The batching_session metrics carry no model label: with several models batching at
  once they are server-wide.
* Sums are written with six significant digits (util/prometheus_exporter.cc:104-106), so
  on a long-running server a short point's share of a sum can be imprecise: measured
  and reported in ``ServerView.precision`` and its notes.

The parser is a small tolerant one of our own: a TF Serving page carries every
TensorFlow metric of the process, and one odd line elsewhere must not lose the point.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from serve_bench.metrics._exposition import fetch_text, samples
from serve_bench.stats import IMPRECISE, ServerView

__all__ = ["MetricsSnapshot", "breakdown", "parse", "scrape", "sum_resolution"]

PREFIX = ":tensorflow:serving:"

# The label that identifies the model, by metric (batching metrics carry none: they are server-wide).
_MODEL_LABEL = {"request_count": "model_name", "request_latency": "model_name", "runtime_latency": "model_name"}
# Labels kept in the snapshot key, by metric (others are summed over).
_KEPT = {"request_count": ("status",), "request_latency": ("API", "entrypoint"), "runtime_latency": ("API",)}
_WANTED = (
    "request_count",
    "request_latency",
    "runtime_latency",
    "batching_session:queuing_latency",
    "batching_session:wrapped_run_count",
    "batching_session:input_batch_size",
    "batching_session:processed_batch_size",
    "batching_session:padding_size",
)
_PREDICT = {
    "GRPC": (("Predict", "GRPC"),),
    "REST": (("predict", "REST"),),
    "": (("Predict", "GRPC"), ("predict", "REST")),
}

Key = tuple[str, str, tuple[str, ...]]  # (metric, "" | "_sum" | "_count", kept label values)


@dataclass(frozen=True)
class MetricsSnapshot:
    """The TF Serving figures of one scrape, for one model (batching metrics are server-wide)."""

    values: dict[Key, float] = field(default_factory=dict)
    families: int = 0  # TF Serving metric families on the page (TYPE lines), even empty ones

    def get(self, metric: str, suffix: str = "", labels: tuple[str, ...] = ()) -> float:
        return self.values.get((metric, suffix, labels), 0.0)

    def total(self, metric: str, suffix: str = "") -> float:
        return sum(v for (m, s, _), v in self.values.items() if m == metric and s == suffix)

    def cells(self, metric: str, suffix: str = "") -> dict[tuple[str, ...], float]:
        return {labels: v for (m, s, labels), v in self.values.items() if m == metric and s == suffix}


def parse(text: str, model: str | None) -> MetricsSnapshot:
    """The figures the breakdown needs from a TF Serving page; ``model`` None keeps every model."""
    values: dict[Key, float] = {}
    families = sum(1 for line in text.splitlines() if line.startswith("# TYPE " + PREFIX))
    for name, labels, value in samples(text, (PREFIX,)):
        short, suffix = name[len(PREFIX) :], ""
        for candidate in ("_sum", "_count"):
            if short.endswith(candidate) and short[: -len(candidate)] in _WANTED:
                short, suffix = short[: -len(candidate)], candidate
        if short not in _WANTED or (
            suffix == "" and short not in ("request_count", "batching_session:wrapped_run_count")
        ):
            continue  # buckets and other metrics are not needed
        model_label = _MODEL_LABEL.get(short)
        if model is not None and model_label and labels.get(model_label) != model:
            continue
        key = (short, suffix, tuple(labels.get(n, "") for n in _KEPT.get(short, ())))
        values[key] = values.get(key, 0.0) + value
    return MetricsSnapshot(values, families)


async def scrape(url: str, model: str | None, timeout: float = 5.0) -> tuple[MetricsSnapshot | None, str]:
    """(snapshot, "") or (None, why it is unavailable)."""
    text, why = await fetch_text(url, timeout)
    if text is None:
        return None, why
    return from_text(text, url, model)


def from_text(text: str, url: str, model: str | None) -> tuple[MetricsSnapshot | None, str]:
    """A fetched page as a TF Serving snapshot, or (None, why it is not TF Serving's)."""
    snapshot = parse(text, model)
    if not snapshot.families:
        return None, f"metrics endpoint {url} has no TF Serving metrics (is it TF Serving's monitoring path?)"
    return snapshot, ""


def sum_resolution(total: float) -> float:
    """The largest error of a running sum written with six significant digits (%.6g): half its last digit."""
    if total == 0 or not math.isfinite(total):
        return 0.0
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(total))) - 5)


class _Delta:
    """Differences between two snapshots, and how precise each difference of sums is."""

    def __init__(self, before: MetricsSnapshot, after: MetricsSnapshot) -> None:
        self.before, self.after = before, after
        self.precision = 0.0
        self.notes: list[str] = []
        self.went_down: list[str] = []

    def value(self, metric: str, suffix: str = "", labels: tuple[str, ...] | None = None) -> float:
        if labels is None:
            delta = self.after.total(metric, suffix) - self.before.total(metric, suffix)
        else:
            delta = self.after.get(metric, suffix, labels) - self.before.get(metric, suffix, labels)
        if delta < 0 and suffix != "_sum":
            self.went_down.append(metric)
        return delta

    def mean(self, metric: str, cells: Iterable[tuple[str, ...]] | None = None, unit: str = "µs") -> float | None:
        """sum/count over the point; None when nothing was recorded; notes precision lost to %.6g sums."""
        chosen = [None] if cells is None else list(cells)
        count = sum(self.value(metric, "_count", c) for c in chosen)
        if count <= 0:
            return None
        total = sum(self.value(metric, "_sum", c) for c in chosen)
        if cells is None:
            sums = [(self.before.total(metric, "_sum"), self.after.total(metric, "_sum"))]
        else:
            sums = [(self.before.get(metric, "_sum", c), self.after.get(metric, "_sum", c)) for c in cells]
        error = sum(sum_resolution(b) + sum_resolution(a) for b, a in sums)
        if error == 0:
            return total / count
        relative = error / abs(total) if total > 0 else math.inf
        self.precision = max(self.precision, relative)
        if relative > IMPRECISE:
            running = max(a for _, a in sums)
            self.notes.append(
                f"{metric}: the server's running sum ({running:.6g} {unit}) is written with 6 significant digits, "
                f"so this point's share ({total:.6g} {unit} over {count:.0f}) is known only to "
                + (f"±{relative:.0%}" if math.isfinite(relative) else "no digit at all (mean not reported)")
                + "; restart the server or run longer points"
            )
        return total / count if total > 0 else None


def breakdown(before: MetricsSnapshot, after: MetricsSnapshot, entrypoint: str = "") -> ServerView:
    """Server-side view of one point from two scrapes; ``entrypoint`` "GRPC" or "REST" counts only
    predicts that came that way ("" counts both)."""
    if entrypoint not in _PREDICT:
        raise ValueError(f"entrypoint must be 'GRPC', 'REST' or '', not {entrypoint!r}")
    d = _Delta(before, after)
    predict_cells = _PREDICT[entrypoint]
    ok = float(sum(d.value("request_latency", "_count", cell) for cell in predict_cells))
    all_predicts = sum(d.value("request_latency", "_count", cell) for cell in _PREDICT[""])
    statuses = set(before.cells("request_count")) | set(after.cells("request_count"))
    errors = float(sum(d.value("request_count", "", s) for s in statuses if s != ("OK",)))
    counted_ok = d.value("request_count", "", ("OK",))
    request = d.mean("request_latency", predict_cells)
    runtime = d.mean("runtime_latency", [("Predict",)])
    queue = d.mean("batching_session:queuing_latency")
    runs = d.value("batching_session:wrapped_run_count")
    batching = runs > 0 or d.value("batching_session:queuing_latency", "_count") > 0
    compute = runtime
    if batching and runtime is not None and queue is not None:
        compute = max(0.0, runtime - queue)
    overhead = max(0.0, request - runtime) if request is not None and runtime is not None else None
    processed_sum = d.value("batching_session:processed_batch_size", "_sum")
    padding_sum = d.value("batching_session:padding_size", "_sum")
    view = ServerView(
        entrypoint=entrypoint,
        requests=ok + errors,
        errors=errors,
        other_requests=max(0.0, counted_ok - all_predicts),
        request_us_mean=request,
        runtime_us_mean=runtime,
        queue_us_mean=queue,
        compute_us_mean=compute,
        overhead_us_mean=overhead,
        batching=batching,
        tf_calls=runs if batching else d.value("runtime_latency", "_count", ("Predict",)),
        input_batch_mean=d.mean("batching_session:input_batch_size", unit="rows"),
        processed_batch_mean=d.mean("batching_session:processed_batch_size", unit="rows"),
        padding_share=padding_sum / processed_sum if processed_sum > 0 else None,
        precision=d.precision,
        notes=tuple(d.notes) + _context_notes(entrypoint, ok, all_predicts),
    )
    if d.went_down:
        return ServerView.unavailable(
            f"the server's counters went down during the point ({', '.join(sorted(set(d.went_down)))}): "
            "it restarted, so this point has no server-side figures"
        )
    return view


def _context_notes(entrypoint: str, ok: float, all_predicts: float) -> tuple[str, ...]:
    if entrypoint and all_predicts > ok:
        other = "REST" if entrypoint == "GRPC" else "gRPC"
        return (
            f"{all_predicts - ok:.0f} predicts came over {other} during the point: runtime, queueing and "
            "batch figures include them (TF Serving does not label those by entrypoint)",
        )
    return ()
