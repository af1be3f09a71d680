"""Seeded arrival schedules for the open loop (MLPerf's server scenario uses Poisson)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ARRIVALS", "arrival_offsets"]

ARRIVALS = ("poisson", "constant")


def _count(rate: float, span: float) -> int:
    return round(rate * span)


def _segment(rate: float, start: float, span: float, arrival: str, rng: np.random.Generator) -> np.ndarray:
    count = _count(rate, span)
    if count == 0:
        return np.zeros(0)
    if arrival == "constant":
        return start + np.arange(count) * (span / count)
    # A Poisson process conditioned on N arrivals in [0, T) is N sorted uniform draws on [0, T)
    # (the order statistics property). Drawing N = rate x T that way keeps every Poisson feature
    # the server sees (exponential gaps, bursts) while the realized rate over the window equals the
    # requested one exactly: cumulating exponential gaps instead gives a count that is itself
    # Poisson, so a seeded "50 req/s" point can send 45.9 req/s (sd = sqrt(N)) and two points of
    # a sweep are compared at different loads.
    return start + np.sort(rng.uniform(0.0, span, size=count))


def arrival_offsets(
    rate: float, duration: float, arrival: str = "poisson", seed: int = 0, warmup_s: float = 0.0
) -> np.ndarray:
    """Send times in seconds from the start, covering [0, warmup_s + duration).

    The warm-up [0, warmup_s) and the measured window [warmup_s, warmup_s + duration)
    are drawn separately, each holding exactly round(rate x span) arrivals, so the
    schedule's rate over the measured window is the requested rate.
    """
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a positive finite number of requests/s, not {rate!r}")
    if not (math.isfinite(duration) and duration > 0) or not (math.isfinite(warmup_s) and warmup_s >= 0):
        raise ValueError(f"duration must be positive and warm-up non-negative (finite), not {duration!r}, {warmup_s!r}")
    if arrival not in ARRIVALS:
        raise ValueError(f"unknown arrival distribution {arrival!r}; use one of {ARRIVALS}")
    rng = np.random.default_rng(seed)
    warmup = _segment(rate, 0.0, warmup_s, arrival, rng) if warmup_s > 0 else np.zeros(0)
    measured = _segment(rate, warmup_s, duration, arrival, rng)
    return np.concatenate([warmup, measured])
