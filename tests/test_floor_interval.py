"""The 95% interval of an in-process floor's images/s: the block bootstrap a served point's throughput gets
(serve_bench/stats/_bootstrap.py), over blocks of consecutive calls instead of time slices, so the README's
in-process gains carry intervals of the same kind as its served ones."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from serve_bench.runtimes import _floor as floor
from serve_bench.runtimes._floor import MAX_BLOCKS, _interval
from serve_bench.stats import rate_interval
from serve_bench.stats._bootstrap import RESAMPLES


class _Chosen:
    """Stands for numpy's Generator: hands out the block picks the test chose."""

    def __init__(self, picks: Iterator[np.ndarray]) -> None:
        self.picks = picks

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        return next(self.picks)


def test_the_interval_is_the_middle_95_percent_of_the_resampled_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five blocks of 10 images each taking 1, 1, 1, 1 and 6 s: 50 images in 10 s, 5/s. Resamples drawn by
    the test: 200 that pick block 4 (the slow one) never (50 / 5 s = 10/s) and 200 that pick it five times
    (50 / 30 s = 1.667/s). numpy's percentiles at 2.5 and 97.5 of that half-and-half sample: the two values."""
    never, always = np.array([0, 1, 2, 3, 0]), np.array([4, 4, 4, 4, 4])
    picks = iter([never] * (RESAMPLES // 2) + [always] * (RESAMPLES // 2))
    monkeypatch.setattr(np.random, "default_rng", lambda seed: _Chosen(picks))
    found = rate_interval(np.full(5, 10.0), np.array([1.0, 1, 1, 1, 6]), seed=0)
    assert found is not None and found.confidence == 0.95
    assert (found.low, found.high) == pytest.approx((50 / 30, 10.0))


def test_even_calls_give_no_spread_and_the_interval_is_scaled_to_the_wall_clock_figure() -> None:
    """40 calls of 10 ms at batch 4: 400 images/s over the calls themselves, whatever the resample. The floor
    reports images/s over the wall clock (the loop's own time too), say 380: the interval is scaled to it."""
    assert _interval([0.01] * 40, 4, 380.0) == pytest.approx([380.0, 380.0])


def test_too_few_calls_give_no_interval_and_many_are_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _interval([0.01] * 4, 4, 400.0) is None  # four blocks cannot carry a 95% interval
    calls = list(np.random.default_rng(1).uniform(0.009, 0.011, 500))
    low, high = _interval(calls, 8, 8 * 500 / sum(calls)) or [0.0, 0.0]
    assert low < 8 * 500 / sum(calls) < high
    # 500 calls in MAX_BLOCKS blocks of 25: the spread of a block's mean, not a call's, so narrow (±1% here)
    assert MAX_BLOCKS == 20 and (high - low) / (8 * 500 / sum(calls)) < 0.02
    # blocks of consecutive calls, as a served point's of consecutive slices: what drifts (clocks, a
    # neighbour) stays inside a block and widens the interval, rather than averaging out call by call
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    monkeypatch.setattr(floor, "rate_interval", lambda items, seconds, **kw: seen.append((items, seconds)))
    _interval(calls, 8, 1.0)
    items, seconds = seen[0]
    assert list(items) == [8 * 25] * 20
    assert seconds[0] == pytest.approx(sum(calls[:25])) and seconds[-1] == pytest.approx(sum(calls[-25:]))
