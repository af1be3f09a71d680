"""The fits' start points: tables whose loss has two basins, so that where the minimiser starts decides the answer.

The GPU fit (``fit``) starts Nelder-Mead from three points and keeps the best end; the CPU fit (``fit_cpu``)
from one. Each table here is built by hand so that its best fit is known, and the test shows that a start
in the other basin ends elsewhere (a worse loss): the start that reaches the best fit is what the test pins.

Times come from the formula in serve_bench/predict/_model.py's docstring, worked out below per table.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import serve_bench.predict._model as model
from serve_bench.predict import Device, Efficiency, GraphCost, Observation, OpCost, fit, fit_cpu, time_per_batch
from serve_bench.predict._host import CpuSpec
from serve_bench.predict._model import nelder_mead

# 10 TFLOPS fp32 and 100 GB/s, no PCIe lanes (no transfer term)
NO_PCIE = Device("cpu", "cpu", 10.0, None, 80.0, 100.0, 16.0, 0, 0)
BATCHES = (1, 2, 4, 8, 16, 32, 64)


def _table(cost: GraphCost, truth: Efficiency) -> list[Observation]:
    return [Observation("round", "fp32", b, b / time_per_batch(cost, NO_PCIE, "fp32", b, truth), "m") for b in BATCHES]


def _loss_of_fit(monkeypatch, cost: GraphCost, observations: list[Observation]):
    """The loss ``fit`` minimises for these figures, taken from its first call to the minimiser."""
    losses: list = []
    monkeypatch.setattr(model, "nelder_mead", lambda f, x0: (losses.append(f), x0)[1])
    fit({"m": cost}, observations, {"round": NO_PCIE})
    monkeypatch.undo()
    return losses[0]


# One op of 1 GFLOP, 1e7 activation elements and 1e7 weight elements an image: B / (10 TFLOPS × e_c) =
# 0.1 ms × B / e_c of arithmetic against (B + 1) × 40 MB / (100 GB/s × e_m) = 0.4 ms × (B + 1) / e_m of traffic.
WIDE = GraphCost((OpCost("conv", "Conv2D", 1e9, 1e7, 1e7),), 1000)


def test_figures_bound_by_a_slow_compute_past_batch_8_are_found_only_from_the_compute_starved_start(monkeypatch):
    """Made at e_c = 0.2, e_m = 0.9, 10 µs an op: 0.4 (B + 1) / 0.9 ms up to batch 8, where it equals B / 2 ms,
    and B / 2 ms after (+ 0.01 ms). Only the start at compute 0.2, memory 0.8 finds them (loss 0 there).

    From (½, ½, 10 µs), (0.8, 0.2, 5 µs) or (0.2, 0.8, 1 s an op) the compute term never binds, so the loss
    does not move with e_c and Nelder-Mead fits the whole table as traffic: e_c stays where compute never binds
    (above 0.1 / 0.46 = 0.22 it changes nothing), the per-op cost heads for 0 and e_m to the geometric mean of
    0.4 (B + 1) / t(B) over the seven batch sizes, 0.86542, with the loss the sum of those seven logs' squared
    deviations from their mean, 0.0110767 (worked out from the times above)."""
    truth = Efficiency(0.2, 0.9, 10e-6)
    got = fit({"m": WIDE}, _table(WIDE, truth), {"round": NO_PCIE})
    assert (got.compute, got.memory, got.per_op_s) == pytest.approx((0.2, 0.9, 10e-6), rel=1e-3)

    b = np.array(BATCHES, dtype=float)
    ratios = np.log(0.4 * (b + 1) / (np.maximum(b / 2, 0.4 * (b + 1) / 0.9) + 0.01))
    memory_only, residual = math.exp(ratios.mean()), float(np.sum((ratios - ratios.mean()) ** 2))
    assert (memory_only, residual) == (pytest.approx(0.86542, rel=1e-5), pytest.approx(0.0110767, rel=1e-5))
    loss = _loss_of_fit(monkeypatch, WIDE, _table(WIDE, truth))
    assert loss(truth.as_vector()) == pytest.approx(0.0, abs=1e-20)
    for start in ((0.5, 0.5, 10e-6), (0.8, 0.2, 5e-6), (0.2, 0.8, 1.0)):
        end = nelder_mead(loss, np.log(start))
        compute, memory, per_op = np.exp(end)
        assert compute > 0.25 and per_op < 2e-6 and memory == pytest.approx(memory_only, rel=1e-3)
        assert residual <= loss(end) < 1.02 * residual  # the per-op cost on its way to 0 when the simplex stopped


# The same op with a tenth of the data: 0.04 ms × (B + 1) / e_m of traffic.
NARROW = GraphCost((OpCost("conv", "Conv2D", 1e9, 1e6, 1e6),), 1000)


def test_figures_bound_by_a_slow_memory_up_to_batch_4_are_found_only_from_the_memory_starved_start(monkeypatch):
    """Made at e_c = 0.2, e_m = 0.1, 10 µs an op: 0.4 (B + 1) ms up to batch 4, where it equals B / 2 ms, and
    B / 2 ms after (+ 0.01 ms). Only the start at compute 0.8, memory 0.2 finds them (loss 0 there).

    From (½, ½, 10 µs), (0.2, 0.8, 20 µs) or (0.8, 0.2, 1 s an op) Nelder-Mead reads the table as compute from
    batch 2 on, with the intercept put into the per-op cost (about 0.19 ms, e_c 0.206, e_m 0.13): a local minimum
    of loss 0.0063 (no point within 0.01 of it in log space does better; found by search, not by hand)."""
    truth = Efficiency(0.2, 0.1, 10e-6)
    got = fit({"m": NARROW}, _table(NARROW, truth), {"round": NO_PCIE})
    assert (got.compute, got.memory, got.per_op_s) == pytest.approx((0.2, 0.1, 10e-6), rel=1e-3)

    loss = _loss_of_fit(monkeypatch, NARROW, _table(NARROW, truth))
    assert loss(truth.as_vector()) == pytest.approx(0.0, abs=1e-20)
    for start in ((0.5, 0.5, 10e-6), (0.2, 0.8, 20e-6), (0.8, 0.2, 1.0)):
        end = nelder_mead(loss, np.log(start))
        assert loss(end) > 0.006 and np.exp(end)[2] > 10 * 10e-6


# A CPU of 8 GFLOP/s and one op of 2.4 MFLOPs an image: 0.3 ms an image at its peak.
SLOW = CpuSpec("slow", 1, 1.0, 128, 1, 1.0, 1.0)
ONE_OP = GraphCost((OpCost("conv", "Conv2D", 2.4e6, 0.0, 0.0),), 100)


def _cpu_fits(times: dict[int, float]) -> list[tuple[float, float, float]]:
    """Every local minimum of fit_cpu's loss as (e, call, loss), by scanning the ratio of the two terms.

    With X the call and Y = 1 / e, t(B) = X + 0.3 ms · B · Y; for a fixed ratio k = Y / X the best log X is the
    mean over batch sizes of log t(B) − log(1 + 0.3 ms · B · k) and the loss their squared deviations from it,
    so the loss's minima over the plane are the minima of this one-variable function of log k."""
    b = np.array(list(times), dtype=float)
    measured = np.log([times[int(x)] for x in b])
    s = np.arange(-5.0, 15.0, 1e-4)
    d = measured[None, :] - np.logaddexp(0.0, s[:, None] + np.log(0.3e-3 * b)[None, :])
    log_call = d.mean(axis=1)
    loss = np.sum((d - log_call[:, None]) ** 2, axis=1)
    at = np.flatnonzero((loss[1:-1] < loss[:-2]) & (loss[1:-1] <= loss[2:])) + 1
    return [(math.exp(-s[i] - log_call[i]), math.exp(log_call[i]), float(loss[i])) for i in at]


def test_fit_cpu_from_its_start_finds_the_better_of_two_minima_on_figures_no_call_cost_and_slope_explain():
    """Batch 1 took 1 ms, batch 10 100 ms and batch 100 11 ms: no t = call + 0.3 ms · B / e comes near, and
    the loss has two minima (scanned as _cpu_fits says). A call of 0.54 ms with e = 0.349 (loss 10.092) and a
    call of 7.30 ms with e = 2.856 (loss 10.405). Were batch 100 10 ms the table would be its own mirror image
    (B → 100 / B swaps the call and the slope) and the two would tie; 11 ms favours the first. fit_cpu's start,
    e = 0.3 and a 5 ms call, ends at the better; from e = 1.3 or from a 1 s call Nelder-Mead ends at the other.

    For figures the formula made (any call and e) the loss has one minimum: its gradient along the curve of
    best fits is a sum of covariances of increasing functions of B, so only data this far from the model can
    have two."""
    times = {1: 1e-3, 10: 0.1, 100: 0.011}
    (e1, call1, loss1), (e2, call2, loss2) = _cpu_fits(times)
    assert (e1, call1, loss1) == (
        pytest.approx(2.856, rel=1e-3),
        pytest.approx(7.297e-3, rel=1e-3),
        pytest.approx(10.405, rel=1e-4),
    )
    assert (e2, call2, loss2) == (
        pytest.approx(0.3493, rel=1e-3),
        pytest.approx(0.5356e-3, rel=1e-3),
        pytest.approx(10.092, rel=1e-4),
    )
    images_per_s = {b: b / t for b, t in times.items()}
    assert fit_cpu(ONE_OP, SLOW, images_per_s) == (pytest.approx(e2, rel=1e-3), pytest.approx(call2, rel=1e-3))

    def loss(v: np.ndarray) -> float:
        e, call = math.exp(v[0]), math.exp(v[1])
        return sum((math.log(t) - math.log(call + 0.3e-3 * b / e)) ** 2 for b, t in times.items())

    for start in ((1.3, 5e-3), (0.3, 1.0)):
        e, call = np.exp(nelder_mead(loss, np.log(start)))
        assert (e, call) == (pytest.approx(e1, rel=1e-3), pytest.approx(call1, rel=1e-3))
