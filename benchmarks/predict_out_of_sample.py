"""The frozen fit scored on published tables no fit has used (issue 32, item 2), device by device.

Every row of serve_bench/predict/data/out_of_sample.csv (NVIDIA DeepLearningExamples@729963dd47e7,
each with its file and line) is predicted by the shipped fit, version 2026-11-26, exactly as
`serve-bench predict` predicts (ResNet-50 v1.5's shipped graph costs; a served request: the copy at
PCIe's rate, then the computation). Nothing is refitted. The tables, and predict's calibration (--tables)
that stands for each:
- mxnet: MxNet/Classification/RN50v1.5/README.md, "Inference performance" (A100 80GB, V100 16GB,
  T4; batch 1-256). MXNet runs the graph op by op with cuDNN: `tensorflow`. Mixed precision is
  published; TF32 (A100) and FP32 (V100, T4) are mixed precision / its throughput speed-up column.
- triton-tf-trt: TensorFlow/Classification/ConvNets/triton/README.md, "Offline" (A40, A100 80GB,
  V100 32GB, T4; client batch 1-128): TF-TRT FP16 served by Triton, one request in flight over
  HTTP, so each figure holds its images' transfer: `tensorrt`.

Printed: per table and device, images/s by batch size (published, predicted, error = predicted /
published - 1), the median and worst |error|, the batching gain at the best batch of each and its
error; for a served table, the rate its images arrived at; then the summary table that
benchmarks/README.md holds, and the error each device is shown with by `serve-bench predict`.
tests/test_predict_out_of_sample.py runs it and pins the figures.

    .venv/bin/python benchmarks/predict_out_of_sample.py
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from serve_bench.predict import TABLES, device_table, shipped_version
from serve_bench.predict._devices import GENERATIONS, precision_class
from serve_bench.predict._expected import expected_error
from serve_bench.predict._outofsample import OUT_OF_SAMPLE_TABLES, Scored, score

_EXAMPLE_DEVICE = {"Volta": "v100", "Turing": "t4", "Ampere": "a100", "Ada Lovelace": "l4", "Hopper": "h100"}


@dataclass(frozen=True)
class Summary:
    """One line of the README's table: a (table, device, precision) scored."""

    table: str
    tables: str  # predict's calibration (--tables) scored on it
    device: str
    precision: str
    batches: str  # "1-256"
    median: float
    worst: float
    gain_published: float
    gain_predicted: float
    gain_error: float
    served_gbs: float | None


def summaries() -> list[Summary]:
    """One per (table, device, precision), in the rows' order."""
    out = []
    for s in score():
        out.append(
            Summary(
                s.table.name,
                s.table.tables,
                s.device,
                s.precision,
                f"{s.batch_sizes[0]}-{s.batch_sizes[-1]}",
                s.median,
                s.worst,
                max(s.published) / s.published[0],
                max(s.predicted) / s.predicted[0],
                s.gain_error,
                s.served_transfer_gbs(),
            )
        )
    return out


def pooled(table: str) -> tuple[float, float, float]:
    """Median and worst |error| of images/s over every row of a table, and the median |gain error|."""
    scored = [s for s in score() if s.table.name == table]
    errors = [abs(e) for s in scored for e in s.errors]
    return statistics.median(errors), max(errors), statistics.median(abs(s.gain_error) for s in scored)


def _print_scored(s: Scored) -> None:
    published, predicted = s.best_batch
    print(f"  {s.device} {s.precision}")
    print(f"    {'batch':>5} {'published':>9} {'predicted':>9} {'error':>7}")
    for b, m, p, e in zip(s.batch_sizes, s.published, s.predicted, s.errors):
        print(f"    {b:>5} {m:>9.1f} {p:>9.1f} {e:>+7.1%}")
    print(f"    images/s |error| median {s.median:.1%}, worst {s.worst:.1%}")
    print(
        f"    batching gain: published {max(s.published) / s.published[0]:.2f}x (batch {published}), predicted "
        f"{max(s.predicted) / s.predicted[0]:.2f}x (batch {predicted}), error {s.gain_error:+.1%}"
    )
    rate = s.served_transfer_gbs()
    if rate is not None:
        b = s.batch_sizes[-1]
        print(
            f"    served: batch {b} took {b / s.published[-1] * 1e3:.1f} ms, the predicted computation "
            f"{s.computed_s[-1] * 1e3:.1f} ms: its images arrived at {rate:.2f} GB/s"
        )


def main() -> None:
    fit = shipped_version()
    print(f"fit {fit.name}, sha256 {fit.sha256} (nothing refitted)")
    for name, table in OUT_OF_SAMPLE_TABLES.items():
        print(f"\n{name}: {table.ran}; scored with predict's {table.tables} fit")
        for s in score():
            if s.table.name == name:
                _print_scored(s)
        median, worst, gain = pooled(name)
        print(f"  all rows: images/s |error| median {median:.1%}, worst {worst:.1%}; |gain error| median {gain:.1%}")

    print("\n| table (predict's runtime) | device | precision | batch | images/s median | worst | gain error |")
    print("|---|---|---|---|---|---|---|")
    for r in summaries():
        print(
            f"| {r.table} ({r.tables}) | {r.device} | {r.precision} | {r.batches} | {r.median:.1%} | {r.worst:.1%} | "
            f"{r.gain_error:+.1%} ({r.gain_predicted:.1f}x vs {r.gain_published:.1f}x) |"
        )

    print("\nthe error serve-bench predict shows, by architecture (predicted/published - 1, 10th-90th percentile):")
    devices = device_table()
    for tables in TABLES:
        for klass, precision in (("fp32", "tf32"), ("mixed", "mixed")):
            for architecture in GENERATIONS:
                device = devices[_EXAMPLE_DEVICE[architecture]]
                if tables == "tensorrt" and precision_class(precision) == "fp32" and device.tf32_tflops is None:
                    continue  # tensorrt's tables are TF32: no fp32 prediction on a device without it
                e = expected_error(device, precision, tables)
                where = e.nearest if e.covered else f"{e.nearest} (no table of {architecture}: expect more)"
                print(
                    f"  {tables:10s} {klass:5s} {architecture:12s} images/s {e.images_per_s.describe():14s} "
                    f"gain {e.gain.describe():14s} from {where}"
                )


if __name__ == "__main__":
    main()
