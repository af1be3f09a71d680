"""Figures with their spread, and the measured (target, batch, load) cells a report is made of.

A cell is one grid point measured one or more times (``repeats``). Its figures
are Estimates: with repeats, the median and the range of the repeats; with one
measurement, the point's own 95% interval when it has one. A repeat that says
nothing about speed (it answered nothing, or the target went down during it) is
kept in the cell, and its flags shown, but the figures come from the repeats that
measured (from all of them when none did).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from serve_bench.stats import Estimate, Point, PointId

__all__ = ["Cell", "cells_of"]


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
    series: str = ""  # the name of the rows it belongs to, where not its target's: "rest jpeg" (report/_analysis.py)

    @classmethod
    def of(cls, points: Iterable[Point], series: str = "") -> Cell:
        group = tuple(points)
        measured = _measured(group)
        first = measured[0]
        return cls(
            group,
            _spread([p.items_per_s for p in measured], Estimate.of(first.items_per_s, first.throughput.items_per_s_ci)),
            _spread([p.latency.p50 for p in measured], Estimate.of(first.latency.p50, first.latency.p50_ci)),
            _spread([p.latency.p99 for p in measured], Estimate.of(first.latency.p99, first.latency.p99_ci)),
            series,
        )

    @property
    def measured(self) -> tuple[Point, ...]:
        """The repeats the figures come from: those that measured the server's speed (all, when none did)."""
        return _measured(self.points)

    @property
    def point(self) -> Point:
        """The measured repeat whose items/s is the median (the one the figures of a single point come from)."""
        ordered = sorted(self.measured, key=lambda p: p.items_per_s)
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
        """``gpu b8 c1`` (``rest jpeg b8 c1`` where a run sent more than one payload): the name a verdict uses to
        point at this cell's row."""
        return f"{self.series or self.target} {self.where}"

    @property
    def where(self) -> str:
        """``b8 c1``: the cell's place in its series' grid."""
        return f"b{self.batch_size} {self.points[0].load.level()}"

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


def _measured(points: tuple[Point, ...]) -> tuple[Point, ...]:
    return tuple(p for p in points if not p.needs_remeasure) or points


def _cell_key(point: Point) -> PointId:
    return replace(point.grid_id, repeat=0)  # a cell holds the repeats


def cells_of(points: Iterable[Point], series: str = "") -> list[Cell]:
    """Points grouped into cells (repeats together), in the order each cell was first measured."""
    groups: dict[PointId, list[Point]] = {}
    for point in points:
        groups.setdefault(_cell_key(point), []).append(point)
    return [Cell.of(group, series) for group in groups.values()]
