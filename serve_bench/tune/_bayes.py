"""A Bayesian search over the grid: a Gaussian process on the knobs' positions, expected improvement.

Why this one (benchmarks/README.md, "Tune"): TF Serving's knobs interact. On 2 CPU cores two batch
threads win at ``max_batch_size`` 1 and lose at 16, so a coordinate search that settles the threads
first never reaches the best corner; on the grid measured there it stopped at 57% of the best, and a
random search of the same 9 configurations lands within 5% of the best in 77% of draws. A Gaussian
process sees every measured configuration at once, so a good corner measured early pulls the search
towards it whatever the order of the knobs.

How it runs, deterministically (the same scores give the same sequence, which is what ``--resume``
relies on):

1. Every configuration of the grid is a point of the unit cube: each varied knob's value is placed by
   its position in the spec's list (0 for the first, 1 for the last), so doubling batch sizes are
   evenly spaced, as their effect tends to be.
2. An initial design of one point more than there are varied knobs: the recipe's start (the first value
   of each knob), then each time the configuration farthest from those already chosen.
3. Then, until the budget is spent, the configuration with the largest expected improvement under a
   Matérn-5/2 Gaussian process fitted to what was measured (length scale and noise chosen by marginal
   likelihood from a small set), ties to the earlier configuration in the grid.

The objective it models is the log of the score, so that a 10% change weighs the same everywhere: log
items/s (throughput mode) or -log latency (latency mode), fitted to the configurations that meet the
SLO. Whether a configuration meets the SLO (and starts at all) is a second Gaussian process, on +1/-1
labels, and the expected improvement is weighted by its probability of meeting it, as in constrained
Bayesian optimisation (Gardner et al., ICML 2014). Until one configuration meets the SLO the search
heads for the lowest latency measured, weighted by the chance of the server starting; while none has
started it keeps spreading out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from serve_bench.stats import Score
from serve_bench.tune._config import ServerConfig, config_of

__all__ = ["Candidate", "candidates_of", "initial_design", "next_candidate", "objective_of"]

LENGTH_SCALES = (0.25, 0.4, 0.6, 1.0)
NOISES = (0.05, 0.2)  # observation noise, as a share of the standardised objective's variance


class Candidate:
    """One configuration of the grid and its place in the unit cube."""

    __slots__ = ("config", "position")

    def __init__(self, config: ServerConfig, position: tuple[float, ...]) -> None:
        self.config = config
        self.position = position


def candidates_of(
    space: Sequence[tuple[str, tuple[Any, ...]]],
    source: str = "spec",
    build: Callable[[dict[str, Any], str], ServerConfig] = config_of,
) -> list[Candidate]:
    """The grid in the spec's order (as ``expand_space`` builds it), each with its position; a
    configuration reached by several combinations (batching off) keeps the first one's. ``build`` makes
    a configuration of one value per knob (TF Serving's by default; see _kinds.py for the others)."""
    varied = [(index, values) for index, (_, values) in enumerate(space) if len(values) > 1]
    names = [knob for knob, _ in space]
    seen: dict[str, Candidate] = {}
    for combo in itertools.product(*(values for _, values in space)):
        config = build(dict(zip(names, combo)), source)
        if config.id not in seen:
            where = tuple(values.index(combo[index]) / (len(values) - 1) for index, values in varied)
            seen[config.id] = Candidate(config, where)
    return list(seen.values())


def _distance2(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b))


def _farthest(rest: Sequence[Candidate], chosen: Sequence[Candidate]) -> Candidate:
    """The candidate whose nearest chosen neighbour is farthest away (the first of equals)."""
    return max(rest, key=lambda c: min(_distance2(c.position, o.position) for o in chosen))


def initial_design(candidates: Sequence[Candidate], size: int) -> list[Candidate]:
    """The first candidate (the recipe's start), then greedily the one farthest from those chosen."""
    chosen = [candidates[0]]
    while len(chosen) < min(size, len(candidates)):
        chosen.append(_farthest([c for c in candidates if c not in chosen], chosen))
    return chosen


def objective_of(score: Score, mode: str) -> float | None:
    """What the search models for one score (larger is better); None: the server did not start."""
    if score.failed or not math.isfinite(score.latency_ms) or score.latency_ms <= 0:
        return None
    if not score.feasible or mode != "throughput":
        return -math.log(score.latency_ms)
    if not math.isfinite(score.items_per_s):
        return None
    return math.log(max(score.items_per_s, 1e-9))


def _matern52(a: np.ndarray, b: np.ndarray, length: float | np.ndarray) -> np.ndarray:
    """The Matérn-5/2 kernel; ``length`` one scale for every knob, or one per knob."""
    d = np.sqrt((((a[:, None, :] - b[None, :, :]) / length) ** 2).sum(-1))
    return np.asarray((1.0 + math.sqrt(5.0) * d + 5.0 / 3.0 * d**2) * np.exp(-math.sqrt(5.0) * d))


def _posterior(
    x: np.ndarray, y: np.ndarray, xs: np.ndarray, length: float | np.ndarray, noise: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """Mean and standard deviation at ``xs``, and the log marginal likelihood (up to a constant)."""
    k = _matern52(x, x, length) + noise * np.eye(len(x))
    chol = np.linalg.cholesky(k)
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
    ks = _matern52(x, xs, length)
    v = np.linalg.solve(chol, ks)
    sd = np.sqrt(np.clip(1.0 - (v**2).sum(0), 1e-12, None))
    return ks.T @ alpha, sd, float(-0.5 * y @ alpha - np.log(np.diag(chol)).sum())


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    return np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in z])


def _expected_improvement(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    z = (mean - best) / sd
    pdf = np.exp(-(z**2) / 2.0) / math.sqrt(2.0 * math.pi)
    return np.asarray((mean - best) * _normal_cdf(z) + sd * pdf)


def _fit(x: np.ndarray, raw: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The best-fitting process's mean and sd at ``xs`` (standardised units), and the best value seen."""
    spread = float(raw.std()) if np.ptp(raw) > 0 else 1.0  # all equal: exactly 0 after centring
    y = (raw - raw.mean()) / spread
    fits = [_posterior(x, y, xs, length, noise) for length in LENGTH_SCALES for noise in NOISES]
    mean, sd, _ = max(fits, key=lambda fit: fit[2])
    return mean, sd, float(y.max())


def _positions(candidates: Sequence[Candidate]) -> np.ndarray:
    return np.array([c.position for c in candidates], dtype=float).reshape(len(candidates), -1)


def _chance(measured: Sequence[tuple[Candidate, bool]], xs: np.ndarray) -> np.ndarray:
    """Probability that each of ``xs`` is on the good side, from +1/-1 labels at the measured positions.

    One length scale per knob, each chosen by marginal likelihood in turn (twice round): a failure or an
    SLO miss usually follows one knob (a batch too large for memory, whatever the timeout), and a scale
    shared by every knob would make the neighbours along the others look as doubtful."""
    x = _positions([c for c, _ in measured])
    labels = np.array([1.0 if good else -1.0 for _, good in measured])
    lengths = np.full(x.shape[1], LENGTH_SCALES[1])

    def fit(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        return _posterior(x, labels, xs, scales, NOISES[0])

    for _ in range(2):
        for knob in range(x.shape[1]):
            options = [np.where(np.arange(x.shape[1]) == knob, v, lengths) for v in (*LENGTH_SCALES, 4.0)]
            lengths = max(options, key=lambda scales: fit(scales)[2])
    mean, sd, _ = fit(lengths)
    return _normal_cdf(mean / sd)


def next_candidate(measured: Sequence[tuple[Candidate, Score]], rest: Sequence[Candidate], mode: str) -> Candidate:
    """The unmeasured candidate with the largest expected improvement, weighted by its chance of meeting the
    SLO (before any configuration meets it: by its chance of starting at all)."""
    xs = _positions(rest)
    meets = [(c, s) for c, s in measured if s.feasible and objective_of(s, mode) is not None]
    started = [(c, s) for c, s in measured if objective_of(s, mode) is not None]
    pool = meets or started
    if not measured:
        return rest[0]
    if not pool:  # nothing has started: spread out, as the initial design does
        return _farthest(rest, [c for c, _ in measured])
    values = np.array([objective_of(s, mode) if meets else -math.log(s.latency_ms) for _, s in pool], dtype=float)
    mean, sd, best = _fit(_positions([c for c, _ in pool]), values, xs)
    gain = _expected_improvement(mean, sd, best)
    good = {id(c) for c, _ in pool}
    if len(pool) < len(measured):  # some missed the SLO or did not start: steer away from them
        gain = gain * _chance([(c, id(c) in good) for c, _ in measured], xs)
    return rest[int(np.argmax(gain))]  # argmax keeps the first of equals: the earlier configuration
