"""Smarter searches vs the exhaustive grid for `serve-bench tune` (issue 12), on the same server and grid.

Runs the grid (every configuration), the Bayesian search and the coordinate search (the batching
guide's recipe) on the local server with the ``tiny`` model, one after the other, each measuring for
itself. Prints, for each: configurations measured, wall time, and the best objective it found (most
images/s with p99 under the SLO); then each search's pick as measured *by the grid run* (so its regret
is not flattered by its own noise), and, when it differs from the grid's pick, both measured again in
alternating rounds, so the difference can be compared with the run-to-run noise. Then, on the grid's
table: how often a random search with the same budget lands within 5% of the grid's best (is a search
worth anything over luck?), and each search replayed on the table as measured and with 8% noise
added to every figure (does it hold when single measurements mislead?).

    .venv/bin/python -m benchmarks.tune_search            # ~12 min on 2 cores (14 with --rounds 5)
    .venv/bin/python -m benchmarks.tune_search --quick    # a 2x2 grid, about 1 min, to try it
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import random
import statistics
import tempfile
import time
from pathlib import Path

from serve_bench.stats import Score
from serve_bench.tune import (
    TuneOutcome,
    TuneSpec,
    bayesian_search,
    coordinate_search,
    parse_tune_spec,
    run_tune,
    search_budget,
)

SPACE = """
num_batch_threads = [2, 1]
max_batch_size = [1, 4, 8, 16]
batch_timeout_micros = [0, 1000, 5000]
"""
QUICK_SPACE = """
max_batch_size = [1, 8]
batch_timeout_micros = [0, 2000]
"""


def spec_text(models_dir: Path, method: str, space: str, quick: bool) -> str:
    durations = "warmup_s = 0.3\nmin_duration_s = 1.0" if quick else "warmup_s = 0.5\nmin_duration_s = 3.0"
    return f"""
name = "bench-tune-{method}"
model = "tiny"
[server]
kind = "local"
models_dir = "{models_dir}"
[space]
{space}
[load]
concurrency = [4, 16]
[durations]
{durations}
windows = 3
[slo]
percentile = "p99"
max_ms = 1000
[search]
method = "{method}"
baselines = []
"""


def _best(outcome: TuneOutcome) -> Score | None:
    return outcome.answer.best if outcome.answer else None


def _random_within(scores: dict[str, Score], budget: int, target: float, draws: int = 10000) -> float:
    """Share of random searches of ``budget`` configurations whose best is within 5% of ``target``."""
    rng = random.Random(0)
    ids = list(scores)
    hits = 0
    for _ in range(draws):
        pick = rng.sample(ids, min(budget, len(ids)))
        best = max((scores[i] for i in pick), key=lambda s: s.rank("throughput"))
        hits += best.feasible and best.items_per_s >= 0.95 * target
    return hits / draws


def _confirm(spec: TuneSpec, grid_pick: str, pick: str, work: Path, rounds: int) -> dict[str, object]:
    """Both picks measured again, alternately, ``rounds`` times: whether the difference is more than the noise."""
    configs = {c.id: c for c in spec.configs}
    pair = dataclasses.replace(spec, configs=(configs[grid_pick], configs[pick]), method="grid", baselines=())
    seen: dict[str, list[float]] = {grid_pick: [], pick: []}
    for round_ in range(rounds):
        outcome = asyncio.run(run_tune(pair, work / f"confirm-{round_}"))
        assert outcome.answer is not None
        for score in outcome.answer.scores:
            seen[score.config].append(score.items_per_s if score.feasible else 0.0)
    ratios = [c / g for g, c in zip(seen[grid_pick], seen[pick]) if g]
    mean = statistics.fmean(ratios) if ratios else math.nan
    sd = statistics.stdev(ratios) if len(ratios) > 1 else math.nan
    print(
        f"  confirmation, {rounds} alternating rounds: grid's pick {grid_pick} "
        + ", ".join(f"{v:.0f}" for v in seen[grid_pick])
        + f" images/s; the search's pick {pick} "
        + ", ".join(f"{v:.0f}" for v in seen[pick])
        + f" images/s; search/grid = {mean:.2f} ± {sd:.2f} (sd of {len(ratios)} rounds)"
    )
    return {"grid_pick": seen[grid_pick], "search_pick": seen[pick], "ratio_mean": mean, "ratio_sd": sd}


def _replays(
    space: str, quick: bool, models_dir: Path, grid_scores: dict[str, Score], best: float
) -> dict[str, object]:
    """The smarter searches replayed on the grid's table: what each picks, noise-free and with noise."""
    import numpy as np

    out: dict[str, object] = {}
    for method, search in (("coordinate", coordinate_search), ("bayesian", bayesian_search)):
        spec = parse_tune_spec(spec_text(models_dir, method, space, quick))
        budget = search_budget(spec)
        picks = []
        for seed in range(101):  # seed 0: the table as measured; then log-normal noise of sd 8%
            rng = np.random.default_rng(seed)
            factor = {k: float(np.exp(rng.normal(0.0, 0.08))) if seed else 1.0 for k in grid_scores}

            async def replay(config, factor=factor):  # type: ignore[no-untyped-def]
                score = grid_scores.get(config.id, Score(config.id, False, failed="not in the grid"))
                return dataclasses.replace(score, items_per_s=score.items_per_s * factor[config.id])

            if search is coordinate_search:
                found = asyncio.run(coordinate_search(spec.space, replay, "throughput", budget=budget))
            else:
                found = asyncio.run(bayesian_search(spec.space, replay, "throughput", budget))
            pick = max(found, key=lambda s: s.rank("throughput"))
            picks.append((pick.config, len(found), grid_scores[pick.config].items_per_s / best))
        within = sum(r >= 0.95 for _, _, r in picks[1:]) / (len(picks) - 1)
        print(
            f"  replayed on the grid's table, the {method} search picks {picks[0][0]} ({picks[0][2]:.1%} of the best) "
            f"after {picks[0][1]} configurations; with 8% noise on every figure it lands within 5% of the "
            f"best in {within:.0%} of 100 replays"
        )
        out[method] = {"pick": picks[0][0], "configs": picks[0][1], "of_best": picks[0][2], "within_5pct_noisy": within}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", default=None, help="a models directory holding tiny (default: export one)")
    parser.add_argument("--out", default=None, help="where the runs go (default: a temporary directory)")
    parser.add_argument("--quick", action="store_true", help="a 2x2 grid with short points")
    parser.add_argument(
        "--rounds", type=int, default=3, help="re-measurements of each pick against the grid's (default 3)"
    )
    parser.add_argument(
        "--methods", default="bayesian,coordinate", help="smarter searches to run against the grid (default: both)"
    )
    args = parser.parse_args()
    work = Path(args.out or tempfile.mkdtemp(prefix="bench-tune-"))
    models_dir = Path(args.models_dir) if args.models_dir else work / "models"
    if not (models_dir / "tiny").exists():
        from serve_bench.export import export_model

        export_model("tiny", weights="random", out=models_dir, warmup_batch_sizes=(1, 4), runtimes=("tensorflow",))
    space = QUICK_SPACE if args.quick else SPACE
    methods = ["grid", *(m for m in args.methods.split(",") if m)]
    results: dict[str, tuple[TuneOutcome, float]] = {}
    for method in methods:
        spec = parse_tune_spec(spec_text(models_dir.resolve(), method, space, args.quick), f"bench-{method}")
        started = time.monotonic()
        outcome = asyncio.run(
            run_tune(
                spec,
                work / method,
                on_event=lambda e: (
                    print(f"  {e.kind:7} {e.config}" + (f": {e.point.describe()}" if e.point else ""), flush=True)
                    if e.kind in ("point", "failed")
                    else None
                ),
            )
        )
        results[method] = (outcome, time.monotonic() - started)
    grid, _ = results["grid"]
    assert grid.answer is not None
    grid_scores = {s.config: s for s in grid.answer.scores}
    grid_best = _best(grid)
    total = len(grid.evaluated)
    print()
    summary: dict[str, object] = {"grid_configs": total}
    for method, (outcome, seconds) in results.items():
        best = _best(outcome)
        print(
            f"  {method:10} measured {len(outcome.evaluated):3d} configurations ({len(outcome.evaluated) / total:.0%} "
            f"of the grid) in {seconds:5.0f} s; best: " + (best.describe("p99") if best else "none meets the SLO")
        )
        summary[method] = {
            "configs": len(outcome.evaluated),
            "seconds": seconds,
            "order": outcome.evaluated,
            "best": best.config if best else None,
            "best_items": best.items_per_s if best else None,
        }
    if grid_best is None:
        (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        return
    spec = parse_tune_spec(spec_text(models_dir, "grid", space, args.quick))
    for method in methods[1:]:
        outcome, _ = results[method]
        pick = _best(outcome)
        if pick is None:
            continue
        again = grid_scores[pick.config]
        in_grid = (
            f"{again.items_per_s:.1f} images/s = {again.items_per_s / grid_best.items_per_s:.1%} of the grid's best"
            if again.feasible
            else "it missed the SLO there"
        )
        print(
            f"  the {method} search's pick {pick.config} as measured by the grid run: {in_grid} "
            f"({grid_best.config}); as measured by itself: {pick.items_per_s / grid_best.items_per_s:.1%}"
        )
        entry = summary[method]
        assert isinstance(entry, dict)
        entry["pick_in_grid"] = again.items_per_s
        if pick.config != grid_best.config:
            entry["confirmation"] = _confirm(spec, grid_best.config, pick.config, work / method, args.rounds)
    budget = search_budget(parse_tune_spec(spec_text(models_dir, "bayesian", space, args.quick)))
    share = _random_within(grid_scores, budget, grid_best.items_per_s)
    print(
        f"  a random search of {budget} configurations lands within 5% of the grid's best in {share:.0%} of 10000 draws"
    )
    summary["random_within_5pct"] = share
    summary["replays"] = _replays(space, args.quick, models_dir, grid_scores, grid_best.items_per_s)
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"\nruns and summary.json in {work}")


if __name__ == "__main__":
    main()
