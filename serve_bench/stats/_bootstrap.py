"""The block bootstrap behind every 95% interval of a throughput: resample equal blocks of a measurement with
replacement, recompute the figure, take the middle 95%. One rule for a load run's window
(load/_analysis.py: blocks of time slices) and for a runtime called in process (runtimes/_floor.py: blocks of
calls), so an in-process gain and a served one carry intervals of the same kind."""

from __future__ import annotations

import numpy as np

from serve_bench.stats._figures import Interval

__all__ = ["CONFIDENCE", "MAX_BLOCKS", "MIN_BLOCKS", "RESAMPLES", "bounds", "rate_interval", "resample_weights"]

RESAMPLES = 400
CONFIDENCE = 0.95
MIN_BLOCKS = 5  # fewer blocks than this: no interval (five values cannot carry a 95% one)
MAX_BLOCKS = 20  # more blocks than this add resampling noise, not information


def resample_weights(blocks: int, rng: np.random.Generator) -> np.ndarray:
    """RESAMPLES rows of how often each block is drawn (``blocks`` draws with replacement a row)."""
    return np.stack([np.bincount(rng.integers(0, blocks, blocks), minlength=blocks) for _ in range(RESAMPLES)]).astype(
        float
    )


def bounds(samples: np.ndarray, estimate: float, scale: float = 1.0) -> Interval:
    """The middle CONFIDENCE of ``samples`` (times ``scale``), widened to hold ``estimate``."""
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(samples * scale, [tail, 100 - tail])
    return Interval(float(min(low, estimate)), float(max(high, estimate)), CONFIDENCE)


def rate_interval(items: np.ndarray, seconds: np.ndarray, seed: int, estimate: float | None = None) -> Interval | None:
    """The interval of sum(items) / sum(seconds) over blocks (each block's items and seconds), scaled to
    ``estimate`` where the figure reported is that ratio measured another way (over a wall-clock span that
    also holds what the blocks leave out); None with fewer than MIN_BLOCKS blocks. Seeded, so the same
    measurement gives the same interval each time."""
    total = float(np.sum(seconds))
    if len(items) < MIN_BLOCKS or total <= 0:
        return None
    rate = float(np.sum(items)) / total
    weights = resample_weights(len(items), np.random.default_rng(seed))
    scale = 1.0 if estimate is None or rate <= 0 else estimate / rate
    return bounds((weights @ items) / (weights @ seconds), rate * scale, scale)
