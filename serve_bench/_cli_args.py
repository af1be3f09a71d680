"""The flags of each subcommand (cli.py's table pairs each with its command)."""

from __future__ import annotations

import argparse

__all__ = [
    "FLAG_OF",
    "bench_args",
    "compare_args",
    "demo_args",
    "export_args",
    "import_locust_args",
    "report_args",
    "serve_args",
    "sweep_args",
]

# The library's parameter name -> the flag a user types: InvalidValue names the former,
# the CLI says the latter.
FLAG_OF = {
    "warmup_s": "--warmup",
    "min_duration_s": "--duration",
    "min_requests": "--min-requests",
    "windows": "--windows",
    "tolerance": "--tolerance",
    "max_duration_s": "--max-duration",
    "timeout_s": "--timeout",
    "batch_size": "--batch-size",
    "concurrency": "--concurrency",
    "rate": "--rate",
    "arrival": "--arrival",
    "processes": "--processes",
    "max_error_share": "--max-errors",
    "slo": "--slo",
    "percentile": "--slo percentile",
    "max_ms": "--slo milliseconds",
    "out": "--out",
    "input_data": "--input-data",
    "force": "--force",
    "version": "--version",
    "weights": "--weights",
    "warmup_batch_sizes": "--warmup-batch-sizes",
}


def export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="catalogue name: inception_v3, resnet50, mobilenet_v2, tiny")
    p.add_argument("--list", action="store_true", help="list the catalogue with sizes, parameters and GFLOPs")
    p.add_argument("--weights", default="imagenet", help="imagenet (needs network), random, or a Keras weights file")
    p.add_argument("--version", type=int, default=None, help="version number (default: next free)")
    p.add_argument("--out", default="exported_models", help="models directory (default: exported_models/)")
    p.add_argument("--warmup-batch-sizes", default="1,8,32", help="one warm-up record per size (default 1,8,32)")
    p.add_argument("--force", action="store_true", help="replace an existing version")


def serve_args(p: argparse.ArgumentParser) -> None:
    from serve_bench.server import build_arg_parser

    build_arg_parser(p)


def demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="exported_models", help="models directory")
    p.add_argument("--results", default="results", help="where the runs are written")
    p.add_argument(
        "--models",
        default="inception_v3,mobilenet_v2",
        help="catalogue models to export and sweep (default inception_v3,mobilenet_v2)",
    )
    p.add_argument(
        "--spec",
        default=None,
        help="sweep spec whose targets the demo points at its server (default loadtests/sweeps/local-cpu.toml)",
    )


def _settings_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warmup", type=float, default=2.0, help="seconds discarded first (default 2)")
    p.add_argument("--duration", type=float, default=5.0, help="minimum measured seconds (default 5)")
    p.add_argument("--min-requests", type=int, default=50, help="minimum measured requests (default 50)")
    p.add_argument("--windows", type=int, default=3, help="stability windows (default 3)")
    p.add_argument("--tolerance", type=float, default=0.10, help="window disagreement allowed (default 0.10)")
    p.add_argument("--until-stable", action="store_true", help="closed loop: run until the windows agree")
    p.add_argument("--max-duration", type=float, default=60.0, help="cap for --until-stable (default 60 s)")
    p.add_argument("--timeout", type=float, default=30.0, help="per-request deadline in seconds (default 30)")


def bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "url",
        help="grpc://host:8500 or http://host:8501 (TF Serving); v2+grpc://host:8001, v2+http://host:8000 (KServe v2)",
    )
    p.add_argument("--model", required=True)
    p.add_argument("--signature", default="", help="default: serving_default (float) or serving_bytes (jpeg)")
    p.add_argument("--payload", choices=("float", "jpeg"), default="float")
    p.add_argument("--batch-size", type=int, default=1)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--concurrency", type=int, default=None, help="closed loop: requests in flight")
    group.add_argument("--rate", type=float, default=None, help="open loop: requests/s")
    p.add_argument("--arrival", choices=("poisson", "constant"), default="poisson")
    p.add_argument("--processes", type=int, default=1, help="generate the load from N processes")
    p.add_argument("--device", default="cpu", help="label for the target (cpu, gpu)")
    p.add_argument("--name", default="bench", help="target name in the results")
    p.add_argument("--metrics", default=None, help="Prometheus URL (default: TF Serving's, on the REST port)")
    p.add_argument(
        "--out",
        default="results/bench",
        help="run directory to append the point to (its points must share the settings below)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--input-data", default=None, help="a directory of JPEG/PNG images or a video to send (default: synthetic)"
    )
    p.add_argument(
        "--max-errors",
        type=float,
        default=0.01,
        help="exit 1 when more than this share of requests failed (default 0.01)",
    )
    _settings_args(p)


def sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (TOML), e.g. loadtests/sweeps/local-cpu.toml")
    p.add_argument("--run-dir", default=None, help="results directory (default results/<name>-<time>)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="skip points already measured in the run directory, "
        "measure again those with no successes or cut off (default: the latest run of this spec)",
    )
    p.add_argument(
        "--models-dir",
        default="exported_models",
        help="where the model was exported (its FLOPs and weights go into run.json)",
    )
    p.add_argument("--no-progress", action="store_true", help="plain lines instead of a progress bar")


def report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="results/<run> directory")
    p.add_argument("--slo", default=None, help="latency objective, e.g. p99=100 (default: the sweep spec's)")
    p.add_argument("--models-dir", default="exported_models", help="where to read the model's FLOPs per image")
    p.add_argument("--no-plots", action="store_true")


def compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--allow-mismatch", action="store_true", help="compare runs measured with different settings")


def import_locust_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("prefix", help="the --csv PREFIX Locust wrote (PREFIX_stats.csv, PREFIX_stats_history.csv)")
    p.add_argument("--out", default=None, help="run directory (default results/locust-<time>)")
    p.add_argument("--target-name", default="locust")
    p.add_argument("--url", default="", help="the --host Locust ran against")
    p.add_argument("--device", default="cpu")
    p.add_argument("--server", default="unknown", help="tensorflow-serving or serve-bench-local")
    p.add_argument("--model", default=None, help="default: read from the request name 'predict <model> b<N>'")
    p.add_argument("--batch-size", type=int, default=None, help="default: read from the request name")
    p.add_argument("--payload", default="float", choices=("float", "jpeg"))
