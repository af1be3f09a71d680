"""`serve-bench tune SPEC.toml`: the command's arguments, progress lines and the printed answer."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from pathlib import Path

from serve_bench.errors import Terminated, interrupted_status
from serve_bench.stats import (
    BEST_BATCHING_FILE,
    BEST_MLSERVER_SERVER_SETTINGS_FILE,
    BEST_MLSERVER_SETTINGS_FILE,
    BEST_TRITON_CONFIG_FILE,
    POINTS_FILE,
    TuneAnswer,
    choose_run_dir,
    nothing_to_resume,
)
from serve_bench.tune._config import TuneConfig
from serve_bench.tune._restart import CommandRestarter, ComposeRestarter, LocalRestarter
from serve_bench.tune._run import CONFIGS_FILE, TuneEvent, planned_configs, run_tune
from serve_bench.tune._spec import METHODS, TuneSpec, load_tune_spec
from serve_bench.tune._started import STARTED_HERE

__all__ = ["add_tune_arguments", "print_answer", "restart_commands", "run_tune_command"]


def add_tune_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `serve-bench tune` that are its own; the CLI adds the shared --run-dir (_cli_args.py)."""
    p.add_argument("spec", help="tune spec (TOML), e.g. loadtests/tune/local-cpu.toml")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted tune: finished configurations are not measured again "
        "(default directory: the latest run of this spec; a folder with nothing finished starts a new run, and "
        "says so)",
    )
    p.add_argument(
        "--input-data",
        default=None,
        metavar="DIR|VIDEO",
        help="send these images (a directory of JPEG/PNG files or a video's frames) instead of synthetic ones",
    )
    p.add_argument("--method", choices=METHODS, default=None, help="override the spec's search.method")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="write each configuration's files and print the exact restart command of each; run nothing",
    )


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def _on_event(event: TuneEvent) -> None:
    if event.kind == "start":
        print(
            f"[{event.index + 1}/{event.total}] {event.config}: restarting the server "
            f"(about {_clock(event.eta_s)} left)",
            flush=True,
        )
    elif event.kind == "point" and event.point is not None:
        print("    " + event.point.describe(), flush=True)
    elif event.kind == "failed":
        print(f"    FAILED to start, skipped: {event.message}", flush=True)
    elif event.kind == "skipped":
        print(f"    {event.config}: already {event.message} (resume), not measured again", flush=True)


def restart_commands(spec: TuneSpec, work_dir: Path) -> list[tuple[str, str]]:
    """(config id, the command that would restart the server with it) for every grid configuration, each
    configuration's files written to ``work_dir/configs/<id>/`` (Triton's and MLServer's with their repository)."""
    import shlex

    family = spec.family
    configs = list(spec.baseline_configs().values()) + list(spec.configs)
    lines: list[tuple[str, str]] = []
    for config in configs:
        config_file = work_dir / "configs" / config.id / family.config_file
        config_file.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(config, TuneConfig):
            config_file.write_text(config.to_text())
            if spec.server.kind == "compose":
                command = ComposeRestarter(spec.server, spec.model, work_dir).restart_command(config, config_file)
            elif spec.server.kind == "command":
                command = CommandRestarter(spec.server, spec.model, work_dir).restart_command(config, config_file)
            else:
                command = (
                    LocalRestarter(spec.server, spec.model, work_dir).server_for(config, config_file).command()[1:]
                )
        else:
            restarter = STARTED_HERE[spec.server.kind](spec.server, spec.model, work_dir)
            command = restarter.prepare(config, config_file).command()
        lines.append((config.id, shlex.join(command)))
    return lines


_WINNER_FILE = {
    BEST_BATCHING_FILE: "winning batching_parameters.txt (mount it as TF Serving's --batching_parameters_file)",
    BEST_TRITON_CONFIG_FILE: "winning config.pbtxt (Triton's model configuration, as tritonserver loaded it)",
    BEST_MLSERVER_SETTINGS_FILE: "winning model-settings.json (MLServer's model settings, as MLServer loaded them)",
}


def print_answer(result: TuneAnswer, best_file: Path | None) -> None:
    pct = result.percentile
    print(f"\n{result.headline()}")
    print(
        f"\nconfigurations, best first ({'most items/s with ' if result.mode == 'throughput' else 'lowest '}"
        f"{pct} <= {result.max_ms:g} ms):"
    )
    for score in result.scores:
        print("  " + score.describe(pct))
    if result.pareto:
        print(f"\nPareto front (throughput vs {pct}):")
        for p in result.pareto:
            print(f"  {p.items_per_s:8.1f} items/s  {pct} {p.latency_ms:8.1f} ms  {p.config} at {p.load}")
    if result.knobs:
        print("\nwhat each knob did (best configuration with each value):")
        print(f"  {'knob':32} {'value':14} {'configs':>7} {'items/s':>9} {pct + ' ms':>9} {'vs best':>8}  best with it")
        for row in result.knobs:
            vs = f"{row.vs_best_pct:+.1f}%" if row.feasible else "miss SLO"
            print(
                f"  {row.knob:32} {row.value:14} {row.configs:7d} {row.items_per_s:9.1f} {row.latency_ms:9.1f} "
                f"{vs:>8}  {row.best_config}"
            )
    for gain in result.gains:
        print(f"\nvs {gain.baseline}: {gain.text}")
    if best_file is not None:
        print(f"\n{_WINNER_FILE.get(best_file.name, 'winning configuration')}: {best_file}")
        workers = best_file.parent / BEST_MLSERVER_SERVER_SETTINGS_FILE
        if best_file.name == BEST_MLSERVER_SETTINGS_FILE and workers.exists():
            print(f"and its parallel_workers, for MLServer's server-wide settings.json: {workers}")


def run_tune_command(args: argparse.Namespace) -> int:
    """Run ``serve-bench tune``; 0 when a configuration meets the SLO, 1 when none does, 130 when interrupted."""
    spec = load_tune_spec(args.spec)
    if args.method:
        spec = dataclasses.replace(spec, method=args.method)
    if args.input_data:
        spec = dataclasses.replace(spec, input_data=args.input_data)
    if args.dry_run:
        work = choose_run_dir(args.run_dir, spec.out, spec.name)
        for config_id, command in restart_commands(spec, work):
            print(f"{config_id}: {command}")
        print(
            f"{len(spec.configs)} configurations in the grid; the {spec.method} search measures about "
            f"{planned_configs(spec)} (baselines included). Each configuration's files are in {work / 'configs'}; "
            "nothing was run"
        )
        return 0
    # resuming: the newest run of the spec that began a tune
    run_dir = choose_run_dir(args.run_dir, spec.out, spec.name, resume=args.resume, holding=CONFIGS_FILE)
    print(
        f"tune {spec.name}: {len(spec.configs)} configurations in the space, the {spec.method} search measures "
        f"about {planned_configs(spec)} (baselines included); results in {run_dir}",
        flush=True,
    )
    if args.resume and (new_run := nothing_to_resume(run_dir, CONFIGS_FILE, POINTS_FILE)):
        print(new_run, flush=True)
    try:
        outcome = asyncio.run(run_tune(spec, run_dir, resume=args.resume, on_event=_on_event))
    except KeyboardInterrupt as exc:
        print(
            f"{'terminated' if isinstance(exc, Terminated) else 'interrupted'}: every finished point and "
            f"configuration is kept in {run_dir}; continue with: serve-bench tune {args.spec} --resume --run-dir "
            f"{run_dir}"
        )
        return interrupted_status(exc)
    for config_id, why in outcome.failed.items():
        print(f"configuration {config_id} did not start: {why} (log: {run_dir / 'configs' / config_id / 'server.log'})")
    if outcome.answer is None:
        return 1
    print_answer(outcome.answer, outcome.best_file)
    if outcome.answer.scores and all(score.failed for score in outcome.answer.scores):
        print("\nno configuration started: what each server said is above, and in its log; the SLO did not decide this")
        return 1
    if outcome.answer.best is None:
        print(
            f"\nno configuration meets {outcome.answer.percentile} <= {outcome.answer.max_ms:g} ms; "
            "relax the SLO, lower the load, or widen the space"
        )
        return 1
    return 0
