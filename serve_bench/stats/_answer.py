"""A tune run's answer (answer.json): typed, versioned, written by ``tune`` and read back by the report.

The file is one JSON object with ``schema_version``; figures with an interval are written flat
(``items_per_s`` with ``items_ci`` as ``[low, high]``, a gain's ``ratio`` with ``low``/``high``) and
held in memory as Estimates. Files written before the version existed are version 1 (the same layout).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError
from serve_bench.stats._estimate import Estimate

__all__ = [
    "TUNE_ANSWER_SCHEMA_VERSION",
    "BaselineGain",
    "KnobRow",
    "ParetoPoint",
    "Score",
    "TuneAnswer",
    "read_tune_answer",
]

TUNE_ANSWER_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Score:
    """A configuration's objective. Throughput mode: the most items/s among its points meeting the SLO;
    latency mode (``at_rate``): its latency (ms) at that rate. Infeasible: the point closest to the SLO."""

    config: str
    feasible: bool
    items: Estimate = field(default_factory=lambda: Estimate(0.0))  # items/s, with its 95% interval when known
    latency: Estimate = field(default_factory=lambda: Estimate(math.inf))  # ms at the SLO's percentile, likewise
    point_key: str = ""
    load: str = ""
    failed: str = ""  # the server did not start: why

    @property
    def items_per_s(self) -> float:
        return self.items.value

    @property
    def latency_ms(self) -> float:
        return self.latency.value

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
        return f"{self.config}: {self.items.text()} items/s, {percentile} {self.latency_ms:.1f} ms at {self.load}" + (
            "" if self.feasible else " (misses the SLO)"
        )


@dataclass(frozen=True)
class ParetoPoint:
    config: str
    load: str
    items_per_s: float
    latency_ms: float


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
class BaselineGain:
    """How much better the best configuration is than a baseline, each ratio with its 95% interval
    (None: not measurable). ``ratio``: the objective (items/s under the SLO, or latency at the SLO rate);
    ``latency_ratio``: baseline latency / best latency at the load where the best reached its objective."""

    baseline: str
    config: str
    ratio: Estimate | None
    text: str
    load: str = ""
    latency_ratio: Estimate | None = None


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
    gains: tuple[BaselineGain, ...]
    # what the run adds when it writes answer.json
    evaluated: tuple[str, ...] = ()  # configuration ids in the order they were measured
    configs: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> knob -> value text
    best_files: tuple[str, ...] = ()  # the winner's file(s) in its server's own format

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

    def to_data(self) -> dict[str, Any]:
        """The answer.json object (intervals flat; an infinite latency is written as JSON's ``Infinity``)."""
        return {
            "schema_version": TUNE_ANSWER_SCHEMA_VERSION,
            "mode": self.mode,
            "percentile": self.percentile,
            "max_ms": self.max_ms,
            "best": _score_data(self.best),
            "closest": _score_data(self.closest),
            "scores": [_score_data(s) for s in self.scores],
            "pareto": [vars(p) for p in self.pareto],
            "knobs": [vars(k) for k in self.knobs],
            "gains": [_gain_data(g) for g in self.gains],
            "evaluated": list(self.evaluated),
            "configs": self.configs,
            "best_file": self.best_files[0] if self.best_files else None,
            "best_files": list(self.best_files),
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_data(), indent=1) + "\n")


def _pair(estimate: Estimate) -> list[float] | None:
    bounds = estimate.bounds
    return list(bounds) if bounds else None


def _score_data(score: Score | None) -> dict[str, Any] | None:
    if score is None:
        return None
    return {
        "config": score.config,
        "feasible": score.feasible,
        "items_per_s": score.items.value,
        "items_ci": _pair(score.items),
        "latency_ms": score.latency.value,
        "latency_ci_ms": _pair(score.latency),
        "point_key": score.point_key,
        "load": score.load,
        "failed": score.failed,
    }


def _gain_data(gain: BaselineGain) -> dict[str, Any]:
    def flat(estimate: Estimate | None) -> tuple[float | None, float | None, float | None]:
        return (None, None, None) if estimate is None else (estimate.value, estimate.low, estimate.high)

    ratio, low, high = flat(gain.ratio)
    latency_ratio, latency_low, latency_high = flat(gain.latency_ratio)
    return {
        "baseline": gain.baseline,
        "config": gain.config,
        "ratio": ratio,
        "low": low,
        "high": high,
        "text": gain.text,
        "load": gain.load,
        "latency_ratio": latency_ratio,
        "latency_low": latency_low,
        "latency_high": latency_high,
    }


def _estimate(value: Any, pair: Any, basis: str = "95% CI") -> Estimate:
    if isinstance(pair, list) and len(pair) == 2:
        return Estimate(float(value), float(pair[0]), float(pair[1]), basis)
    return Estimate(float(value))


def _score(data: Any) -> Score | None:
    if data is None:
        return None
    return Score(
        str(data["config"]),
        bool(data["feasible"]),
        _estimate(data.get("items_per_s", 0.0), data.get("items_ci")),
        _estimate(data.get("latency_ms", math.inf), data.get("latency_ci_ms")),
        str(data.get("point_key", "")),
        str(data.get("load", "")),
        str(data.get("failed", "")),
    )


def _ratio(value: Any, low: Any, high: Any) -> Estimate | None:
    if value is None:
        return None
    if low is None or high is None:
        return Estimate(float(value))
    return Estimate(float(value), float(low), float(high), "95% CI")


def _answer(data: dict[str, Any]) -> TuneAnswer:
    return TuneAnswer(
        mode=str(data["mode"]),
        percentile=str(data.get("percentile", "p99")),
        max_ms=float(data.get("max_ms", math.inf)),
        best=_score(data.get("best")),
        closest=_score(data.get("closest")),
        scores=tuple(s for s in map(_score, data["scores"]) if s is not None),
        pareto=tuple(ParetoPoint(**p) for p in data.get("pareto") or []),
        knobs=tuple(KnobRow(**k) for k in data.get("knobs") or []),
        gains=tuple(
            BaselineGain(
                str(g["baseline"]),
                str(g["config"]),
                _ratio(g.get("ratio"), g.get("low"), g.get("high")),
                str(g.get("text", "")),
                str(g.get("load", "")),
                _ratio(g.get("latency_ratio"), g.get("latency_low"), g.get("latency_high")),
            )
            for g in data.get("gains") or []
        ),
        evaluated=tuple(data.get("evaluated") or ()),
        configs={str(k): dict(v) for k, v in (data.get("configs") or {}).items()},
        best_files=tuple(data.get("best_files") or ([data["best_file"]] if data.get("best_file") else [])),
    )


def read_tune_answer(path: Path) -> TuneAnswer | None:
    """answer.json at ``path``, None when there is none (a sweep); a damaged file, or one of a version this
    serve-bench does not know, is a one-line UserError."""
    if not path.exists():
        return None
    rerun = "rerun `serve-bench tune ... --resume` to rewrite it"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is not a tune answer ({exc}); {rerun}") from None
    if not isinstance(data, dict) or not isinstance(data.get("scores"), list):
        raise UserError(f"{path} is not a tune answer (no scores); {rerun}")
    version = data.get("schema_version", 1)  # files from before the version existed have version 1's layout
    if version != TUNE_ANSWER_SCHEMA_VERSION:
        raise UserError(
            f"{path} is a tune answer of schema_version {version!r}; this serve-bench reads version "
            f"{TUNE_ANSWER_SCHEMA_VERSION} (upgrade serve-bench, or {rerun})"
        )
    try:
        return _answer(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{path} is not a tune answer ({type(exc).__name__}: {exc}); {rerun}") from None
