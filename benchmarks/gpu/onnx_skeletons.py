"""ONNX skeletons for the GPU host's CPU: each model's ONNX Runtime copy without its large weights.

    .venv/bin/python benchmarks/gpu/onnx_skeletons.py --out .whl/onnx            # make gpu-wheels runs it
    .venv/bin/python benchmarks/gpu/onnx_skeletons.py --out DIR --models tiny

The GPU host has ONNX Runtime and onnx but no TensorFlow, so it cannot convert a model itself, and the weights of
InceptionV3 and ResNet-50 are over what a device call carries. Here, where TensorFlow runs, each catalogue model
is exported with random weights and converted by tf2onnx as ``serve-bench export --runtimes onnxruntime`` does
(the copy checked against TensorFlow's features); the skeleton is that graph with every large float weight
replaced by its mean and spread (``serve_bench.runtimes._onnxruntime.strip_weights``). There, the onnxruntime
record's ``write_random`` draws the weights again from the folder ``SERVE_BENCH_ONNX_SKELETONS`` names.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from serve_bench.errors import UserError  # noqa: E402

MODELS = "inception_v3,mobilenet_v2,resnet50,tiny"


def write_skeletons(models: list[str], out: Path) -> list[tuple[str, int, int, float]]:
    """(model, the copy's bytes, the skeleton's bytes, seconds) for each model; each skeleton is out/<model>.onnx."""
    from serve_bench.export import export_model
    from serve_bench.runtimes import ONNXRUNTIME
    from serve_bench.runtimes._onnxruntime import strip_weights

    written = []
    for model in models:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="onnx-skeleton-") as scratch:
            export_model(model, weights="random", out=scratch, warmup_batch_sizes=(1,), runtimes=(ONNXRUNTIME.name,))
            copy = ONNXRUNTIME.copy_files(Path(scratch), model, 1)[0]
            skeleton = out / f"{model}.onnx"
            strip_weights(copy, skeleton)
            written.append((model, copy.stat().st_size, skeleton.stat().st_size, time.perf_counter() - started))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default=MODELS)
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    try:
        for model, full, skeleton, seconds in write_skeletons(models, args.out):
            print(f"{model}: {skeleton / 1024:.0f} KiB skeleton of a {full / 2**20:.1f} MiB copy ({seconds:.0f} s)")
    except UserError as exc:
        print(f"onnx_skeletons: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
