"""Latency histograms: HdrHistogram in integer microseconds, 3 significant digits."""

from __future__ import annotations

from collections.abc import Iterable

from hdrh.histogram import HdrHistogram

__all__ = ["PERCENTILES", "LatencySummary", "decode", "encode", "histogram_of", "merge", "new_histogram", "summarize"]

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3  # values are exact to 0.1%
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}

LatencySummary = dict[str, float]


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def histogram_of(values_us: Iterable[float]) -> HdrHistogram:
    histogram = new_histogram()
    for value in values_us:
        histogram.record_value(min(max(round(float(value)), LOWEST_US), HIGHEST_US))
    return histogram


def summarize(histogram: HdrHistogram) -> LatencySummary:
    """p50, p90, p95, p99, p99.9, max, mean in µs (zeros when empty)."""
    if histogram.get_total_count() == 0:
        return {**{k: 0.0 for k in PERCENTILES}, "max": 0.0, "mean": 0.0, "count": 0}
    summary: LatencySummary = {k: float(histogram.get_value_at_percentile(p)) for k, p in PERCENTILES.items()}
    summary["max"] = float(histogram.get_max_value())
    summary["mean"] = round(float(histogram.get_mean_value()), 1)
    summary["count"] = histogram.get_total_count()
    return summary


def encode(histogram: HdrHistogram) -> str:
    return str(histogram.encode().decode("ascii"))


def decode(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text.encode("ascii"))


def merge(histograms: Iterable[HdrHistogram]) -> HdrHistogram:
    total = new_histogram()
    for histogram in histograms:
        total.add(histogram)
    return total
