"""Smarter search vs the exhaustive grid for `serve-bench tune` (issue 12), on the same server and grid.

Runs the grid (every configuration) and the coordinate search (the batching guide's recipe) on the
local server with the ``tiny`` model, one after the other, each measuring for itself. Prints, for each:
configurations measured, wall time, and the best objective it found (most images/s with p99 under
the SLO); then the coordinate search's pick as measured *by the grid run* (so its regret is not
flattered by its own noise); replayed on the grid's table, a random search with the same budget
(how often it lands within 5% of the grid's best), which says whether the recipe's order is worth
anything over luck; and, when the two picks differ, both measured again in alternating rounds, so
the difference can be compared with the run-to-run noise.

    .venv/bin/python -m benchmarks.tune_search            # ~10 min on 2 cores
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

from serve_bench.tune import (
    Score,
    TuneOutcome,
    TuneSpec,
    coordinate_budget,
    coordinate_search,
    parse_tune_spec,
    run_tune,
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
[workload]
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


def _confirm(spec: TuneSpec, grid_pick: str, coord_pick: str, work: Path, rounds: int) -> dict[str, object]:
    """Both picks measured again, alternately, ``rounds`` times: whether the difference is more than the noise."""
    configs = {c.id: c for c in spec.configs}
    pair = dataclasses.replace(spec, configs=(configs[grid_pick], configs[coord_pick]), method="grid", baselines=())
    seen: dict[str, list[float]] = {grid_pick: [], coord_pick: []}
    for round_ in range(rounds):
        outcome = asyncio.run(run_tune(pair, work / f"confirm-{round_}"))
        assert outcome.answer is not None
        for score in outcome.answer.scores:
            seen[score.config].append(score.items_per_s if score.feasible else 0.0)
    ratios = [c / g for g, c in zip(seen[grid_pick], seen[coord_pick]) if g]
    mean = statistics.fmean(ratios) if ratios else math.nan
    sd = statistics.stdev(ratios) if len(ratios) > 1 else math.nan
    print(
        f"  confirmation, {rounds} alternating rounds: grid's pick {grid_pick} "
        + ", ".join(f"{v:.0f}" for v in seen[grid_pick])
        + f" images/s; coordinate's pick {coord_pick} "
        + ", ".join(f"{v:.0f}" for v in seen[coord_pick])
        + f" images/s; coordinate/grid = {mean:.2f} ± {sd:.2f} (sd of {len(ratios)} rounds)"
    )
    return {"grid_pick": seen[grid_pick], "coordinate_pick": seen[coord_pick], "ratio_mean": mean, "ratio_sd": sd}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models-dir", default=None, help="a models directory holding tiny (default: export one)")
    parser.add_argument("--out", default=None, help="where the two runs go (default: a temporary directory)")
    parser.add_argument("--quick", action="store_true", help="a 2x2 grid with short points")
    parser.add_argument("--rounds", type=int, default=3, help="re-measurements of the two picks (default 3)")
    args = parser.parse_args()
    work = Path(args.out or tempfile.mkdtemp(prefix="bench-tune-"))
    models_dir = Path(args.models_dir) if args.models_dir else work / "models"
    if not (models_dir / "tiny").exists():
        from serve_bench.export import export_model

        export_model("tiny", weights="random", out=models_dir, warmup_batch_sizes=(1, 4))
    space = QUICK_SPACE if args.quick else SPACE
    results: dict[str, tuple[TuneOutcome, float]] = {}
    for method in ("grid", "coordinate"):
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
    grid, grid_s = results["grid"]
    coord, coord_s = results["coordinate"]
    assert grid.answer is not None and coord.answer is not None
    grid_scores = {s.config: s for s in grid.answer.scores}
    grid_best, coord_best = _best(grid), _best(coord)
    total = len(grid.evaluated)
    print(
        f"\ngrid: {total} configurations; coordinate: {len(coord.evaluated)} "
        f"({len(coord.evaluated) / total:.0%} of the grid)"
    )
    for name, outcome, seconds in (("grid", grid, grid_s), ("coordinate", coord, coord_s)):
        best = _best(outcome)
        print(
            f"  {name:10} measured {len(outcome.evaluated):3d} configurations in {seconds:5.0f} s; best: "
            + (best.describe("p99") if best else "none meets the SLO")
        )
    summary: dict[str, object] = {
        "grid_configs": total,
        "coordinate_configs": len(coord.evaluated),
        "grid_s": grid_s,
        "coordinate_s": coord_s,
        "coordinate_order": coord.evaluated,
    }
    if grid_best is not None and coord_best is not None:
        again = grid_scores[coord_best.config]
        own = coord_best.items_per_s / grid_best.items_per_s
        in_grid = (
            f"{again.items_per_s:.1f} images/s = {again.items_per_s / grid_best.items_per_s:.1%} of the grid's best"
            if again.feasible
            else "it missed the SLO there"
        )
        print(
            f"  the coordinate search's pick {coord_best.config} as measured by the grid run: {in_grid} "
            f"({grid_best.config}); as measured by itself: {own:.1%}"
        )

        async def replay(config):  # type: ignore[no-untyped-def]
            return grid_scores.get(config.id, Score(config.id, False, failed="not in the grid"))

        spec = parse_tune_spec(spec_text(models_dir, "coordinate", space, args.quick))
        replayed = asyncio.run(coordinate_search(spec.space, replay, "throughput", budget=coordinate_budget(spec)))
        replay_best = max(replayed, key=lambda s: s.rank("throughput"))
        share = _random_within(grid_scores, len(coord.evaluated), grid_best.items_per_s)
        print(
            f"  replayed on the grid's table, the coordinate search picks {replay_best.config} "
            f"({replay_best.items_per_s / grid_best.items_per_s:.1%} of the best) after {len(replayed)} configurations"
        )
        print(
            f"  a random search of {len(coord.evaluated)} configurations lands within 5% of the grid's best "
            f"in {share:.0%} of 10000 draws"
        )
        summary.update(
            grid_best=grid_best.config,
            grid_best_items=grid_best.items_per_s,
            coordinate_best=coord_best.config,
            coordinate_best_items=coord_best.items_per_s,
            coordinate_pick_in_grid=again.items_per_s,
            replay_best=replay_best.config,
            replay_configs=len(replayed),
            random_within_5pct=share,
        )
        if coord_best.config != grid_best.config:
            summary["confirmation"] = _confirm(spec, grid_best.config, coord_best.config, work, args.rounds)
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"\nruns and summary.json in {work}")


if __name__ == "__main__":
    main()
