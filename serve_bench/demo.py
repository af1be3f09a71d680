"""`make demo`: the whole pipeline on this machine, with random weights.

1. export inception_v3 and mobilenet_v2 (random weights; reused when already exported)
2. start the local server with TF Serving's batching and metrics configs
3. sweep loadtests/sweeps/local-cpu.toml over gRPC and REST, batch sizes 1-32, for each model
4. write and print the reports, and say where they are
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from serve_bench import export
from serve_bench.errors import UserError

DEMO_MODELS = ("inception_v3", "mobilenet_v2")
ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "loadtests" / "sweeps" / "local-cpu.toml"


def ensure_exported(name: str, out: Path, warmup_batch_sizes: tuple[int, ...] = (1, 8)) -> Path:
    """Reuse the latest exported version of ``name``; otherwise export one with random weights."""
    versions = export.list_versions(out / name)
    if versions:
        path = out / name / str(versions[-1])
        print(f"reusing {name} version {versions[-1]} at {path}")
        return path
    print(f"exporting {name} with RANDOM weights (no download here; timing does not depend on weight values, "
          "the features are meaningless)", flush=True)
    result = export.export_model(name, weights="random", out=out, warmup_batch_sizes=warmup_batch_sizes)
    facts = result.facts
    print(f"  -> {result.path}: {facts.parameters:,} parameters, {facts.flops_per_image / 1e9:.2f} GFLOPs/image")
    return result.path


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_local_server(models_dir: Path, grpc_port: int, rest_port: int) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "serve_bench", "serve",
        "--model_config_file", str(models_dir / "models.config"), "--models_dir", str(models_dir),
        "--port", str(grpc_port), "--rest_api_port", str(rest_port),
        "--enable_batching", "--batching_parameters_file", str(ROOT / "docker" / "batching" / "cpu.txt"),
        "--monitoring_config_file", str(ROOT / "docker" / "monitoring.config"),
    ]
    print("starting the local server: " + " ".join(command[2:]), flush=True)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    url = f"http://127.0.0.1:{rest_port}/v1/models/{DEMO_MODELS[0]}"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise UserError(f"the local server exited while starting: {output.strip().splitlines()[-1:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise UserError("the local server did not become ready within 5 minutes")


def stop_local_server(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from serve_bench._cli_commands import describe_point
    from serve_bench.report import build_report, print_summary
    from serve_bench.sweep import load_spec, new_run_dir, run_sweep

    console = Console()
    started = time.monotonic()
    out = Path(args.out)
    for name in DEMO_MODELS:
        ensure_exported(name, out)
    print(f"models.config: {export.write_models_config(out)}")

    grpc_port, rest_port = _free_port(), _free_port()
    server = start_local_server(out, grpc_port, rest_port)
    reports = []
    try:
        base = load_spec(SPEC)
        metrics = f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics"
        targets = tuple(
            dataclasses.replace(t, url=(f"grpc://127.0.0.1:{grpc_port}" if t.protocol == "grpc"
                                        else f"http://127.0.0.1:{rest_port}"), metrics_url=metrics, pid=server.pid)
            for t in base.targets)
        for model in DEMO_MODELS:
            spec = dataclasses.replace(base, model=model, name=f"demo-{model}", targets=targets,
                                       out=args.results)
            run_dir = new_run_dir(spec)
            console.print(f"\n[bold]sweep {model}[/bold] over gRPC and REST, batch sizes "
                          f"{', '.join(map(str, spec.batch_sizes))} -> {run_dir}")

            def on_point(plan, point, done, total, eta):  # type: ignore[no-untyped-def]
                if point is None:
                    console.print(f"  [{done + 1}/{total}] {plan.target.name} batch {plan.batch_size} "
                                  f"concurrency {plan.load.concurrency} (about {int(eta)} s left)")
                else:
                    console.print("    " + describe_point(point))

            asyncio.run(run_sweep(spec, run_dir, on_point=on_point))
            output = build_report(run_dir, models_dir=out)
            print_summary(output.analysis, console)
            reports.append(output.html)
    finally:
        stop_local_server(server)
    console.print(f"\ndemo finished in {time.monotonic() - started:.0f} s (models with random weights: the "
                  "timings are real, the features are not). Reports:")
    for path in reports:
        console.print(f"  {path}  (plots and summary.csv beside it)")
    return 0
