"""Figures with their spread, and the measured (target, batch, load) cells a report is made of.

A cell is one grid point measured one or more times (``repeats``). Its figures
are Estimates: with repeats, the median and the range of the repeats; with one
measurement, the point's own 95% interval when it has one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from serve_bench.stats import Interval, Point

__all__ = ["Cell", "Estimate", "cells_of", "ratio"]


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
    if top.known and bottom.known and bottom.low and bottom.low > 0:
        assert top.low is not None and top.high is not None and bottom.high is not None
        return Estimate(value, top.low / bottom.high, top.high / bottom.low, "from both ranges")
    return Estimate(value)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _spread(values: list[float], single: Estimate) -> Estimate:
    if len(values) == 1:
        return single
    return Estimate(_median(values), min(values), max(values), f"range of {len(values)} repeats")


@dataclass(frozen=True)
class Cell:
    """One measured (target, batch size, load), over its repeats (superseded points already left out)."""

    points: tuple[Point, ...]
    items_per_s: Estimate
    p50_us: Estimate
    p99_us: Estimate

    @classmethod
    def of(cls, points: Iterable[Point]) -> Cell:
        group = tuple(points)
        first = group[0]
        return cls(
            group,
            _spread([p.items_per_s for p in group], Estimate.of(first.items_per_s, first.throughput.items_per_s_ci)),
            _spread([p.latency.p50 for p in group], Estimate.of(first.latency.p50, first.latency.p50_ci)),
            _spread([p.latency.p99 for p in group], Estimate.of(first.latency.p99, first.latency.p99_ci)),
        )

    @property
    def point(self) -> Point:
        """The repeat whose items/s is the median (the one the figures of a single point come from)."""
        ordered = sorted(self.points, key=lambda p: p.items_per_s)
        return ordered[(len(ordered) - 1) // 2]

    @property
    def batch_size(self) -> int:
        return self.points[0].batch_size

    @property
    def target(self) -> str:
        return self.points[0].target.name

    @property
    def mode(self) -> str:
        return self.points[0].load.mode

    @property
    def in_flight(self) -> int:
        return self.points[0].load.in_flight

    @property
    def label(self) -> str:
        """``gpu b8 c1``: the name a verdict uses to point at this cell's row."""
        return f"{self.target} b{self.batch_size} {self.points[0].load.level()}"

    @property
    def usable(self) -> bool:
        """Some measurement answered requests and none of them was cut off."""
        return any(not p.needs_remeasure for p in self.points)

    def flags(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for point in self.points:
            for flag in point.flags():
                seen[flag] = None
        return tuple(seen)


def _cell_key(point: Point) -> tuple[object, ...]:
    load = point.load
    return (
        point.target.name,
        point.model,
        point.signature,
        point.payload,
        point.batch_size,
        load.mode,
        load.concurrency,
        load.rate,
        load.arrival,
        load.processes,
    )


def cells_of(points: Iterable[Point]) -> list[Cell]:
    """Points grouped into cells (repeats together), in the order each cell was first measured."""
    groups: dict[tuple[object, ...], list[Point]] = {}
    for point in points:
        groups.setdefault(_cell_key(point), []).append(point)
    return [Cell.of(group) for group in groups.values()]
