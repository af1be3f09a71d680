"""Which software stack? The same model on TensorFlow, ONNX Runtime and OpenVINO, in process and served.

    .venv/bin/python -m benchmarks.runtimes [--models inception_v3,mobilenet_v2] [--seconds 8]

For each model (random weights: speed does not depend on their values): export once, converted
for every runtime (each copy checked equal to TensorFlow by export itself); then, per runtime,
images/s at batch 1 and 8 calling the model in a loop in this process, and served by the local
server (``serve --runtime R``, another process) to serve-bench's gRPC client with one request in
flight. Printed: images/s, the ratio to TensorFlow at the same batch and place, the batching
gain (batch 8 over batch 1) per runtime, and which lever moved throughput more on this machine:
batching (on TensorFlow) or the runtime (at batch 8). Ratios, not absolutes: the figures are
one machine's.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.server_vs_inprocess import served
from serve_bench.errors import UserError
from serve_bench.export import converted_model_path, export_model
from serve_bench.runtimes import RUNTIMES, RuntimeSettings, open_runner
from serve_bench.servers import LocalServerProcess

BATCHES = (1, 8)


class _TensorFlow:
    """The SavedModel's serving_default, holding the loaded object (its variables live as long as it)."""

    def __init__(self, path: Path) -> None:
        from serve_bench._tf import import_tensorflow

        self.tf = import_tensorflow()
        self.loaded = self.tf.saved_model.load(str(path))

    def __call__(self, images: np.ndarray) -> np.ndarray:
        outputs = self.loaded.signatures["serving_default"](images=self.tf.constant(images))
        return np.asarray(outputs["features"])


def _caller(models_dir: Path, model: str, runtime: str) -> Any:
    """A function of a batch of images -> features, for ``runtime``, in this process."""
    if runtime == "tensorflow":
        return _TensorFlow(models_dir / model / "1")
    runner = open_runner(runtime, converted_model_path(models_dir, runtime, model, 1), RuntimeSettings(runtime))
    return lambda images: runner({"images": images})["features"]


def in_process(call: Any, shape: tuple[int, ...], batch: int, seconds: float) -> float:
    images = np.random.default_rng(0).uniform(0, 255, (batch, *shape)).astype(np.float32)
    call(images)  # warm up
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        call(images)
        count += 1
    return count * batch / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="inception_v3,mobilenet_v2")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per figure (default 8)")
    args = parser.parse_args()
    for model in args.models.split(","):
        out = Path(tempfile.mkdtemp(prefix="bench-runtimes-"))
        started = time.perf_counter()
        result = export_model(model, weights="random", out=out, warmup_batch_sizes=(1,), runtimes=RUNTIMES)
        print(f"\n{model}: exported in {time.perf_counter() - started:.0f} s")
        for conversion in result.conversions:
            print(
                f"  {conversion.runtime}: {conversion.converter}, {conversion.seconds:.1f} s, features within "
                f"{conversion.max_error:.1g} of TensorFlow's (float32 allows {conversion.tolerance:.1g})"
                if conversion.ok
                else f"  {conversion.runtime}: not converted: {conversion.reason}"
            )
        converted = ("tensorflow", *(c.runtime for c in result.conversions if c.ok))
        shape = result.facts.input_shape
        figures: dict[tuple[str, str, int], float] = {}
        runtimes = []
        for runtime in converted:
            try:  # a runtime that cannot run in this process (Keras on JAX, beside TensorFlow's Keras) says why
                call = _caller(out, model, runtime)
            except UserError as exc:
                print(f"  {runtime}: not measured here: {exc}")
                continue
            runtimes.append(runtime)
            for batch in BATCHES:
                figures[(runtime, "in process", batch)] = in_process(call, shape, batch, args.seconds)
            del call
            with LocalServerProcess(out, model, extra_flags=(f"--runtime={runtime}",)) as server:
                for batch in BATCHES:
                    rate, _ = asyncio.run(served(server.grpc_url, server.metrics_url, model, batch, 1, args.seconds))
                    figures[(runtime, "served", batch)] = rate
        print(
            f"  {'runtime':<12} {'where':<11} "
            + " ".join(f"{f'b{b} img/s':>10} {'vs TF':>6}" for b in BATCHES)
            + "  gain b8/b1"
        )
        for where in ("in process", "served"):
            for runtime in runtimes:
                cells = []
                for batch in BATCHES:
                    rate = figures[(runtime, where, batch)]
                    cells.append(f"{rate:10.1f} {rate / figures[('tensorflow', where, batch)]:5.2f}x")
                gain = figures[(runtime, where, BATCHES[-1])] / figures[(runtime, where, BATCHES[0])]
                print(f"  {runtime:<12} {where:<11} " + " ".join(cells) + f"  {gain:9.2f}x")
        batching = figures[("tensorflow", "served", 8)] / figures[("tensorflow", "served", 1)]
        best = max(runtimes, key=lambda r: figures[(r, "served", 8)])
        switching = figures[(best, "served", 8)] / figures[("tensorflow", "served", 8)]
        both = figures[(best, "served", 8)] / figures[("tensorflow", "served", 1)]
        lever = "batching" if batching > switching else f"the runtime ({best})"
        print(
            f"  served: batching 1 -> 8 on TensorFlow {batching:.2f}x; {best} over TensorFlow at batch 8 "
            f"{switching:.2f}x; both {both:.2f}x. The larger lever here: {lever}."
        )


if __name__ == "__main__":
    main()
