"""report/_analysis.py's figures against values worked out by hand: the latency model a + b·B and its gain
bound, the baseline and the two batching gains, the table's order, the verdict's sentences and the warnings.

The fit's expected values come from its definition (least squares on relative errors), solved here with
exact fractions and Cramer's rule, not from numpy; every other figure is worked out in a comment beside it.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest

from serve_bench.report import analyze_run, fit_latency_model
from serve_bench.report._analysis import LatencyModel
from serve_bench.stats import Estimate, LoadInfo, Point, Slo, point_key
from tests._points import make_point

FIT = "±2 sigma of the fit"


def _relative_fit(batches: list[int], latencies: list[float]) -> dict[str, float]:
    """The fit's definition, worked exactly: minimise Σ((y - a - b·x) / y)², i.e. regress 1 on (1/y, x/y).

    Normal equations M·(a, b) = r with M = [[Σ1/y², Σx/y²], [Σx/y², Σx²/y²]] and r = (Σ1/y, Σx/y), solved by
    Cramer's rule. R² is the usual 1 - Σresidual² / Σ(y - ȳ)². The gain bound g = (a + b) / b = 1 + a/b; its
    sigma by the delta method: the variance of the relative residuals over n - 2 degrees of freedom times
    M⁻¹ gives cov(a, b), and σ² = ∇g·cov·∇g with ∇g = (1/b, -a/b²).
    """
    xs, ys = [Fraction(x) for x in batches], [Fraction(y) for y in latencies]
    s11 = sum(1 / y**2 for y in ys)
    s1x = sum(x / y**2 for x, y in zip(xs, ys, strict=True))
    sxx = sum(x * x / y**2 for x, y in zip(xs, ys, strict=True))
    r1, rx = sum(1 / y for y in ys), sum(x / y for x, y in zip(xs, ys, strict=True))
    det = s11 * sxx - s1x**2
    a, b = (r1 * sxx - s1x * rx) / det, (s11 * rx - s1x * r1) / det
    residuals = [y - a - b * x for x, y in zip(xs, ys, strict=True)]
    mean = sum(ys) / len(ys)
    r2 = 1 - sum(r * r for r in residuals) / sum((y - mean) ** 2 for y in ys)
    variance = sum((r / y) ** 2 for r, y in zip(residuals, ys, strict=True)) / (len(xs) - 2)
    ga, gb = 1 / b, -a / b**2
    sigma2 = variance * (ga * ga * sxx - 2 * ga * gb * s1x + gb * gb * s11) / det
    return {"a": float(a), "b": float(b), "r2": float(r2), "gain": float(1 + a / b), "sigma": math.sqrt(sigma2)}


def test_the_fit_is_least_squares_on_relative_errors_with_the_bound_two_sigma_either_side():
    """Five batch sizes around 1000 µs + 1000 µs·B with a few percent of noise: a, b, R² and the bound's
    range agree with the exact solution. The range's low end lies between 1 and 2 (not clamped)."""
    batches, latencies = [1, 2, 4, 8, 16], [2100.0, 2900.0, 5200.0, 8800.0, 17300.0]
    want = _relative_fit(batches, latencies)  # a 1052.16, b 994.53, R² 0.99864, g 2.0579, sigma 0.1198
    model = fit_latency_model(batches, latencies)
    assert model is not None and model.points == 5
    assert model.a_us == pytest.approx(want["a"], rel=1e-9) and model.b_us == pytest.approx(want["b"], rel=1e-9)
    assert model.r_squared == pytest.approx(want["r2"], rel=1e-12)
    assert model.gain_bound == pytest.approx(want["gain"], rel=1e-12)
    low, high = want["gain"] - 2 * want["sigma"], want["gain"] + 2 * want["sigma"]
    assert 1.0 < low < 2.0
    assert model.bound == Estimate(pytest.approx(want["gain"]), pytest.approx(low), pytest.approx(high), FIT)
    # three batch sizes: one degree of freedom left, so still a range (it is wider)
    few = _relative_fit(batches[:3], latencies[:3])
    three = fit_latency_model(batches[:3], latencies[:3])
    assert three is not None and three.bound.high == pytest.approx(few["gain"] + 2 * few["sigma"])
    assert three.bound.low == pytest.approx(few["gain"] - 2 * few["sigma"])


def test_the_bound_s_low_end_stops_at_one_batching_never_lowers_throughput_in_the_model():
    """A small fixed cost (g near 1) and noise: g - 2 sigma falls below 1, so the range starts at 1.0."""
    batches, latencies = [1, 2, 4, 8], [1300.0, 1900.0, 4300.0, 7800.0]
    want = _relative_fit(batches, latencies)
    assert want["gain"] - 2 * want["sigma"] < 1.0 < want["gain"]
    model = fit_latency_model(batches, latencies)
    assert model is not None and model.bound.low == 1.0
    assert model.bound.high == pytest.approx(want["gain"] + 2 * want["sigma"])


def test_an_exact_line_has_a_range_of_zero_width_and_two_batch_sizes_have_none():
    """2000 + 500·B exactly: no residuals, so R² is 1 and the range is the bound itself, (2000 + 500) / 500 = 5;
    with two batch sizes the line has no degree of freedom left and no range is claimed."""
    model = fit_latency_model([1, 2, 4, 8], [2500.0, 3000.0, 4000.0, 6000.0])
    assert model is not None and model.r_squared == pytest.approx(1.0)
    assert model.bound == Estimate(pytest.approx(5.0), pytest.approx(5.0), pytest.approx(5.0), FIT)
    two = fit_latency_model([1, 8], [2500.0, 6000.0])
    assert two is not None and two.gain_bound == pytest.approx(5.0) and two.bound.low is None
    assert two.bound.basis == ""


def test_a_negative_fixed_cost_is_noise_so_the_line_goes_through_the_origin():
    """900, 1900, 3900 µs at batch 1, 2, 4 (-100 + 1000·B): the free fit's a is negative, so a = 0 and
    b minimises Σ(1 - b·x/y)²: b = Σ(x/y) / Σ(x²/y²). No fixed cost: the gain is 1 and its range [1, 1]
    (batching cannot raise throughput), with one degree of freedom even for two batch sizes."""
    batches, latencies = [1, 2, 4], [900.0, 1900.0, 3900.0]
    assert _relative_fit(batches, latencies)["a"] < 0
    xs, ys = [Fraction(x) for x in batches], [Fraction(y) for y in latencies]
    b = sum(x / y for x, y in zip(xs, ys, strict=True)) / sum((x / y) ** 2 for x, y in zip(xs, ys, strict=True))
    mean = sum(ys) / 3
    r2 = 1 - sum((y - b * x) ** 2 for x, y in zip(xs, ys, strict=True)) / sum((y - mean) ** 2 for y in ys)
    model = fit_latency_model(batches, latencies)
    assert model is not None and model.a_us == 0.0 and model.b_us == pytest.approx(float(b), rel=1e-12)
    assert model.r_squared == pytest.approx(float(r2), rel=1e-12)
    assert model.bound == Estimate(1.0, 1.0, 1.0, FIT)
    two = fit_latency_model([1, 2], [900.0, 1900.0])
    assert two is not None and two.a_us == 0.0 and two.bound == Estimate(1.0, 1.0, 1.0, FIT)


def test_latency_exactly_proportional_to_the_batch_has_no_fixed_cost_and_is_not_a_negative_one():
    """2 and 4 µs at batch 1 and 2 (2 µs × B): the free fit's a is exactly 0, a fixed cost that is not
    negative, so the free line stands (the through-origin refit is for a negative a only). Its two
    parameters take both batch sizes' degrees of freedom: the bound is 1 (no fixed cost to spread), with no
    range claimed. The pairwise sums make it exact: xj·yi - xi·yj is 0 for whole batch sizes at any whole number
    of µs per item (3 µs × B at batch 1, 3, 7 and 100 too), so a is 0.0, not ±1e-15."""
    model = fit_latency_model([1, 2], [2.0, 4.0])
    assert model is not None and (model.a_us, model.b_us) == (0.0, 2.0)
    assert model.bound == Estimate(1.0)
    # three batch sizes on the same line: one degree of freedom, no residual, so the range is [1, 1]
    three = fit_latency_model([1, 2, 4], [2.0, 4.0, 8.0])
    assert three is not None and three.bound == Estimate(1.0, 1.0, 1.0, FIT)
    assert (model := fit_latency_model([1, 3, 7, 100], [3.0, 9.0, 21.0, 300.0])) is not None and model.a_us == 0.0


def test_zero_latencies_give_no_model_and_no_division_by_zero():
    """Every latency 0 µs (a clock that did not tick during the call): latency does not grow with the batch,
    so there is no per-image cost to fit and no model, as for any flat curve. One 0 µs among others (a repeat
    that answered nothing, its latencies zeros) weighs 1/(1e-9)² = 1e18: the fit goes through it, so the fixed
    cost is negative, the line through the origin has a slope of about 0, and there is no model either, where
    the normal matrix's sw·sxx - sx² rounded to exactly 0 and divided by it."""
    assert fit_latency_model([1, 2, 4], [0.0, 0.0, 0.0]) is None
    assert fit_latency_model([1, 2, 4], [0.0, 1000.0, 2000.0]) is None
    assert fit_latency_model([1, 2], [0.0, 5.0]) is None
    assert fit_latency_model([1, 2, 4], [1000.0, 0.0, 2000.0]) is None


def test_the_fit_does_not_depend_on_the_unit_of_latency():
    """The same curve in seconds instead of µs (every latency × 1e-6): a and b scale by 1e-6, R² and the bound
    with its range do not change. Sub-unit values are where a clamp or a threshold written for µs would bite."""
    batches, latencies = [1, 2, 4, 8, 16], [2100.0, 2900.0, 5200.0, 8800.0, 17300.0]
    in_us, in_s = fit_latency_model(batches, latencies), fit_latency_model(batches, [y * 1e-6 for y in latencies])
    assert in_us is not None and in_s is not None
    assert in_s.a_us == pytest.approx(in_us.a_us * 1e-6) and in_s.b_us == pytest.approx(in_us.b_us * 1e-6)
    assert in_s.r_squared == pytest.approx(in_us.r_squared, rel=1e-9)
    assert in_s.bound == Estimate(
        pytest.approx(in_us.bound.value), pytest.approx(in_us.bound.low), pytest.approx(in_us.bound.high), FIT
    )
    # a per-image cost under one unit is still a cost: 0.2 + 0.5·B s gives the bound (0.2 + 0.5) / 0.5 = 1.4
    small = fit_latency_model([1, 2, 4], [0.7, 1.2, 2.2])
    assert small is not None and small.a_us == pytest.approx(0.2) and small.gain_bound == pytest.approx(1.4)


def test_no_model_when_latency_stays_flat_or_when_one_batch_size_was_measured():
    """A flat curve has no per-image cost: b = 0, and (a + b) / b would be infinite, not a bound. So has
    1000, 3000, 1000 µs at batch 1, 3, 5: symmetric about batch 3 with symmetric weights, its slope is 0."""
    assert fit_latency_model([1, 2, 4], [1000.0, 1000.0, 1000.0]) is None
    assert fit_latency_model([1, 2, 4, 8], [1000.0, 1000.0, 1000.0, 1000.0]) is None
    assert fit_latency_model([1, 3, 5], [1000.0, 3000.0, 1000.0]) is None
    assert fit_latency_model([1, 2, 4, 5], [1000.0, 2000.0, 2000.0, 1000.0]) is None
    assert fit_latency_model([4, 4, 4], [1000.0, 2000.0, 3000.0]) is None
    # a per-image cost a million times smaller than the latency is still one: 1000 µs + 1e-6 µs × B up to
    # batch 4 (4e-6 µs across the batches, four times the cutoff of a billionth of 1000 µs)
    tiny = fit_latency_model([1, 2, 4], [1000.000001, 1000.000002, 1000.000004])
    assert tiny is not None and tiny.b_us == pytest.approx(1e-6, rel=1e-3)
    # ... and one forty times smaller is not: 2.5e-8 µs × B is 1e-7 µs across the batches, a tenth of the cutoff
    assert fit_latency_model([1, 2, 4], [1000.000000025, 1000.00000005, 1000.0000001]) is None


def test_the_model_s_description_and_its_throughput():
    """12 345 µs + 1 234 µs × B: 12.35 ms and 1.234 ms (µs / 1000). At batch 4 and 2 in flight a call takes
    12 345 + 4 × 1 234 = 17 281 µs, so 2 × 4 images per 0.017281 s = 462.93... images/s."""
    model = LatencyModel(12_345.0, 1_234.0, 0.98765, 6, Estimate(11.0))
    assert model.describe() == "12.35 ms + 1.234 ms × batch (R² 0.988, 6 batch sizes)"
    assert model.latency_us(4) == 17_281.0
    assert model.items_per_s(4, concurrency=2) == pytest.approx(8 / 0.017281, rel=1e-12)
    assert model.items_per_s(4) == pytest.approx(4 / 0.017281, rel=1e-12)


def _as(point: Point, load: LoadInfo | None = None, **target: object) -> Point:
    """``point`` under another load or with other target fields (its key follows, as a sweep writes it)."""
    new_target = dataclasses.replace(point.target, **target)  # type: ignore[arg-type]
    new_load = point.load if load is None else load
    key = point_key(new_target.name, point.model, point.signature, point.payload, point.batch_size, new_load, 0)
    return dataclasses.replace(point, target=new_target, load=new_load, key=key)


def test_the_table_runs_baseline_first_then_closed_stream_locust_open_each_by_batch_load_and_rate():
    """The baseline is batch 1 at the fewest in flight among the curve modes: Locust's one user here, though
    a closed loop at 2 in flight sorts first among the other rows (closed < stream < locust < open, then
    batch, requests in flight and, for open loops, the rate). Measured in a scrambled order on purpose."""
    base = make_point("cpu", "cpu", 1, 10_000)
    points = [
        _as(base, LoadInfo("open", rate=20.0, arrival="poisson")),
        _as(base, LoadInfo("open", rate=10.0, arrival="poisson")),
        _as(make_point("cpu", "cpu", 1, 12_000, concurrency=3), LoadInfo("locust", concurrency=3)),
        _as(make_point("cpu", "cpu", 2, 15_000), LoadInfo("stream", concurrency=1)),
        make_point("cpu", "cpu", 4, 20_000),
        make_point("cpu", "cpu", 1, 12_000, concurrency=2),
        _as(base, LoadInfo("locust", concurrency=1)),
    ]
    target = analyze_run(points).targets[0]
    assert target.baseline is not None and target.baseline.mode == "locust" and target.baseline.in_flight == 1
    assert [(c.mode, c.label) for c in target.cells] == [
        ("locust", "cpu b1 c1"),
        ("closed", "cpu b1 c2"),
        ("closed", "cpu b4 c1"),
        ("stream", "cpu b2 c1"),
        ("locust", "cpu b1 c3"),
        ("open", "cpu b1 10/s"),
        ("open", "cpu b1 20/s"),
    ]
    # the curves stay within the baseline's mode: Locust at 1 user; the closed loop's batch 4 is not on them
    assert {b: c.label for b, c in target.client_curve.items()} == {1: "cpu b1 c1"}
    assert {n: c.mode for n, c in target.server_curve.items()} == {1: "locust", 3: "locust"}


def test_the_gains_take_the_best_above_the_baseline_even_when_it_is_slower_than_the_baseline():
    """Batch 1 at 1 in flight: 1 / 10 ms = 100 images/s. Batch 2: 2 / 25 ms = 80, batch 4: 4 / 50 ms = 80:
    batching loses here, so the client gain is 80/100 = 0.80 (batch 2, the first of the tie), not the
    baseline over itself. Server side: 2 in flight at 25 ms = 80/s, 4 at 40 ms = 100/s: the gain 1.00."""
    points = [
        make_point("cpu", "cpu", 1, 10_000),
        make_point("cpu", "cpu", 2, 25_000),
        make_point("cpu", "cpu", 4, 50_000),
        make_point("cpu", "cpu", 1, 25_000, concurrency=2),
        make_point("cpu", "cpu", 1, 40_000, concurrency=4),
    ]
    target = analyze_run(points).targets[0]
    assert target.client_gain is not None and target.client_gain.top.label == "cpu b2 c1"
    assert target.client_gain.ratio.value == pytest.approx(0.8)
    assert target.server_gain is not None and target.server_gain.top.label == "cpu b1 c4"
    assert target.server_gain.ratio.value == pytest.approx(1.0)
    # the best per batch: batch 1's best is 4 in flight (100/s ties the baseline's 100/s: the first measured stays)
    assert {b: c.label for b, c in target.best_by_batch.items()} == {1: "cpu b1 c1", 2: "cpu b2 c1", 4: "cpu b4 c1"}
    # two batch sizes only (1 and 2) still make a client gain: 2 / 25 ms over 1 / 10 ms = 0.80
    two = analyze_run(points[:2]).targets[0]
    assert two.client_gain is not None and two.client_gain.ratio.value == pytest.approx(0.8)


def test_a_slow_baseline_under_one_image_a_second_still_gives_gains_and_an_slo_gain():
    """Batch 1 at 2 s a call: 0.5 images/s. Batch 4 at 4 s: 1 image/s, twice the baseline; 2 in flight at
    2 s: 1 image/s, also 2.00×. p99 = 1.2 × latency: 2.4 s and 4.8 s, both within p99 ≤ 5 s. A CPU this slow
    is still compared with a GPU: 1 image/s (its best) against the GPU's 1 / 1 ms = 1000: 1000×."""
    points = [
        make_point("cpu", "cpu", 1, 2e6),
        make_point("cpu", "cpu", 4, 4e6),
        make_point("cpu", "cpu", 1, 2e6, concurrency=2),
        make_point("gpu", "gpu", 1, 1_000),
    ]
    analysis = analyze_run(points, Slo("p99", 5_000.0))
    cpu = analysis.targets[0]
    assert cpu.client_gain is not None and cpu.client_gain.ratio.value == pytest.approx(2.0)
    assert cpu.server_gain is not None and cpu.server_gain.ratio.value == pytest.approx(2.0)
    assert cpu.slo_gain is not None and cpu.slo_gain.ratio.value == pytest.approx(2.0)
    assert cpu.best_under_slo is not None and cpu.best_under_slo.label == "cpu b4 c1"
    assert (
        "GPU over CPU at their best within p99 ≤ 5000 ms: 1000.0× (gpu b1 c1: 1000.0 images/s; cpu b4 c1: 1.0)."
        in analysis.verdict_lines
    )


def test_a_baseline_of_zero_images_a_second_gives_no_gain_rather_than_an_infinite_one():
    """A point that answered requests but whose window counted no images (items/s 0): a ratio over it is not a
    figure, so neither gain, nor the SLO gain, nor the GPU over CPU line is stated."""
    zero = make_point("cpu", "cpu", 1, 10_000)
    zero = dataclasses.replace(zero, throughput=dataclasses.replace(zero.throughput, items_per_s=0.0))
    points = [zero, make_point("cpu", "cpu", 4, 20_000), make_point("cpu", "cpu", 1, 10_000, concurrency=2)]
    analysis = analyze_run([*points, make_point("gpu", "gpu", 1, 1_000)], Slo("p99", 100.0))
    cpu = analysis.targets[0]
    assert cpu.baseline is not None and cpu.baseline.items_per_s.value == 0.0
    assert cpu.client_gain is None and cpu.server_gain is None and cpu.slo_gain is None
    analysis = analyze_run([zero, make_point("gpu", "gpu", 1, 1_000)])
    assert not any(line.startswith("GPU over CPU") for line in analysis.verdict_lines)


def test_a_bound_equal_to_the_measured_gain_holds_and_gflops_are_images_times_flops():
    """1, 2 and 4.4 ms at batch 1, 2 and 4: 1000, 1000 and 909 images/s, so the measured gain (batch 2) is
    exactly 1; latency grows faster than the batch, the free fit's a is negative, the line goes through the
    origin and its bound (0 + b) / b is exactly 1 too. A bound equal to the gain holds: not contradicted.
    At 5.7 GFLOP per image, 1000 images/s achieve 5 700 GFLOP/s; 4 / 4.4 ms = 909.09 images/s, 5 181.8."""
    points = [make_point("gpu", "gpu", b, latency) for b, latency in ((1, 1_000.0), (2, 2_000.0), (4, 4_400.0))]
    analysis = analyze_run(points, flops_per_image=5.7e9)
    target = analysis.targets[0]
    assert target.client_gain is not None and target.client_gain.ratio.value == 1.0
    assert target.model is not None and target.model.a_us == 0.0 and target.model.gain_bound == 1.0
    assert not target.model_contradicted
    exact = pytest.approx(5_700.0, rel=1e-12)
    assert target.gflops == {1: exact, 2: exact, 4: pytest.approx(4 / 0.0044 * 5.7, rel=1e-12)}
    assert analysis.flops_per_image == 5.7e9
    assert analyze_run(points).targets[0].gflops == {}


def test_the_device_picked_for_gpu_over_cpu_is_grpc_then_v2_grpc_then_the_first_measured():
    """Three GPU targets measured REST first: the comparison uses the gRPC one (the least client overhead);
    without it the Open Inference Protocol's gRPC one; with neither, the first target measured."""
    rest = _as(make_point("gpu-rest", "gpu", 1, 2_000), protocol="rest")
    v2 = _as(make_point("gpu-v2", "gpu", 1, 1_500), protocol="v2-grpc")
    grpc = make_point("gpu-grpc", "gpu", 1, 1_000)
    cpu = make_point("cpu", "cpu", 1, 10_000)
    assert grpc.target.protocol == "grpc"

    def picked(*points: Point) -> str:
        (row,) = analyze_run([*points, cpu]).device_ratios
        return row.gpu.target

    assert picked(rest, v2, grpc) == "gpu-grpc"
    assert picked(rest, v2) == "gpu-v2"
    assert picked(rest, _as(make_point("gpu-rest2", "gpu", 1, 1_000), protocol="v2-rest")) == "gpu-rest"


def test_the_verdict_without_an_slo_with_one_device_and_with_no_batching_measured():
    """Word for word. GPU and CPU without an SLO: 'at their best' and nothing after it; the GPU's best is
    4 / 2 ms = 2000 images/s, the CPU's 1 / 10 ms = 100: 20.0×."""
    gpu = [make_point("gpu", "gpu", 1, 1_000), make_point("gpu", "gpu", 4, 2_000)]
    cpu = [make_point("cpu", "cpu", 1, 10_000)]
    lines = analyze_run([*gpu, *cpu]).verdict_lines
    assert lines == (
        "gpu: batch 4 gives 2.00× the images/s of batch 1 (gpu b4 c1 vs gpu b1 c1).",
        "GPU over CPU at their best: 20.0× (gpu b4 c1: 2000.0 images/s; cpu b1 c1: 100.0).",
    )
    # a GPU alone: no comparison and no 'No GPU target' line
    assert analyze_run(gpu).verdict_lines == lines[:1]
    # one point per target: no gain of either kind to state
    assert analyze_run([gpu[0], *cpu]).verdict_lines == (
        "GPU over CPU at their best: 10.0× (gpu b1 c1: 1000.0 images/s; cpu b1 c1: 100.0).",
        "Not enough points for a batching gain: measure batch 1 and a larger batch (or more requests in flight) "
        "per target.",
    )
    # server batching alone is a batching gain too: 2 in flight at 1 ms = 2000/s over 1000/s
    served = analyze_run([gpu[0], make_point("gpu", "gpu", 1, 1_000, concurrency=2)]).verdict_lines
    assert served == (
        "gpu: server batching of single images at 2 in flight gives 2.00× the images/s (gpu b1 c2 vs gpu b1 c1).",
    )
    assert analyze_run(cpu).verdict_lines[0] == "No GPU target in this run."


def test_a_gain_whose_range_ends_exactly_at_one_is_within_the_noise():
    """Repeats (the range of a ratio is low/high over high/low): batch 1 at 200 and 250 images/s (5 and 4 ms),
    batch 4 at 250 and 400 (16 and 10 ms): low = 250/250 = 1 exactly, so within the noise. Batch 4 at 160
    and 200 (25 and 20 ms): high = 200/200 = 1 exactly, within the noise too."""
    base = [make_point("cpu", "cpu", 1, latency, repeat=r) for r, latency in enumerate((5_000, 4_000))]
    up = [make_point("cpu", "cpu", 4, latency, repeat=r) for r, latency in enumerate((16_000, 10_000))]
    down = [make_point("cpu", "cpu", 4, latency, repeat=r) for r, latency in enumerate((25_000, 20_000))]
    for batch4, low, high in ((up, 1.0, 2.0), (down, 0.64, 1.0)):
        target = analyze_run([*base, *batch4]).targets[0]
        assert target.client_gain is not None
        assert (target.client_gain.ratio.low, target.client_gain.ratio.high) == (pytest.approx(low), high)
        line = analyze_run([*base, *batch4]).verdict_lines[0]
        assert "within the noise" in line and "gives" not in line
    # server batching: 2 in flight at 8 and 5 ms = 250 and 400 images/s (median 325) over 200 and 250 (225):
    # 325/225 = 1.44, low 250/250 = 1 exactly, high 400/200 = 2
    served = [make_point("cpu", "cpu", 1, latency, concurrency=2, repeat=r) for r, latency in enumerate((8_000, 5_000))]
    line = analyze_run([*base, *served]).verdict_lines[0]
    assert line == (
        "cpu: server batching of single images at 2 in flight: 1.44× [1.00×–2.00×] the images/s, within the noise "
        "(cpu b1 c2 vs cpu b1 c1)."
    )


def test_warnings_name_the_point_by_its_key_and_keep_only_the_notes_that_matter():
    """A point with notes: 'unanswered' and 'did not become stable' ones are warnings, the synthetic
    'server metrics unavailable' one is not. Without a key the point is named 'target bBATCH'."""
    point = make_point("gpu", "gpu", 4, 10_000)
    noted = point.with_notes("3 requests unanswered at the end", "the point did not become stable in 30 s")
    warnings = analyze_run([noted]).warnings
    assert warnings == [
        f"{point.key}: 3 requests unanswered at the end",
        f"{point.key}: the point did not become stable in 30 s",
    ]
    unnamed = dataclasses.replace(noted, key="", cut_off="target down")
    assert analyze_run([unnamed]).warnings == [
        "cut off: gpu b4: target down",
        "gpu b4: 3 requests unanswered at the end",
        "gpu b4: the point did not become stable in 30 s",
    ]


def _runtime(name: str, runtime: str, batch: int, latency_us: float, concurrency: int = 1, repeat: int = 0) -> Point:
    return _as(make_point(name, "cpu", batch, latency_us, concurrency=concurrency, repeat=repeat), runtime=runtime)


def _levers(points: list[Point]) -> list[str]:
    return [v for v in analyze_run(points).verdict_lines if v.startswith(("Runtimes on", "Which lever"))]


def test_runtimes_are_compared_at_their_best_over_tensorflow_and_the_larger_lever_is_named():
    """TensorFlow (measured second): batch 1 at 10 ms = 100 images/s, batch 4 at 20 ms = 200 (p99 1.2 × 20 =
    24.0 ms): batching gives 2.00×. ONNX Runtime at 4 ms = 250/s (p99 4.8 ms): 250/200 = 1.25×; OpenVINO at
    5 ms = 200/s (p99 6.0): 1.00×. Batching (2.00×) moved throughput more than the best runtime (1.25×)."""
    tf = [_runtime("tf", "tensorflow", 1, 10_000), _runtime("tf", "tensorflow", 4, 20_000)]
    ov = _runtime("ov", "openvino", 1, 5_000)
    assert _levers([_runtime("ort", "onnxruntime", 1, 4_000), *tf, ov]) == [
        "Runtimes on cpu at their best, over tensorflow (tf b4 c1: 200.0 images/s, p99 24.0 ms): "
        "onnxruntime 1.25× (ort b1 c1: 250.0 images/s, p99 4.8 ms); openvino 1.00× (ov b1 c1: 200.0 images/s, "
        "p99 6.0 ms).",
        "Which lever on cpu: batching (2.00× on tensorflow) moved throughput more than the runtime "
        "(onnxruntime, 1.25×).",
    ]
    # ONNX Runtime at 2 ms = 500/s: 2.50×, more than batching's 2.00×
    assert _levers([_runtime("ort", "onnxruntime", 1, 2_000), *tf])[1] == (
        "Which lever on cpu: the runtime (onnxruntime, 2.50×) moved throughput more than batching (2.00× on "
        "tensorflow)."
    )
    # the best runtime exactly as fast as TensorFlow's best (OpenVINO 1.00×; ONNX Runtime 100/200 = 0.50×)
    assert _levers([_runtime("ort", "onnxruntime", 1, 10_000), *tf, ov])[1] == (
        "Which lever on cpu: no runtime was faster than tensorflow beyond the noise."
    )
    # TensorFlow measured at batch 1 only: no batching gain, so the runtime it is (250/100 = 2.50×)
    assert _levers([tf[0], _runtime("ort", "onnxruntime", 1, 4_000)])[1] == (
        "Which lever on cpu: batching gave tensorflow no gain beyond the noise (or none measured): the runtime "
        "(onnxruntime, 2.50×) it is."
    )
    # server batching counts as batching too, and the larger of the two gains is the one compared: 4 in flight
    # at 10 ms = 400/s is 4.00× batch 1 (client batching: 2.00×) and TensorFlow's best; ONNX Runtime at 1 ms =
    # 1000/s is 1000/400 = 2.50×, less than 4.00×
    served = [*tf, _runtime("tf", "tensorflow", 1, 10_000, concurrency=4)]
    assert _levers([*served, _runtime("ort", "onnxruntime", 1, 1_000)])[1] == (
        "Which lever on cpu: batching (4.00× on tensorflow) moved throughput more than the runtime "
        "(onnxruntime, 2.50×)."
    )


def test_without_tensorflow_the_first_runtime_is_the_baseline_and_one_runtime_makes_no_comparison():
    """ONNX Runtime measured first at 4 ms = 250/s, OpenVINO at 2 ms = 500/s: 2.00× over ONNX Runtime; a
    target without a runtime stated is left out, and one runtime alone is not compared with anything."""
    ort, ov = _runtime("ort", "onnxruntime", 1, 4_000), _runtime("ov", "openvino", 1, 2_000)
    unstated = make_point("plain", "cpu", 1, 1_000)
    assert _levers([ort, unstated, ov])[0] == (
        "Runtimes on cpu at their best, over onnxruntime (ort b1 c1: 250.0 images/s, p99 4.8 ms): openvino 2.00× "
        "(ov b1 c1: 500.0 images/s, p99 2.4 ms)."
    )
    assert _levers([ort, unstated]) == []
    # the baseline runtime measured nothing usable (cut off), or the other runtime did not: no comparison
    assert _levers([dataclasses.replace(ort, cut_off="target down"), ov]) == []
    assert _levers([ort, dataclasses.replace(ov, cut_off="target down")]) == []


def test_runtime_and_batching_gains_whose_ranges_overlap_or_touch_move_it_alike():
    """Repeats give ranges. TensorFlow batch 1 at 10 and 8 ms (100, 125/s), batch 4 at 16 and 20 ms (250,
    200/s): batching 225/112.5 = 2.00× [200/125 = 1.60×, 250/100 = 2.50×]. ONNX Runtime at 2.5 and 2 ms
    (400, 500/s) over TensorFlow's best 225 [200, 250]: 2.00× [400/250 = 1.60×, 500/200 = 2.50×]: they
    overlap, so the lever is both."""
    tf = [_runtime("tf", "tensorflow", 1, latency, repeat=r) for r, latency in enumerate((10_000, 8_000))]
    tf += [_runtime("tf", "tensorflow", 4, latency, repeat=r) for r, latency in enumerate((16_000, 20_000))]
    ort = [_runtime("ort", "onnxruntime", 1, latency, repeat=r) for r, latency in enumerate((2_500, 2_000))]
    assert _levers([*tf, *ort])[1] == (
        "Which lever on cpu: batching (2.00× [1.60×–2.50×] on tensorflow) and the runtime (onnxruntime, 2.00× "
        "[1.60×–2.50×]) move it alike, within the noise; use both."
    )
    # ranges that only touch still overlap: ONNX Runtime at 1.6 and 1 ms (625, 1000/s): 812.5/225 = 3.61×
    # [625/250 = 2.50×, 1000/200 = 5.00×] starts where batching's range ends
    touching = [_runtime("ort", "onnxruntime", 1, latency, repeat=r) for r, latency in enumerate((1_600, 1_000))]
    assert "move it alike" in _levers([*tf, *touching])[1]
    # ... and from the other side: ONNX Runtime at 3.90625 and 3.125 ms (256, 320/s): 288/225 = 1.28× [256/250 =
    # 1.024×, 320/200 = 1.60×] ends where batching's range starts
    below = [_runtime("ort", "onnxruntime", 1, latency, repeat=r) for r, latency in enumerate((3_906.25, 3_125))]
    assert "move it alike" in _levers([*tf, *below])[1]
    apart = [_runtime("ort", "onnxruntime", 1, latency, repeat=r) for r, latency in enumerate((1_000, 500))]
    assert "moved throughput more than batching" in _levers([*tf, *apart])[1]  # 4.00× to 10.0×: apart


def test_a_tie_as_printed_between_runtime_and_batching_without_ranges_moves_it_alike():
    """One repeat each, so no ranges: TensorFlow batch 1 at 10 ms (100/s), batch 4 at 20 ms (200/s): batching
    200/100 = 2.00×; ONNX Runtime at 2.5 ms (400/s) over TensorFlow's best 200/s: 2.00×. Neither lever moved
    throughput more, so the verdict may not name one (it said 'the runtime moved throughput more')."""
    tf = [_runtime("tf", "tensorflow", 1, 10_000), _runtime("tf", "tensorflow", 4, 20_000)]
    ort = [_runtime("ort", "onnxruntime", 1, 2_500)]
    assert _levers([*tf, *ort])[1] == (
        "Which lever on cpu: batching (2.00× on tensorflow) and the runtime (onnxruntime, 2.00×) move it alike; "
        "use both."
    )
    # alike as printed: ONNX Runtime at 2.496 ms, 1e6 / 2496 = 400.64/s over 200/s is 2.0032×, shown as 2.00×
    # like batching's, so it is no more a lever than batching is; at 2.48 ms, 403.2/200 = 2.016× reads 2.02×
    close = [_runtime("ort", "onnxruntime", 1, 2_496)]
    assert _levers([*tf, *close])[1].endswith("(onnxruntime, 2.00×) move it alike; use both.")
    apart = [_runtime("ort", "onnxruntime", 1, 2_480)]
    assert _levers([*tf, *apart])[1].endswith(
        "(onnxruntime, 2.02×) moved throughput more than batching (2.00× on tensorflow)."
    )


def test_a_ratio_is_printed_to_two_decimals_below_ten_and_to_one_from_ten_as_it_rounds():
    """format_ratio, which the tie above compares: 9.994 reads 9.99×; 9.996 rounds to 10.00, which is ten or
    more, so it reads 10.0× as 10.004 does (it read 10.00×, and a tie between the two was missed)."""
    from serve_bench.stats import format_ratio

    assert [format_ratio(v) for v in (9.994, 9.996, 10.004, 12.34, 0.5)] == [
        "9.99×",
        "10.0×",
        "10.0×",
        "12.3×",
        "0.50×",
    ]
    assert (format_ratio(None), format_ratio(float("inf"))) == ("n/a", "n/a")


def test_each_device_gets_its_runtime_lines_whatever_the_device_before_it_lacked():
    """The GPU, measured first, lacks something each time; the CPU after it still gets its two lines.
    CPU: TensorFlow at 10 ms = 100/s (p99 12.0 ms), ONNX Runtime at 5 ms = 200/s (p99 6.0 ms): 2.00×."""
    cpu = [_runtime("tf", "tensorflow", 1, 10_000), _runtime("ort", "onnxruntime", 1, 5_000)]
    cpu_lines = [
        "Runtimes on cpu at their best, over tensorflow (tf b1 c1: 100.0 images/s, p99 12.0 ms): onnxruntime "
        "2.00× (ort b1 c1: 200.0 images/s, p99 6.0 ms).",
        "Which lever on cpu: batching gave tensorflow no gain beyond the noise (or none measured): the runtime "
        "(onnxruntime, 2.00×) it is.",
    ]

    def gpu(name: str, runtime: str, latency_us: float, cut_off: str = "") -> Point:
        point = _as(make_point(name, "gpu", 1, latency_us), runtime=runtime)
        return dataclasses.replace(point, cut_off=cut_off)

    one_runtime = [gpu("g-tf", "tensorflow", 1_000)]
    base_cut_off = [gpu("g-tf", "tensorflow", 1_000, "target down"), gpu("g-ort", "onnxruntime", 500)]
    other_cut_off = [gpu("g-tf", "tensorflow", 1_000), gpu("g-ort", "onnxruntime", 500, "target down")]
    for first in (one_runtime, base_cut_off, other_cut_off):
        assert _levers([*first, *cpu]) == cpu_lines
    # a GPU whose other runtime is slower (1000 / 2000 images/s = 0.50×) says so, and the CPU follows
    slower = [gpu("g-tf", "tensorflow", 500), gpu("g-ort", "onnxruntime", 1_000)]
    assert _levers([*slower, *cpu])[1:] == [
        "Which lever on gpu: no runtime was faster than tensorflow beyond the noise.",
        *cpu_lines,
    ]


def test_runtime_lines_for_a_slow_baseline_with_long_latencies_and_for_a_baseline_of_nothing():
    """TensorFlow at 2 s a call: 0.5 images/s is still a baseline (ONNX Runtime at 1 s = 1/s: 2.00×); p99 in
    ms to one decimal: 1.2 × 2 s = 2400.0 ms and 1200.0 ms. A baseline at 0 images/s is none: no lines."""
    slow = [_runtime("tf", "tensorflow", 1, 2e6), _runtime("ort", "onnxruntime", 1, 1e6)]
    assert _levers(slow)[0] == (
        "Runtimes on cpu at their best, over tensorflow (tf b1 c1: 0.5 images/s, p99 2400.0 ms): onnxruntime "
        "2.00× (ort b1 c1: 1.0 images/s, p99 1200.0 ms)."
    )
    tf = slow[0]
    zero = dataclasses.replace(tf, throughput=dataclasses.replace(tf.throughput, items_per_s=0.0))
    assert _levers([zero, slow[1]]) == []


def test_like_for_like_keeps_the_float_series_else_the_first_payload_measured():
    """Cross-device comparisons set side by side the series of one payload: float where the run sent float, else
    the payload of the first series (never a GPU's JPEG rows against a CPU's float ones)."""
    from serve_bench.report._analysis import like_for_like

    def targets(*payloads: str) -> list[str]:
        points = [make_point(f"t{i}", "cpu", 1, 1000.0, payload=p) for i, p in enumerate(payloads)]
        return [t.name for t in like_for_like(analyze_run(points).targets)]

    assert targets("jpeg", "float", "float") == ["t1", "t2"]
    assert targets("jpeg", "uint8", "jpeg") == ["t0", "t2"]
    assert targets() == []
