"""The edges of serve-bench's intervals and ratios (stats/_bootstrap.py, stats/_estimate.py): a zero, an infinite
figure, a range that does not hold its value. Each is a case a results file can carry (a point that served
nothing, a bound of 0 from a bootstrap of zeros); each assertion is one a one-line change would break (a mutation
sample found ten that no test saw)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from serve_bench.stats import Estimate, Interval, independent_ratio, rate_interval, ratio, ratio_text
from serve_bench.stats._bootstrap import bounds


def test_a_bootstraps_interval_is_widened_to_hold_the_figure_it_is_reported_with():
    """The middle 95% of resampled rates need not hold the rate measured over the whole span (a wall clock that
    holds what the blocks leave out): the interval reaches it, on whichever side it lies."""
    samples = np.linspace(4.0, 6.0, 401)
    assert bounds(samples, 10.0) == Interval(pytest.approx(4.05), 10.0, 0.95)
    assert bounds(samples, 1.0) == Interval(1.0, pytest.approx(5.95), 0.95)


def test_blocks_that_took_no_time_give_no_interval_and_blocks_that_served_nothing_give_zero():
    """Seconds that sum to 0 (a results file with empty blocks): no rate, so no interval, rather than a division by
    zero. Items that sum to 0 against a reported figure: the interval is [0, 0], not a scale of figure / 0."""
    items, seconds = np.ones(6), np.ones(6)
    assert rate_interval(items, np.zeros(6), seed=1) is None
    assert rate_interval(np.zeros(6), seconds, seed=1, estimate=5.0) == Interval(0.0, 0.0, 0.95)
    assert rate_interval(items[:4], seconds[:4], seed=1) is None  # fewer than MIN_BLOCKS
    assert rate_interval(items, seconds, seed=1) == Interval(1.0, 1.0, 0.95)


def test_a_ratio_over_a_range_reaching_zero_has_no_range():
    """top / bottom takes its range from the extremes: a bottom whose low end is 0 would put infinity (or a
    division by zero) at the top, so the ratio is given without a range."""
    assert ratio(Estimate(2.0, 1.0, 3.0), Estimate(1.0, 0.0, 2.0)) == Estimate(2.0)
    assert ratio(Estimate(2.0, 1.0, 3.0), Estimate(1.0, 0.5, 2.0)) == Estimate(2.0, 0.5, 6.0, "from both ranges")


def test_an_independent_ratio_of_a_range_touching_zero_or_of_an_infinite_figure():
    """On a log scale a range whose low end is 0 has no half-width: the ratio has no range. An infinite top (a
    point that served everything in no time, as a file may say) gives no ratio at all."""
    assert independent_ratio(Estimate(2.0, 0.0, 4.0), Estimate(1.0, 0.5, 2.0)) == Estimate(2.0)
    assert independent_ratio(Estimate(math.inf), Estimate(1.0)) is None
    both = independent_ratio(Estimate(2.0, 1.0, 4.0), Estimate(1.0, 0.5, 2.0))
    assert both is not None and both.low == pytest.approx(2.0 / 2 ** math.sqrt(2))  # ln 2 twice, in quadrature


def test_a_range_that_does_not_hold_its_value_draws_no_negative_error_bar():
    """A repeated point's median outside its repeats' range cannot happen, but a file can say so: the error
    bar's lower arm is 0 rather than negative (matplotlib refuses one)."""
    assert Estimate(1.0, 1.5, 2.0).error_bar() == (0.0, 1.0)
    assert Estimate(1.0, 0.5, 2.0).error_bar(scale=10.0) == (5.0, 10.0)


def test_a_half_known_range_is_not_printed():
    assert ratio_text(Estimate(2.0, None, 3.0)) == "2.00×"
    assert ratio_text(Estimate(2.0, 1.5, 3.0)) == "2.00× [1.50×–3.00×]"
