"""Leave-one-out errors of `serve-bench predict` on the published tables it ships.

For each calibration (--tables) and precision class (fp32/tf32, mixed), each device family of its
tables is left out of the fit in turn and predicted from its peaks alone, then each model in turn
where there are several; printed: per (model, device) the median and worst relative error of
images/s and the error of the batching gain at the best batch. The tables, all NVIDIA
DeepLearningExamples', batch 1-256:
- tensorflow: TensorFlow 1 ConvNets (ResNet-50 v1.5, ResNeXt-101 32x4d, SE-ResNeXt-101 32x4d;
  T4, V100 16/32 GB, A100 40 GB), the graph costed as TensorFlow runs it;
- tensorrt: PaddlePaddle ResNet-50 v1.5 through Paddle-TRT (A100 80 GB, A30, A10), the graph
  costed with its point-wise ops fused into the kernels that wrote their inputs, as TensorRT
  builds it, and each batch's copy overlapping the computation, as the benchmark's DALI pipeline
  ran it.
tests/test_predict.py pins the medians printed here to the ones in benchmarks/README.md.

Then the CPU: the two `make demo` runs recorded in tests/data/demo_2core_20261125 (2-core AMD
EPYC VM, gRPC, one request in flight, batch 1-8), each calibrated on one of its batch sizes with
the per-call cost fitted on the other model's run, and the error at its other batch sizes.

Run: .venv/bin/python benchmarks/predict_validation.py
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

from serve_bench.predict import TABLES, CpuSpec, GraphCost, calibrate_cpu, calibration, cpu_points, fit_cpu

RECORDED = Path(__file__).resolve().parent.parent / "tests" / "data" / "demo_2core_20261125"
RECORDING_CPU = CpuSpec("AMD EPYC", cores=2, ghz=2.6, vector_bits=256, fma_units=2, bw_gbs=25.0, mem_gb=24.0)


def cpu_from_one_point() -> None:
    runs = {}
    for model in ("inception_v3", "mobilenet_v2"):
        cost = GraphCost.from_json(json.loads((RECORDED / model / "graph_cost.json").read_text()))
        runs[model] = (cost, cpu_points(RECORDED / model, model)[1])
    for model, (cost, measured) in runs.items():
        (other,) = set(runs) - {model}
        _, call_s = fit_cpu(*runs[other][:1], RECORDING_CPU, runs[other][1])
        spec = dataclasses.replace(RECORDING_CPU, call_ms=call_s * 1e3)
        figures = ", ".join(f"{b}: {v:.1f}" for b, v in measured.items())
        print(f"{model}: measured images/s {figures}; per call {spec.call_ms:.1f} ms (fitted on {other})")
        for batch in measured:
            errors = calibrate_cpu(cost, spec, measured, batch=batch).errors
            shown = "  ".join(f"b{b} {e:+5.1%}" for b, e in errors.items())
            print(f"  from batch {batch}: {shown}   worst {max(abs(e) for e in errors.values()):.1%}")


def main() -> None:
    for tables, klass in itertools.product(TABLES, ("fp32", "mixed")):
        fitted = calibration(klass, tables)
        eff = fitted.efficiency
        print(
            f"{tables} {klass}: fitted on all: compute {eff.compute:.2f} of peak, memory {eff.memory:.2f} of "
            f"bandwidth, {eff.per_op_s * 1e6:.1f} µs per op"
        )
        for loo in filter(None, (fitted.device_out, fitted.model_out)):
            print(f"  {loo.left_out} left out:")
            for h in loo.held:
                print(
                    f"    {h.model:20s} {h.device:10s} images/s median {h.median:6.1%} worst {h.worst:6.1%}   "
                    f"gain {h.gain_error:+6.1%}"
                )
            print(
                f"    {'all':31s} images/s median {loo.median:6.1%} worst {loo.worst:6.1%}   "
                f"|gain| median {loo.gain_median:.1%} worst {loo.gain_worst:.1%}"
            )
    cpu_from_one_point()


if __name__ == "__main__":
    main()
