"""Freeze `serve-bench predict` for the GPUs about to be measured, before they are measured.

Runs `serve-bench predict` for InceptionV3, ResNet-50 and MobileNetV2 on the H100 SXM5 and the
H200 SXM, with each calibration (--tables tensorflow: fp32, tf32, mixed; tensorrt: tf32, mixed),
and writes into one folder, for each (model, tables, precision):
- ``<model>-<tables>-<precision>.json``, what ``--predictions`` wrote;
- ``<model>-<tables>-<precision>.txt``, what the command printed;
and, once:
- ``graph_costs/<model>.json``, the graph costs the predictions were made from (tests re-predict from
  them without TensorFlow);
- ``fit.json``, the shipped fit's name, hash and everything the hash is made of, so that a later
  hash that differs can be diffed input by input;
- ``commands.txt``, the command lines.

The models are exported first with random weights (timing does not depend on weight values):

    for m in inception_v3 resnet50 mobilenet_v2; do
      .venv/bin/serve-bench export $m --weights random --models-dir /tmp/pred-models --runtimes tensorflow
    done
    .venv/bin/python benchmarks/predict_frozen.py --models-dir /tmp/pred-models

It refuses to write into a folder that already holds frozen predictions: those stand for the fit
they were made with, and a new fit takes a new folder.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
from pathlib import Path

from serve_bench.cli import main as cli_main
from serve_bench.export import list_versions
from serve_bench.predict import FIT_VERSION, cost_saved_model, shipped_inputs, shipped_version

MODELS = ("inception_v3", "resnet50", "mobilenet_v2")
DEVICES = ("h100", "h200")
PRECISIONS = {"tensorflow": ("fp32", "tf32", "mixed"), "tensorrt": ("tf32", "mixed")}
HERE = Path(__file__).resolve().parent


def name(model: str, tables: str, precision: str) -> str:
    return f"{model}-{tables}-{precision}"


def command(model: str, tables: str, precision: str, models_dir: str, out: Path) -> list[str]:
    return [
        "predict",
        model,
        "--gpu",
        *DEVICES,
        "--tables",
        tables,
        "--precision",
        precision,
        "--models-dir",
        models_dir,
        "--predictions",
        str(out / f"{name(model, tables, precision)}.json"),
    ]


def freeze(models_dir: str, out: Path) -> None:
    if any(out.glob("*.json")):
        sys.exit(f"{out} already holds frozen predictions; a new fit takes a new folder")
    (out / "graph_costs").mkdir(parents=True, exist_ok=True)
    lines = []
    for model in MODELS:
        versions = list_versions(Path(models_dir) / model)
        if not versions:
            sys.exit(f"no exported {model} under {models_dir}; export it first (see this script's docstring)")
        cost = cost_saved_model(Path(models_dir) / model / str(versions[-1]))
        (out / "graph_costs" / f"{model}.json").write_text(json.dumps(cost.to_json()) + "\n")
        for tables, precisions in PRECISIONS.items():
            for precision in precisions:
                argv = command(model, tables, precision, models_dir, out)
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):
                    status = cli_main(argv)
                if status != 0:
                    sys.exit(f"serve-bench {shlex.join(argv)} exited {status}")
                text = printed.getvalue().replace(str(out) + "/", "")
                (out / f"{name(model, tables, precision)}.txt").write_text(text)
                lines.append("serve-bench " + shlex.join(argv).replace(str(out) + "/", ""))
                print(lines[-1])
    version = shipped_version()
    record = {**version.to_json(), "inputs": shipped_inputs()}
    (out / "fit.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    (out / "commands.txt").write_text("\n".join(lines) + "\n")
    print(f"frozen: {version.describe()} -> {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", default="/tmp/pred-models", help="where the three models were exported")
    parser.add_argument("--out", type=Path, default=HERE / "results" / f"predicted-{FIT_VERSION}")
    args = parser.parse_args()
    freeze(args.models_dir, args.out)


if __name__ == "__main__":
    main()
