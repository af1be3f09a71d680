"""The published tables the GPU predictions are fitted on, the fits, and their held-out errors.

Each calibration (``TABLES``: tensorflow, tensorrt, named by what ran the graph on the GPU; ``--tables``)
has its tables, all NVIDIA DeepLearningExamples' inference tables shipped in data/ with their file and
lines; ``fitted`` gives the efficiencies of a precision class fitted on every row of them, ``calibration``
adds the errors of that fit with each device family, then each model, left out in turn: the held-out
errors a prediction is shown with.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from serve_bench.errors import UserError
from serve_bench.predict._devices import Device, device_table, precision_class
from serve_bench.predict._graph import GraphCost, fuse_pointwise
from serve_bench.predict._model import Efficiency, Observation, fit, time_per_batch
from serve_bench.predict._reference import reference_costs

__all__ = [
    "COPY_OVERLAPS",
    "FAMILIES",
    "PUBLISHED_FILES",
    "TABLES",
    "Calibration",
    "HeldOut",
    "LeaveOneOut",
    "calibration",
    "check_tables",
    "data_text",
    "fitted",
    "leave_one_device_out",
    "leave_one_model_out",
    "published_observations",
    "run_by",
]

# What runs the graph on the GPU, and the published tables its efficiencies are fitted on:
# TensorFlow as TF Serving runs a SavedModel (the walker's graph, op by op), or TensorRT (the
# same graph with its point-wise ops fused into the kernels that wrote their inputs: ``fuse_pointwise``).
PUBLISHED_FILES = {"tensorflow": "published_tf1_convnets.csv", "tensorrt": "published_paddle_trt_resnet50.csv"}
# predict's calibrations (``--tables``), named by what ran their tables: not the runtime a target runs
# (export's RUNTIMES), which is a different concept
TABLES = tuple(PUBLISHED_FILES)
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
FAMILIES = {
    "v100-32gb": "v100",
    "a100-80gb": "a100",
    "h100-pcie": "h100",
    "v100-pcie": "v100",
    "a100-pcie": "a100",
    "a10g": "a10",
}


def check_tables(tables: str) -> None:
    """One line naming the published tables ``predict`` has, for a name it has none for."""
    if tables not in TABLES:
        raise UserError(f"no published GPU tables {tables!r} to predict with; choose one of: {', '.join(TABLES)}")


def data_text(name: str) -> str:
    return resources.files("serve_bench.predict").joinpath("data", name).read_text(encoding="utf-8")


@cache
def published_observations(tables: str = "tensorflow") -> tuple[Observation, ...]:
    """The shipped published figures of one calibration, all NVIDIA DeepLearningExamples' inference tables.

    tensorflow: its TensorFlow 1 ConvNets (ResNet-50 v1.5, ResNeXt-101 32x4d, SE-ResNeXt-101 32x4d
    on T4, V100 16/32 GB and A100 40 GB); tensorrt: its PaddlePaddle ResNet-50 v1.5 through
    Paddle-TRT (A100 80 GB, A30, A10; TF32 and FP16). Read once per process: every prediction asks.
    """
    check_tables(tables)
    text = data_text(PUBLISHED_FILES[tables])
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
    errors: tuple[float, ...] = ()  # signed relative error of images/s (predicted/published - 1), by batch


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
    return FAMILIES.get(device, device)


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
            signed = tuple(p / o.images_per_s - 1 for p, o in zip(predicted, figures))
            relative = [abs(e) for e in signed]
            gain_p = max(predicted) / predicted[0]
            gain_o = max(o.images_per_s for o in figures) / figures[0].images_per_s
            held.append(HeldOut(model, device, statistics.median(relative), max(relative), gain_p / gain_o - 1, signed))
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
    model_out: LeaveOneOut | None  # None where the calibration's tables have one model


def run_by(cost: GraphCost, tables: str) -> GraphCost:
    """``cost`` as what ran ``tables`` executes it (TensorRT fuses point-wise ops; TensorFlow runs the graph
    as walked)."""
    check_tables(tables)
    return fuse_pointwise(cost) if tables == "tensorrt" else cost


def _calibration_set(klass: str, tables: str) -> tuple[dict[str, GraphCost], list[Observation]]:
    """The reference models' costs as what ran ``tables`` runs them, and its tables' rows of a precision class."""
    costs = {name: run_by(cost, tables) for name, cost in reference_costs().items()}
    return costs, [o for o in published_observations(tables) if precision_class(o.precision) == klass]


@cache
def fitted(klass: str, tables: str = "tensorflow") -> Efficiency:
    """The efficiencies fitted on every shipped table of a precision class and calibration (what predictions use)."""
    costs, observations = _calibration_set(klass, tables)
    return fit(costs, observations, device_table(), COPY_OVERLAPS[tables])


@cache
def calibration(klass: str, tables: str = "tensorflow") -> Calibration:
    """Fit a precision class on a calibration's shipped tables, and measure its errors with a device, then a model,
    left out."""
    costs, observations = _calibration_set(klass, tables)
    devices = device_table()
    several_models = len({o.model for o in observations}) > 1
    overlaps = COPY_OVERLAPS[tables]
    return Calibration(
        fitted(klass, tables),
        leave_one_device_out(costs, observations, devices, overlaps),
        leave_one_model_out(costs, observations, devices, overlaps) if several_models else None,
    )
