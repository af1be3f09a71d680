"""The cost model's figures: PCIe's rate per lane, the time of a batch on a device without PCIe, the
efficiencies' vector form, the fit's bounds, and the Nelder-Mead minimiser step by step.

Expected values are worked out by hand: PCIe rates from the PCI-SIG transfer rates and line code,
times from the formula in serve_bench/predict/_model.py's docstring, and the minimiser's points
from the standard Nelder-Mead rules (Nelder and Mead, The Computer Journal 7(4), 1965; the
coefficients as Wikipedia's "Nelder–Mead method" gives them: reflection 1, expansion 2,
contraction ½, shrink ½) traced by hand on landscapes chosen to take every branch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from serve_bench.predict import Device, Efficiency, GraphCost, Observation, OpCost, fit, time_per_batch
from serve_bench.predict._model import PCIE_GBS_PER_LANE, nelder_mead, times_per_batch

# round figures: 10 TFLOPS fp32, 80 fp16, 100 GB/s; PCIe 4 ×16, and a CPU-like twin with no PCIe lanes
ROUND = Device("round", "round", 10.0, None, 80.0, 100.0, 16.0, 4, 16)
NO_PCIE = Device("cpu", "cpu", 10.0, None, 80.0, 100.0, 16.0, 0, 0)


def test_pcies_rate_per_lane_is_its_transfer_rate_after_line_coding():
    """PCIe 3.0, 4.0 and 5.0 signal at 8, 16 and 32 GT/s per lane with 128b/130b encoding: 8 × 128/130 / 8
    bits = 0.985 GB/s, 1.969 and 3.938 (to the MB/s)."""
    assert PCIE_GBS_PER_LANE == {
        gen: pytest.approx(gt * 128 / 130 / 8, abs=5e-4) for gen, gt in ((3, 8), (4, 16), (5, 32))
    }
    assert set(PCIE_GBS_PER_LANE) == {3, 4, 5}


def test_a_device_without_pcie_lanes_reads_the_images_where_they_are():
    """No transfer term on a CPU: one compute-bound op of 1 GFLOP per image at 10 TFLOPS × ½ takes
    0.2 ms an image; a memory-bound op of 1 G elements at 100 GB/s × ¼ takes 4 × 1e9 / 25e9 = 160 ms an
    image, plus its 1,000 weight elements once a batch (4 kB / 25 GB/s = 0.16 µs); 10 µs per op and 100 µs per call.
    The same on PCIe 4 ×16 adds B × 3 × 224 × 224 × 4 B / 31.5 GB/s."""
    cost = GraphCost((OpCost("conv", "Conv2D", 1e9, 0.0, 0.0), OpCost("add", "AddV2", 0.0, 1e9, 1000.0)), 150_528)
    eff = Efficiency(0.5, 0.25, 10e-6, 100e-6)
    batches = np.array([1.0, 4.0])
    ops = batches * (0.2e-3 + 0.16) + 4e3 / 25e9 + 2 * 10e-6
    times = times_per_batch(cost, NO_PCIE, "fp32", batches, eff)
    assert list(times) == pytest.approx(list(100e-6 + ops), rel=1e-12)
    assert time_per_batch(cost, NO_PCIE, "fp32", 4, eff, copy_overlaps=True) == pytest.approx(100e-6 + ops[1])
    copy = batches * 150_528 * 4 / (1.969e9 * 16)
    on_pcie = times_per_batch(cost, ROUND, "fp32", batches, eff)
    assert list(on_pcie) == pytest.approx(list(100e-6 + ops + copy), rel=1e-12)


def test_efficiencies_travel_as_the_logs_of_the_three_fitted_factors():
    """The fit searches log space (a factor stays positive); the per-call cost is not fitted and comes back 0."""
    e = Efficiency(0.5, 0.25, 10e-6, 100e-6)
    assert list(e.as_vector()) == pytest.approx([math.log(0.5), math.log(0.25), math.log(10e-6)])
    back = Efficiency.from_vector(np.log([0.5, 0.25, 10e-6]))
    assert (back.compute, back.memory, back.per_op_s, back.per_call_s) == pytest.approx((0.5, 0.25, 10e-6, 0.0))
    assert all(type(v) is float for v in (back.compute, back.memory, back.per_op_s))


def _table(cost: GraphCost, device: Device, truth: Efficiency, model: str = "m") -> list[Observation]:
    """Images/s by the formula at batch 1-64, as the published tables give them."""
    return [
        Observation("round", "fp32", b, b / time_per_batch(cost, device, "fp32", b, truth), model)
        for b in (1, 2, 4, 8, 16, 32, 64)
    ]


# A convolution whose 100 MB of weights bound it up to batch ~7 and its arithmetic after, and an
# element-wise op bound by memory throughout: the figures tell compute, memory and per-op cost apart.
TWO_OPS = GraphCost((OpCost("conv", "Conv2D", 1e9, 0.0, 2.5e7), OpCost("add", "AddV2", 0.0, 1e6, 0.0)), 1000)


def test_the_fit_never_puts_a_device_above_its_peak():
    """Figures 1.5 times faster than the compute peak (or the memory bandwidth) allows are fitted with
    that efficiency at most 1: no device runs above its peak. Figures within the peaks are fitted back."""
    got = fit({"m": TWO_OPS}, _table(TWO_OPS, ROUND, Efficiency(1.5, 0.5, 20e-6)), {"round": ROUND})
    assert got.compute <= 1.0 and got.memory <= 1.0
    exact = fit({"m": TWO_OPS}, _table(TWO_OPS, ROUND, Efficiency(0.4, 0.6, 20e-6)), {"round": ROUND})
    assert (exact.compute, exact.memory, exact.per_op_s) == pytest.approx((0.4, 0.6, 20e-6), rel=0.01)
    memory_bound = fit({"m": TWO_OPS}, _table(TWO_OPS, ROUND, Efficiency(0.5, 1.5, 20e-6)), {"round": ROUND})
    assert memory_bound.memory <= 1.0 and memory_bound.compute <= 1.0


def test_the_fit_takes_one_precision_class_and_every_table_of_it():
    """fp32 and tf32 share one class (4-byte data); mixed is another. Two models' tables on one device
    are fitted together: the model named by each observation costs its figures."""
    with pytest.raises(ValueError, match=r"fit one precision class at a time, not \['fp32', 'mixed'\]"):
        fit({"m": TWO_OPS}, [Observation("round", "fp32", 1, 1.0), Observation("round", "mixed", 1, 1.0)], {})
    other = GraphCost((OpCost("conv", "Conv2D", 4e9, 0.0, 1e6), OpCost("add", "AddV2", 0.0, 1e6, 0.0)), 1000)
    truth = Efficiency(0.4, 0.6, 20e-6)
    table = _table(TWO_OPS, ROUND, truth, "m") + _table(other, ROUND, truth, "n")
    got = fit({"m": TWO_OPS, "n": other}, table, {"round": ROUND})
    assert (got.compute, got.memory, got.per_op_s) == pytest.approx((0.4, 0.6, 20e-6), rel=0.01)


class _Scripted:
    """A landscape given point by point; every point asked for is logged (100 where none is given)."""

    def __init__(self, values: dict[tuple[float, ...], float]) -> None:
        self.values = values
        self.asked: list[tuple[float, ...]] = []

    def __call__(self, x: np.ndarray) -> float:
        point = tuple(float(v) for v in x)
        self.asked.append(point)
        return self.values.get(point, 100.0)


def test_nelder_mead_reflects_expands_contracts_and_shrinks_by_the_standard_coefficients():
    """Traced by hand in 2-D from (0, 0), step ½: the simplex (0,0) 3, (½,0) 1, (0,½) 2.
    1. centroid of the best two (¼,¼); reflect the worst through it to (½,½): 0.8 < 1, so expand to
       (¾,¾): 0.8, no better than the reflection (strictly better is needed): keep (½,½).
    2. best (½,½) .8, (½,0) 1, worst (0,½) 2; centroid (½,¼); reflected (1,0) .5 < .8: expanded
       (1½,-¼) .4 is better: kept.
    3. best (1½,-¼) .4, (½,½) .8, worst (½,0) 1; centroid (1,⅛); reflected (1½,¼) .8, not better
       than the second worst: contract halfway to the worst, (¾,1/16): 1, not better than the worst:
       shrink towards the best, (1,⅛) .7 and (1,-⅛) .6, the best evaluated again.
    4. best (1½,-¼) .4, (1,-⅛) .6, worst (1,⅛) .7; centroid (1¼,-3/16); reflected (1½,-½) .4, no
       better than the best but better than the second worst: accepted, no expansion.
    The best is the first of the two at .4: (1½,-¼)."""
    f = _Scripted(
        {
            (0.0, 0.0): 3.0,
            (0.5, 0.0): 1.0,
            (0.0, 0.5): 2.0,
            (0.5, 0.5): 0.8,
            (0.75, 0.75): 0.8,
            (1.0, 0.0): 0.5,
            (1.5, -0.25): 0.4,
            (1.5, 0.25): 0.8,
            (0.75, 0.0625): 1.0,
            (1.0, 0.125): 0.7,
            (1.0, -0.125): 0.6,
            (1.5, -0.5): 0.4,
        }
    )
    best = nelder_mead(f, np.array([0.0, 0.0]), iterations=4)
    assert f.asked == [
        (0.0, 0.0),
        (0.5, 0.0),
        (0.0, 0.5),
        (0.5, 0.5),
        (0.75, 0.75),
        (1.0, 0.0),
        (1.5, -0.25),
        (1.5, 0.25),
        (0.75, 0.0625),
        (1.5, -0.25),
        (1.0, 0.125),
        (1.0, -0.125),
        (1.5, -0.5),
    ]
    assert tuple(best) == (1.5, -0.25)


def test_nelder_mead_on_a_parabola_takes_the_textbook_steps_and_finds_its_minimum():
    """(x - 3)² from 0, step ½, by hand: {0: 9, ½: 6.25}; reflect to 1 (4), expand to 1½ (2.25, kept);
    reflect to 2½ (.25), expand to 3½ (.25, not better: 2½ kept); reflect to 3½ (.25, not better than
    2½): contract to 2 (1, better than the worst 1½); reflect to 3 (0), expand to 3½ (.25: 3 kept);
    reflect to 3½, contract to 2¾. After five iterations the best is 3. Left to run, it stops
    within 1e-10 of the minimum's value: x within 1e-4 of 3."""
    asked: list[float] = []

    def parabola(x: np.ndarray) -> float:
        asked.append(float(x[0]))
        return (float(x[0]) - 3) ** 2

    assert nelder_mead(parabola, np.array([0.0]), iterations=5)[0] == 3.0
    assert asked == [0.0, 0.5, 1.0, 1.5, 2.5, 3.5, 3.5, 2.0, 3.0, 3.5, 3.5, 2.75]
    assert nelder_mead(lambda x: (float(x[0]) - 3) ** 2 + 1, np.array([0.0]))[0] == pytest.approx(3.0, abs=1e-4)


def test_nelder_mead_gives_up_after_4000_iterations_of_two_evaluations():
    """A landscape that improves on every evaluation (each value the negative of its call number) never
    converges: each iteration reflects and then expands, 2 evaluations, after the 2 of a 1-D simplex.
    The default simplex is the start and the start + ½."""
    asked: list[float] = []

    def ever_better(x: np.ndarray) -> float:
        asked.append(float(x[0]))
        return -float(len(asked))

    nelder_mead(ever_better, np.array([0.0]), step=0.0)
    assert len(asked) == 2 + 2 * 4000
    asked.clear()
    nelder_mead(ever_better, np.array([1.0]), iterations=0)
    assert asked == [1.0, 1.5]


def test_nelder_mead_stops_when_the_simplexs_values_agree_to_the_tolerance():
    """A flat landscape: the first check finds the spread 0 and stops before any step. Values 1 and
    1 + 1e-11 agree to 1e-10 of 1; 1 and 1 + 1e-9 do not, and the search goes on (to its one iteration)."""
    calls = []

    def flat(x: np.ndarray) -> float:
        calls.append(x)
        return 5.0

    nelder_mead(flat, np.array([0.0, 0.0]))
    assert len(calls) == 3
    for spread, evaluations in ((1e-11, 2), (1e-9, 4)):
        asked: list[float] = []

        def near(x: np.ndarray, spread: float = spread) -> float:
            asked.append(float(x[0]))
            return 1.0 + (spread if float(x[0]) == 0.0 else 0.0)

        nelder_mead(near, np.array([0.0]), iterations=1)
        assert len(asked) == evaluations, spread


def test_nelder_mead_stops_on_the_spread_between_its_best_and_worst_values():
    """tol ½ (exact in binary). 1-D from 0: values 0 and ¼; the bound is ½ · (|0| + ½) = ¼ and the
    spread ¼ is within it (at most, not under): no step. Values 0 and 0.3: over the bound, one step
    (reflect to -½ and contract to ¼, both 100, shrink to 0 and ¼: four more points); it is the best
    value's size that scales the bound
    (0.3's would allow ½ · 0.8 = 0.4). 2-D from (0,0): values 1, 1, 5: the best two agree but the worst
    does not: one step (reflect to (½,-½), contract to (⅛,¼), both 100, shrink towards (0,0): 3 more)."""
    for worst, evaluations in ((0.25, 2), (0.3, 6)):
        asked: list[float] = []

        def line(x: np.ndarray, worst: float = worst) -> float:
            asked.append(float(x[0]))
            return {0.0: 0.0, 0.5: worst}.get(float(x[0]), 100.0)

        nelder_mead(line, np.array([0.0]), iterations=1, tol=0.5)
        assert len(asked) == evaluations, worst
    f = _Scripted({(0.0, 0.0): 1.0, (0.5, 0.0): 1.0, (0.0, 0.5): 5.0})
    nelder_mead(f, np.array([0.0, 0.0]), iterations=1)
    assert f.asked == [
        (0.0, 0.0),
        (0.5, 0.0),
        (0.0, 0.5),
        (0.5, -0.5),
        (0.125, 0.25),
        (0.0, 0.0),
        (0.25, 0.0),
        (0.0, 0.25),
    ]


def test_nelder_mead_keeps_a_contraction_better_than_the_worst_even_if_not_the_second_worst():
    """2-D from (0,0): 1, 2, 3. Centroid (¼,0); reflected (½,-½) 100: contract halfway to the worst
    (0,½): (⅛,¼) 2.5, worse than the second worst 2 but better than the worst 3: kept, no shrink."""
    f = _Scripted({(0.0, 0.0): 1.0, (0.5, 0.0): 2.0, (0.0, 0.5): 3.0, (0.125, 0.25): 2.5})
    nelder_mead(f, np.array([0.0, 0.0]), iterations=1)
    assert f.asked == [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.5, -0.5), (0.125, 0.25)]


# one op of 1 GFLOP and no traffic: its time, B × 1e9 / (10 TFLOPS × e) + 1 op × per-op, ignores memory
COMPUTE_ONLY = GraphCost((OpCost("conv", "Conv2D", 1e9, 0.0, 0.0),), 1000)
AT_PEAK = GraphCost((OpCost("conv", "Conv2D", 1e9, 0.0, 0.0), OpCost("add", "AddV2", 0.0, 1e6, 0.0)), 1000)


def test_the_fits_loss_is_the_sum_of_squared_log_errors_and_allows_a_device_at_its_peak(monkeypatch):
    """The loss the minimiser is given, read by a stand-in for it: figures made at exactly the peaks
    (e = 1 for compute and memory, 10 µs per op) are predicted exactly there: loss 0 (a sum from
    nothing), not refused as above the peak. At compute ½ every image takes twice the compute time."""
    import serve_bench.predict._model as model

    losses: list = []
    monkeypatch.setattr(model, "nelder_mead", lambda f, x0: (losses.append(f), x0)[1])
    fit({"m": AT_PEAK}, _table(AT_PEAK, NO_PCIE, Efficiency(1.0, 1.0, 10e-6)), {"round": NO_PCIE})
    assert losses[0](np.array([0.0, 0.0, math.log(10e-6)])) == pytest.approx(0.0, abs=1e-20)
    assert losses[0](np.array([math.log(1.5), 0.0, math.log(10e-6)])) == math.inf


def test_a_start_that_fits_no_better_than_the_first_does_not_replace_it(monkeypatch):
    """With no traffic the memory efficiency changes nothing: a stand-in minimiser that returns the
    default start (½, ½, 10 µs) and then, from the other starts, the same point with memory 0.9 finds
    equal losses; only a strictly better fit replaces the first, so memory stays ½."""
    import serve_bench.predict._model as model

    calls: list = []

    def stand_in(f, x0):
        calls.append(x0)
        return x0 if len(calls) == 1 else np.log([0.5, 0.9, 10e-6])

    monkeypatch.setattr(model, "nelder_mead", stand_in)
    got = fit({"m": COMPUTE_ONLY}, _table(COMPUTE_ONLY, NO_PCIE, Efficiency(0.3, 0.3, 10e-6)), {"round": NO_PCIE})
    assert len(calls) == 3 and (got.compute, got.memory) == (pytest.approx(0.5), pytest.approx(0.5))
