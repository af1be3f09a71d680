"""From measured points to the answer: each configuration's objective, the best under the SLO,
the Pareto front of throughput vs latency, what each knob did, and the gain over the baselines."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from serve_bench.stats import (
    BaselineGain,
    Estimate,
    KnobRow,
    ParetoPoint,
    Point,
    Score,
    Slo,
    TuneAnswer,
    independent_ratio,
    ratio_text,
)
from serve_bench.tune._config import ServerConfig

__all__ = [
    "answer",
    "config_id_of",
    "pareto_front",
    "score_config",
]


def config_id_of(point: Point) -> str:
    """Tune names each point's target after the configuration it measured."""
    return point.grid_id.target


def _latency_ms(point: Point, percentile: str) -> float:
    return point.latency.due.ms(percentile)


def _meets(point: Point, slo: Slo) -> bool:
    return slo.met_by(point)


# two-sided 95% Student t quantiles by degrees of freedom (batch means over a point's windows), to 30; past 30,
# t(30) = 2.04, wider than any t(df > 30) by at most 4.1% (the normal 1.96 would be 12% narrower at 10 degrees)
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}
_T95 |= {11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 16: 2.12, 17: 2.11, 18: 2.10, 19: 2.09, 20: 2.09}
_T95 |= {21: 2.08, 22: 2.07, 23: 2.07, 24: 2.06, 25: 2.06, 26: 2.06, 27: 2.05, 28: 2.05, 29: 2.05, 30: 2.04}
_QUANTILE = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99_9": 0.999}


def items_estimate(point: Point) -> Estimate:
    """items/s with the point's own 95% interval, else one from its stability windows as batch means."""
    ci = point.throughput.items_per_s_ci
    if ci is not None:
        return Estimate.of(point.items_per_s, ci)
    rates = [w.items_per_s for w in point.stability.windows]
    if len(rates) < 2:
        return Estimate(point.items_per_s)
    mean = sum(rates) / len(rates)
    sd = math.sqrt(sum((r - mean) ** 2 for r in rates) / (len(rates) - 1))
    half = _T95.get(len(rates) - 1, _T95[30]) * sd / math.sqrt(len(rates))
    return Estimate(point.items_per_s, max(0.0, point.items_per_s - half), point.items_per_s + half, "95% CI")


def latency_estimate(point: Point, percentile: str) -> Estimate:
    """A latency percentile (ms) with its 95% interval: the point's own for p99, else the distribution-free
    order-statistic interval (ranks n*q -/+ 1.96*sqrt(n*q*(1-q))) read off its HdrHistogram."""
    value = _latency_ms(point, percentile)
    own = point.latency.p99_ci if percentile == "p99" else None
    if own is not None:
        return Estimate(value, own.low / 1000, own.high / 1000, f"{own.confidence:.0%} CI")
    if not point.latency.histogram:
        return Estimate(value)
    from serve_bench.stats import decode

    histogram = decode(point.latency.histogram)
    n = histogram.get_total_count()
    q = _QUANTILE[percentile]
    if n < 2:
        return Estimate(value)
    spread = 1.96 * math.sqrt(n * q * (1 - q))
    low_rank, high_rank = max(1.0, n * q - spread), min(float(n), n * q + spread + 1)
    return Estimate(
        value,
        histogram.get_value_at_percentile(100 * low_rank / n) / 1000,
        histogram.get_value_at_percentile(100 * high_rank / n) / 1000,
        "95% CI",
    )


def _score_of(config: str, point: Point, slo: Slo, feasible: bool) -> Score:
    return Score(
        config,
        feasible,
        items_estimate(point),
        latency_estimate(point, slo.percentile),
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


def _gain(name: str, best: Score, base: Score, mode: str, same_load: Score | None, percentile: str) -> BaselineGain:
    if base.failed:
        return BaselineGain(name, base.config, None, f"{name} ({base.config}) did not start: {base.failed}")
    if mode == "throughput":
        ratio = independent_ratio(best.items, base.items) if base.feasible else None
        what = "images/s under the SLO"
    else:
        ratio = independent_ratio(base.latency, best.latency)
        what = f"lower {percentile} at the SLO rate"
    text = (
        f"{ratio_text(ratio)} the {what} of {name} ({base.config})"
        if ratio is not None
        else f"{name} ({base.config}) meets the SLO at no measured load"
    )
    latency = None
    if same_load is not None and not same_load.failed:
        latency = independent_ratio(same_load.latency, best.latency)
        items = independent_ratio(best.items, same_load.items)
        text += (
            f"; at {best.load}: {percentile} {best.latency_ms:.1f} ms vs {same_load.latency_ms:.1f} ms "
            f"({ratio_text(latency, 'n/a')} lower), {best.items_per_s:.1f} vs {same_load.items_per_s:.1f} images/s "
            f"({ratio_text(items, 'n/a')})"
        )
    return BaselineGain(name, base.config, ratio, text, best.load, latency)


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
