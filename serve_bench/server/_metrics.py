"""TF Serving's metrics, with its names, labels and bucket layouts, in Prometheus text.

TF Serving exports ``/tensorflow/serving/request_count`` as
``:tensorflow:serving:request_count`` and so on; one scraper reads both servers.
A small registry of our own rather than prometheus_client's: its Counter adds a
``_total`` suffix that TF Serving's exporter does not.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict

__all__ = ["Metrics"]


def _exponential(scale: float, growth: float, count: int) -> list[float]:
    return [scale * growth**i for i in range(count)]


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Histogram:
    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1


_HISTOGRAMS: dict[str, tuple[str, tuple[str, ...], list[float]]] = {
    "request_latency": ("Distribution of wall time (in microseconds) for Tensorflow Serving request.",
                        ("model_name", "API", "entrypoint"), _exponential(10, 1.8, 33)),
    "runtime_latency": ("Distribution of wall time (in microseconds) for Tensorflow runtime.",
                        ("model_name", "API", "runtime"), _exponential(10, 1.8, 33)),
    "batching_session:queuing_latency": ("Distribution of wall time spent (in microseconds) in queuing",
                                         ("thread_pool_name",), _exponential(100, 1.2, 52)),
    "batching_session:input_batch_size": ("Tracks the batch size distribution on the inputs.", (),
                                          [float(2**i) for i in range(17)]),
    "batching_session:processed_batch_size": ("Tracks the batch size distribution on processing.", (),
                                              [float(2**i) for i in range(17)]),
    "batching_session:padding_size": ("Tracks the padding size distribution on batches.",
                                      ("execution_batch_size",), [0.0] + [float(2**i) for i in range(17)]),
}
_COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "request_count": ("The total number of requests.", ("model_name", "status")),
    "batching_session:wrapped_run_count": ("Total count of run calls on the wrapped session", ()),
}
PREFIX = ":tensorflow:serving:"


class Metrics:
    """Thread-safe: batch threads record from outside the event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[str, ...], float]] = defaultdict(dict)
        self._histograms: dict[str, dict[tuple[str, ...], _Histogram]] = defaultdict(dict)

    def inc(self, name: str, labels: tuple[str, ...] = (), by: float = 1) -> None:
        with self._lock:
            cells = self._counters[name]
            cells[labels] = cells.get(labels, 0) + by

    def observe(self, name: str, value: float, labels: tuple[str, ...] = ()) -> None:
        with self._lock:
            cells = self._histograms[name]
            cell = cells.get(labels)
            if cell is None:
                cell = cells[labels] = _Histogram(_HISTOGRAMS[name][2])
            cell.observe(value)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, (help_text, label_names) in _COUNTERS.items():
                full = PREFIX + name
                lines += [f"# HELP {full} {help_text}", f"# TYPE {full} counter"]
                for labels, value in sorted(self._counters.get(name, {}).items()):
                    lines.append(f"{full}{_labels(label_names, labels)} {_fmt(value)}")
            for name, (help_text, label_names, _) in _HISTOGRAMS.items():
                full = PREFIX + name
                lines += [f"# HELP {full} {help_text}", f"# TYPE {full} histogram"]
                for labels, cell in sorted(self._histograms.get(name, {}).items()):
                    cumulative = 0
                    for bound, count in zip(cell.bounds + [float("inf")], cell.counts):
                        cumulative += count
                        le = "+Inf" if bound == float("inf") else _fmt(bound)
                        lines.append(f"{full}_bucket{_labels(label_names + ('le',), labels + (le,))} {cumulative}")
                    lines.append(f"{full}_sum{_labels(label_names, labels)} {_fmt(cell.sum)}")
                    lines.append(f"{full}_count{_labels(label_names, labels)} {cell.count}")
        return "\n".join(lines) + "\n"


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    if not names:
        return ""
    escaped = (v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for v in values)
    return "{" + ",".join(f'{n}="{v}"' for n, v in zip(names, escaped)) + "}"
