"""Predictions for devices not at hand, each with the error its calibration showed on devices left out."""

from __future__ import annotations

import csv
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from serve_bench.predict._devices import Device, bytes_per_element, device_table, peak_flops, precision_class
from serve_bench.predict._graph import GraphCost
from serve_bench.predict._model import Efficiency, Observation, fit, time_per_batch
from serve_bench.predict._reference import reference_cost

__all__ = [
    "BATCH_SIZES",
    "DeviceError",
    "LeaveOneOut",
    "Prediction",
    "calibration",
    "leave_one_device_out",
    "predict",
    "published_observations",
]

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PUBLISHED_FILE = "published_resnet50v15_tf1.csv"
# Devices left out together: the two V100s differ in memory size only (and DGX-2's clocks), so
# predicting one from the other would not be a prediction.
_FAMILIES = {"v100-32gb": "v100", "a100-80gb": "a100", "h100-pcie": "h100", "v100-pcie": "v100", "a100-pcie": "a100"}
SATURATION = 0.95  # throughput "stops growing" at the first batch within 5% of the largest


def published_observations() -> list[Observation]:
    """The shipped published figures (ResNet-50 v1.5, TensorFlow 1, NVIDIA DeepLearningExamples)."""
    text = resources.files("serve_bench.predict").joinpath("data", PUBLISHED_FILE).read_text()
    return [
        Observation(r["device"], r["precision"], int(r["batch_size"]), float(r["images_per_s"]))
        for r in csv.DictReader(text.splitlines())
    ]


@dataclass(frozen=True)
class DeviceError:
    """How far one left-out device's prediction was from its published figures."""

    device: str
    median: float  # relative error of images/s over its batch sizes
    worst: float
    gain_error: float  # relative error of the batching gain at the best batch (signed)


@dataclass(frozen=True)
class LeaveOneOut:
    """Errors of one precision class with each device family left out of the fit in turn."""

    precision_class: str
    devices: tuple[DeviceError, ...]
    median: float  # over every left-out (device, batch) figure
    worst: float
    gain_median: float  # |gain error| over the left-out devices
    gain_worst: float


def _family(device: str) -> str:
    return _FAMILIES.get(device, device)


def leave_one_device_out(
    cost: GraphCost, observations: Sequence[Observation], devices: dict[str, Device]
) -> LeaveOneOut:
    """Fit without each device family, predict it, and say how far off each prediction was."""
    classes = {precision_class(o.precision) for o in observations}
    (klass,) = classes
    errors: list[float] = []
    per_device: list[DeviceError] = []
    for family in sorted({_family(o.device) for o in observations}):
        eff = fit(cost, [o for o in observations if _family(o.device) != family], devices)
        for name in sorted({o.device for o in observations if _family(o.device) == family}):
            held = sorted((o for o in observations if o.device == name), key=lambda o: o.batch_size)
            predicted = [
                o.batch_size / time_per_batch(cost, devices[name], o.precision, o.batch_size, eff) for o in held
            ]
            relative = [abs(p / o.images_per_s - 1) for p, o in zip(predicted, held)]
            gain_p = max(predicted) / predicted[0]
            gain_o = max(o.images_per_s for o in held) / held[0].images_per_s
            per_device.append(DeviceError(name, statistics.median(relative), max(relative), gain_p / gain_o - 1))
            errors += relative
    gains = [abs(d.gain_error) for d in per_device]
    return LeaveOneOut(
        klass, tuple(per_device), statistics.median(errors), max(errors), statistics.median(gains), max(gains)
    )


@cache
def calibration(klass: str) -> tuple[Efficiency, LeaveOneOut]:
    """The efficiencies fitted on every shipped table of a precision class, and their leave-one-out errors."""
    cost = reference_cost()
    devices = device_table()
    observations = [o for o in published_observations() if precision_class(o.precision) == klass]
    return fit(cost, observations, devices), leave_one_device_out(cost, observations, devices)


@dataclass(frozen=True)
class Prediction:
    """A model on a device at a precision: latency and images/s by batch size, and what follows from them."""

    device: Device
    precision: str
    batch_sizes: tuple[int, ...]
    latency_s: tuple[float, ...]
    images_per_s: tuple[float, ...]
    largest_batch_that_fits: int
    error: LeaveOneOut
    unknown_ops: tuple[str, ...]

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
            "batch_sizes": list(self.batch_sizes),
            "latency_ms": [round(t * 1e3, 3) for t in self.latency_s],
            "images_per_s": [round(v, 1) for v in self.images_per_s],
            "gain": round(self.gain, 2),
            "saturating_batch": self.saturating_batch,
            "largest_batch_that_fits": self.largest_batch_that_fits,
            "usd_per_million_images": self.usd_per_million_images,
            "error": {
                "median": self.error.median,
                "worst": self.error.worst,
                "gain_median": self.error.gain_median,
                "gain_worst": self.error.gain_worst,
            },
            "unknown_ops": list(self.unknown_ops),
            "predicted": True,
        }


def _largest_batch(cost: GraphCost, device: Device, precision: str) -> int:
    """The largest batch whose weights and largest op's tensors fit in the device's memory.

    A bound from above: the framework keeps more alive (workspace, its allocator's pool).
    """
    size = bytes_per_element(precision)
    free = device.mem_gb * 1e9 - cost.weight_elements * size
    widest = max((op.activations for op in cost.ops), default=0.0) * size
    return max(0, int(free // widest)) if widest else 0


def predict(cost: GraphCost, device: Device, precision: str, batch_sizes: Sequence[int] = BATCH_SIZES) -> Prediction:
    """Predicted latency and images/s of ``cost``'s model on ``device`` (raises UserError for a missing precision)."""
    peak_flops(device, precision)  # one line if the device lacks it
    eff, error = calibration(precision_class(precision))
    times = tuple(time_per_batch(cost, device, precision, b, eff) for b in batch_sizes)
    return Prediction(
        device,
        precision,
        tuple(batch_sizes),
        times,
        tuple(b / t for b, t in zip(batch_sizes, times)),
        _largest_batch(cost, device, precision),
        error,
        cost.unknown,
    )
