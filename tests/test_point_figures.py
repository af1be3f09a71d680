"""A point's small records (stats/_figures.py, _point.py, _histogram.py, _energy.py, _slo.py): their figures
and their words.

Written from `make mutants`' survivors (MUTANTS.md, issue 35). Every reader (the terminal line, the report,
the CSV) shows these phrases, so they are compared word for word; each expected text is written out from
the record's fields by hand, with numbers chosen so that a rounding or a scale changed by one digit shows.
"""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from serve_bench.errors import InvalidValue
from serve_bench.stats import (
    ClientView,
    Codec,
    Counts,
    EnergyView,
    Figures,
    Interval,
    Latency,
    LoadInfo,
    Percentiles,
    Point,
    ServerView,
    Slo,
    Stability,
    Target,
    Throughput,
    histogram_of,
)
from serve_bench.stats._histogram import HIGHEST_US

# -- Interval ---------------------------------------------------------------------------------------------------


def test_an_interval_holds_both_its_ends_and_prints_scaled_to_the_digits_asked() -> None:
    interval = Interval(1.26, 2.5)
    assert interval.contains(1.26) and interval.contains(2.5) and interval.contains(2.0)
    assert not interval.contains(1.259) and not interval.contains(2.501)
    assert interval.describe() == "[1.3, 2.5]"  # scale 1, one digit
    assert Interval(1500.0, 2750.0).describe(scale=0.001, digits=3) == "[1.500, 2.750]"  # µs shown as ms


# -- Percentiles -------------------------------------------------------------------------------------------------


def test_percentiles_of_an_empty_histogram_are_zeros_and_of_one_value_that_value() -> None:
    """Below 2,048 µs HdrHistogram (3 significant digits) holds every whole µs exactly."""
    assert Percentiles.of(histogram_of([])) == Percentiles()
    one = Percentiles.of(histogram_of([1234.0]))
    assert one == Percentiles(1234.0, 1234.0, 1234.0, 1234.0, 1234.0, max=1234.0, mean=1234.0, count=1)


def test_percentiles_mean_is_rounded_to_a_tenth_of_a_microsecond() -> None:
    """1000, 1000, 1001 µs: mean 1000.333… µs, shown 1000.3; the median 1000; the max and p90 1001."""
    three = Percentiles.of_values([1000.0, 1000.0, 1001.0])
    assert (three.p50, three.p90, three.max, three.mean, three.count) == (1000.0, 1001.0, 1001.0, 1000.3, 3)


def test_an_unknown_latency_figure_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KeyError) as caught:
        Percentiles().get("p98")
    assert caught.value.args == ("no latency figure 'p98'; known: p50, p90, p95, p99, p99_9, max, mean",)
    assert Percentiles(max=7.0, mean=3.0).get("max") == 7.0 and Percentiles(mean=3.0).get("mean") == 3.0


def test_latencies_outside_the_histograms_range_are_clipped_to_it() -> None:
    """0.2 µs rounds to 0 and is kept as the lowest trackable value, 1 µs; five thousand seconds is kept as one
    hour (3.6e9 µs), HdrHistogram's highest: nothing is dropped, nothing recorded below 1 µs."""
    clipped = Percentiles.of(histogram_of([0.2, 5e9]))
    assert clipped.count == 2 and clipped.p50 == 1.0
    assert clipped.max >= HIGHEST_US and clipped.max <= HIGHEST_US * 1.001  # one hour, to 0.1%
    # not a number is not a latency: refused, not cast to int64's lowest value and then lost without a word
    with pytest.raises(ValueError, match=r"^a latency is NaN \(not a number\): no histogram can count it$"):
        histogram_of([float("nan"), 5.0])


# -- Counts, Throughput, Latency ---------------------------------------------------------------------------------


def test_counts_list_each_error_status_with_its_count() -> None:
    counts = Counts.of(10, 7, 14, {"UNAVAILABLE": 2, "DEADLINE_EXCEEDED": 1})
    assert counts.describe() == "3 errors of 10 requests (DEADLINE_EXCEEDED ×1, UNAVAILABLE ×2)"
    assert Counts(10, 10, 20).describe() == "10 of 10 requests answered"


def test_throughput_and_latency_read_as_a_person_writes_them() -> None:
    """40 items/s with its 95% interval [38.0, 42.04] -> [38.0, 42.0] at 10 req/s; latencies in µs shown in ms to
    0.1: p50 1,260 -> 1.3, p99 2,040 -> 2.0, the uncorrected p99 1,560 -> 1.6."""
    throughput = Throughput(10.0, 40.0, Interval(38.0, 42.04))
    assert throughput.describe() == "40.0 items/s (95% CI [38.0, 42.0]), 10.0 req/s"
    due, sent = Percentiles(p50=1260.0, p99=2040.0), Percentiles(p50=900.0, p99=1560.0)
    assert Latency(due, sent).describe() == "p50 1.3 ms, p99 2.0 ms (uncorrected p99 1.6 ms)"
    assert Latency(due).describe() == "p50 1.3 ms, p99 2.0 ms"


# -- Stability ---------------------------------------------------------------------------------------------------


def test_stability_says_its_state_spread_figures_and_tolerance() -> None:
    stable = Stability(True, 0.1, items_spread=0.03, latency_spread=0.02)
    assert stable.describe() == "stable: windows differ by 3% in throughput and latency, tolerance 10%"
    unstable = Stability(False, None, latency_spread=0.3, judged_on="latency")
    assert unstable.describe() == "unstable: windows differ by 30% in latency"
    assert Stability(False, 0.1, enough_requests=False).describe() == "too few requests per window to judge stability"


# -- ClientView --------------------------------------------------------------------------------------------------


def test_the_client_view_names_what_limited_it() -> None:
    limited = ClientView(95.0, 120.0, True, ("event loop busy 95% of the window", "sent 90.0 req/s of 100.0"), 3)
    assert limited.flags() == ("client-limited", "safety cap hit")
    assert limited.describe() == (
        "client-limited: event loop busy 95% of the window; sent 90.0 req/s of 100.0; "
        "safety cap hit 3 times (the server could not keep up with the schedule)"
    )
    assert ClientView(41.6).describe() == "client loop 42% busy" and ClientView(41.6).flags() == ()


# -- Point -------------------------------------------------------------------------------------------------------

TARGET = Target("gpu", "grpc://gpu:8500", "gpu", server="tfserving")
LOAD = LoadInfo("closed", concurrency=4)


def _figures(**changes: object) -> Figures:
    """A closed-loop point's analysis: 100 requests, 98 answered (2 UNAVAILABLE), 392 images in 4 s."""
    figures = Figures(
        duration_s=4.0,
        counts=Counts(100, 98, 392, (("UNAVAILABLE", 2),)),
        throughput=Throughput(24.5, 98.0),
        latency=Latency(Percentiles(p50=40_000.0, p99=61_000.0)),
        stability=Stability(True, 0.1, items_spread=0.02, latency_spread=0.04),
        client=ClientView(12.0, 30.0),
        codec=Codec(3.0, 4.0, 1000),
        notes=("from the analysis",),
        cut_off="",
    )
    return replace(figures, **changes)  # type: ignore[arg-type]


def test_a_measured_point_carries_every_figure_and_adds_the_callers_notes_after_the_analysis() -> None:
    figures = _figures()
    point = Point.measured(
        figures,
        target=TARGET,
        model="inception_v3",
        signature="serving_default",
        payload="float",
        batch_size=4,
        load=LOAD,
        repeat=2,
        key="a key",
        notes=("from the sweep",),
    )
    for spec in fields(figures):
        if spec.name != "notes":
            assert getattr(point, spec.name) == getattr(figures, spec.name), spec.name
    assert point.notes == ("from the analysis", "from the sweep")
    assert (point.target, point.model, point.signature, point.payload, point.batch_size, point.load) == (
        TARGET,
        "inception_v3",
        "serving_default",
        "float",
        4,
        LOAD,
    )
    assert (point.repeat, point.key) == (2, "a key")
    alone = Point.measured(
        figures,
        target=TARGET,
        model="m",
        signature="s",
        payload="jpeg",
        batch_size=1,
        load=LOAD,
    )
    assert alone.notes == ("from the analysis",)


def _point(figures: Figures, server: ServerView | None = None) -> Point:
    return Point.measured(
        figures,
        target=TARGET,
        model="inception_v3",
        signature="serving_default",
        payload="float",
        batch_size=4,
        load=LOAD,
        server=server,
    )


def test_a_point_is_described_in_one_line_with_every_problem_in_capitals() -> None:
    """The line: name, batch, load, throughput, latency, the server's split; then the problems in brackets."""
    head = "gpu b4 concurrency 4: 98.0 items/s, 24.5 req/s, p50 40.0 ms, p99 61.0 ms"
    server = ServerView(request_us_mean=30_000.0, queue_us_mean=10_000.0, compute_us_mean=20_000.0)
    assert _point(_figures(), server).describe() == (
        f"{head}, server 30.0 ms = queue 10.0 + compute 20.0 [2 errors of 100 requests (UNAVAILABLE ×2)]"
    )
    troubled = _figures(
        counts=Counts(100, 0, 0, ()),
        stability=Stability(False, 0.1, items_spread=0.3),
        client=ClientView(95.0, 99.0, True, ("event loop busy 95% of the window", "sent 9.0 req/s of 10.0")),
        cut_off="target down",
    )
    assert _point(troubled).describe() == (
        f"{head} [CUT OFF: target down, NO SUCCESSES, UNSTABLE, "
        "CLIENT-LIMITED: event loop busy 95% of the window; sent 9.0 req/s of 10.0]"
    )
    one = _figures(counts=Counts(1, 1, 4, ()))
    assert _point(one).describe() == head  # one success is a success: nothing to flag
    empty_server = ServerView(requests=3.0)  # available, but with no figure to show
    assert _point(one, empty_server).describe() == head


def test_loads_without_a_concurrency_are_described_as_one_in_flight() -> None:
    assert LoadInfo("locust").describe() == "1 Locust users"
    assert LoadInfo("stream").describe() == "stream of 1 batches in flight"


# -- energy and the SLO ------------------------------------------------------------------------------------------


def test_joules_per_image_of_one_device_and_below_one_image_per_second() -> None:
    """GPU 200 W (idle 50), CPU 80 W (idle 30). At 0.5 images/s the GPU alone spends 200 / 0.5 = 400 J per
    image, 300 J above idle; both devices 280 / 0.5 = 560 J."""
    view = EnergyView(seconds=10.0, gpu_watts_mean=200.0, gpu_idle_watts=50.0, cpu_watts_mean=80.0, cpu_idle_watts=30.0)
    assert view.joules_per_item(0.5, "gpu") == 400.0
    assert view.joules_per_item(0.5, "gpu", above_idle=True) == 300.0
    assert view.joules_per_item(0.5) == 560.0


def test_an_slo_with_a_second_equals_sign_is_refused_for_its_milliseconds() -> None:
    """ "p99=1=2": the percentile is what comes before the first "=", so "1=2" is the milliseconds, not a number."""
    with pytest.raises(InvalidValue) as caught:
        Slo.parse("p99=1=2")
    assert caught.value.name == "max_ms"
