"""From measured points to the answer: each configuration's objective, the best under the SLO,
the Pareto front of throughput vs latency, what each knob did, and the gain over the baselines."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from serve_bench.stats import Point
from serve_bench.tune._config import TuneConfig
from serve_bench.tune._spec import TuneSlo

__all__ = ["Gain", "KnobRow", "ParetoPoint", "Score", "TuneAnswer", "answer", "config_id_of", "pareto_front",
           "score_config"]


def config_id_of(point: Point) -> str:
    """Tune points are keyed ``<config id>|<sweep key>``."""
    return point.key.split("|", 1)[0]


@dataclass(frozen=True)
class Score:
    """A configuration's objective. Throughput mode: the most items/s among its points meeting the SLO;
    latency mode (slo.at_rate): its latency at that rate. Infeasible: the point closest to the SLO."""

    config: str
    feasible: bool
    items_per_s: float = 0.0
    items_ci: tuple[float, float] | None = None
    latency_ms: float = math.inf
    latency_ci_ms: tuple[float, float] | None = None
    point_key: str = ""
    load: str = ""
    failed: str = ""  # the server did not start: why

    def rank(self, mode: str) -> tuple[bool, bool, float]:
        """Larger is better: started, meets the SLO, then the objective (infeasible: the lower latency)."""
        if self.failed or not math.isfinite(self.latency_ms):
            return (not self.failed, False, -math.inf)
        if self.feasible and mode == "throughput":
            return (True, True, self.items_per_s)
        return (True, self.feasible, -self.latency_ms)

    def objective(self, mode: str) -> float:
        return self.items_per_s if mode == "throughput" else self.latency_ms

    def describe(self, percentile: str) -> str:
        if self.failed:
            return f"{self.config}: did not start ({self.failed})"
        ci = f" [{self.items_ci[0]:.1f}, {self.items_ci[1]:.1f}]" if self.items_ci else ""
        return (f"{self.config}: {self.items_per_s:.1f} items/s{ci}, {percentile} {self.latency_ms:.1f} ms "
                f"at {self.load}" + ("" if self.feasible else " (misses the SLO)"))


def _latency_ms(point: Point, percentile: str) -> float:
    return point.latency.due.ms(percentile)


def _meets(point: Point, slo: TuneSlo) -> bool:
    return point.error_count == 0 and _latency_ms(point, slo.percentile) <= slo.max_ms


def _score_of(config: str, point: Point, slo: TuneSlo, feasible: bool) -> Score:
    ci = point.throughput.items_per_s_ci
    lat_ci = point.latency.p99_ci if slo.percentile == "p99" else None
    return Score(config, feasible, point.items_per_s, (ci.low, ci.high) if ci else None,
                 _latency_ms(point, slo.percentile), (lat_ci.low / 1000, lat_ci.high / 1000) if lat_ci else None,
                 point.key, point.load.describe())


def score_config(config: str, points: Iterable[Point], slo: TuneSlo) -> Score:
    usable = [p for p in points if not p.needs_remeasure]
    if slo.at_rate is not None:
        usable = [p for p in usable if p.load.mode == "open" and p.load.rate == slo.at_rate]
    if not usable:
        return Score(config, False)
    passing = [p for p in usable if _meets(p, slo)]
    if passing:
        best = (max(passing, key=lambda p: p.items_per_s) if slo.at_rate is None
                else min(passing, key=lambda p: _latency_ms(p, slo.percentile)))
        return _score_of(config, best, slo, True)
    closest = min(usable, key=lambda p: (p.error_count > 0, _latency_ms(p, slo.percentile)))
    return _score_of(config, closest, slo, False)


@dataclass(frozen=True)
class ParetoPoint:
    config: str
    load: str
    items_per_s: float
    latency_ms: float


def pareto_front(points: Iterable[Point], percentile: str) -> tuple[ParetoPoint, ...]:
    """Points no other point beats on both throughput (higher) and latency (lower), by throughput."""
    candidates = sorted(((p.items_per_s, _latency_ms(p, percentile), p) for p in points
                         if not p.needs_remeasure and p.error_count == 0), key=lambda c: (-c[0], c[1]))
    front: list[ParetoPoint] = []
    lowest = math.inf
    for items, latency, point in candidates:
        if latency < lowest:
            front.append(ParetoPoint(config_id_of(point), point.load.describe(), items, latency))
            lowest = latency
    return tuple(reversed(front))


@dataclass(frozen=True)
class KnobRow:
    """One value of one knob: the best configuration measured with it."""

    knob: str
    value: str
    configs: int
    best_config: str
    feasible: bool
    items_per_s: float
    latency_ms: float
    vs_best_pct: float  # objective relative to the overall best, in %


@dataclass(frozen=True)
class Gain:
    """How much better the best configuration is than a baseline: ratio and its 95% interval (None: unknown)."""

    baseline: str
    config: str
    ratio: float | None
    low: float | None
    high: float | None
    text: str


def _relative_half(value: float, ci: tuple[float, float] | None) -> float | None:
    if ci is None or value <= 0:
        return None
    return (ci[1] - ci[0]) / 2 / value


def _gain(name: str, best: Score, base: Score, mode: str) -> Gain:
    if base.failed:
        return Gain(name, base.config, None, None, None, f"{name} ({base.config}) did not start: {base.failed}")
    if not base.feasible and mode == "throughput":
        return Gain(name, base.config, None, None, None,
                    f"{name} ({base.config}) meets the SLO at no measured load (closest: {base.describe('p')})")
    if mode == "throughput":
        ratio = best.items_per_s / base.items_per_s if base.items_per_s else None
        errors = [_relative_half(best.items_per_s, best.items_ci), _relative_half(base.items_per_s, base.items_ci)]
    else:
        ratio = base.latency_ms / best.latency_ms if best.latency_ms else None
        errors = [_relative_half(best.latency_ms, best.latency_ci_ms), _relative_half(base.latency_ms,
                                                                                       base.latency_ci_ms)]
    if ratio is None:
        return Gain(name, base.config, None, None, None, f"{name}: nothing to compare")
    what = "throughput under the SLO" if mode == "throughput" else "lower latency at the SLO rate"
    if any(e is None for e in errors):
        return Gain(name, base.config, ratio, None, None,
                    f"{ratio:.2f}x the {what} of {name} ({base.config}); uncertainty unknown (no interval)")
    # relative errors of a ratio add in quadrature (independent measurements)
    half = ratio * math.sqrt(sum(e * e for e in errors if e is not None))
    return Gain(name, base.config, ratio, ratio - half, ratio + half,
                f"{ratio:.2f}x (95% CI {ratio - half:.2f}-{ratio + half:.2f}) the {what} of {name} ({base.config})")


@dataclass(frozen=True)
class TuneAnswer:
    mode: str  # throughput | latency
    percentile: str
    max_ms: float
    best: Score | None  # None: no configuration meets the SLO
    closest: Score | None  # the best-ranked configuration, feasible or not
    scores: tuple[Score, ...]  # best first
    pareto: tuple[ParetoPoint, ...]
    knobs: tuple[KnobRow, ...]
    gains: tuple[Gain, ...]

    def headline(self) -> str:
        if self.best is not None:
            return f"best configuration under {self.percentile} <= {self.max_ms:g} ms: " + \
                self.best.describe(self.percentile)
        if self.closest is None or self.closest.failed:
            return "no configuration was measured (every server start failed)"
        return (f"no configuration meets {self.percentile} <= {self.max_ms:g} ms; closest: "
                + self.closest.describe(self.percentile))


def answer(points_by_config: Mapping[str, Sequence[Point]], configs: Mapping[str, TuneConfig],
           failed: Mapping[str, str], slo: TuneSlo, baselines: Mapping[str, str],
           space_knobs: Sequence[str]) -> TuneAnswer:
    """The answer over every configuration measured (or failed); ``baselines`` maps a name to a config id."""
    mode = "latency" if slo.at_rate is not None else "throughput"
    scores = [score_config(c, points_by_config.get(c, ()), slo) for c in configs if c not in failed]
    scores += [Score(c, False, failed=why) for c, why in failed.items()]
    scores.sort(key=lambda s: s.rank(mode), reverse=True)
    closest = scores[0] if scores else None
    best = closest if closest is not None and closest.feasible and not closest.failed else None
    every = [p for pts in points_by_config.values() for p in pts]
    by_id = {s.config: s for s in scores}
    rows: list[KnobRow] = []
    for knob in space_knobs:
        values: dict[str, list[Score]] = {}
        for cid, config in configs.items():
            if cid in by_id:
                values.setdefault(config.value_of(knob), []).append(by_id[cid])
        if len(values) < 2:
            continue
        for value, group in values.items():
            top = max(group, key=lambda s: s.rank(mode))
            vs = 0.0
            if best is not None and top.feasible:
                vs = (top.objective(mode) / best.objective(mode) - 1) * 100 if best.objective(mode) else 0.0
            rows.append(KnobRow(knob, value, len(group), top.config, top.feasible, top.items_per_s, top.latency_ms,
                                vs))
    gains = tuple(_gain(name, best, by_id[cid], mode) for name, cid in baselines.items()
                  if best is not None and cid in by_id)
    return TuneAnswer(mode, slo.percentile, slo.max_ms, best, closest, tuple(scores),
                      pareto_front(every, slo.percentile), tuple(rows), gains)
