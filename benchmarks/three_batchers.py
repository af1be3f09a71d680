"""Three batchers side by side: images/s of batch-1 requests at 8 in flight on the local server
(TF Serving's batching as imitated here), real Triton 2.51 and real MLServer 1.7.1, in one run.

    .venv/bin/python -m benchmarks.three_batchers [--model inception_v3] [--seconds 20] [--rounds 2]

It runs the shipped spec (loadtests/sweeps/three-batchers.toml: each server started by serve-bench,
the same model, max batch 32, at most 2 ms of batching delay) and prints, per server, images/s at 1 and
8 in flight with their 95% intervals, the server's own view (mean executed batch, queue and compute),
and each server's images/s over the local server's. Rounds alternate the order of the servers, so a
drift of the machine's speed during the run does not favour the one measured first.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
from pathlib import Path

from serve_bench.export import export_model, list_versions
from serve_bench.load import PointSettings
from serve_bench.stats import Point
from serve_bench.sweep import load_spec, run_sweep

ROOT = Path(__file__).resolve().parent.parent


def _models_dir(model: str) -> Path:
    shipped = ROOT / "exported_models"
    if list_versions(shipped / model) and (shipped / "triton" / model).exists():
        return shipped
    out = Path(tempfile.mkdtemp(prefix="three-batchers-models-"))
    export_model(model, weights="random", out=out, warmup_batch_sizes=(1, 8), runtimes=("tensorflow",))
    return out


def _row(point: Point) -> str:
    items = point.throughput.items_per_s
    interval = point.throughput.items_per_s_ci
    ci = f" [{interval.low:.1f}–{interval.high:.1f}]" if interval is not None else ""
    view = point.server.describe() if point.server is not None else "no server view"
    return f"{point.target.name:9s} c{point.load.concurrency:<2d} {items:8.1f} img/s{ci}   {view}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="inception_v3")
    parser.add_argument("--seconds", type=float, default=20.0, help="minimum duration of each point")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    models_dir = _models_dir(args.model)
    base = load_spec(ROOT / "loadtests" / "sweeps" / "three-batchers.toml")
    settings = dataclasses.replace(base.settings, min_duration_s=args.seconds, max_duration_s=3 * args.seconds)
    by_server: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        targets = base.targets if round_ % 2 == 0 else tuple(reversed(base.targets))
        spec = dataclasses.replace(
            base,
            model=args.model,
            models_dir=str(models_dir),
            targets=targets,
            settings=PointSettings(**vars(settings)),
        )
        run_dir = Path(tempfile.mkdtemp(prefix="three-batchers-run-"))
        outcome = asyncio.run(run_sweep(spec, run_dir, models_dir=models_dir))
        print(f"round {round_ + 1} ({', '.join(t.name for t in targets)}): {run_dir}")
        for point in outcome.measured:
            print("  " + _row(point))
            if point.load.concurrency == 8:
                by_server.setdefault(point.target.name, []).append(point.throughput.items_per_s)
    local = statistics.median(by_server["local"])
    print(f"\n{args.model}, batch 1 x 8 in flight, median of {args.rounds} rounds (ratio to the local server):")
    for name, values in by_server.items():
        median = statistics.median(values)
        spread = f"{min(values):.1f}–{max(values):.1f}"
        print(f"  {name:9s} {median:8.1f} img/s (rounds {spread})  {median / local:5.2f}x")


if __name__ == "__main__":
    main()
