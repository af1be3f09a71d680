"""The figures of one point as small immutable records, each able to say what is wrong with it.

A point is made of these records (see _point.py); each has ``flags()`` (short
labels, empty when all is well) and ``describe()`` (one phrase a person reads),
so every reader shows the same flags worded the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from hdrh.histogram import HdrHistogram

from serve_bench.stats._histogram import PERCENTILES, histogram_of

__all__ = [
    "PERCENTILE_NAMES",
    "ClientView",
    "Codec",
    "Counts",
    "Figures",
    "Interval",
    "Latency",
    "Percentiles",
    "Stability",
    "Throughput",
    "Window",
]

PERCENTILE_NAMES: dict[str, float] = PERCENTILES  # the one list (name -> percentile), under its public name


@dataclass(frozen=True)
class Interval:
    """A confidence interval [low, high] around a figure (same unit as the figure)."""

    low: float
    high: float
    confidence: float = 0.95

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def describe(self, scale: float = 1.0, digits: int = 1) -> str:
        return f"[{self.low * scale:.{digits}f}, {self.high * scale:.{digits}f}]"


@dataclass(frozen=True)
class Percentiles:
    """Latency percentiles in µs (HdrHistogram values, exact to 0.1%); zeros when nothing was measured."""

    p50: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    p99_9: float = 0.0
    max: float = 0.0
    mean: float = 0.0
    count: int = 0

    NAMES: ClassVar[tuple[str, ...]] = tuple(PERCENTILE_NAMES)

    @classmethod
    def of(cls, histogram: HdrHistogram) -> Percentiles:
        if histogram.get_total_count() == 0:
            return cls()
        values = {name: float(histogram.get_value_at_percentile(p)) for name, p in PERCENTILE_NAMES.items()}
        return cls(
            **values,
            max=float(histogram.get_max_value()),
            mean=round(float(histogram.get_mean_value()), 1),
            count=int(histogram.get_total_count()),
        )

    @classmethod
    def of_values(cls, values_us: Iterable[float]) -> Percentiles:
        return cls.of(histogram_of(values_us))

    def get(self, name: str) -> float:
        """The figure called ``name`` (p50 … p99_9, max, mean); KeyError for any other name."""
        if name not in PERCENTILE_NAMES and name not in ("max", "mean"):
            raise KeyError(f"no latency figure {name!r}; known: {', '.join((*PERCENTILE_NAMES, 'max', 'mean'))}")
        return float(getattr(self, name))

    def ms(self, name: str) -> float:
        return self.get(name) / 1000.0


@dataclass(frozen=True)
class Counts:
    """Requests whose send (closed loop: answer) fell in the measured window; errors by status."""

    requests: int
    ok: int
    items: int  # images in the successful requests
    errors: tuple[tuple[str, int], ...] = ()  # (status, count), sorted by status

    @classmethod
    def of(cls, requests: int, ok: int, items: int, errors: Mapping[str, int]) -> Counts:
        return cls(requests, ok, items, tuple(sorted((str(k), int(v)) for k, v in errors.items() if v)))

    @property
    def error_count(self) -> int:
        return sum(n for _, n in self.errors)

    def errors_by_status(self) -> dict[str, int]:
        return dict(self.errors)

    def flags(self) -> tuple[str, ...]:
        flags = []
        if self.ok == 0:
            flags.append("no successes")
        if self.errors:
            flags.append("errors")
        return tuple(flags)

    def describe(self) -> str:
        if not self.errors:
            return f"{self.ok} of {self.requests} requests answered"
        listed = ", ".join(f"{status} ×{n}" for status, n in self.errors)
        return f"{self.error_count} errors of {self.requests} requests ({listed})"


@dataclass(frozen=True)
class Throughput:
    """Per second of the measured window. Open loop adds the requested, scheduled and achieved send rates."""

    requests_per_s: float
    items_per_s: float
    items_per_s_ci: Interval | None = None
    requested_rate: float | None = None
    scheduled_rate: float | None = None
    achieved_rate: float | None = None

    def describe(self) -> str:
        text = f"{self.items_per_s:.1f} items/s"
        if self.items_per_s_ci is not None:
            text += f" (95% CI {self.items_per_s_ci.describe()})"
        return text + f", {self.requests_per_s:.1f} req/s"


@dataclass(frozen=True)
class Latency:
    """Latency from when each request was due (open loop: its scheduled time) to its decoded answer.

    ``sent`` is the open loop's latency from the actual send (not corrected for
    coordinated omission); ``histogram`` is the encoded HdrHistogram of ``due``.
    """

    due: Percentiles
    sent: Percentiles | None = None
    histogram: str = ""
    p50_ci: Interval | None = None
    p99_ci: Interval | None = None

    @property
    def p50(self) -> float:
        return self.due.p50

    @property
    def p90(self) -> float:
        return self.due.p90

    @property
    def p99(self) -> float:
        return self.due.p99

    @property
    def mean(self) -> float:
        return self.due.mean

    def get(self, name: str) -> float:
        return self.due.get(name)

    def describe(self) -> str:
        text = f"p50 {self.due.ms('p50'):.1f} ms, p99 {self.due.ms('p99'):.1f} ms"
        if self.sent is not None:
            text += f" (uncorrected p99 {self.sent.ms('p99'):.1f} ms)"
        return text


@dataclass(frozen=True)
class Window:
    """One stability window: an equal share of the point's successful requests."""

    requests: int
    items_per_s: float
    mean_latency_us: float


@dataclass(frozen=True)
class Stability:
    """Whether the point's windows agree within ``tolerance``.

    ``judged_on`` says which figures were compared: open-loop throughput is set by
    the schedule, so open-loop points are judged on latency only.
    """

    stable: bool
    tolerance: float | None = None
    windows: tuple[Window, ...] = ()
    items_spread: float = 0.0  # (max - min) / mean of the windows' items/s
    latency_spread: float = 0.0  # same for the windows' mean latency
    enough_requests: bool = True
    judged_on: str = "throughput and latency"

    def flags(self) -> tuple[str, ...]:
        if not self.enough_requests:
            return ("too few requests",)
        return () if self.stable else ("unstable",)

    @property
    def worst_spread(self) -> float:
        return self.latency_spread if self.judged_on == "latency" else max(self.items_spread, self.latency_spread)

    def describe(self) -> str:
        if not self.enough_requests:
            return "too few requests per window to judge stability"
        tolerance = f", tolerance {self.tolerance:.0%}" if self.tolerance is not None else ""
        state = "stable" if self.stable else "unstable"
        return f"{state}: windows differ by {self.worst_spread:.0%} in {self.judged_on}{tolerance}"


@dataclass(frozen=True)
class ClientView:
    """The load generator watching itself: its CPU, whether it set the pace, how late its sends were."""

    loop_cpu_percent: float = 0.0
    process_cpu_percent: float = 0.0
    limited: bool = False
    reasons: tuple[str, ...] = ()
    safety_cap_hits: int = 0  # open loop: sends queued because too many were in flight
    schedule_lag: Percentiles | None = None  # open loop: sent - scheduled, µs

    def flags(self) -> tuple[str, ...]:
        flags = []
        if self.limited:
            flags.append("client-limited")
        if self.safety_cap_hits:
            flags.append("safety cap hit")
        return tuple(flags)

    def describe(self) -> str:
        parts = []
        if self.limited:
            parts.append("client-limited: " + "; ".join(self.reasons))
        if self.safety_cap_hits:
            parts.append(
                f"safety cap hit {self.safety_cap_hits} times (the server could not keep up with the schedule)"
            )
        return "; ".join(parts) or f"client loop {self.loop_cpu_percent:.0f}% busy"


@dataclass(frozen=True)
class Codec:
    """Encoding happens once before the timed region; decoding is inside each request's latency."""

    encode_once_us: float = 0.0
    decode_mean_us: float = 0.0
    request_bytes: int = 0


@dataclass(frozen=True)
class Figures:
    """What the analysis of one load run yields; ``Point.measured`` adds what was measured and where."""

    duration_s: float
    counts: Counts
    throughput: Throughput
    latency: Latency
    stability: Stability
    client: ClientView
    codec: Codec
    notes: tuple[str, ...] = ()
    cut_off: str = ""  # why the point ended early (e.g. the target went down); "" when it ran its course
