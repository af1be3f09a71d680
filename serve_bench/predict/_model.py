"""The analytical model: time per batch from op costs, device peaks and three fitted efficiencies.

For a batch of B images on a device, each op takes the longer of its arithmetic at the
device's peak and its memory traffic at the device's bandwidth, each scaled by an efficiency,
plus a fixed cost per op (the framework dispatching a kernel); the batch adds a fixed cost
per call and the images' transfer to the device over PCIe:

    t(B) = c + B·x/pcie + Σ_ops [ max(F·B / (peak·e_c), (A·B + W)·s / (bw·e_m)) + L ]

F, A, W: the op's FLOPs and activation elements per image and weight elements (from the graph
walker); s: bytes per element (4, or 2 in mixed precision); x: one input image's bytes.
This is the per-op roofline (Williams, Waterman and Patterson, CACM 2009) with a launch term,
the form HPE's Deep Learning Cookbook used; the fitted e_c, e_m and L are shared by every
device of a precision class, so a device left out of the fit is predicted from its peaks alone.

Where the images are copied while the previous batch computes (a benchmark whose input pipeline
runs ahead, ``copy_overlaps``), a batch takes c + max(B·x/pcie, Σ_ops ...) instead: fitting such a
table with the sum would charge the copy to the efficiencies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from serve_bench.predict._devices import Device, bytes_per_element, peak_flops, precision_class
from serve_bench.predict._graph import GraphCost

__all__ = ["PCIE_GBS_PER_LANE", "Efficiency", "Observation", "fit", "nelder_mead", "time_per_batch", "times_per_batch"]

PCIE_GBS_PER_LANE = {3: 0.985, 4: 1.969, 5: 3.938}  # GB/s per lane after line coding (PCI-SIG)


@dataclass(frozen=True)
class Efficiency:
    """Factors of one precision class: compute, memory and per-op seconds are fitted.

    ``per_call_s`` is not: fitted on the three published models (228, 449 and 713 ops) it came
    out at 0-23 µs, below what the tables resolve, and made the model-left-out error worse; the
    whole fixed cost goes to the per-op term, which grows with a bigger graph as dispatching does.
    """

    compute: float
    memory: float
    per_op_s: float
    per_call_s: float = 0.0

    def as_vector(self) -> np.ndarray:
        return np.log([self.compute, self.memory, self.per_op_s])

    @classmethod
    def from_vector(cls, v: np.ndarray) -> Efficiency:
        c, m, op = np.exp(v)
        return cls(float(c), float(m), float(op))


@dataclass(frozen=True)
class Observation:
    """One published figure: images/s of a model at a batch size, device and precision."""

    device: str
    precision: str
    batch_size: int
    images_per_s: float
    model: str = "resnet50v1.5"  # the tables' name for it (a key of the costs a fit is given)


def time_per_batch(
    cost: GraphCost, device: Device, precision: str, batch: int, eff: Efficiency, copy_overlaps: bool = False
) -> float:
    """Seconds for one batch of ``batch`` images (the formula in the module's docstring)."""
    return float(times_per_batch(cost, device, precision, np.array([float(batch)]), eff, copy_overlaps)[0])


def times_per_batch(
    cost: GraphCost,
    device: Device,
    precision: str,
    batches: np.ndarray,
    eff: Efficiency,
    copy_overlaps: bool = False,
) -> np.ndarray:
    """``time_per_batch`` for every batch size of ``batches`` at once (ops × batches arrays)."""
    peak = peak_flops(device, precision) * eff.compute
    bandwidth = device.mem_bw_gbs * 1e9 * eff.memory
    size = bytes_per_element(precision)
    flops, activations, weights = cost.columns
    traffic = (np.outer(activations, batches) + weights[:, None]) * size
    compute = np.outer(flops, batches)
    ops = np.maximum(compute / peak, traffic / bandwidth).sum(axis=0) + len(cost.ops) * eff.per_op_s
    transfer = np.zeros_like(batches)  # a CPU (no PCIe lanes) reads the images where they are
    if device.pcie_lanes:
        transfer = batches * cost.input_elements * 4 / (PCIE_GBS_PER_LANE[device.pcie_gen] * device.pcie_lanes * 1e9)
    result: np.ndarray = eff.per_call_s + (np.maximum(transfer, ops) if copy_overlaps else transfer + ops)
    return result


def nelder_mead(
    f: Callable[[np.ndarray], float], x0: np.ndarray, step: float = 0.5, iterations: int = 4000, tol: float = 1e-10
) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (standard Nelder-Mead: reflection 1, expansion 2, contraction and shrink ½)."""
    n = len(x0)
    simplex = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) <= tol * (abs(values[0]) + tol):
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                values = [f(x) for x in simplex]
    best: np.ndarray = simplex[int(np.argmin(values))]
    return best


_START = Efficiency(0.5, 0.5, 10e-6)


def fit(
    costs: Mapping[str, GraphCost],
    observations: Sequence[Observation],
    devices: dict[str, Device],
    copy_overlaps: bool = False,
) -> Efficiency:
    """The efficiencies that best predict ``observations`` (least squares on log images/s).

    ``costs`` holds each observed model's graph costs by its name. All observations must be of
    one precision class (``precision_class``); ``copy_overlaps``: how their benchmark copied images.
    """
    classes = {precision_class(o.precision) for o in observations}
    if len(classes) != 1:
        raise ValueError(f"fit one precision class at a time, not {sorted(classes)}")
    # one (model, device, precision) table at a time: its batch sizes in one array
    tables: dict[tuple[str, str, str], list[Observation]] = {}
    for o in observations:
        tables.setdefault((o.model, o.device, o.precision), []).append(o)
    arrays = [
        (costs[m], devices[d], p, np.array([float(o.batch_size) for o in t]), np.log([o.images_per_s for o in t]))
        for (m, d, p), t in tables.items()
    ]

    def loss(v: np.ndarray) -> float:
        eff = Efficiency.from_vector(v)
        if eff.compute > 1 or eff.memory > 1:  # no device runs above its peak
            return math.inf
        total = 0.0
        for cost, device, precision, batches, measured in arrays:
            predicted = np.log(batches / times_per_batch(cost, device, precision, batches, eff, copy_overlaps))
            total += float(np.sum((predicted - measured) ** 2))
        return total

    best = _START.as_vector()
    for start in (_START.as_vector(), np.log([0.2, 0.8, 20e-6]), np.log([0.8, 0.2, 5e-6])):
        candidate = nelder_mead(loss, start)
        if loss(candidate) < loss(best):
            best = candidate
    return Efficiency.from_vector(best)
