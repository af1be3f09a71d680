"""Subcommands beyond export; each registers itself with the table in cli.py."""

from __future__ import annotations

import argparse

from serve_bench.cli import command

# --- demo -------------------------------------------------------------------


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="exported_models", help="models directory")
    p.add_argument("--results", default="results", help="where the runs are written")


@command("demo", "the README's first command: export, serve, sweep, report")(_demo_args)
def _demo(args: argparse.Namespace) -> int:
    from serve_bench.demo import run_demo

    return run_demo(args)


# --- serve ------------------------------------------------------------------


def _serve_args(p: argparse.ArgumentParser) -> None:
    from serve_bench.server import build_arg_parser

    build_arg_parser(p)


@command("serve", "run the local TF-Serving-compatible server (gRPC + REST)")(_serve_args)
def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from serve_bench.server import LocalServer, config_from_args

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    server = LocalServer(config_from_args(args))
    asyncio.run(server.serve_forever())
    return 0


# --- bench / sweep ------------------------------------------------------------


def describe_point(point) -> str:  # type: ignore[no-untyped-def]
    """One line a perf_analyzer user reads at a glance."""
    load = point.load
    level = f"concurrency {load.concurrency}" if load.mode != "open" else f"{load.rate:g} req/s {load.arrival}"
    lat = point.latency_us
    flags = []
    if not point.stability.get("stable", True):
        flags.append("UNSTABLE")
    if point.limited:
        flags.append("CLIENT-LIMITED: " + "; ".join(point.client["reasons"]))
    if point.error_count:
        flags.append(f"errors {point.counts['errors']}")
    text = (f"{point.target.name} b{point.batch_size} {level}: {point.throughput['items_per_s']:.1f} items/s, "
            f"{point.throughput['requests_per_s']:.1f} req/s, p50 {lat['p50'] / 1000:.1f} ms, "
            f"p99 {lat['p99'] / 1000:.1f} ms")
    if point.latency_uncorrected_us:
        text += f" (uncorrected p99 {point.latency_uncorrected_us['p99'] / 1000:.1f} ms)"
    server = point.server
    if server.get("available") and server.get("processed_batch_mean"):
        text += f", server batch {server['processed_batch_mean']:.1f}"
    return text + (f" [{', '.join(flags)}]" if flags else "")


def _settings_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warmup", type=float, default=2.0, help="seconds discarded first (default 2)")
    p.add_argument("--duration", type=float, default=5.0, help="minimum measured seconds (default 5)")
    p.add_argument("--min-requests", type=int, default=50, help="minimum measured requests (default 50)")
    p.add_argument("--windows", type=int, default=3, help="stability windows (default 3)")
    p.add_argument("--tolerance", type=float, default=0.10, help="window disagreement allowed (default 0.10)")
    p.add_argument("--until-stable", action="store_true", help="closed loop: run until the windows agree")
    p.add_argument("--max-duration", type=float, default=60.0, help="cap for --until-stable (default 60 s)")
    p.add_argument("--timeout", type=float, default=30.0, help="per-request deadline in seconds (default 30)")


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", help="grpc://host:8500 or http://host:8501")
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
    p.add_argument("--out", default="results/bench", help="run directory to append the point to")
    p.add_argument("--seed", type=int, default=0)
    _settings_args(p)


def _settings(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from serve_bench.load import PointSettings

    if args.duration <= 0 or args.warmup < 0 or args.windows < 1 or args.timeout <= 0:
        from serve_bench.errors import UserError

        raise UserError("--duration and --timeout must be positive, --warmup >= 0, --windows >= 1")
    return PointSettings(warmup_s=args.warmup, min_duration_s=args.duration, min_requests=args.min_requests,
                         windows=args.windows, tolerance=args.tolerance, until_stable=args.until_stable,
                         max_duration_s=args.max_duration, timeout_s=args.timeout)


@command("bench", "measure one point (closed loop with --concurrency, open loop with --rate)")(_bench_args)
def _bench(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from serve_bench.client import ServeBenchError, connect, parse_target
    from serve_bench.errors import UserError
    from serve_bench.load import signature_for_payload
    from serve_bench.stats import LoadInfo, ResultsWriter, collect_run_metadata
    from serve_bench.sweep import PointPlan, Target, measure_point

    if args.batch_size < 1 or args.processes < 1 or (args.concurrency is not None and args.concurrency < 1) \
            or (args.rate is not None and args.rate <= 0):
        raise UserError("--batch-size, --concurrency, --processes must be >= 1 and --rate > 0")
    try:
        parse_target(args.url)
    except ServeBenchError as exc:
        raise UserError(str(exc)) from None
    settings = _settings(args)
    if args.rate is not None:
        load = LoadInfo("open", rate=args.rate, arrival=args.arrival, processes=args.processes)
    else:
        load = LoadInfo("closed", concurrency=args.concurrency or 1, processes=args.processes)
    signature = signature_for_payload(args.payload, args.signature)
    target = Target(args.name, args.url, args.device, args.metrics)
    plan = PointPlan(target, args.model, signature, args.payload, args.batch_size, load, 0, args.seed)

    async def run():  # type: ignore[no-untyped-def]
        try:
            async with connect(args.url, args.model, signature, timeout=settings.timeout_s) as client:
                return await measure_point(client, plan, settings)
        except ServeBenchError as exc:
            raise UserError(str(exc)) from exc

    writer = ResultsWriter(Path(args.out))
    with writer:
        point = asyncio.run(run())
        writer.append(point)
        writer.write_run(collect_run_metadata(str(vars(args)), command="bench"))
    print(describe_point(point))
    print(f"point appended to {Path(args.out) / 'points.jsonl'}")
    return 0


def _sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (TOML), e.g. loadtests/sweeps/local-cpu.toml")
    p.add_argument("--run-dir", default=None, help="results directory (default results/<name>-<time>)")
    p.add_argument("--resume", action="store_true", help="skip points already in the run directory "
                   "(default: the latest run of this spec)")
    p.add_argument("--no-progress", action="store_true", help="plain lines instead of a progress bar")


@command("sweep", "measure a grid of points from a TOML spec; resumable")(_sweep_args)
def _sweep(args: argparse.Namespace) -> int:
    import asyncio
    import sys
    from pathlib import Path

    from serve_bench.errors import UserError
    from serve_bench.sweep import latest_run_dir, load_spec, new_run_dir, run_sweep

    spec = load_spec(args.spec)
    if args.run_dir:
        run_dir = Path(args.run_dir)
    elif args.resume:
        run_dir = latest_run_dir(spec) or new_run_dir(spec)
    else:
        run_dir = new_run_dir(spec)
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a directory; choose another --run-dir")
    return _run_sweep_with_progress(spec, run_dir, args.resume, not args.no_progress and sys.stdout.isatty())


def _run_sweep_with_progress(spec, run_dir, resume: bool, bar: bool) -> int:  # type: ignore[no-untyped-def]
    import asyncio

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from serve_bench.sweep import run_sweep

    console = Console()
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("ETA {task.fields[eta]}"), console=console, disable=not bar)

    def on_point(plan, point, done, total, eta):  # type: ignore[no-untyped-def]
        eta_text = f"{int(eta // 60)}:{int(eta % 60):02d}"
        if point is None:
            if not progress.tasks:
                progress.add_task("", total=total, eta=eta_text)
            progress.update(progress.tasks[0].id, description=plan.key, completed=done, eta=eta_text)
            if not bar:
                console.print(f"[{done + 1}/{total}] {plan.key} (about {eta_text} left)")
        else:
            progress.update(progress.tasks[0].id, completed=done, eta=eta_text)
            console.print("  " + describe_point(point))

    console.print(f"sweep {spec.name}: results in {run_dir}")
    try:
        with progress:
            outcome = asyncio.run(run_sweep(spec, run_dir, resume=resume, on_point=on_point))
    except KeyboardInterrupt:
        console.print(f"interrupted: every finished point is kept in {run_dir / 'points.jsonl'}; "
                      f"continue with --resume --run-dir {run_dir}")
        return 130
    if outcome.skipped:
        console.print(f"resumed: {outcome.skipped} points were already measured")
    for name, why in outcome.failed_targets.items():
        console.print(f"[red]target {name} stopped answering[/red]: {why}; its remaining points were skipped")
    console.print(f"{len(outcome.measured)} points measured -> {run_dir / 'points.jsonl'}")
    return 1 if outcome.failed_targets else 0


# --- report / compare -----------------------------------------------------------


def _parse_slo(text: str | None):  # type: ignore[no-untyped-def]
    if not text:
        return None
    from serve_bench.errors import UserError
    from serve_bench.report import Slo

    percentile, _, value = text.partition("=")
    if percentile not in ("p50", "p90", "p95", "p99", "p99_9") or not value:
        raise UserError(f"--slo {text!r}: write it as p99=100 (percentile=milliseconds)")
    try:
        return Slo(percentile, float(value))
    except ValueError:
        raise UserError(f"--slo {text!r}: {value!r} is not a number of milliseconds") from None


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="results/<run> directory")
    p.add_argument("--slo", default=None, help="latency objective, e.g. p99=100 (default: the sweep spec's)")
    p.add_argument("--models-dir", default="exported_models", help="where to read the model's FLOPs per image")
    p.add_argument("--no-plots", action="store_true")


@command("report", "analyse a run: terminal summary, summary.csv, plots/*.png, report.html")(_report_args)
def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from serve_bench.report import build_report, print_summary

    output = build_report(Path(args.run), slo=_parse_slo(args.slo), models_dir=Path(args.models_dir),
                          plots=not args.no_plots)
    print_summary(output.analysis)
    print(f"report: {output.html}\nsummary: {output.csv}" + (f"\nplots: {output.html.parent / 'plots'}"
                                                              if output.plots else ""))
    return 0


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--allow-mismatch", action="store_true", help="compare runs measured with different settings")


@command("compare", "two runs side by side: B/A ratio of images/s and p99 per matching point")(_compare_args)
def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from serve_bench.report import compare_runs, format_ratio

    result = compare_runs(Path(args.run_a), Path(args.run_b), allow_mismatch=args.allow_mismatch)
    table = Table(title=f"B = {args.run_b} vs A = {args.run_a}")
    for column in ("configuration", "A target", "B target", "A images/s", "B images/s", "B/A images/s",
                   "A p99 ms", "B p99 ms", "B/A p99"):
        table.add_column(column, justify="right")
    for row in result.rows:
        a, b = row["a"], row["b"]
        table.add_row(row["config"], f"{a.target.name} ({a.target.server_kind})",
                      f"{b.target.name} ({b.target.server_kind})", f"{a.throughput['items_per_s']:.1f}",
                      f"{b.throughput['items_per_s']:.1f}", format_ratio(row["items_ratio"]),
                      f"{a.latency_us['p99'] / 1000:.1f}", f"{b.latency_us['p99'] / 1000:.1f}",
                      format_ratio(row["p99_ratio"]))
    console = Console()
    console.print(table)
    for difference in result.differences:
        console.print(f"[yellow]measured differently:[/yellow] {difference}")
    if result.only_a or result.only_b:
        console.print(f"unmatched: {len(result.only_a)} points only in A, {len(result.only_b)} only in B")
    return 0


# --- import-locust --------------------------------------------------------------


def _import_locust_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("prefix", help="the --csv PREFIX Locust wrote (PREFIX_stats.csv, PREFIX_stats_history.csv)")
    p.add_argument("--out", default=None, help="run directory (default results/locust-<time>)")
    p.add_argument("--target-name", default="locust")
    p.add_argument("--url", default="", help="the --host Locust ran against")
    p.add_argument("--device", default="cpu")
    p.add_argument("--server", default="unknown", help="tensorflow-serving or serve-bench-local")
    p.add_argument("--model", default=None, help="default: read from the request name 'predict <model> b<N>'")
    p.add_argument("--batch-size", type=int, default=None, help="default: read from the request name")
    p.add_argument("--payload", default="float", choices=("float", "jpeg"))


@command("import-locust", "turn Locust CSV output into a serve-bench run that `report` reads")(_import_locust_args)
def _import_locust(args: argparse.Namespace) -> int:
    import datetime as _dt
    from pathlib import Path

    from serve_bench.stats import ResultsWriter, collect_run_metadata, import_locust

    points = import_locust(args.prefix, target_name=args.target_name, url=args.url, device=args.device,
                           server=args.server, model=args.model, batch_size=args.batch_size, payload=args.payload)
    out = Path(args.out or f"results/locust-{_dt.datetime.now():%Y%m%d-%H%M%S}")
    with ResultsWriter(out) as writer:
        for point in points:
            writer.append(point)
        writer.write_run(collect_run_metadata(source=f"locust csv {args.prefix}", command="import-locust"))
    print(f"{len(points)} points imported from {args.prefix}_stats.csv -> {out / 'points.jsonl'} "
          "(closed loop by Locust users; Locust's latency resolution is coarser)")
    return 0
