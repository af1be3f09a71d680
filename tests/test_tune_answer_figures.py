"""Each figure of tune's answer worked out by hand: the intervals of a configuration's objective, which point
scores it, the Pareto front, the knob rows' distance to the best, and the gain over each baseline with its text."""

from __future__ import annotations

import dataclasses
import math

import pytest

from serve_bench.stats import (
    Estimate,
    Interval,
    LoadInfo,
    Percentiles,
    Score,
    Slo,
    Stability,
    Window,
    encode,
    histogram_of,
)
from serve_bench.tune import TuneConfig, answer, pareto_front, score_config
from serve_bench.tune._answer import items_estimate, latency_estimate
from tests._points import make_point


def _windows(point, rates: list[float]):  # type: ignore[no-untyped-def]
    """The point without its own items/s interval, with stability windows of these items/s."""
    throughput = dataclasses.replace(point.throughput, items_per_s_ci=None)
    stability = Stability(True, 0.1, tuple(Window(100, r, 1000.0) for r in rates))
    return dataclasses.replace(point, throughput=throughput, stability=stability)


def _with_latencies(point, values_us: list[float], p99_ci: Interval | None = None):  # type: ignore[no-untyped-def]
    histogram = histogram_of(values_us)
    latency = dataclasses.replace(
        point.latency, due=Percentiles.of(histogram), histogram=encode(histogram), p99_ci=p99_ci
    )
    return dataclasses.replace(point, latency=latency)


def _open(cid: str, rate: float, latency_us: float, concurrency: int = 1, repeat: int = 0):  # type: ignore[no-untyped-def]
    point = make_point(cid, "cpu", 1, latency_us, concurrency, repeat=repeat)
    return dataclasses.replace(point, load=LoadInfo("open", rate=rate, arrival="poisson"))


def test_items_interval_from_the_windows_is_a_batch_means_student_t_interval() -> None:
    """k windows as batch means: mean ± t(0.975, k-1) · s/√k, s with k-1 in the denominator; clamped at 0 items/s.
    [90, 100, 110]: s = √((100 + 0 + 100)/2) = 10, half = 4.30 · 10/√3 = 24.83.
    [1, 9] around 5: s = √((16 + 16)/1) = √32, half = 12.71 · √32/√2 = 50.84, so the low end is 0.
    11 windows alternating 90 and 110 (6 and 5) around 100 (the point's figure): t(10) = 2.228 (2.23 in 3 digits).
    32 windows, 16 of 90 and 16 of 110: s = √(32·100/31), t(31) = 2.040 (t(30), 2.04, past the table)."""
    base = make_point("c", "cpu", 1, 10_000, 1)  # 100 items/s
    three = items_estimate(_windows(base, [90, 100, 110]))
    assert three.value == 100 and three.basis == "95% CI"
    assert three.low == pytest.approx(100 - 4.30 * 10 / math.sqrt(3)) and three.low == pytest.approx(75.17, abs=0.01)
    assert three.high == pytest.approx(100 + 4.30 * 10 / math.sqrt(3))

    two = items_estimate(_windows(make_point("c", "cpu", 1, 200_000, 1), [1, 9]))  # 5 items/s
    assert two == Estimate(5.0, 0.0, pytest.approx(5 + 12.71 * 4), "95% CI")  # type: ignore[arg-type]

    eleven = [90.0, 110.0] * 5 + [90.0]
    mean = sum(eleven) / 11
    s = math.sqrt(sum((r - mean) ** 2 for r in eleven) / 10)
    assert items_estimate(_windows(base, eleven)).high == pytest.approx(100 + 2.23 * s / math.sqrt(11))

    many = items_estimate(_windows(base, [90.0, 110.0] * 16))
    assert many.high == pytest.approx(100 + 2.04 * math.sqrt(3200 / 31) / math.sqrt(32))
    assert items_estimate(_windows(base, [100.0])) == Estimate(100.0)  # one window: no spread known


def test_latency_interval_is_the_points_own_for_p99_else_order_statistics_of_its_histogram() -> None:
    """Order statistics (distribution-free): ranks n·q ∓ 1.96·√(n·q·(1-q)), the upper one + 1, within [1, n], read
    off the HdrHistogram (its value at percentile 100·rank/n is the value at rank round(rank)). 1000 latencies
    1001..2000 µs (exact below 2048 µs at 3 digits), rank r is 1000 + r µs.
    p50: spread 1.96·√250 = 30.99: ranks 469.01 and 531.99 -> 1469 and 1532 µs; the p50 itself is rank 500.
    p99: spread 1.96·√9.9 = 6.17: ranks 983.83 and 997.17 -> 1984 and 1997 µs; the p99 is rank 990.
    Two latencies 1001, 1002: p50 spread 1.39, ranks max(1, -0.39) = 1 and min(2, 3.39) = 2."""
    values = [1000.0 + r for r in range(1, 1001)]
    point = _with_latencies(make_point("c", "cpu", 1, 1500, 1), values)
    assert latency_estimate(point, "p50") == Estimate(1.5, 1.469, 1.532, "95% CI")
    assert latency_estimate(point, "p99") == Estimate(1.99, 1.984, 1.997, "95% CI")

    own = _with_latencies(point, values, p99_ci=Interval(1900.0, 2000.0, 0.95))
    assert latency_estimate(own, "p99") == Estimate(1.99, 1.9, 2.0, "95% CI")
    assert latency_estimate(own, "p50") == Estimate(1.5, 1.469, 1.532, "95% CI")  # the p99 interval is the p99's

    pair = _with_latencies(point, [1001.0, 1002.0])
    assert latency_estimate(pair, "p50") == Estimate(1.001, 1.001, 1.002, "95% CI")
    assert latency_estimate(_with_latencies(point, [1001.0]), "p50") == Estimate(1.001)  # one latency: no interval
    bare = dataclasses.replace(point, latency=dataclasses.replace(point.latency, histogram=""))
    assert latency_estimate(bare, "p50") == Estimate(1.5)


def test_a_configurations_score_comes_from_the_right_point() -> None:
    """No point worth reading: infeasible. At a rate, of the passing points at that rate the lowest latency
    (a repeat with more items/s but a higher p99 does not win). None passing: the closest is one without errors
    first (even a single error), then the lowest latency."""
    slo = Slo("p99", 100.0)
    assert score_config("c", [make_point("c", "cpu", 1, 1000, 1, ok=0)], slo) == Score("c", False)

    fast, busy = _open("c", 100, 8000), _open("c", 100, 9000, concurrency=2, repeat=1)  # 125/s at 9.6 ms, 222/s
    at_rate = score_config("c", [busy, fast], slo, at_rate=100)
    assert at_rate.feasible and at_rate.point_key == fast.key and at_rate.latency_ms == pytest.approx(9.6)

    one_error = make_point("c", "cpu", 1, 5000, 1, errors=1, repeat=0)
    clean = make_point("c", "cpu", 1, 20_000, 1, repeat=1)
    closest = score_config("c", [one_error, clean], Slo("p99", 1.0))
    assert not closest.feasible and closest.point_key == clean.key


def test_the_pareto_front_leaves_out_points_with_errors_or_cut_off() -> None:
    """A point with one error or one cut off says nothing clean about the configuration, however fast it looks."""
    clean = make_point("a", "cpu", 1, 10_000, 4)  # 400/s at 12 ms
    errors = make_point("b", "cpu", 1, 1000, 8, errors=1)  # 8000/s at 1.2 ms, one error
    cut = make_point("c", "cpu", 1, 1000, 8, cut_off="the target died")
    assert [p.config for p in pareto_front([clean, errors, cut], "p99")] == ["a"]


def test_answer_knob_rows_and_gains_over_each_baseline() -> None:
    """mbs8 at concurrency 8: 800/s, p99 12 ms (the best); mbs16: 400/s; the defaults 500/s, measured at
    concurrency 4 only; no batching misses the 50 ms SLO at concurrency 8 (80/s, p99 120 ms); mbs32 did not start.
    Rows' distance to the best, (objective / 800 - 1) · 100: default -37.5, 16 -50, 8 0; no distance for a value
    whose best misses the SLO or did not start. A one-valued knob (runtime) has no rows.
    Gains: 800/500 = 1.60× the defaults (no same-load point); no batching meets the SLO at no load, but at
    concurrency 8 its p99 is 120/12 = 10× the best's and its items/s 800/80 = 10× lower. A baseline that was
    not measured is skipped, not the end of the list."""
    configs = {
        c.id: c
        for c in (
            TuneConfig(),
            TuneConfig(batching=False),
            TuneConfig(max_batch_size=8),
            TuneConfig(max_batch_size=16),
            TuneConfig(max_batch_size=32),
        )
    }
    points = {
        "mbs8": [make_point("mbs8", "cpu", 1, 10_000, 8)],
        "mbs16": [make_point("mbs16", "cpu", 1, 20_000, 8)],
        "defaults": [make_point("defaults", "cpu", 1, 8_000, 4)],
        "nobatch": [make_point("nobatch", "cpu", 1, 100_000, 8)],
    }
    baselines = {"latest": "mbs64", "defaults": "defaults", "no_batching": "nobatch"}
    result = answer(points, configs, {"mbs32": "did not become AVAILABLE"}, Slo("p99", 50.0), baselines,
                    ["runtime", "max_batch_size"])  # fmt: skip
    assert result.best is not None and result.best.config == "mbs8"
    rows = {r.value: (r.knob, r.best_config, r.feasible, r.vs_best_pct) for r in result.knobs}
    assert rows == {
        "default": ("max_batch_size", "defaults", True, pytest.approx(-37.5)),
        "off": ("max_batch_size", "nobatch", False, 0.0),
        "8": ("max_batch_size", "mbs8", True, 0.0),
        "16": ("max_batch_size", "mbs16", True, pytest.approx(-50.0)),
        "32": ("max_batch_size", "mbs32", False, 0.0),
    }
    defaults, no_batching = result.gains
    assert defaults.ratio == Estimate(pytest.approx(1.6))  # type: ignore[arg-type]
    assert defaults.text == "1.60× the images/s under the SLO of defaults (defaults)" and defaults.latency_ratio is None
    assert no_batching.ratio is None and no_batching.latency_ratio == Estimate(pytest.approx(10.0))  # type: ignore[arg-type]
    assert no_batching.text == (
        "no_batching (nobatch) meets the SLO at no measured load; at concurrency 8: p99 12.0 ms vs 120.0 ms "
        "(10.0× lower), 800.0 vs 80.0 images/s (10.0×)"
    )

    two = answer(points, {k: configs[k] for k in ("mbs8", "mbs16")}, {}, Slo("p99", 50.0), {}, ["max_batch_size"])
    assert [r.value for r in two.knobs] == ["8", "16"]  # two values are enough for rows
    assert answer({}, {}, {}, Slo("p99", 50.0), {}, []).closest is None


def test_latency_gain_at_the_slo_rate_and_a_winning_baseline_with_nothing_searched() -> None:
    """At 100 req/s the best has p99 9.6 ms, the defaults 19.2 ms: 2.00× lower p99, and 125 vs 62.5 items/s.
    When the defaults win and every feasible configuration is a baseline, the defaults' own gain is left out and
    the other baseline's is still given: 1000 vs 400 items/s, 2.50×."""
    configs = {"a": TuneConfig(max_batch_size=4), "defaults": TuneConfig()}
    points = {"a": [_open("a", 100, 8000)], "defaults": [_open("defaults", 100, 16_000)]}
    result = answer(points, configs, {}, Slo("p99", 100.0), {"defaults": "defaults"}, [], at_rate=100.0)
    (gain,) = result.gains
    assert gain.ratio == Estimate(pytest.approx(2.0))  # type: ignore[arg-type]
    assert gain.text == (
        "2.00× the lower p99 at the SLO rate of defaults (defaults); at 100 req/s poisson: p99 9.6 ms vs 19.2 ms "
        "(2.00× lower), 125.0 vs 62.5 images/s (2.00×)"
    )

    configs = {c.id: c for c in (TuneConfig(), TuneConfig(batching=False))}
    points = {
        "defaults": [make_point("defaults", "cpu", 1, 8_000, 8)],  # 1000/s
        "nobatch": [make_point("nobatch", "cpu", 1, 20_000, 8)],  # 400/s
    }
    result = answer(points, configs, {}, Slo("p99", 50.0), {"defaults": "defaults", "no_batching": "nobatch"}, [])
    assert result.best is not None and result.best.config == "defaults"
    assert [(g.baseline, g.ratio) for g in result.gains] == [("no_batching", Estimate(pytest.approx(2.5)))]  # type: ignore[arg-type]
