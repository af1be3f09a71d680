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

    Only closed-loop points at one request in flight, of float images (a JPEG point decodes in the
    graph, which the cost model does not describe), that ran their course without errors: batching done
    by the client, which is what the cost model describes (server-side batching of concurrent requests
    adds queueing it does not). Repeats of a batch size count by their median. Raises UserError naming
    what is missing.
    """
    if not run_dir.is_dir():
        raise UserError(f"run {run_dir} is not a results directory; give results/<run> (RUN or --from-run)")
    points = read_points(run_dir)
    by_target: dict[str, dict[int, list[float]]] = {}
    for p in points:
        if _client_batching(p) and p.model == model:
            by_target.setdefault(p.target.name, {}).setdefault(p.batch_size, []).append(p.items_per_s)
    if not by_target:
        models = sorted({p.model for p in points})
        raise UserError(
            f"run {run_dir} has no CPU points of {model} at one request in flight (models measured there: "
            f"{', '.join(models) or 'none'}); calibrate from a run whose spec has a CPU target and concurrency 1"
        )
    name = max(by_target, key=lambda n: len(by_target[n]))  # max keeps the first of equals: file order
    return name, {b: statistics.median(v) for b, v in sorted(by_target[name].items())}


def _client_batching(p: Point) -> bool:
    return p.target.device == "cpu" and p.is_client_batching and p.items_per_s > 0


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
            "call_ms": round(self.efficiency.per_call_s * 1e3, 3),
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
    call_given: bool = True,
) -> CpuCalibration:
    """Scale the CPU's roofline by the one efficiency that reproduces ``measured[batch]`` exactly.

    t(B) = call + roofline(B) / e, with ``call`` the spec's per-call cost (not fitted: one
    figure fixes one unknown) and e shared by compute and memory. When the per-call cost is the
    shipped default (``call_given`` False) it is held to half the calibration point's time, so a
    model or host faster than the one it was fitted on is not left with nothing to scale. ``batch`` defaults to the
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
    per_batch = chosen / measured[chosen]
    if not call_given and call_s > per_batch / 2:
        call_s = per_batch / 2  # the shipped figure belongs to a slower host or model: at most half of this point
    at_peak = time_per_batch(cost, cpu, "fp32", chosen, Efficiency(1.0, 1.0, 0.0))
    took = per_batch - call_s
    if took <= 0:
        raise UserError(
            f"batch {chosen} took {per_batch * 1e3:.2f} ms, no more than --cpu call_ms={spec.call_ms:g}; give a "
            "smaller call_ms or calibrate on a larger --calibrate-batch"
        )
    factor = at_peak / took
    efficiency = Efficiency(factor, factor, 0.0, call_s)  # efficiency.per_call_s: the per-call cost used
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
