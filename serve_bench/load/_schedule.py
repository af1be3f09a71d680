"""Seeded arrival schedules for the open loop (MLPerf's server scenario uses Poisson)."""

from __future__ import annotations

import numpy as np

__all__ = ["ARRIVALS", "arrival_offsets"]

ARRIVALS = ("poisson", "constant")


def arrival_offsets(rate: float, duration: float, arrival: str = "poisson", seed: int = 0) -> np.ndarray:
    """Send times in seconds from the start, covering [0, duration)."""
    if rate <= 0:
        raise ValueError("rate must be positive")
    if arrival == "constant":
        return np.arange(int(np.ceil(rate * duration))) / rate
    if arrival != "poisson":
        raise ValueError(f"unknown arrival distribution {arrival!r}; use one of {ARRIVALS}")
    rng = np.random.default_rng(seed)
    expected = int(rate * duration)
    gaps = rng.exponential(1.0 / rate, size=expected + 10 * int(np.sqrt(expected) + 10))
    offsets = np.concatenate([[0.0], np.cumsum(gaps)[:-1]])
    while offsets[-1] < duration:  # extremely unlikely: extend
        more = offsets[-1] + np.cumsum(rng.exponential(1.0 / rate, size=expected + 10))
        offsets = np.concatenate([offsets, more])
    return offsets[offsets < duration]
