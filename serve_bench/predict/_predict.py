"""Predictions for devices not at hand, each with the error to expect on its device and the fit it came from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
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
from serve_bench.predict._expected import ExpectedError, expected_error
from serve_bench.predict._freeze import FIT_VERSION, FORM, ModelVersion, content_hash, rounded, text_digest
from serve_bench.predict._graph import GraphCost
from serve_bench.predict._model import PCIE_GBS_PER_LANE, Efficiency, time_per_batch
from serve_bench.predict._published import (
    COPY_OVERLAPS,
    FAMILIES,
    PUBLISHED_FILES,
    TABLES,
    LeaveOneOut,
    calibration,
    data_text,
    fitted,
    published_observations,
    run_by,
)
from serve_bench.predict._reference import REFERENCE_FILE, reference_costs

__all__ = ["BATCH_SIZES", "Prediction", "predict", "shipped_inputs", "shipped_tables", "shipped_version"]

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SATURATION = 0.95  # throughput "stops growing" at the first batch within 5% of the largest


@dataclass(frozen=True)
class Prediction:
    """A model on a device at a precision: latency and images/s by batch size, and what follows from them."""

    device: Device
    precision: str
    tables: str
    batch_sizes: tuple[int, ...]
    latency_s: tuple[float, ...]
    images_per_s: tuple[float, ...]
    largest_batch_that_fits: int
    error: LeaveOneOut  # with the device left out
    model_error: LeaveOneOut | None  # with the model left out (None: the calibration's tables have one model)
    calibrated_on: tuple[str, ...]  # the devices of the calibration's tables: the error bars were measured among them
    unknown_ops: tuple[str, ...]
    efficiency: Efficiency  # the fitted parameters this prediction used
    fit: ModelVersion  # the shipped fit's name and hash (``shipped_version``)
    expected: ExpectedError | None = None  # the error to expect on this device (``expected_error``)

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
            "runtime": self.tables,  # the file's key since it was written (report reads it)
            "batch_sizes": list(self.batch_sizes),
            "latency_ms": [round(t * 1e3, 3) for t in self.latency_s],
            "images_per_s": [round(v, 1) for v in self.images_per_s],
            "gain": round(self.gain, 2),
            "saturating_batch": self.saturating_batch,
            "largest_batch_that_fits": self.largest_batch_that_fits,  # an upper bound (``_largest_batch``)
            "largest_batch_that_fits_is": "an upper bound: the weights and the widest op's tensors only",
            "usd_per_million_images": self.usd_per_million_images,
            "error": _error_json(self.error),
            **({"model_error": _error_json(self.model_error)} if self.model_error is not None else {}),
            **({"expected_error": self.expected.to_json()} if self.expected is not None else {}),
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
    tables: str = "tensorflow",
) -> Prediction:
    """Predicted latency and images/s of ``cost``'s model on ``device`` calibrated on the published ``tables``
    (tensorflow or tensorrt: what ran them; raises UserError for a missing precision or unknown tables)."""
    peak_flops(device, precision)  # one line if the device lacks it
    measured = sorted({o.precision for o in published_observations(tables)})
    if precision not in measured:
        raise UserError(
            f"the {tables} tables have no {precision} rows to calibrate on; use --precision {' or '.join(measured)}"
        )
    cost = run_by(cost, tables)
    fitted = calibration(precision_class(precision), tables)
    times = tuple(time_per_batch(cost, device, precision, b, fitted.efficiency) for b in batch_sizes)
    return Prediction(
        device,
        precision,
        tables,
        tuple(batch_sizes),
        times,
        tuple(b / t for b, t in zip(batch_sizes, times)),
        _largest_batch(cost, device, precision),
        fitted.device_out,
        fitted.model_out,
        tuple(sorted({o.device for o in published_observations(tables)})),
        cost.unknown,
        fitted.efficiency,
        shipped_version(),
        expected_error(device, precision, tables),
    )


def _parameters(eff: Efficiency) -> dict[str, float]:
    return {"compute": eff.compute, "memory": eff.memory, "per_op_s": eff.per_op_s, "per_call_s": eff.per_call_s}


_FIGURES = ("fp32_tflops", "tf32_tflops", "fp16_tflops", "mem_bw_gbs", "mem_gb", "pcie_gen", "pcie_lanes")


def _figures(device: Device) -> dict[str, Any]:
    """The device's figures a prediction is made from (its sources stay in the table)."""
    return {name: getattr(device, name) for name in _FIGURES}


def shipped_tables() -> dict[str, str]:
    """The text of every shipped table a fit is made from: the published figures and the reference costs."""
    return {name: data_text(name) for name in (*PUBLISHED_FILES.values(), REFERENCE_FILE)}


def _probe() -> dict[str, Any]:
    """Seconds the shipped form gives each reference model, as each calibration's runtime runs it, at batch 1 and 256 on
    every (device, precision) of its tables, its images copied then computed as a prediction does."""
    devices = device_table()
    probe: dict[str, Any] = {}
    for tables in TABLES:
        costs = {name: run_by(cost, tables) for name, cost in reference_costs().items()}
        for device, precision in sorted({(o.device, o.precision) for o in published_observations(tables)}):
            eff = fitted(precision_class(precision), tables)
            probe[f"{tables} {device} {precision}"] = {
                name: [time_per_batch(cost, devices[device], precision, b, eff) for b in (1, 256)]
                for name, cost in sorted(costs.items())
            }
    return probe


def shipped_inputs(tables: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything the shipped version's hash is made of (``tables`` in place of ``shipped_tables()``):
    the fitted parameters of every calibration and precision class, each table's digest, the figures of the
    devices the tables measured, and the form (its constants and what it predicts for the reference models)."""
    texts = shipped_tables() if tables is None else tables
    classes = sorted({precision_class(p) for p in PRECISIONS})
    measured = sorted({o.device for tables in TABLES for o in published_observations(tables)})
    inputs: dict[str, Any] = rounded(
        {
            "fitted": {r: {k: _parameters(fitted(k, r)) for k in classes} for r in TABLES},
            "tables": {name: text_digest(text) for name, text in sorted(texts.items())},
            "calibration_devices": {d: _figures(device_table()[d]) for d in measured},
            "form": {
                "pcie_gbs_per_lane": PCIE_GBS_PER_LANE,
                "copy_overlaps": COPY_OVERLAPS,
                "published_files": PUBLISHED_FILES,
                "families_left_out_together": FAMILIES,
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
