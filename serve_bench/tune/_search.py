"""Which configurations to measure: the exhaustive grid, a Bayesian search (``_bayes.py``, the default smarter
search, chosen by measurement), or a coordinate search along the batching guide's recipe.

The coordinate search starts from the first value listed for every knob, then, knob by knob in the
guide's order (batch threads and TensorFlow threads, then max_batch_size, then the timeout, then the
rest; Triton's and MLServer's follow their own guides, see _kinds.py), measures each value of that knob
with the others held at the best found so far and keeps the best. A second pass runs when the first
changed anything. It measures 1 + sum(values - 1) configurations per pass instead of the product, and it
is what TF Serving's batching guide asks a person to do by hand.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from serve_bench.stats import Score
from serve_bench.tune._bayes import Candidate, candidates_of, initial_design, next_candidate
from serve_bench.tune._config import RECIPE_ORDER, ServerConfig, config_of

__all__ = ["Build", "Evaluate", "bayesian_search", "coordinate_order", "coordinate_search", "grid_search"]

Evaluate = Callable[[ServerConfig], Awaitable[Score]]
# one value of each knob -> the configuration (TF Serving's config_of by default; a Family's config_of)
Build = Callable[[dict[str, Any], str], ServerConfig]


class BudgetSpent(Exception):
    pass


async def grid_search(configs: Sequence[ServerConfig], evaluate: Evaluate, budget: int | None = None) -> list[Score]:
    """Every configuration in order (the first ``budget`` when given)."""
    scores = []
    for config in configs[:budget] if budget else configs:
        scores.append(await evaluate(config))
    return scores


def coordinate_order(
    space: Sequence[tuple[str, tuple[Any, ...]]], order: Sequence[str] = (), recipe: Sequence[str] = RECIPE_ORDER
) -> list[str]:
    """The knobs to vary: the spec's order first, then the recipe's; knobs with one value are fixed."""
    varied = [knob for knob, values in space if len(values) > 1]
    listed = [k for k in order if k in varied]
    return listed + [k for k in recipe if k in varied and k not in listed]


async def coordinate_search(
    space: Sequence[tuple[str, tuple[Any, ...]]],
    evaluate: Evaluate,
    mode: str,
    order: Sequence[str] = (),
    budget: int | None = None,
    passes: int = 2,
    source: str = "spec",
    build: Build = config_of,
    recipe: Sequence[str] = RECIPE_ORDER,
) -> list[Score]:
    """Coordinate search; returns the scores of the configurations it measured, in order."""
    values = dict(space)
    current = {knob: options[0] for knob, options in space}
    seen: dict[str, Score] = {}
    scores: list[Score] = []

    async def score(config: ServerConfig) -> Score:
        if config.id not in seen:
            if budget is not None and len(seen) >= budget:
                raise BudgetSpent
            seen[config.id] = await evaluate(config)
            scores.append(seen[config.id])
        return seen[config.id]

    try:
        await score(build(current, source))
        for _ in range(passes):
            changed = False
            for knob in coordinate_order(space, order, recipe):
                tried = [(await score(build({**current, knob: v}, source)), v) for v in values[knob]]
                best_value = max(tried, key=lambda t: t[0].rank(mode))[1]
                if best_value != current[knob]:
                    current[knob] = best_value
                    changed = True
            if not changed:
                break
    except BudgetSpent:
        pass
    return scores


async def bayesian_search(
    space: Sequence[tuple[str, tuple[Any, ...]]],
    evaluate: Evaluate,
    mode: str,
    budget: int,
    source: str = "spec",
    build: Build = config_of,
) -> list[Score]:
    """Gaussian-process search over the grid (see _bayes.py); returns the scores it measured, in order."""
    candidates = candidates_of(space, source, build)
    varied = sum(len(values) > 1 for _, values in space)
    scores: list[Score] = []
    done: list[tuple[Candidate, Score]] = []

    async def measure(candidate: Candidate) -> None:
        score = await evaluate(candidate.config)
        scores.append(score)
        done.append((candidate, score))

    for candidate in initial_design(candidates, min(budget, varied + 1)):
        await measure(candidate)
    while len(done) < min(budget, len(candidates)):
        measured = [c for c, _ in done]
        await measure(next_candidate(done, [c for c in candidates if c not in measured], mode))
    return scores
