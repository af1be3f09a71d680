"""The latency objective (stats.Slo): how it is parsed, what it refuses, and when a point meets it.

Written from `make mutants`' survivors in stats/_slo.py (MUTANTS.md): each case below is the input that
tells the right code from a one-line change of it, with the expected value worked out by hand.
"""

from __future__ import annotations

import math

import pytest

from serve_bench.errors import InvalidValue
from serve_bench.stats import Slo
from tests._points import make_point


@pytest.mark.parametrize(
    ("text", "percentile", "max_ms"),
    [("p99=100", "p99", 100.0), (" p50 = 2.5 ", "p50", 2.5), ("p99_9=0.75", "p99_9", 0.75)],
)
def test_parse_reads_percentile_equals_milliseconds(text, percentile, max_ms):
    assert Slo.parse(text) == Slo(percentile, max_ms)


@pytest.mark.parametrize(
    ("text", "name", "shown"),
    [
        ("p99", "slo", "'p99'"),  # no "=": the whole text is named
        ("p99=", "slo", "'p99='"),
        ("p99=  ", "slo", "'p99=  '"),
        ("p99=fast", "max_ms", "'fast'"),  # a value that is not a number: that value is named
        (" p99 = x ", "max_ms", "'x'"),
        ("p98=100", "percentile", "'p98'"),
    ],
)
def test_parse_refuses_with_the_part_that_is_wrong(text, name, shown):
    with pytest.raises(InvalidValue) as caught:
        Slo.parse(text)
    assert caught.value.name == name
    assert str(caught.value).endswith(f"got {shown}")


def test_parse_message_says_how_to_write_it():
    with pytest.raises(InvalidValue, match=r"^slo must be written as percentile=milliseconds, e\.g\. p99=100, got"):
        Slo.parse("100ms")
    with pytest.raises(InvalidValue, match=r"^max_ms must be a number of milliseconds, got 'soon'$"):
        Slo.parse("p99=soon")


@pytest.mark.parametrize("max_ms", [True, False, 0, -1.0, math.inf, -math.inf, math.nan, "100"])
def test_a_max_that_is_not_a_finite_positive_number_is_refused(max_ms):
    with pytest.raises(InvalidValue) as caught:
        Slo("p99", max_ms)
    assert caught.value.name == "max_ms" and caught.value.value is max_ms
    assert caught.value.requirement == "a finite number > 0"


@pytest.mark.parametrize("max_ms", [0.5, 1, 1e-3])
def test_a_max_below_one_millisecond_is_a_valid_objective(max_ms):
    assert Slo("p50", max_ms).max_ms == max_ms


def test_an_unknown_percentile_names_the_known_ones():
    with pytest.raises(InvalidValue) as caught:
        Slo("p42", 10)
    assert caught.value.name == "percentile" and caught.value.value == "p42"
    assert caught.value.requirement == "one of p50, p90, p95, p99, p99_9"


def test_a_point_exactly_at_the_objective_meets_it():
    """met_by is `<=` on milliseconds: p99 = 1.2 x 50,000 us = 60 ms meets 60 ms, and misses 59.99 ms."""
    point = make_point("a", "cpu", 1, latency_us=50_000, p99_factor=1.2)
    assert point.latency.get("p99") == 60_000
    assert Slo("p99", 60.0).met_by(point)
    assert not Slo("p99", 59.99).met_by(point)
    assert Slo("p50", 50.0).met_by(point) and not Slo("p50", 49.99).met_by(point)


def test_a_point_with_one_success_can_meet_it_and_one_with_none_cannot():
    one = make_point("a", "cpu", 1, latency_us=1_000, ok=1)
    none = make_point("a", "cpu", 1, latency_us=1_000, ok=0)
    assert one.counts.ok == 1 and Slo("p99", 100).met_by(one)
    assert none.counts.ok == 0 and not Slo("p99", 100).met_by(none)


def test_errors_or_a_cut_off_point_never_meet_it():
    assert not Slo("p99", 100).met_by(make_point("a", "cpu", 1, latency_us=1_000, errors=1))
    assert not Slo("p99", 100).met_by(make_point("a", "cpu", 1, latency_us=1_000, cut_off="target down"))


def test_label_shows_the_percentile_as_people_write_it():
    assert Slo("p99_9", 2.5).label() == "p99.9 ≤ 2.5 ms"
    assert Slo("p50", 100.0).label() == "p50 ≤ 100 ms"
