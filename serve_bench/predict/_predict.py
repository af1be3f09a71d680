"""Predictions for devices not at hand, each with the error its calibration showed on devices left out."""

from __future__ import annotations

import csv
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from serve_bench.errors import UserError
from serve_bench.predict._devices import (
    PRECISIONS,
    Device,
    bytes_per_element,
    device_table,
    peak_flops,
    precision_class,
)
from serve_bench.predict._freeze import FIT_VERSION, FORM, ModelVersion, content_hash, rounded, text_digest
from serve_bench.predict._graph import GraphCost, fuse_pointwise
from serve_bench.predict._model import PCIE_GBS_PER_LANE, Efficiency, Observation, fit, time_per_batch
from serve_bench.predict._reference import REFERENCE_FILE, reference_costs

__all__ = [
    "BATCH_SIZES",
    "RUNTIMES",
    "Calibration",
    "HeldOut",
    "LeaveOneOut",
    "Prediction",
    "calibration",
    "check_runtime",
    "leave_one_device_out",
    "leave_one_model_out",
    "predict",
    "published_observations",
    "run_by",
    "shipped_inputs",
    "shipped_tables",
    "shipped_version",
]

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# What runs the graph on the GPU, and the published tables its efficiencies are fitted on:
# TensorFlow as TF Serving runs a SavedModel (the walker's graph, op by op), or TensorRT (the
# same graph with its point-wise ops fused into the kernels that wrote their inputs: ``fuse_pointwise``).
PUBLISHED_FILES = {"tensorflow": "published_tf1_convnets.csv", "tensorrt": "published_paddle_trt_resnet50.csv"}
RUNTIMES = tuple(PUBLISHED_FILES)
# Whether the tables' benchmark copied a batch's images while the previous one computed.
# TensorFlow 1's inference_benchmark.sh passes --data_dir: each Estimator step takes its batch from
# a tf.data pipeline on the host (ConvNets utils/data_utils.py get_tfrecords_input_fn, prefetched
# on the host, not to the device), copied as the step starts. Paddle-TRT's inference.py
# benchmark_synthetic feeds a DALI pipeline that copies pinned host memory to the GPU (dali.py
# dali_synthetic_dataloader: external_source, .gpu()) and runs ahead of its consumer by default
# (exec_pipelined=True, exec_async=True, prefetch_queue_depth=2: DALI's Python API,
# nvidia.dali.pipeline.Pipeline), so the next batch crosses PCIe while this one computes; with the
# fitted efficiencies the copy is shorter than the computation in every row, so those tables hold no
# copy time at all (and say nothing of PCIe). A prediction is of a served request, whose images
# arrive with it: copied (at PCIe's rate, in no case fitted), then computed.
COPY_OVERLAPS = {"tensorflow": False, "tensorrt": True}
# Devices left out together: the two V100s differ in memory size only (and DGX-2's clocks), so
# predicting one from the other would not be a prediction.
_FAMILIES = {
    "v100-32gb": "v100",
    "a100-80gb": "a100",
    "h100-pcie": "h100",
    "v100-pcie": "v100",
    "a100-pcie": "a100",
    "a10g": "a10",
}
SATURATION = 0.95  # throughput "stops growing" at the first batch within 5% of the largest


def check_runtime(runtime: str) -> None:
    """One line naming the runtimes with tables, for a runtime ``predict`` has none for."""
    if runtime not in RUNTIMES:
        raise UserError(
            f"no published GPU tables for runtime {runtime!r} to predict with; choose one of: {', '.join(RUNTIMES)}"
        )


def _data_text(name: str) -> str:
    return resources.files("serve_bench.predict").joinpath("data", name).read_text(encoding="utf-8")


@cache
def published_observations(runtime: str = "tensorflow") -> tuple[Observation, ...]:
    """The shipped published figures of one runtime, all NVIDIA DeepLearningExamples' inference tables.

    tensorflow: its TensorFlow 1 ConvNets (ResNet-50 v1.5, ResNeXt-101 32x4d, SE-ResNeXt-101 32x4d
    on T4, V100 16/32 GB and A100 40 GB); tensorrt: its PaddlePaddle ResNet-50 v1.5 through
    Paddle-TRT (A100 80 GB, A30, A10; TF32 and FP16). Read once per process: every prediction asks.
    """
    check_runtime(runtime)
    text = _data_text(PUBLISHED_FILES[runtime])
    return tuple(
        Observation(r["device"], r["precision"], int(r["batch_size"]), float(r["images_per_s"]), r["model"])
        for r in csv.DictReader(text.splitlines())
    )


@dataclass(frozen=True)
class HeldOut:
    """How far the prediction of one left-out (model, device) was from its published figures."""

    model: str
    device: str
    median: float  # relative error of images/s over its batch sizes
    worst: float
    gain_error: float  # relative error of the batching gain at the best batch (signed)


@dataclass(frozen=True)
class LeaveOneOut:
    """Errors of one precision class with each device family (or each model) left out of the fit in turn."""

    precision_class: str
    left_out: str  # "device" or "model"
    held: tuple[HeldOut, ...]
    median: float  # over every left-out (model, device, batch) figure
    worst: float
    gain_median: float  # |gain error| over the left-out (model, device) pairs
    gain_worst: float


def _family(device: str) -> str:
    return _FAMILIES.get(device, device)


def _leave_out(
    costs: Mapping[str, GraphCost],
    observations: Sequence[Observation],
    devices: dict[str, Device],
    left_out: str,
    copy_overlaps: bool = False,
) -> LeaveOneOut:
    """Fit without each group (a device family, or a model), predict it, and say how far off it was."""

    def group(o: Observation) -> str:
        return _family(o.device) if left_out == "device" else o.model

    (klass,) = {precision_class(o.precision) for o in observations}
    errors: list[float] = []
    held: list[HeldOut] = []
    for name in sorted({group(o) for o in observations}):
        eff = fit(costs, [o for o in observations if group(o) != name], devices, copy_overlaps)
        for model, device in sorted({(o.model, o.device) for o in observations if group(o) == name}):
            figures = sorted(
                (o for o in observations if (o.model, o.device) == (model, device)), key=lambda o: o.batch_size
            )
            predicted = [
                o.batch_size
                / time_per_batch(costs[model], devices[device], o.precision, o.batch_size, eff, copy_overlaps)
                for o in figures
            ]
            relative = [abs(p / o.images_per_s - 1) for p, o in zip(predicted, figures)]
            gain_p = max(predicted) / predicted[0]
            gain_o = max(o.images_per_s for o in figures) / figures[0].images_per_s
            held.append(HeldOut(model, device, statistics.median(relative), max(relative), gain_p / gain_o - 1))
            errors += relative
    gains = [abs(h.gain_error) for h in held]
    return LeaveOneOut(
        klass, left_out, tuple(held), statistics.median(errors), max(errors), statistics.median(gains), max(gains)
    )


def leave_one_device_out(
    costs: Mapping[str, GraphCost],
    observations: Sequence[Observation],
    devices: dict[str, Device],
    copy_overlaps: bool = False,
) -> LeaveOneOut:
    """Each device family left out in turn: how well the model predicts a GPU it was not fitted on."""
    return _leave_out(costs, observations, devices, "device", copy_overlaps)


def leave_one_model_out(
    costs: Mapping[str, GraphCost],
    observations: Sequence[Observation],
    devices: dict[str, Device],
    copy_overlaps: bool = False,
) -> LeaveOneOut:
    """Each model left out in turn: how well it predicts a model it was not fitted on (the user's own)."""
    return _leave_out(costs, observations, devices, "model", copy_overlaps)


@dataclass(frozen=True)
class Calibration:
    """The efficiencies fitted on every shipped table of a precision class, and the two held-out errors."""

    efficiency: Efficiency
    device_out: LeaveOneOut
    model_out: LeaveOneOut | None  # None where the runtime's tables have one model


def run_by(cost: GraphCost, runtime: str) -> GraphCost:
    """``cost`` as ``runtime`` executes it (TensorRT fuses point-wise ops; TensorFlow runs the graph as walked)."""
    check_runtime(runtime)
    return fuse_pointwise(cost) if runtime == "tensorrt" else cost


def _calibration_set(klass: str, runtime: str) -> tuple[dict[str, GraphCost], list[Observation]]:
    """The reference models' costs as ``runtime`` runs them, and its tables' rows of a precision class."""
    costs = {name: run_by(cost, runtime) for name, cost in reference_costs().items()}
    return costs, [o for o in published_observations(runtime) if precision_class(o.precision) == klass]


@cache
def fitted(klass: str, runtime: str = "tensorflow") -> Efficiency:
    """The efficiencies fitted on every shipped table of a precision class and runtime (what predictions use)."""
    costs, observations = _calibration_set(klass, runtime)
    return fit(costs, observations, device_table(), COPY_OVERLAPS[runtime])


@cache
def calibration(klass: str, runtime: str = "tensorflow") -> Calibration:
    """Fit a precision class on a runtime's shipped tables, and measure its errors with a device, then a model,
    left out."""
    costs, observations = _calibration_set(klass, runtime)
    devices = device_table()
    several_models = len({o.model for o in observations}) > 1
    overlaps = COPY_OVERLAPS[runtime]
    return Calibration(
        fitted(klass, runtime),
        leave_one_device_out(costs, observations, devices, overlaps),
        leave_one_model_out(costs, observations, devices, overlaps) if several_models else None,
    )


@dataclass(frozen=True)
class Prediction:
    """A model on a device at a precision: latency and images/s by batch size, and what follows from them."""

    device: Device
    precision: str
    runtime: str
    batch_sizes: tuple[int, ...]
    latency_s: tuple[float, ...]
    images_per_s: tuple[float, ...]
    largest_batch_that_fits: int
    error: LeaveOneOut  # with the device left out
    model_error: LeaveOneOut | None  # with the model left out (None: the runtime's tables have one model)
    calibrated_on: tuple[str, ...]  # the devices of the runtime's tables: the error bars were measured among them
    unknown_ops: tuple[str, ...]
    efficiency: Efficiency  # the fitted parameters this prediction used
    fit: ModelVersion  # the shipped fit's name and hash (``shipped_version``)

    @property
    def gain(self) -> float:
        """Largest images/s over batch 1's."""
        return max(self.images_per_s) / self.images_per_s[0]

    @property
    def saturating_batch(self) -> int:
        """The first batch size whose images/s is within 5% of the largest."""
        top = max(self.images_per_s)
        return next(b for b, v in zip(self.batch_sizes, self.images_per_s) if v >= SATURATION * top)

    @property
    def usd_per_million_images(self) -> float | None:
        price = self.device.price_per_hour_usd
        return None if price is None else price / (max(self.images_per_s) * 3600) * 1e6

    def to_json(self) -> dict[str, Any]:
        """The record ``--predictions`` and a run's predictions.json hold (``predicted`` is always true)."""
        return {
            "device": self.device.id,
            "name": self.device.name,
            "precision": self.precision,
            "runtime": self.runtime,
            "batch_sizes": list(self.batch_sizes),
            "latency_ms": [round(t * 1e3, 3) for t in self.latency_s],
            "images_per_s": [round(v, 1) for v in self.images_per_s],
            "gain": round(self.gain, 2),
            "saturating_batch": self.saturating_batch,
            "largest_batch_that_fits": self.largest_batch_that_fits,
            "usd_per_million_images": self.usd_per_million_images,
            "error": _error_json(self.error),
            **({"model_error": _error_json(self.model_error)} if self.model_error is not None else {}),
            "calibrated_on": list(self.calibrated_on),
            "unknown_ops": list(self.unknown_ops),
            "fit": {**self.fit.to_json(), "form": FORM, "fitted": _parameters(self.efficiency)},
            "device_figures": _figures(self.device),
            "predicted": True,
        }


def _error_json(error: LeaveOneOut) -> dict[str, Any]:
    return {
        "median": error.median,
        "worst": error.worst,
        "gain_median": error.gain_median,
        "gain_worst": error.gain_worst,
    }


def _largest_batch(cost: GraphCost, device: Device, precision: str) -> int:
    """The largest batch whose weights and largest op's tensors fit in the device's memory.

    A bound from above: the framework keeps more alive (workspace, its allocator's pool).
    """
    size = bytes_per_element(precision)
    free = device.mem_gb * 1e9 - cost.weight_elements * size
    widest = max((op.activations for op in cost.ops), default=0.0) * size
    return max(0, int(free // widest)) if widest else 0


def predict(
    cost: GraphCost,
    device: Device,
    precision: str,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    runtime: str = "tensorflow",
) -> Prediction:
    """Predicted latency and images/s of ``cost``'s model on ``device`` run by ``runtime`` (raises UserError for
    a missing precision or a runtime without tables)."""
    peak_flops(device, precision)  # one line if the device lacks it
    measured = sorted({o.precision for o in published_observations(runtime)})
    if precision not in measured:
        raise UserError(
            f"the {runtime} tables have no {precision} rows to calibrate on; use --precision {' or '.join(measured)}"
        )
    cost = run_by(cost, runtime)
    fitted = calibration(precision_class(precision), runtime)
    times = tuple(time_per_batch(cost, device, precision, b, fitted.efficiency) for b in batch_sizes)
    return Prediction(
        device,
        precision,
        runtime,
        tuple(batch_sizes),
        times,
        tuple(b / t for b, t in zip(batch_sizes, times)),
        _largest_batch(cost, device, precision),
        fitted.device_out,
        fitted.model_out,
        tuple(sorted({o.device for o in published_observations(runtime)})),
        cost.unknown,
        fitted.efficiency,
        shipped_version(),
    )


def _parameters(eff: Efficiency) -> dict[str, float]:
    return {"compute": eff.compute, "memory": eff.memory, "per_op_s": eff.per_op_s, "per_call_s": eff.per_call_s}


_FIGURES = ("fp32_tflops", "tf32_tflops", "fp16_tflops", "mem_bw_gbs", "mem_gb", "pcie_gen", "pcie_lanes")


def _figures(device: Device) -> dict[str, Any]:
    """The device's figures a prediction is made from (its sources stay in the table)."""
    return {name: getattr(device, name) for name in _FIGURES}


def shipped_tables() -> dict[str, str]:
    """The text of every shipped table a fit is made from: the published figures and the reference costs."""
    return {name: _data_text(name) for name in (*PUBLISHED_FILES.values(), REFERENCE_FILE)}


def _probe() -> dict[str, Any]:
    """Seconds the shipped form gives each reference model, as each runtime runs it, at batch 1 and 256 on
    every (device, precision) of that runtime's tables, its images copied then computed as a prediction does."""
    devices = device_table()
    probe: dict[str, Any] = {}
    for runtime in RUNTIMES:
        costs = {name: run_by(cost, runtime) for name, cost in reference_costs().items()}
        for device, precision in sorted({(o.device, o.precision) for o in published_observations(runtime)}):
            eff = fitted(precision_class(precision), runtime)
            probe[f"{runtime} {device} {precision}"] = {
                name: [time_per_batch(cost, devices[device], precision, b, eff) for b in (1, 256)]
                for name, cost in sorted(costs.items())
            }
    return probe


def shipped_inputs(tables: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything the shipped version's hash is made of (``tables`` in place of ``shipped_tables()``):
    the fitted parameters of every runtime and precision class, each table's digest, the figures of the
    devices the tables measured, and the form (its constants and what it predicts for the reference models)."""
    texts = shipped_tables() if tables is None else tables
    classes = sorted({precision_class(p) for p in PRECISIONS})
    measured = sorted({o.device for runtime in RUNTIMES for o in published_observations(runtime)})
    inputs: dict[str, Any] = rounded(
        {
            "fitted": {r: {k: _parameters(fitted(k, r)) for k in classes} for r in RUNTIMES},
            "tables": {name: text_digest(text) for name, text in sorted(texts.items())},
            "calibration_devices": {d: _figures(device_table()[d]) for d in measured},
            "form": {
                "pcie_gbs_per_lane": PCIE_GBS_PER_LANE,
                "copy_overlaps": COPY_OVERLAPS,
                "published_files": PUBLISHED_FILES,
                "families_left_out_together": _FAMILIES,
                "saturation": SATURATION,
                "precision_class": {p: precision_class(p) for p in PRECISIONS},
                "bytes_per_element": {p: bytes_per_element(p) for p in PRECISIONS},
                "probe_s": _probe(),
            },
        }
    )
    return inputs


@cache
def shipped_version() -> ModelVersion:
    """The shipped fit's name (``FIT_VERSION``) and the sha256 of ``shipped_inputs()``, computed from what ships."""
    return ModelVersion(FIT_VERSION, content_hash(shipped_inputs()))
