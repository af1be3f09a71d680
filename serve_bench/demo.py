"""`make demo`: the whole pipeline on this machine, with random weights.

1. export inception_v3 and mobilenet_v2 (random weights; reused when already exported)
2. start the local server with TF Serving's batching and metrics configs
3. sweep loadtests/sweeps/local-cpu.toml over gRPC and REST, batch sizes 1-8, for each model
4. write and print the reports, and say where they are
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from rich.console import Console

from serve_bench import export
from serve_bench._progress import SweepProgress
from serve_bench._server_facts import LOCAL
from serve_bench.report import build_report, print_summary
from serve_bench.servers import LocalServerProcess
from serve_bench.sweep import SweepSpec, launched_target, load_spec, new_run_dir, run_sweep

DEMO_MODELS = ("inception_v3", "mobilenet_v2")
ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "loadtests" / "sweeps" / "local-cpu.toml"
BATCHING_FILE = ROOT / "docker" / "batching" / "cpu.txt"


def ensure_exported(name: str, out: Path, warmup_batch_sizes: tuple[int, ...] = (1, 8)) -> Path:
    """Reuse the latest exported version of ``name``; otherwise export one with random weights."""
    versions = export.list_versions(out / name)
    if versions:
        path = out / name / str(versions[-1])
        print(f"reusing {name} version {versions[-1]} at {path}")
        return path
    print(
        f"exporting {name} with RANDOM weights (no download here; timing does not depend on weight values, "
        "the features are meaningless)",
        flush=True,
    )
    result = export.export_model(
        name, weights="random", out=out, warmup_batch_sizes=warmup_batch_sizes, runtimes=("tensorflow",)
    )
    facts = result.facts
    print(f"  -> {result.path}: {facts.parameters:,} parameters, {facts.flops_per_image / 1e9:.2f} GFLOPs/image")
    return result.path


def _demo_spec(spec_path: Path, model: str, results: Path, server: LocalServerProcess) -> SweepSpec:
    """The spec with its targets pointed at the demo's server (gRPC and REST: one server serves every model)
    and its name per model."""
    base = load_spec(spec_path)
    targets = tuple(launched_target(t, server, LOCAL, t.protocol) for t in base.targets)
    return dataclasses.replace(base, model=model, name=f"demo-{model}", targets=targets, out=str(results))


def run_demo(
    out: Path,
    results: Path,
    *,
    models: tuple[str, ...] = DEMO_MODELS,
    spec_path: Path = SPEC,
    console: Console | None = None,
) -> list[Path]:
    """Export (or reuse) ``models``, serve them locally, sweep each with ``spec_path``, report; the HTML paths."""
    console = console or Console()
    started = time.monotonic()
    load_spec(spec_path)  # a spec that cannot be read is said before a model is exported or a server started
    for name in models:
        ensure_exported(name, out)
    print(f"models.config: {export.write_models_config(out)}")

    # TF Serving's CPU batching config, as docker/compose.yaml gives it; ready once models[0] is AVAILABLE
    server = LocalServerProcess(out, models[0], model_config_file=out / "models.config", batching_file=BATCHING_FILE)
    print("starting the local server: " + " ".join(server.command()[2:]), flush=True)
    server.start()
    reports = []
    try:
        for model in models:
            spec = _demo_spec(spec_path, model, results, server)
            run_dir = new_run_dir(spec)
            console.print(
                f"\n[bold]sweep {model}[/bold] over gRPC and REST, batch sizes "
                f"{', '.join(map(str, spec.batch_sizes))} -> {run_dir}"
            )
            with SweepProgress(console, bar=False, indent="  ") as progress:
                asyncio.run(run_sweep(spec, run_dir, on_point=progress, models_dir=out))
            output = build_report(run_dir, models_dir=out)
            print_summary(output.analysis, console)
            reports.append(output.html)
    finally:
        server.stop(grace_s=60)
    console.print(
        f"\ndemo finished in {time.monotonic() - started:.0f} s (models with random weights: the "
        "timings are real, the features are not). Reports:"
    )
    for path in reports:
        console.print(f"  {path}  (plots and summary.csv beside it)")
    return reports
