"""The flags of each subcommand (cli.py's table pairs each with its command).

One name per concept across every subcommand (``serve`` keeps ``tensorflow_model_server``'s own
flags). The shared ones are declared once here and added to each subcommand that takes them, as
pyperf declares its shared options once:

    ``URL``                 the target (positional where it is the command's subject, else ``--url``)
    ``--target-name NAME``  the target's name in the results
    ``--run-dir DIR``       one run's directory, ``results/<run>`` (``report`` and ``compare`` take it as RUN)
    ``--models-dir DIR``    the exported models, ``exported_models/``
    ``--timeout SECONDS``   per-request deadline, one default everywhere (PointSettings.timeout_s)
    ``--until-stable``      on by default, as in sweep and tune specs (``--no-until-stable`` for fixed length)
    ``--device LABEL``      the target's device label, cpu or gpu (``predict`` names GPUs with ``--gpu``)

A word means one thing in every subcommand: ``--run-dir`` is where a run is written (a command that reads
one takes it as ``RUN``; ``predict`` also as ``--from-run``), ``--runtime`` is what a target runs
(``predict``'s calibration is ``--tables``). pipeline's and tune's own flags are declared by their
packages; their shared ones here. A renamed flag keeps working as a hidden alias that says its new name
once (``errors.Renamed``): every one is in ``RENAMED``, which ``add_renamed`` adds to its subcommand.
"""

from __future__ import annotations

import argparse

from serve_bench.errors import Renamed

__all__ = [
    "FLAG_OF",
    "RENAMED",
    "add_renamed",
    "bench_args",
    "compare_args",
    "demo_args",
    "export_args",
    "import_locust_args",
    "pipeline_args",
    "predict_args",
    "report_args",
    "serve_args",
    "sweep_args",
    "tune_args",
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
    "out": "--models-dir",  # export's parameter
    "input_data": "--input-data",
    "force": "--force",
    "version": "--version",
    "weights": "--weights",
    "warmup_batch_sizes": "--warmup-batch-sizes",
    "runtime": "--runtime",
    "seed": "--seed",
    "metrics_url": "--metrics",
}

# Old flag -> new flag, per subcommand (each old name is a hidden alias that says the new one).
RENAMED: dict[str, dict[str, str]] = {
    "export": {"--out": "--models-dir"},
    "demo": {"--out": "--models-dir", "--results": "--results-root"},
    "bench": {"--out": "--run-dir", "--name": "--target-name"},
    "import-locust": {"--out": "--run-dir"},
    "pipeline": {"--target": "--url", "--name": "--target-name", "--results": "--run-dir", "--out": "--features"},
    # predict's words meant something else elsewhere: --runtime is what a target runs, --device a cpu/gpu label,
    # --run-dir where a run is written
    "predict": {"--runtime": "--tables", "--device": "--gpu", "--run-dir": "--from-run"},
}


def add_renamed(p: argparse.ArgumentParser, command: str) -> None:
    """Each old name of ``command``'s flags (``RENAMED``) as a hidden alias of the flag it became: stored where
    the new one is, taking the same values, and saying the new name once when used."""
    for old, new in RENAMED.get(command, {}).items():
        action = p._option_string_actions[new]
        p.add_argument(old, dest=action.dest, nargs=action.nargs, action=Renamed, new=new, help=argparse.SUPPRESS)


def run_dir_arg(p: argparse.ArgumentParser, help: str, *, default: str | None = None) -> None:
    """``--run-dir DIR``: the directory a run is written to (results/<run>)."""
    p.add_argument("--run-dir", metavar="DIR", default=default, help=help)


def models_dir_arg(p: argparse.ArgumentParser, help: str) -> None:
    """``--models-dir DIR``: where models are exported (TF Serving's layout)."""
    p.add_argument("--models-dir", metavar="DIR", default="exported_models", help=help)


def target_name_arg(p: argparse.ArgumentParser, default: str, *, note: str = "") -> None:
    """``--target-name NAME``: the target's name in the results."""
    p.add_argument(
        "--target-name",
        metavar="NAME",
        default=default,
        help=f"target name in the results (default {default}{'; ' + note if note else ''})",
    )


def url_arg(p: argparse.ArgumentParser, *, default: str, help: str = "") -> None:
    """``--url URL``: the target, where it is not the command's subject (bench takes it as ``URL``)."""
    p.add_argument("--url", metavar="URL", default=default, help=help or _URL_HELP)


def device_arg(p: argparse.ArgumentParser) -> None:
    """``--device LABEL``: the target's device label in the results."""
    p.add_argument("--device", metavar="LABEL", default="cpu", help="label for the target (cpu, gpu) (default cpu)")


_URL_HELP = "grpc://host:8500 or http://host:8501 (TF Serving); v2+grpc://host:8001, v2+http://host:8000 (KServe v2)"


def export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="catalogue name: inception_v3, resnet50, mobilenet_v2, tiny")
    p.add_argument("--list", action="store_true", help="list the catalogue with sizes, parameters and GFLOPs")
    p.add_argument("--weights", default="imagenet", help="imagenet (needs network), random, or a Keras weights file")
    p.add_argument("--version", type=int, default=None, help="version number (default: next free)")
    models_dir_arg(p, "models directory to export into (default exported_models/)")
    p.add_argument("--warmup-batch-sizes", default="1,8,32", help="one warm-up record per size (default 1,8,32)")
    p.add_argument("--force", action="store_true", help="replace an existing version")
    p.add_argument(
        "--runtimes",
        default=None,
        help="tensorflow,onnxruntime,openvino,jax: also convert the SavedModel for these (default: every one "
        "installed but jax, whose check starts a process of its own). Without TensorFlow installed, "
        "--runtimes jax --weights random writes the jax copy alone, built with random weights where it runs",
    )


def serve_args(p: argparse.ArgumentParser) -> None:
    from serve_bench.server import build_arg_parser

    build_arg_parser(p)


def demo_args(p: argparse.ArgumentParser) -> None:
    models_dir_arg(p, "models directory to export into and serve from (default exported_models/)")
    p.add_argument(
        "--results-root",
        metavar="DIR",
        default="results",
        help="where the demo makes its run directories, one per model (default results/; a spec's out)",
    )
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
    # the defaults are the library's and the specs' (PointSettings, sweep.UNTIL_STABLE): one value each
    from serve_bench.load import PointSettings
    from serve_bench.sweep import UNTIL_STABLE

    d = PointSettings()
    p.add_argument("--warmup", type=float, default=d.warmup_s, help=f"seconds discarded first (default {d.warmup_s:g})")
    p.add_argument(
        "--duration",
        type=float,
        default=d.min_duration_s,
        help=f"minimum measured seconds (default {d.min_duration_s:g})",
    )
    p.add_argument(
        "--min-requests", type=int, default=d.min_requests, help=f"minimum measured requests (default {d.min_requests})"
    )
    p.add_argument("--windows", type=int, default=d.windows, help=f"stability windows (default {d.windows})")
    p.add_argument(
        "--tolerance", type=float, default=d.tolerance, help=f"window disagreement allowed (default {d.tolerance:g})"
    )
    p.add_argument(
        "--until-stable",
        action=argparse.BooleanOptionalAction,
        default=UNTIL_STABLE,
        help="closed loop: run until the windows agree, at most --max-duration "
        f"(default {'on' if UNTIL_STABLE else 'off'}, as in sweep and tune specs)",
    )
    p.add_argument(
        "--max-duration",
        type=float,
        default=d.max_duration_s,
        help=f"cap for --until-stable (default {d.max_duration_s:g} s)",
    )
    timeout_arg(p, d.timeout_s)


def timeout_arg(p: argparse.ArgumentParser, default: float) -> None:
    """``--timeout SECONDS``: the per-request deadline (one default: PointSettings.timeout_s)."""
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=default,
        help=f"per-request deadline in seconds (default {default:g})",
    )


def bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", metavar="URL", help=_URL_HELP)
    p.add_argument("--model", required=True)
    p.add_argument("--signature", default="", help="default: serving_default (float) or serving_bytes (jpeg)")
    p.add_argument("--payload", choices=("float", "jpeg"), default="float")
    p.add_argument("--batch-size", type=int, default=1)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--concurrency", type=int, default=None, help="closed loop: requests in flight")
    group.add_argument("--rate", type=float, default=None, help="open loop: requests/s")
    p.add_argument("--arrival", choices=("poisson", "constant"), default="poisson")
    p.add_argument("--processes", type=int, default=1, help="generate the load from N processes")
    device_arg(p)
    p.add_argument(
        "--runtime",
        default="",
        help="label: what runs the model there (tensorflow, onnxruntime, openvino), recorded with the point so "
        "the report can compare runtimes (default: not stated)",
    )
    target_name_arg(p, "bench")
    p.add_argument("--metrics", default=None, help="Prometheus URL (default: TF Serving's, on the REST port)")
    run_dir_arg(
        p,
        "run directory to append the point to (default results/bench; its points must share the settings below)",
        default="results/bench",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--input-data",
        default=None,
        metavar="DIR|VIDEO",
        help="a directory of JPEG/PNG images or a video to send (default: synthetic)",
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
    run_dir_arg(p, "run directory (default results/<name>-<time>)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="skip points already measured in the run directory, "
        "measure again those with no successes or cut off (default: the latest run of this spec; "
        "a folder with no points starts a new run, and says so)",
    )
    models_dir_arg(p, "where the model was exported (its FLOPs and weights go into run.json)")
    p.add_argument("--no-progress", action="store_true", help="plain lines instead of a progress bar")


def report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help="a run directory, results/<run>")
    p.add_argument("--slo", default=None, help="latency objective, e.g. p99=100 (default: the sweep spec's)")
    models_dir_arg(p, "where to read the model's FLOPs per image")
    p.add_argument("--no-plots", action="store_true")


def predict_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="an exported model's name (its latest version is costed)")
    p.add_argument(
        "run",
        metavar="RUN",
        nargs="?",
        default=None,
        help="a run directory, results/<run>, with CPU points of MODEL at one request in flight: one calibrates "
        "this CPU, the others check it; predictions.json is written there for its report (or --from-run RUN)",
    )
    p.add_argument("--from-run", metavar="RUN", default=None, help="the run to calibrate this CPU on, as RUN")
    p.add_argument(
        "--gpu",
        nargs="+",
        default=["t4", "a100"],
        metavar="GPU",
        help="GPUs from the shipped table: t4 l4 a10 a10g a30 v100 v100-32gb v100-pcie a100 a100-80gb a100-pcie "
        "h100 h100-pcie h200 (default: t4 a100)",
    )
    p.add_argument(
        "--precision",
        default="fp32",
        help="fp32 (CUDA cores), tf32 (Ampere and later) or mixed (float16 tensor cores) (default: fp32)",
    )
    p.add_argument(
        "--tables",
        default="tensorflow",
        metavar="{tensorflow,tensorrt}",
        help="which published tables calibrate the GPUs, named by what ran them: tensorflow (TF Serving, the "
        "graph op by op; T4, V100 and A100 tables) or tensorrt (point-wise ops fused into the kernels that wrote "
        "their inputs; A100, A30 and A10 tables, tf32 and mixed only) (default: tensorflow)",
    )
    models_dir_arg(p, "where the model was exported")
    p.add_argument("--predictions", metavar="FILE", default=None, help="also write the predictions as JSON to FILE")
    p.add_argument(
        "--calibrate-batch",
        type=int,
        default=None,
        metavar="N",
        help="the measured batch size that calibrates the CPU (default: the smallest measured)",
    )
    p.add_argument(
        "--cpu",
        default=None,
        metavar="KEY=VALUE,...",
        help="describe the CPU the run measured instead of reading this host: cores, ghz, vector_bits, fma_units, "
        "bw_gbs, mem_gb, and call_ms, what a call costs whatever its batch (e.g. cores=2,ghz=2.6,call_ms=5)",
    )


def compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a", metavar="RUN_A", help="run directory A (the baseline)")
    p.add_argument("run_b", metavar="RUN_B", help="run directory B")
    p.add_argument("--allow-mismatch", action="store_true", help="compare runs measured with different settings")


def import_locust_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("prefix", help="the --csv PREFIX Locust wrote (PREFIX_stats.csv, PREFIX_stats_history.csv)")
    run_dir_arg(p, "run directory (default results/locust-<time>)")
    target_name_arg(p, "locust")
    url_arg(p, default="", help="the target Locust ran against (its --host)")
    device_arg(p)
    p.add_argument(
        "--server", default="unknown", help="the server kind Locust ran against: local, tfserving, triton or mlserver"
    )
    p.add_argument("--model", default=None, help="default: read from the request name 'predict <model> b<N>'")
    p.add_argument("--batch-size", type=int, default=None, help="default: read from the request name")
    p.add_argument("--payload", default="float", choices=("float", "jpeg"))


def pipeline_args(p: argparse.ArgumentParser) -> None:
    """The pipeline's own flags (its package declares them), then the shared ones."""
    from serve_bench.pipeline import PipelineConfig, add_pipeline_arguments

    add_pipeline_arguments(p)
    url_arg(p, default="grpc://localhost:8500")
    timeout_arg(p, PipelineConfig.timeout_s)  # bench's and the specs' default (PointSettings.timeout_s)
    target_name_arg(p, "pipeline", note="the payload is appended")
    device_arg(p)
    models_dir_arg(p, "where the SavedModel is, for the in-process comparison")
    run_dir_arg(p, "run directory (default results/pipeline-<time>)")


def tune_args(p: argparse.ArgumentParser) -> None:
    """tune's own flags (its package declares them), then the shared one."""
    from serve_bench.tune import add_tune_arguments

    add_tune_arguments(p)
    run_dir_arg(p, "run directory (default results/<name>-<time>)")
