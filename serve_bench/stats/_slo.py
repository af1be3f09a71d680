"""The latency objective: one definition that the sweep's rate search and the report both use."""

from __future__ import annotations

import math
from dataclasses import dataclass

from serve_bench.errors import InvalidValue
from serve_bench.stats._figures import PERCENTILE_NAMES
from serve_bench.stats._point import Point

__all__ = ["Slo"]


@dataclass(frozen=True)
class Slo:
    """``percentile`` of the latency (from when each request was due) at most ``max_ms`` milliseconds.

    Refuses an unknown percentile and a ``max_ms`` that is not a finite number > 0
    (``InvalidValue`` naming ``percentile`` or ``max_ms``).
    """

    percentile: str = "p99"
    max_ms: float = 100.0

    def __post_init__(self) -> None:
        if self.percentile not in PERCENTILE_NAMES:
            raise InvalidValue("percentile", self.percentile, f"one of {', '.join(PERCENTILE_NAMES)}")
        if (
            isinstance(self.max_ms, bool)
            or not isinstance(self.max_ms, (int, float))
            or not math.isfinite(self.max_ms)
            or self.max_ms <= 0
        ):
            raise InvalidValue("max_ms", self.max_ms, "a finite number > 0")

    @classmethod
    def parse(cls, text: str) -> Slo:
        """``"p99=100"`` (percentile=milliseconds)."""
        percentile, sep, value = text.partition("=")
        if not sep or not value.strip():
            raise InvalidValue("slo", text, "written as percentile=milliseconds, e.g. p99=100")
        try:
            max_ms = float(value)
        except ValueError:
            raise InvalidValue("max_ms", value.strip(), "a number of milliseconds") from None
        return cls(percentile.strip(), max_ms)

    def met_by(self, point: Point) -> bool:
        """Every request answered, none cut off, and the percentile within the objective."""
        return (
            point.counts.ok > 0
            and point.error_count == 0
            and not point.cut_off
            and point.latency.get(self.percentile) / 1000 <= self.max_ms
        )

    def label(self) -> str:
        return f"{self.percentile.replace('_', '.')} ≤ {self.max_ms:g} ms"
