"""The CPU side of the GPU run: XLA:CPU (the jax runtime) against ONNX Runtime, each model in process (the floor).

    .venv/bin/python -m benchmarks.cpu_runtimes                              # the three models, 1, 8, 32
    .venv/bin/python -m benchmarks.cpu_runtimes --models mobilenet_v2 --batch-sizes 1,8 --rounds 3

The GPU visits measured the host's CPU with the GPU's own runtime, Keras on JAX, which XLA:CPU compiles; ONNX Runtime
(in the GPU host's image) runs the same models faster on a CPU. Which is the fairer CPU for "how much does batching
help on a GPU compared with a CPU", and the cost per image it implies, is the runtime a person would deploy on a CPU.
This script measures both as the GPU run would on its host: the jax copy built from the catalogue with random weights,
the ONNX Runtime copy drawn from its skeleton (``benchmarks/gpu/onnx_skeletons.py``, written into a temporary folder
here unless ``--skeletons`` names one), each floor in a process of its own (``serve_bench.runtimes._floor``), the two
runtimes alternating round by round. Prints images/s per batch size (median over the rounds), each runtime's best and
gain, and ONNX Runtime over XLA:CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _floor(copy: Path, runtime: str, sizes: str, seconds: float) -> dict[int, float]:
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-m", "serve_bench.runtimes._floor", str(copy), "--runtime", runtime]
    command += ["--batch-sizes", sizes, "--min-seconds", f"{seconds:g}", "--min-calls", "3"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{runtime} floor of {copy}: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {x["batch_size"]: x["images_per_s"] for x in lines if "images_per_s" in x}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mobilenet_v2,resnet50,inception_v3")
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0, help="per size, at least")
    parser.add_argument("--skeletons", type=Path, default=None, help="a folder of <model>.onnx skeletons")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    sys.path.insert(0, str(ROOT))
    from serve_bench.runtimes import ONNXRUNTIME, write_random_copy
    from serve_bench.runtimes._onnxruntime import SKELETONS_ENV

    scratch = Path(tempfile.mkdtemp(prefix="cpu-runtimes-"))
    skeletons = args.skeletons
    if skeletons is None:
        skeletons = scratch / "skeletons"
        made = subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks/gpu/onnx_skeletons.py"),
                "--out",
                str(skeletons),
                "--models",
                ",".join(models),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0:
            print(made.stderr[-2000:], file=sys.stderr)
            return 1
    os.environ[SKELETONS_ENV] = str(skeletons.resolve())
    load = os.getloadavg()
    print(
        f"CPU runtimes in process: {os.cpu_count()} CPUs, {args.rounds} rounds, at least {args.seconds:g} s a size; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before"
    )
    for model in models:
        copies = {
            "jax": write_random_copy(scratch / "models", model, 1),
            ONNXRUNTIME.name: ONNXRUNTIME.write_random(scratch / "models", model, 1),  # type: ignore[misc]
        }
        rates: dict[str, dict[int, list[float]]] = {runtime: {} for runtime in copies}
        for round_ in range(args.rounds):
            order = list(copies) if round_ % 2 == 0 else list(reversed(copies))
            for runtime in order:
                for size, rate in _floor(copies[runtime], runtime, args.batch_sizes, args.seconds).items():
                    rates[runtime].setdefault(size, []).append(rate)
        medians = {r: {b: statistics.median(v) for b, v in sorted(by.items())} for r, by in rates.items()}
        print(f"{model}: images/s, median over the rounds (range)")
        for runtime, by in rates.items():
            cells = [f"b{b} {statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})" for b, v in sorted(by.items())]
            best = max(medians[runtime], key=lambda b: medians[runtime][b])
            gain = medians[runtime][best] / medians[runtime][min(medians[runtime])]
            print(f"  {runtime:12s} " + "; ".join(cells) + f"; best b{best}, gain {gain:.2f}x")
        ort, xla = medians[ONNXRUNTIME.name], medians["jax"]
        over = "; ".join(f"b{b} {ort[b] / xla[b]:.2f}x" for b in sorted(ort) if b in xla)
        print(f"  onnxruntime over XLA:CPU: {over}; best over best {max(ort.values()) / max(xla.values()):.2f}x")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
