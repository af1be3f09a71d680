"""Seeded arrival schedules for the open loop (MLPerf's server scenario uses Poisson).

A schedule is drawn a chunk at a time (``ArrivalSchedule.chunks``), so its memory does not grow
with rate x duration: ``--rate 1e9`` once allocated 7.45 GiB of send times before the first send.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["ARRIVALS", "CHUNK", "MAX_RATE", "ArrivalSchedule", "arrival_offsets"]

ARRIVALS = ("poisson", "constant")

# The most requests/s an open-loop point may ask for. One generator process sends about 6300
# requests/s over gRPC and 11000 over REST against a trivial server (benchmarks/README.md, "Load
# generator"), so 10^6 is ~100x what one process reaches and well past what --processes on one
# host can: a higher rate measures nothing but the generator, and 1e308 overflows the schedule.
MAX_RATE = 1e6

# Send times per chunk: 512 KiB as float64 (2 MiB as the loop's list of floats). Drawing the next
# chunk takes ~4 ms, once every CHUNK sends; a schedule of at most CHUNK arrivals per window is
# drawn in one piece, exactly as it always was for its seed.
CHUNK = 1 << 16


def _count(rate: float, span: float) -> int:
    return round(rate * span)


def _segment(
    rate: float, start: float, span: float, arrival: str, rng: np.random.Generator, chunk: int
) -> Iterator[np.ndarray]:
    count = _count(rate, span)
    if count == 0:
        return
    if arrival == "constant":
        step = span / count
        for first in range(0, count, chunk):
            yield start + np.arange(first, min(first + chunk, count)) * step
        return
    # A Poisson process conditioned on N arrivals in [0, T) is N sorted uniform draws on [0, T)
    # (the order statistics property). Drawing N = rate x T that way keeps every Poisson feature
    # the server sees (exponential gaps, bursts) while the realized rate over the window equals the
    # requested one exactly: cumulating exponential gaps instead gives a count that is itself
    # Poisson, so a seeded "50 req/s" point can send 45.9 req/s (sd = sqrt(N)) and two points of
    # a sweep are compared at different loads.
    # A long window is cut into equal slices drawn one after the other: the N draws fall into the
    # slices multinomially, i.e. slice k gets Binomial(left, 1 / slices left), then its own sorted
    # uniforms. The same process, a slice in memory at a time.
    slices = -(-count // chunk)
    if slices == 1:
        yield start + np.sort(rng.uniform(0.0, span, size=count))
        return
    left = count
    for k in range(slices):
        n = left if k == slices - 1 else int(rng.binomial(left, 1.0 / (slices - k)))
        left -= n
        low, high = start + span * k / slices, start + span * (k + 1) / slices
        yield low + np.sort(rng.uniform(0.0, high - low, size=n))


@dataclass(frozen=True)
class ArrivalSchedule:
    """Send times in seconds from the start, covering [0, warmup_s + duration), drawn lazily.

    The warm-up [0, warmup_s) and the measured window [warmup_s, warmup_s + duration)
    are drawn separately, each holding exactly round(rate x span) arrivals, so the
    schedule's rate over the measured window is the requested rate. ``chunks()`` yields
    them in order, at most about ``chunk`` at a time; each call starts the same seeded draw.
    ValueError for a rate, duration or arrival that cannot make a schedule.
    """

    rate: float
    duration: float
    arrival: str = "poisson"
    seed: int = 0
    warmup_s: float = 0.0
    chunk: int = CHUNK

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and 0 < self.rate <= MAX_RATE):
            raise ValueError(f"rate must be a finite number of requests/s in (0, {MAX_RATE:g}], not {self.rate!r}")
        finite = math.isfinite(self.duration) and math.isfinite(self.warmup_s)
        if not (finite and self.duration > 0 and self.warmup_s >= 0):
            raise ValueError(
                f"duration must be positive and warm-up non-negative (finite), not {self.duration!r}, {self.warmup_s!r}"
            )
        if self.arrival not in ARRIVALS:
            raise ValueError(f"unknown arrival distribution {self.arrival!r}; use one of {ARRIVALS}")
        if self.chunk < 1:
            raise ValueError(f"chunk must be >= 1, not {self.chunk!r}")

    @property
    def scheduled(self) -> int:
        """Arrivals inside the measured window."""
        return _count(self.rate, self.duration)

    @property
    def count(self) -> int:
        """All arrivals, warm-up included."""
        return (_count(self.rate, self.warmup_s) if self.warmup_s > 0 else 0) + self.scheduled

    def chunks(self) -> Iterator[np.ndarray]:
        rng = np.random.default_rng(self.seed)
        if self.warmup_s > 0:
            yield from _segment(self.rate, 0.0, self.warmup_s, self.arrival, rng, self.chunk)
        yield from _segment(self.rate, self.warmup_s, self.duration, self.arrival, rng, self.chunk)


def arrival_offsets(
    rate: float, duration: float, arrival: str = "poisson", seed: int = 0, warmup_s: float = 0.0
) -> np.ndarray:
    """The whole of ``ArrivalSchedule(rate, duration, arrival, seed, warmup_s)`` as one array
    (for short schedules and tests: ``run_open_loop`` takes the schedule itself)."""
    chunks = list(ArrivalSchedule(rate, duration, arrival, seed, warmup_s).chunks())
    return np.concatenate(chunks) if chunks else np.zeros(0)
