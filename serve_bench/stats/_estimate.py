"""A figure with its interval, and the one way a ratio of two is computed and worded.

``Estimate`` is what the analysis, the report and tune hold wherever a value comes with a
range: a point's figure with its 95% interval (``Estimate.of``), a cell's median over
repeats with their range, a gain. Files keep the range as flat ``low``/``high`` numbers
(summary.csv, answer.json); in memory it is an Estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from serve_bench.stats._figures import Interval

__all__ = ["Estimate", "format_ratio", "independent_ratio", "ratio", "ratio_text"]


@dataclass(frozen=True)
class Estimate:
    """A figure and, when known, the range it is uncertain within (``basis`` says which range)."""

    value: float
    low: float | None = None
    high: float | None = None
    basis: str = ""  # "95% CI", "range of 3 repeats", or "" (no spread known)

    @classmethod
    def of(cls, value: float, interval: Interval | None) -> Estimate:
        if interval is None:
            return cls(value)
        return cls(value, interval.low, interval.high, f"{interval.confidence:.0%} CI")

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def bounds(self) -> tuple[float, float] | None:
        """(low, high) when the range is known: what a file stores beside the value."""
        return (self.low, self.high) if self.low is not None and self.high is not None else None

    def text(self, scale: float = 1.0, digits: int = 1, suffix: str = "") -> str:
        """``12.3`` or ``12.3 [11.9–12.8]`` (the range after the value, same unit)."""
        value = f"{self.value * scale:.{digits}f}{suffix}"
        if self.low is None or self.high is None:
            return value
        return f"{value} [{self.low * scale:.{digits}f}–{self.high * scale:.{digits}f}{suffix}]"

    def error_bar(self, scale: float = 1.0) -> tuple[float, float]:
        """(below, above) distances for a plot's error bar; zeros without a range."""
        if self.low is None or self.high is None:
            return 0.0, 0.0
        return max(0.0, (self.value - self.low) * scale), max(0.0, (self.high - self.value) * scale)


def ratio(top: Estimate, bottom: Estimate) -> Estimate:
    """top / bottom, its range from the ranges' extremes (wide on purpose: no independence assumed)."""
    if bottom.value <= 0:
        return Estimate(math.inf)
    value = top.value / bottom.value
    above, below = top.bounds, bottom.bounds
    if above is not None and below is not None and below[0] > 0:
        return Estimate(value, above[0] / below[1], above[1] / below[0], "from both ranges")
    return Estimate(value)


def _log_half(estimate: Estimate) -> float | None:
    """Half-width of the interval on a log scale (intervals of latency percentiles are not symmetric)."""
    bounds = estimate.bounds
    if bounds is None or estimate.value <= 0 or min(bounds) <= 0:
        return None
    return math.log(bounds[1] / bounds[0]) / 2


def independent_ratio(top: Estimate, bottom: Estimate) -> Estimate | None:
    """top / bottom with a 95% interval for two independent measurements (log-scale half-widths add
    in quadrature); None when the ratio cannot be taken (a zero or infinite figure)."""
    if not bottom.value or not math.isfinite(top.value) or not math.isfinite(bottom.value):
        return None
    value = top.value / bottom.value
    errors = [_log_half(top), _log_half(bottom)]
    if errors[0] is None or errors[1] is None:
        return Estimate(value)
    factor = math.exp(math.hypot(errors[0], errors[1]))
    return Estimate(value, value / factor, value * factor, "95% CI")


def format_ratio(value: float | None) -> str:
    """``2.50×`` (``12.3×`` from 10 on); ``n/a`` for no ratio."""
    if value is None or not math.isfinite(value):
        return "n/a"
    text = f"{value:.2f}"
    return f"{text}×" if float(text) < 10 else f"{value:.1f}×"  # 9.996 rounds to 10, so it reads 10.0× as 10.004 does


def ratio_text(estimate: Estimate | None, why: str = "not measured") -> str:
    """``2.50× [2.10×–2.90×]`` (the range when known); ``why`` when there is no ratio."""
    if estimate is None:
        return why
    text = format_ratio(estimate.value)
    if estimate.low is not None and estimate.high is not None:
        text += f" [{format_ratio(estimate.low)}–{format_ratio(estimate.high)}]"
    return text
