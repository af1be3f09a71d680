"""Latency histograms: HdrHistogram in integer microseconds, 3 significant digits."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from hdrh.histogram import HdrHistogram

__all__ = ["PERCENTILES", "decode", "encode", "histogram_of", "merge", "new_histogram"]

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3  # values are exact to 0.1%
# The one list of latency percentiles serve-bench reports: name -> percentile (Percentiles has a field each).
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def histogram_of(values_us: Iterable[float]) -> HdrHistogram:
    """A histogram of latencies in µs (rounded to whole µs, clipped to the histogram's range); ValueError for NaN."""
    histogram = new_histogram()
    raw = np.fromiter(values_us, dtype=np.float64)
    if np.isnan(raw).any():  # a cast to int64 would make it a huge negative number, then lose it
        raise ValueError("a latency is NaN (not a number): no histogram can count it")
    values = np.clip(np.rint(raw), LOWEST_US, HIGHEST_US).astype(np.int64)
    # one record_value per distinct value: latencies repeat, and each call is a Python call
    distinct, counts = np.unique(values, return_counts=True)
    for value, count in zip(distinct.tolist(), counts.tolist()):
        histogram.record_value(value, count)
    return histogram


def encode(histogram: HdrHistogram) -> str:
    return str(histogram.encode().decode("ascii"))


def decode(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text.encode("ascii"))


def merge(histograms: Iterable[HdrHistogram]) -> HdrHistogram:
    total = new_histogram()
    for histogram in histograms:
        total.add(histogram)
    return total
