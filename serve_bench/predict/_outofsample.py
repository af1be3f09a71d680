"""The shipped fit scored on published tables no fit has used (issue 32, item 2).

Rows of NVIDIA DeepLearningExamples' per-batch-size inference tables that no calibration, design
choice or error bar of ``predict`` has seen, each with its file and line
(data/out_of_sample.csv), predicted with the shipped fit exactly as ``serve-bench predict``
predicts them: same graph costs, same calibration, a served request's copy then its computation.
Nothing here fits; ``score`` says how far each (table, device, precision) came out.
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
from dataclasses import dataclass
from functools import cache

from serve_bench.predict._devices import get_device, precision_class
from serve_bench.predict._model import time_per_batch
from serve_bench.predict._published import data_text, fitted, run_by
from serve_bench.predict._reference import reference_costs

__all__ = ["OUT_OF_SAMPLE_FILE", "OUT_OF_SAMPLE_TABLES", "Row", "Scored", "Table", "out_of_sample_rows", "score"]

OUT_OF_SAMPLE_FILE = "out_of_sample.csv"


@dataclass(frozen=True)
class Table:
    """One set of unused published tables: what ran it, and which of predict's calibrations stands for it."""

    name: str
    tables: str  # predict's calibration (``--tables``) whose fit is scored on it
    ran: str  # the software and the benchmark, as its README and scripts say
    served: bool  # each figure is of a request served with its images (the copy is inside it)


OUT_OF_SAMPLE_TABLES = {
    # MxNet/Classification/RN50v1.5: benchmark.py --mode val runs ./runner (train.py) on the validation
    # set: MXNet's symbolic graph, op by op on cuDNN (BN+ReLU fused in float16 only: runner's
    # --fuse-bn-relu), images decoded on the GPU by DALI (--data-backend dali-gpu) in a pipeline that runs
    # ahead, so no float image crosses PCIe in the timed step. "Total IPS (data + compute time taken into
    # account)". Closest of predict's calibrations: tensorflow (an unfused graph, kernel by kernel).
    "mxnet": Table(
        "mxnet",
        "tensorflow",
        "MXNet 1.x (NGC mxnet-22.10-py3 on the A100, 20.12 on the V100 and T4), cuDNN, DALI on the GPU",
        served=False,
    ),
    # TensorFlow/Classification/ConvNets/triton: the ResNet-50 v1.5 SavedModel converted by TF-TRT at FP16
    # (convert_model.py --output-type tf-trt), served by Triton 20.12's TensorFlow backend (2 instances,
    # dynamic batching), measured by run_offline_performance_test_on_triton.py: perf_client -i http -c 1 to
    # 127.0.0.1:8000, random float32 224x224x3 images, no shared memory. Each figure is batch / the mean
    # latency of one request at a time, its images sent over HTTP and copied to the GPU inside it.
    # Closest of predict's calibrations: tensorrt, whose prediction is of such a served request.
    "triton-tf-trt": Table(
        "triton-tf-trt",
        "tensorrt",
        "TF-TRT FP16 in Triton 20.12 (TensorFlow backend), perf_client over HTTP on the same host, 1 in flight",
        served=True,
    ),
}


@dataclass(frozen=True)
class Row:
    """One published figure no fit has used: images/s of a model at a batch size, device and precision."""

    table: str
    model: str
    device: str
    precision: str
    batch_size: int
    images_per_s: float
    latency_ms: float
    source: str  # file and line at NVIDIA/DeepLearningExamples@729963dd47e7, and how a derived figure was derived


@cache
def out_of_sample_rows() -> tuple[Row, ...]:
    """Every shipped row of data/out_of_sample.csv, in file order."""
    return tuple(
        Row(
            r["table"],
            r["model"],
            r["device"],
            r["precision"],
            int(r["batch_size"]),
            float(r["images_per_s"]),
            float(r["latency_avg_ms"]),
            r["source"],
        )
        for r in csv.DictReader(data_text(OUT_OF_SAMPLE_FILE).splitlines())
    )


@dataclass(frozen=True)
class Scored:
    """One (table, model, device, precision): the published images/s by batch size and the shipped fit's."""

    table: Table
    model: str
    device: str
    precision: str
    batch_sizes: tuple[int, ...]
    published: tuple[float, ...]
    predicted: tuple[float, ...]
    computed_s: tuple[float, ...]  # the predicted computation alone, seconds per batch (no copy)

    @property
    def errors(self) -> tuple[float, ...]:
        """Signed relative error of images/s by batch size: predicted / published - 1."""
        return tuple(p / m - 1 for p, m in zip(self.predicted, self.published))

    @property
    def median(self) -> float:
        """Median |error| of images/s over the batch sizes."""
        return statistics.median(abs(e) for e in self.errors)

    @property
    def worst(self) -> float:
        return max(abs(e) for e in self.errors)

    @property
    def gain_error(self) -> float:
        """Signed error of the batching gain at the best batch (largest images/s over batch 1's), as
        ``leave_one_device_out`` measures it."""
        return _gain(self.predicted) / _gain(self.published) - 1

    @property
    def best_batch(self) -> tuple[int, int]:
        """The batch size of the largest images/s: published, predicted."""
        return _best(self.batch_sizes, self.published), _best(self.batch_sizes, self.predicted)

    def served_transfer_gbs(self) -> float | None:
        """For a served table, the rate its images arrived at the largest batch: that batch's float32
        images over its published time per batch less the predicted computation (None: not served, or
        the computation alone is predicted slower than the published time)."""
        if not self.table.served:
            return None
        batch, ips = self.batch_sizes[-1], self.published[-1]
        left = batch / ips - self.computed_s[-1]
        cost = reference_costs()[self.model]
        return batch * cost.input_elements * 4 / left / 1e9 if left > 0 else None


def _gain(images_per_s: tuple[float, ...]) -> float:
    return max(images_per_s) / images_per_s[0]


def _best(batches: tuple[int, ...], images_per_s: tuple[float, ...]) -> int:
    return batches[images_per_s.index(max(images_per_s))]


@cache
def score() -> tuple[Scored, ...]:
    """Each (table, model, device, precision) of the shipped rows, predicted by the shipped fit of the table's
    calibration: images/s as ``predict`` gives them (a served request: copy, then computation)."""
    groups: dict[tuple[str, str, str, str], list[Row]] = {}
    for r in out_of_sample_rows():
        groups.setdefault((r.table, r.model, r.device, r.precision), []).append(r)
    scored = []
    for (name, model, device_id, precision), rows in groups.items():
        table = OUT_OF_SAMPLE_TABLES[name]
        rows.sort(key=lambda r: r.batch_size)
        batches = tuple(r.batch_size for r in rows)
        device = get_device(device_id)
        cost = run_by(reference_costs()[model], table.tables)
        eff = fitted(precision_class(precision), table.tables)
        served = tuple(time_per_batch(cost, device, precision, b, eff) for b in batches)
        alone = dataclasses.replace(device, pcie_lanes=0)  # no lanes: no copy (a CPU's reading, in _model)
        computed = tuple(time_per_batch(cost, alone, precision, b, eff) for b in batches)
        scored.append(
            Scored(
                table,
                model,
                device_id,
                precision,
                batches,
                tuple(r.images_per_s for r in rows),
                tuple(b / t for b, t in zip(batches, served)),
                computed,
            )
        )
    return tuple(scored)
