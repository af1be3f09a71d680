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


def test_the_same_measurement_gives_the_same_interval_and_a_rate_under_one_is_scaled_too():
    """The bootstrap is seeded: two calls on the same blocks give one interval (a report rebuilt from the same
    file does not move). A rate below 1 item/s (a slow model's batch of 1 over long blocks) is scaled to the
    figure reported like any other: only a rate of 0 is left unscaled."""
    rng = np.random.default_rng(3)
    items, seconds = rng.integers(1, 6, 12).astype(float), rng.uniform(8.0, 12.0, 12)
    first = rate_interval(items, seconds, seed=7)
    assert first is not None and first.low < first.high
    assert rate_interval(items, seconds, seed=7) == first
    rate = items.sum() / seconds.sum()
    assert rate < 1
    scaled = rate_interval(items, seconds, seed=7, estimate=2 * rate)
    assert scaled is not None
    assert (scaled.low, scaled.high) == (pytest.approx(2 * first.low), pytest.approx(2 * first.high))


def test_a_ratio_over_a_bottom_range_from_zero_has_no_range_and_a_zero_figure_no_interval():
    """A bottom range from exactly 0 would divide by zero at the top of the ratio's range. A zero figure (a
    point that served nothing) gives an independent ratio of 0 with no interval, not a range of [0, 0] called a
    95% one; a range below 1 (ratios of seconds) is a range like any other."""
    assert ratio(Estimate(2.0, 1.0, 3.0), Estimate(1.0, 0.0, 1.5)) == Estimate(2.0)
    assert independent_ratio(Estimate(0.0, 0.5, 1.0), Estimate(1.0, 0.5, 2.0)) == Estimate(0.0)
    small = independent_ratio(Estimate(0.5, 0.25, 0.8), Estimate(0.4, 0.2, 0.9))
    assert small is not None and small.known and small.basis == "95% CI"


def test_an_error_bar_under_one_unit_and_no_ratio_said_as_not_measured():
    assert Estimate(10.0, 9.5, 10.25).error_bar() == (0.5, 0.25)
    assert ratio_text(None) == "not measured"
    assert ratio_text(None, "no CPU point") == "no CPU point"


def test_five_blocks_carry_an_interval_and_so_do_blocks_shorter_than_a_second():
    """MIN_BLOCKS is the fewest blocks with an interval (five, not six); a measurement of 0.5 s in all still has
    one (0 s has none, as the test of empty blocks above says)."""
    rng = np.random.default_rng(5)
    items = rng.integers(1, 6, 5).astype(float)
    assert rate_interval(items, np.full(5, 1.0), seed=1) is not None
    assert rate_interval(items, np.full(5, 0.1), seed=1) is not None


def test_a_figure_and_its_range_are_scaled_alike_in_text():
    assert Estimate(0.0123, 0.011, 0.014).text(scale=1000, digits=1, suffix=" ms") == "12.3 ms [11.0–14.0 ms]"
