"""The CPU a run measured: the cost model calibrated on one of its points predicts the others.

A run directory's client-batching points (closed loop, one request in flight, a CPU target)
give images/s by batch size. One of them fixes the CPU's efficiency: the single factor by which
its roofline (``_host``'s peak and bandwidth) has to be scaled to take the measured time. The
model then predicts every other batch size, and the run's own figures say how far off it was.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench.errors import UserError
from serve_bench.predict._devices import Device
from serve_bench.predict._graph import GraphCost
from serve_bench.predict._host import CpuSpec, cpu_device
from serve_bench.predict._model import Efficiency, nelder_mead, time_per_batch
from serve_bench.stats import Point, read_points

__all__ = ["CpuCalibration", "calibrate_cpu", "cpu_points", "fit_cpu"]


def cpu_points(run_dir: Path, model: str) -> tuple[str, dict[int, float]]:
    """The CPU target with the most client-batching points of ``model`` in a run, and its images/s by batch.

    Only closed-loop points at one request in flight without errors count: batching done by the
    client, which is what the cost model describes (server-side batching of concurrent requests
    adds queueing it does not). Raises UserError naming what is missing.
    """
    if not run_dir.is_dir():
        raise UserError(f"--run-dir {run_dir} is not a results directory; give results/<run>")
    points = read_points(run_dir)
    usable = [p for p in points if _client_batching(p) and p.model == model]
    by_target: dict[str, dict[int, float]] = {}
    for p in usable:
        by_target.setdefault(p.target.name, {})[p.batch_size] = p.items_per_s
    if not by_target:
        models = sorted({p.model for p in points})
        raise UserError(
            f"--run-dir {run_dir} has no CPU points of {model} at one request in flight (models measured there: "
            f"{', '.join(models) or 'none'}); calibrate from a run whose spec has a CPU target and concurrency 1"
        )
    name = max(by_target, key=lambda n: len(by_target[n]))  # max keeps the first of equals: file order
    return name, dict(sorted(by_target[name].items()))


def _client_batching(p: Point) -> bool:
    return (
        p.target.device == "cpu"
        and p.load.mode == "closed"
        and (p.load.concurrency or 1) == 1
        and p.error_count == 0
        and p.items_per_s > 0
    )


@dataclass(frozen=True)
class CpuCalibration:
    """The CPU's fitted efficiency from one measured point, and how the other measured points came out."""

    spec: CpuSpec
    device: Device
    target: str
    calibrated_on: int  # the batch size whose measured images/s fixed the efficiency
    efficiency: Efficiency
    measured: dict[int, float]  # images/s by batch size, as the run measured them
    predicted: dict[int, float]  # images/s by batch size, from the calibrated model

    @property
    def errors(self) -> dict[int, float]:
        """Relative error of images/s at every measured batch size except the one calibrated on."""
        return {
            b: self.predicted[b] / v - 1
            for b, v in self.measured.items()
            if b != self.calibrated_on and b in self.predicted
        }

    @property
    def median_error(self) -> float | None:
        errors = [abs(e) for e in self.errors.values()]
        return statistics.median(errors) if errors else None

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device.name,
            "described": self.device.sources.get("fp32_tflops", ""),
            "target": self.target,
            "calibrated_on": self.calibrated_on,
            "efficiency": round(self.efficiency.compute, 4),
            "measured_images_per_s": {str(b): round(v, 2) for b, v in self.measured.items()},
            "predicted_images_per_s": {str(b): round(v, 2) for b, v in self.predicted.items()},
            "errors": {str(b): round(e, 4) for b, e in self.errors.items()},
            "predicted": True,
        }


def calibrate_cpu(
    cost: GraphCost,
    spec: CpuSpec,
    measured: dict[int, float],
    *,
    target: str = "",
    batch: int | None = None,
    batch_sizes: Sequence[int] = (),
) -> CpuCalibration:
    """Scale the CPU's roofline by the one efficiency that reproduces ``measured[batch]`` exactly.

    t(B) = call + roofline(B) / e, with ``call`` the spec's per-call cost (not fitted: one
    figure fixes one unknown) and e shared by compute and memory. ``batch`` defaults to the
    smallest measured batch size; predictions are made for every measured batch size and for
    ``batch_sizes``.
    """
    if not measured:
        raise UserError("no measured CPU points to calibrate from")
    chosen = min(measured) if batch is None else batch
    if chosen not in measured:
        raise UserError(
            f"--calibrate-batch {chosen}: the run measured batch sizes {', '.join(map(str, sorted(measured)))} only"
        )
    cpu = cpu_device(spec)
    call_s = spec.call_ms / 1e3
    at_peak = time_per_batch(cost, cpu, "fp32", chosen, Efficiency(1.0, 1.0, 0.0))
    took = chosen / measured[chosen] - call_s
    if took <= 0:
        raise UserError(
            f"batch {chosen} took less than the CPU's per-call cost ({spec.call_ms:g} ms); give a smaller "
            "--cpu call_ms=... or calibrate on a larger --calibrate-batch"
        )
    factor = at_peak / took
    efficiency = Efficiency(factor, factor, 0.0, call_s)
    wanted = sorted({*measured, *batch_sizes})
    predicted = {b: b / time_per_batch(cost, cpu, "fp32", b, efficiency) for b in wanted}
    return CpuCalibration(spec, cpu, target, chosen, efficiency, dict(measured), predicted)


def fit_cpu(cost: GraphCost, spec: CpuSpec, measured: dict[int, float]) -> tuple[float, float]:
    """The efficiency and per-call seconds that best fit every measured point (log images/s least squares).

    Needs two batch sizes or more: how the benchmark derives a CPU's per-call cost from one run,
    to be given to another model's one-point calibration.
    """
    if len(measured) < 2:
        raise ValueError("fitting a per-call cost needs two batch sizes or more")
    cpu = cpu_device(spec)
    roof = {b: time_per_batch(cost, cpu, "fp32", b, Efficiency(1.0, 1.0, 0.0)) for b in measured}
    logs = {b: math.log(v) for b, v in measured.items()}

    def loss(v: np.ndarray) -> float:
        e, call = math.exp(v[0]), math.exp(v[1])
        return sum((math.log(b / (call + roof[b] / e)) - logs[b]) ** 2 for b in measured)

    best = nelder_mead(loss, np.log([0.3, 5e-3]))
    return math.exp(best[0]), math.exp(best[1])
