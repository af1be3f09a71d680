"""The subcommands: each takes the parsed flags, calls the library, prints, and returns the exit status.

Library imports sit inside each command so that ``serve-bench --help`` and a
command's bad flags answer without importing TensorFlow, gRPC or matplotlib.
A library ``InvalidValue`` names a parameter; cli.py turns it into the flag.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from serve_bench.errors import InvalidValue, Terminated, UserError, interrupted_status

if TYPE_CHECKING:
    from serve_bench.load import PointSettings

__all__ = ["bench", "compare", "demo", "export", "import_locust", "predict", "report", "serve", "sweep"]


def export(args: argparse.Namespace) -> int:
    from rich.console import Console

    from serve_bench import export as library
    from serve_bench._tf import tensorflow_installed
    from serve_bench.catalogue import CATALOGUE, get_spec
    from serve_bench.load import memory_available
    from serve_bench.runtimes import CONVERSION_FILE, DEFAULT_RUNTIME

    if args.list:
        Console().print(library.catalogue_table())
        return 0
    if not args.model:
        raise UserError(f"name a model to export ({', '.join(CATALOGUE)}) or pass --list")
    get_spec(args.model)  # fail on a bad name before TensorFlow starts
    sizes = library.parse_batch_sizes(args.warmup_batch_sizes)
    # and a warm-up record past this process's memory (43690 tiny images died of MemoryError under 4 GB), too
    library.check_warmup_batch_sizes(get_spec(args.model), sizes, memory_available())
    runtimes = library.parse_runtimes(args.runtimes) if args.runtimes is not None else None
    asked = {part.strip() for part in (args.runtimes or "").split(",")}
    if runtimes is not None and not tensorflow_installed() and DEFAULT_RUNTIME not in asked:
        # a host without TensorFlow (a GPU host with JAX): copies for runtimes that build the model themselves
        for path in library.export_without_tensorflow(
            args.model, runtimes, weights=args.weights, out=args.models_dir, version=args.version
        ):
            made = json.loads((path.parent / CONVERSION_FILE).read_text()).get("converter", "")
            print(f"{args.model}: {path.parent} ({made})")  # how its random weights came: built, or drawn
        return 0
    result = library.export_model(
        args.model,
        weights=args.weights,
        version=args.version,
        out=args.models_dir,
        warmup_batch_sizes=sizes,
        force=args.force,
        runtimes=runtimes,
    )
    print(library.describe_export(result))
    return 0


def serve(args: argparse.Namespace) -> int:
    import logging

    from serve_bench.server import LocalServer, config_from_args

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    asyncio.run(LocalServer(config_from_args(args)).serve_forever())
    return 0


def demo(args: argparse.Namespace) -> int:
    from serve_bench.demo import SPEC, run_demo

    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    if not models:
        raise UserError("--models: name at least one catalogue model")
    run_demo(Path(args.models_dir), Path(args.results_root), models=models, spec_path=Path(args.spec or SPEC))
    return 0


def _point_settings(args: argparse.Namespace) -> PointSettings:
    from serve_bench.load import PointSettings

    return PointSettings(
        warmup_s=args.warmup,
        min_duration_s=args.duration,
        min_requests=args.min_requests,
        windows=args.windows,
        tolerance=args.tolerance,
        until_stable=args.until_stable,
        max_duration_s=args.max_duration,
        timeout_s=args.timeout,
    )


def bench(args: argparse.Namespace) -> int:
    from serve_bench.client import ServeBenchError, user_error
    from serve_bench.load import check_schedule, check_settings, positive_number
    from serve_bench.stats import LoadInfo, parse_target
    from serve_bench.sweep import (
        METRICS_UNREAD,
        measure_plan,
        open_point_run,
        plan_point,
        point_failure,
        same_name_elsewhere,
    )

    if args.rate is not None:
        load = LoadInfo("open", rate=args.rate, arrival=args.arrival, processes=args.processes)
    else:
        load = LoadInfo(
            "closed", concurrency=1 if args.concurrency is None else args.concurrency, processes=args.processes
        )
    settings = check_settings(_point_settings(args))
    plan = plan_point(  # checks the batch size and the load, once
        args.url,
        args.model,
        batch_size=args.batch_size,
        load=load,
        payload=args.payload,
        signature=args.signature,
        target_name=args.target_name,
        device=args.device,
        metrics_url=args.metrics,
        seed=args.seed,
        runtime=args.runtime,
    )
    if positive_number("max_error_share", args.max_errors, allow_zero=True) > 1:
        raise InvalidValue("max_error_share", args.max_errors, "at most 1: a share of the requests (0.01: one in 100)")
    parse_target(args.url)  # a malformed URL is refused (InvalidTarget) before the run directory is made
    check_schedule(plan, settings)  # records, requests in flight, processes: before connecting (docs/bounds.md)
    out = Path(args.run_dir)
    with open_point_run(out, settings, command="bench", source=f"bench {args.url} {args.model}", plan=plan) as writer:
        elsewhere = same_name_elsewhere(out, plan)  # said after the point, where the user reads the outcome
        try:
            point = asyncio.run(measure_plan(plan, settings, input_data=args.input_data))
        except ServeBenchError as exc:
            raise user_error(exc) from exc
        writer.append(point)
    print(point.describe())
    print(f"point appended to {out / 'points.jsonl'}")
    if elsewhere:
        print(
            f"serve-bench bench: warning: {out} also holds target {plan.target.name!r} at {elsewhere}: report shows "
            "both servers as one target; give each its own --target-name",
            file=sys.stderr,
        )
    unread = [note for note in point.notes if note.startswith(METRICS_UNREAD)]
    if args.metrics and point.server is None and unread:  # the page the user named did not answer: said here too
        print(f"serve-bench bench: warning: {unread[0]}; the point has no server split", file=sys.stderr)
    failure = point_failure(point, args.max_errors)
    if failure:
        print(f"serve-bench bench: {failure} (--max-errors {args.max_errors:g})", file=sys.stderr)
        return 1
    return 0


def sweep(args: argparse.Namespace) -> int:
    from rich.console import Console

    from serve_bench._progress import SweepProgress
    from serve_bench.load import what_failed
    from serve_bench.stats import POINTS_FILE, choose_run_dir, nothing_to_resume
    from serve_bench.sweep import load_spec, run_sweep

    spec = load_spec(args.spec)
    run_dir = choose_run_dir(args.run_dir, spec.out, spec.name, resume=args.resume)
    console = Console()
    console.print(f"sweep {spec.name}: results in {run_dir}")
    if args.resume and (new_run := nothing_to_resume(run_dir, POINTS_FILE)):
        console.print(new_run, markup=False)
    try:
        with SweepProgress(console, bar=not args.no_progress and sys.stdout.isatty()) as progress:
            outcome = asyncio.run(
                run_sweep(spec, run_dir, resume=args.resume, on_point=progress, models_dir=Path(args.models_dir))
            )
    except KeyboardInterrupt as exc:
        console.print(
            f"{'terminated' if isinstance(exc, Terminated) else 'interrupted'}: every finished point is kept in "
            f"{run_dir / 'points.jsonl'}; continue with --resume --run-dir {run_dir}"
        )
        return interrupted_status(exc)
    if outcome.skipped:
        console.print(f"resumed: {outcome.skipped} points were already measured")
    if outcome.remeasured:
        console.print(
            f"measured again: {outcome.remeasured} points whose earlier result had no successes, was "
            "cut off or ran on another runtime (the old lines stay, marked superseded)"
        )
    for name, why in outcome.failed_targets.items():
        console.print(f"[red]target {name} stopped answering[/red]: {why}; its remaining points were skipped")
    unusable = [p for p in outcome.measured if p.needs_remeasure]
    if unusable:
        said = what_failed(unusable[0].notes, unusable[0].counts.errors_by_status())
        console.print(
            f"[red]{len(unusable)} points measured nothing usable[/red] (no successes or cut off, e.g. "
            f"{unusable[0].key}{f', {said}' if said else ''}); `--resume --run-dir {run_dir}` measures them again"
        )
    console.print(f"{len(outcome.measured)} points measured -> {run_dir / 'points.jsonl'}")
    return 1 if outcome.failed_targets or unusable else 0


def _warn(command: str) -> Callable[[str], None]:
    """One line on stderr for what a command read past (a torn last line of points.jsonl)."""

    def warn(message: str) -> None:
        print(f"serve-bench {command}: warning: {message}", file=sys.stderr)

    return warn


def report(args: argparse.Namespace) -> int:
    from serve_bench.report import build_report, print_summary
    from serve_bench.stats import Slo

    slo = Slo.parse(args.slo) if args.slo else None
    output = build_report(
        Path(args.run), slo=slo, models_dir=Path(args.models_dir), plots=not args.no_plots, on_skip=_warn("report")
    )
    print_summary(output.analysis)
    print(f"report: {output.html}\nsummary: {output.csv}")
    if output.plots:
        print(f"plots: {output.html.parent / 'plots'}")
    return 0


def _run_to_read(args: argparse.Namespace) -> Path | None:
    """predict's run, given as RUN or --from-run (once)."""
    if args.run and args.from_run and Path(args.run) != Path(args.from_run):
        raise UserError(f"give the run once: RUN {args.run} or --from-run {args.from_run}")
    run = args.run or args.from_run
    return Path(run) if run else None


def predict(args: argparse.Namespace) -> int:
    import json

    from serve_bench.export import list_versions
    from serve_bench.predict import (
        CALL_MS_SOURCE,
        calibrate_cpu,
        check_tables,
        cost_saved_model,
        cpu_points,
        get_device,
        parse_cpu,
    )
    from serve_bench.predict import predict as predict_on
    from serve_bench.report import PREDICTIONS_FILE, print_predictions
    from serve_bench.stats import POINTS_FILE

    for name in args.gpu:  # --gpu takes every word after it: a run given last went to it
        if Path(name, POINTS_FILE).is_file():
            raise UserError(f"--gpu took {name!r}, a run: give RUN before --gpu, or as --from-run {name}")
    devices = [get_device(name) for name in args.gpu]  # an unknown GPU fails before TensorFlow loads
    if args.predictions is not None:  # a file it cannot write fails before the graph is costed, not after
        written = Path(args.predictions)
        if written.is_dir():
            raise UserError(f"--predictions {written} is a directory; give the JSON file to write")
        if not written.parent.is_dir():
            raise UserError(f"--predictions {written}: directory {written.parent} does not exist")
    check_tables(args.tables)  # and so do tables predict does not ship
    run_dir = _run_to_read(args)
    if run_dir is None and (args.cpu is not None or args.calibrate_batch is not None):
        raise UserError("--cpu and --calibrate-batch describe the CPU a run measured: give the run too (RUN)")
    measured = cpu_points(run_dir, args.model) if run_dir is not None else None
    spec = parse_cpu(args.cpu or "") if run_dir is not None else None
    versions = list_versions(Path(args.models_dir) / args.model)
    if not versions:
        raise UserError(
            f"no exported model {args.model!r} under {args.models_dir}; run `serve-bench export {args.model}` first"
        )
    cost = cost_saved_model(Path(args.models_dir) / args.model / str(versions[-1]))
    predictions = [predict_on(cost, device, args.precision, tables=args.tables) for device in devices]
    cpu = None
    call_given = "call_ms" in (args.cpu or "")
    if measured is not None and spec is not None:
        target, by_batch = measured
        cpu = calibrate_cpu(cost, spec, by_batch, target=target, batch=args.calibrate_batch, call_given=call_given)
    print_predictions(args.model, cost, predictions, cpu, call_given=call_given, call_source=CALL_MS_SOURCE)
    record = {
        "model": args.model,
        "predictions": [p.to_json() for p in predictions],
        "cpu": cpu.to_json() if cpu is not None else None,
    }
    text = json.dumps(record, indent=1) + "\n"
    for path in filter(None, (run_dir / PREDICTIONS_FILE if run_dir else None, args.predictions)):
        try:
            Path(path).write_text(text)
        except OSError as exc:
            raise UserError(f"cannot write the predictions to {path} ({exc.strerror or exc})") from None
        print(f"\npredictions: {path}")
    return 0


def compare(args: argparse.Namespace) -> int:
    from serve_bench.report import compare_runs, print_comparison

    result = compare_runs(
        Path(args.run_a), Path(args.run_b), allow_mismatch=args.allow_mismatch, on_skip=_warn("compare")
    )
    print_comparison(result, f"B = {args.run_b} vs A = {args.run_a}")
    return 0


def import_locust(args: argparse.Namespace) -> int:
    from serve_bench.load import import_locust as read_locust
    from serve_bench.stats import ResultsWriter, choose_run_dir, collect_run_metadata, read_points

    points = read_locust(
        args.prefix,
        on_skip=_warn("import-locust"),
        target_name=args.target_name,
        url=args.url,
        device=args.device,
        server=args.server,
        model=args.model,
        batch_size=args.batch_size,
        payload=args.payload,
    )
    out = choose_run_dir(args.run_dir, "results", "locust")
    if (out / "points.jsonl").exists():  # the same CSV imported twice read as two repeats of each measurement
        there = {point.key for point in read_points(out)}
        again = [point.key for point in points if point.key in there]
        if again:
            raise UserError(
                f"{out} already holds {again[0]}"
                + (f" and {len(again) - 1} more of these points" if len(again) > 1 else "")
                + "; import into another --run-dir (each import is one measurement, not a repeat)"
            )
    with ResultsWriter(out) as writer:
        for point in points:
            writer.append(point)
        writer.write_run(collect_run_metadata(source=f"locust csv {args.prefix}", command="import-locust"))
    print(
        f"{len(points)} points imported from {args.prefix}_stats.csv -> {out / 'points.jsonl'} "
        "(closed loop by Locust users; Locust's latency resolution is coarser)"
    )
    return 0
