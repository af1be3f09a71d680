"""TF Serving's metrics, with its names, labels and buckets, written as its Prometheus exporter writes them.

Definitions (name, labels, buckets) come from:
  tensorflow_serving/servables/tensorflow/util.cc:54-89          request_count, request_latency,
                                                                  runtime_latency, request_example_*
  tensorflow_serving/batching/batching_session.cc:59-68           queuing_latency, wrapped_run_count
  tensorflow_serving/batching/batching_util.h:117-153             input/processed batch size, padding size
  tensorflow_serving/servables/tensorflow/saved_model_warmup_util.cc:51-63, core/request_logger.cc:34
The page follows tensorflow_serving/util/prometheus_exporter.cc: metrics sorted by their
TensorFlow name, a ``# TYPE`` line each (no HELP), every character outside
``[a-zA-Z0-9_]`` of the name turned into ``:``, label values escaped for ``\\`` and
``"`` only, doubles (bucket limits, sums) written with six significant digits
(absl::StrCat), counts and counters as integers, ``{}`` even when a metric has no
labels, and the last bucket ``+Inf``. Histograms count a value in the first bucket
whose limit is strictly greater (tsl Histogram::Add uses upper_bound).

The batching_util histograms are registered on first use in TF Serving, so they
appear on the page only once a batch has been formed; the others always do.

A registry of our own rather than prometheus_client's: its Counter adds a
``_total`` suffix and its text format differs from TF Serving's.
"""

from __future__ import annotations

import bisect
import re
import threading
from dataclasses import dataclass

__all__ = ["DEFINITIONS", "Definition", "Metrics", "exponential_buckets", "format_double", "prometheus_name"]


def exponential_buckets(scale: float, growth: float, count: int) -> tuple[float, ...]:
    """tsl monitoring::Buckets::Exponential: limits by repeated multiplication (not pow), as TF computes them."""
    limits: list[float] = []
    bound = scale
    for _ in range(count):
        limits.append(bound)
        bound *= growth
    return tuple(limits)


def format_double(value: float) -> str:
    """absl::StrCat of a double: %g with six significant digits (1e+06, 32.4, 104.976)."""
    return f"{value:.6g}"


def prometheus_name(tf_name: str) -> str:
    """prometheus_exporter.cc GetPrometheusMetricName: /tensorflow/serving/x -> :tensorflow:serving:x."""
    name = re.sub(r"[^a-zA-Z0-9_]", ":", tf_name)
    return "_" + name if name[:1].isdigit() else name


def _label_name(name: str) -> str:
    sanitized = re.sub(r"[^a-zA-Z0-9]", "_", name)
    return "_" + sanitized if sanitized[:1].isdigit() else sanitized


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


@dataclass(frozen=True)
class Definition:
    """One TF Serving metric: its TensorFlow name, kind, label names and (histograms) bucket limits."""

    tf_name: str
    kind: str  # "counter" | "histogram"
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()
    lazy: bool = False  # registered on first use (batching_util.h's function-local statics)


_LATENCY = exponential_buckets(10, 1.8, 33)
_BATCH = exponential_buckets(1, 2, 14)

# Keyed by the short name the server records under ("batching_session:input_batch_size").
DEFINITIONS: dict[str, Definition] = {
    "request_count": Definition("/tensorflow/serving/request_count", "counter", ("model_name", "status")),
    "request_latency": Definition(
        "/tensorflow/serving/request_latency", "histogram", ("model_name", "API", "entrypoint"), _LATENCY
    ),
    "runtime_latency": Definition(
        "/tensorflow/serving/runtime_latency", "histogram", ("model_name", "API", "runtime"), _LATENCY
    ),
    "request_example_counts": Definition(
        "/tensorflow/serving/request_example_counts", "histogram", ("model",), exponential_buckets(1, 2, 15)
    ),
    "request_example_count_total": Definition("/tensorflow/serving/request_example_count_total", "counter", ("model",)),
    "model_warmup_latency": Definition(
        "/tensorflow/serving/model_warmup_latency", "histogram", ("model_path", "status"), _LATENCY
    ),
    "model_warmup_records_read": Definition(
        "/tensorflow/serving/model_warmup_records_read", "counter", ("model_path", "status")
    ),
    "request_log_count": Definition("/tensorflow/serving/request_log_count", "counter", ("model_name", "status_code")),
    "batching_session:queuing_latency": Definition(
        "/tensorflow/serving/batching_session/queuing_latency",
        "histogram",
        ("thread_pool_name",),
        exponential_buckets(100, 1.2, 52),
    ),
    "batching_session:wrapped_run_count": Definition(
        "/tensorflow/serving/batching_session/wrapped_run_count", "counter", ()
    ),
    "batching_session:input_batch_size": Definition(
        "/tensorflow/serving/batching_session/input_batch_size", "histogram", (), _BATCH, lazy=True
    ),
    "batching_session:processed_batch_size": Definition(
        "/tensorflow/serving/batching_session/processed_batch_size", "histogram", (), _BATCH, lazy=True
    ),
    "batching_session:padding_size": Definition(
        "/tensorflow/serving/batching_session/padding_size", "histogram", ("execution_batch_size",), _BATCH, lazy=True
    ),
}


class _Histogram:
    def __init__(self, limits: tuple[float, ...]) -> None:
        self.limits = limits  # the implicit last bucket runs to DBL_MAX ("+Inf")
        self.counts = [0] * (len(limits) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_right(self.limits, value)] += 1
        self.sum += float(value)


class Metrics:
    """Thread-safe: batch threads record from outside the event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[str, ...], int]] = {}
        self._histograms: dict[str, dict[tuple[str, ...], _Histogram]] = {}

    def inc(self, name: str, labels: tuple[str, ...] = (), by: int = 1) -> None:
        definition = DEFINITIONS[name]
        _check(name, definition, labels, "counter")
        with self._lock:
            cells = self._counters.setdefault(name, {})
            cells[labels] = cells.get(labels, 0) + int(by)

    def observe(self, name: str, value: float, labels: tuple[str, ...] = ()) -> None:
        definition = DEFINITIONS[name]
        _check(name, definition, labels, "histogram")
        with self._lock:
            cells = self._histograms.setdefault(name, {})
            cell = cells.get(labels)
            if cell is None:
                cell = cells[labels] = _Histogram(definition.buckets)
            cell.observe(value)

    def render(self) -> str:
        """The page, byte for byte as PrometheusExporter::GeneratePage writes it."""
        lines: list[str] = []
        with self._lock:
            for name, definition in sorted(DEFINITIONS.items(), key=lambda item: item[1].tf_name):
                if definition.lazy and name not in self._histograms and name not in self._counters:
                    continue
                full = prometheus_name(definition.tf_name)
                lines.append(f"# TYPE {full} {definition.kind}")
                names = tuple(_label_name(n) for n in definition.labels)
                if definition.kind == "counter":
                    for labels, count in sorted(self._counters.get(name, {}).items()):
                        lines.append(f"{full}{{{_pairs(names, labels)}}} {count}")
                    continue
                for labels, cell in sorted(self._histograms.get(name, {}).items()):
                    pairs = _pairs(names, labels)
                    prefix = f"{full}_bucket{{{pairs}{',' if pairs else ''}"
                    cumulative = 0
                    for i, count in enumerate(cell.counts):
                        cumulative += count
                        limit = format_double(cell.limits[i]) if i < len(cell.limits) else "+Inf"
                        lines.append(f'{prefix}le="{limit}"}} {cumulative}')
                    lines.append(f"{full}_sum{{{pairs}}} {format_double(cell.sum)}")
                    lines.append(f"{full}_count{{{pairs}}} {cumulative}")
        return "\n".join(lines) + "\n"


def _pairs(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    return ",".join(f'{n}="{_label_value(v)}"' for n, v in zip(names, values))


def _check(name: str, definition: Definition, labels: tuple[str, ...], kind: str) -> None:
    if definition.kind != kind or len(labels) != len(definition.labels):
        raise ValueError(f"metric {name} is a {definition.kind} labelled {definition.labels}; got {kind} {labels}")
