"""From measured points to the answer: each configuration's objective, the best under the SLO,
the Pareto front of throughput vs latency, what each knob did, and the gain over the baselines."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from serve_bench.stats import Point, Slo
from serve_bench.tune._config import ServerConfig

__all__ = [
    "Gain",
    "KnobRow",
    "ParetoPoint",
    "Score",
    "TuneAnswer",
    "answer",
    "config_id_of",
    "pareto_front",
    "score_config",
]


def config_id_of(point: Point) -> str:
    """Tune points are keyed ``<config id>|<sweep key>``."""
    return point.key.split("|", 1)[0]


@dataclass(frozen=True)
class Score:
    """A configuration's objective. Throughput mode: the most items/s among its points meeting the SLO;
    latency mode (``at_rate``): its latency at that rate. Infeasible: the point closest to the SLO."""

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
        return (
            f"{self.config}: {self.items_per_s:.1f} items/s{ci}, {percentile} {self.latency_ms:.1f} ms "
            f"at {self.load}" + ("" if self.feasible else " (misses the SLO)")
        )


def _latency_ms(point: Point, percentile: str) -> float:
    return point.latency.due.ms(percentile)


def _meets(point: Point, slo: Slo) -> bool:
    return slo.met_by(point)


# two-sided 95% Student t quantiles by degrees of freedom (batch means over a point's windows)
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
_QUANTILE = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99_9": 0.999}


def items_interval(point: Point) -> tuple[float, float] | None:
    """The point's own 95% interval for items/s, else one from its stability windows as batch means."""
    ci = point.throughput.items_per_s_ci
    if ci is not None:
        return (ci.low, ci.high)
    rates = [w.items_per_s for w in point.stability.windows]
    if len(rates) < 2:
        return None
    mean = sum(rates) / len(rates)
    sd = math.sqrt(sum((r - mean) ** 2 for r in rates) / (len(rates) - 1))
    half = _T95.get(len(rates) - 1, 1.96) * sd / math.sqrt(len(rates))
    return (max(0.0, point.items_per_s - half), point.items_per_s + half)


def latency_interval(point: Point, percentile: str) -> tuple[float, float] | None:
    """95% interval (ms) for a latency percentile: the point's own for p99, else the distribution-free
    order-statistic interval (ranks n*q -/+ 1.96*sqrt(n*q*(1-q))) read off its HdrHistogram."""
    own = point.latency.p99_ci if percentile == "p99" else None
    if own is not None:
        return (own.low / 1000, own.high / 1000)
    if not point.latency.histogram:
        return None
    from serve_bench.stats import decode

    histogram = decode(point.latency.histogram)
    n = histogram.get_total_count()
    q = _QUANTILE[percentile]
    if n < 2:
        return None
    spread = 1.96 * math.sqrt(n * q * (1 - q))
    low_rank, high_rank = max(1.0, n * q - spread), min(float(n), n * q + spread + 1)
    return (
        histogram.get_value_at_percentile(100 * low_rank / n) / 1000,
        histogram.get_value_at_percentile(100 * high_rank / n) / 1000,
    )


def _score_of(config: str, point: Point, slo: Slo, feasible: bool) -> Score:
    return Score(
        config,
        feasible,
        point.items_per_s,
        items_interval(point),
        _latency_ms(point, slo.percentile),
        latency_interval(point, slo.percentile),
        point.key,
        point.load.describe(),
    )


def score_config(config: str, points: Iterable[Point], slo: Slo, at_rate: float | None = None) -> Score:
    usable = [p for p in points if not p.needs_remeasure]
    if at_rate is not None:
        usable = [p for p in usable if p.load.mode == "open" and p.load.rate == at_rate]
    if not usable:
        return Score(config, False)
    passing = [p for p in usable if _meets(p, slo)]
    if passing:
        best = (
            max(passing, key=lambda p: p.items_per_s)
            if at_rate is None
            else min(passing, key=lambda p: _latency_ms(p, slo.percentile))
        )
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
    candidates = sorted(
        (
            (p.items_per_s, _latency_ms(p, percentile), p)
            for p in points
            if not p.needs_remeasure and p.error_count == 0
        ),
        key=lambda c: (-c[0], c[1]),
    )
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
    """How much better the best configuration is than a baseline, each ratio with its 95% interval
    (None: not measurable). ``ratio``: the objective (items/s under the SLO, or latency at the SLO rate);
    ``latency_ratio``: baseline latency / best latency at the load where the best reached its objective."""

    baseline: str
    config: str
    ratio: float | None
    low: float | None
    high: float | None
    text: str
    load: str = ""
    latency_ratio: float | None = None
    latency_low: float | None = None
    latency_high: float | None = None


def _log_half(value: float, ci: tuple[float, float] | None) -> float | None:
    """Half-width of the interval on a log scale (intervals of latency percentiles are not symmetric)."""
    if ci is None or value <= 0 or ci[0] <= 0 or ci[1] <= 0:
        return None
    return math.log(ci[1] / ci[0]) / 2


def _ratio(
    top: float, top_ci: tuple[float, float] | None, bottom: float, bottom_ci: tuple[float, float] | None
) -> tuple[float | None, float | None, float | None]:
    """top / bottom with a 95% interval: independent log-scale half-widths add in quadrature."""
    if not bottom or not math.isfinite(top) or not math.isfinite(bottom):
        return None, None, None
    ratio = top / bottom
    errors = [_log_half(top, top_ci), _log_half(bottom, bottom_ci)]
    if any(e is None for e in errors):
        return ratio, None, None
    factor = math.exp(math.sqrt(sum(e * e for e in errors if e is not None)))
    return ratio, ratio / factor, ratio * factor


def _ratio_text(ratio: float | None, low: float | None, high: float | None) -> str:
    if ratio is None:
        return "n/a"
    return f"{ratio:.2f}x" + (
        f" (95% CI {low:.2f}-{high:.2f})" if low is not None and high is not None else " (interval unknown)"
    )


def _gain(name: str, best: Score, base: Score, mode: str, same_load: Score | None, percentile: str) -> Gain:
    if base.failed:
        return Gain(name, base.config, None, None, None, f"{name} ({base.config}) did not start: {base.failed}")
    if mode == "throughput":
        ratio, low, high = (
            _ratio(best.items_per_s, best.items_ci, base.items_per_s, base.items_ci)
            if base.feasible
            else (None, None, None)
        )
        what = "images/s under the SLO"
    else:
        ratio, low, high = _ratio(base.latency_ms, base.latency_ci_ms, best.latency_ms, best.latency_ci_ms)
        what = f"lower {percentile} at the SLO rate"
    text = (
        f"{_ratio_text(ratio, low, high)} the {what} of {name} ({base.config})"
        if ratio is not None
        else f"{name} ({base.config}) meets the SLO at no measured load"
    )
    lat: tuple[float | None, float | None, float | None] = (None, None, None)
    if same_load is not None and not same_load.failed:
        lat = _ratio(same_load.latency_ms, same_load.latency_ci_ms, best.latency_ms, best.latency_ci_ms)
        items = _ratio(best.items_per_s, best.items_ci, same_load.items_per_s, same_load.items_ci)
        text += (
            f"; at {best.load}: {percentile} {best.latency_ms:.1f} ms vs {same_load.latency_ms:.1f} ms "
            f"({_ratio_text(*lat)} lower), {best.items_per_s:.1f} vs {same_load.items_per_s:.1f} images/s "
            f"({_ratio_text(*items)})"
        )
    return Gain(name, base.config, ratio, low, high, text, best.load, *lat)


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
            return f"best configuration under {self.percentile} <= {self.max_ms:g} ms: " + self.best.describe(
                self.percentile
            )
        if self.closest is None or self.closest.failed:
            return "no configuration was measured (every server start failed)"
        return f"no configuration meets {self.percentile} <= {self.max_ms:g} ms; closest: " + self.closest.describe(
            self.percentile
        )


def answer(
    points_by_config: Mapping[str, Sequence[Point]],
    configs: Mapping[str, ServerConfig],
    failed: Mapping[str, str],
    slo: Slo,
    baselines: Mapping[str, str],
    space_knobs: Sequence[str],
    at_rate: float | None = None,
) -> TuneAnswer:
    """The answer over every configuration measured (or failed); ``baselines`` maps a name to a config id."""
    mode = "latency" if at_rate is not None else "throughput"
    scores = [score_config(c, points_by_config.get(c, ()), slo, at_rate) for c in configs if c not in failed]
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
            rows.append(KnobRow(knob, value, len(group), top.config, top.feasible, top.items_per_s, top.latency_ms, vs))
    gains = []
    searched = [s for s in scores if s.feasible and not s.failed and s.config not in baselines.values()]
    for name, cid in baselines.items():
        if best is None or cid not in by_id:
            continue
        # a baseline that wins is compared with the best searched configuration: how far behind it is
        top = searched[0] if best.config == cid and searched else best
        if top.config == cid:
            continue
        same = [p for p in points_by_config.get(cid, ()) if p.load.describe() == top.load and not p.needs_remeasure]
        same_load = _score_of(cid, same[0], slo, _meets(same[0], slo)) if same else None
        gain = _gain(name, top, by_id[cid], mode, same_load, slo.percentile)
        if top is not best:
            gain = replace(
                gain, text=f"{name} is the best configuration; the best searched one, {top.config}, is " + gain.text
            )
        gains.append(gain)
    return TuneAnswer(
        mode,
        slo.percentile,
        slo.max_ms,
        best,
        closest,
        tuple(scores),
        pareto_front(every, slo.percentile),
        tuple(rows),
        tuple(gains),
    )
