"""A measured point: immutable, versioned, one JSON object per line in points.jsonl.

A point is built from small frozen records (see _figures.py); nothing in it is
a mutable container, and changing it means making a new one
(``dataclasses.replace``, ``with_notes``, ``superseding``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, fields, replace
from typing import Any

from serve_bench.stats._energy import EnergyView
from serve_bench.stats._figures import ClientView, Codec, Counts, Figures, Latency, Stability, Throughput
from serve_bench.stats._inputs import InputSource, StreamFigures
from serve_bench.stats._server_view import ServerView
from serve_bench.stats._target import Target

__all__ = [
    "LOAD_MODES",
    "PAYLOAD_KINDS",
    "SCHEMA_VERSION",
    "STREAM_MODE",
    "LoadInfo",
    "Point",
    "PointId",
    "point_key",
]

SCHEMA_VERSION = 5  # history and migrations: _schema.py

# The values a point may hold for its payload and its load mode; the reader refuses others.
PAYLOAD_KINDS = ("float", "jpeg")  # float32 pixels (serving_default) | encoded image bytes (serving_bytes)
STREAM_MODE = "stream"  # the video pipeline: at most N batches in flight, each sent as its frames arrive
LOAD_MODES = ("closed", "open", "locust", STREAM_MODE)


@dataclass(frozen=True)
class LoadInfo:
    """closed: ``concurrency`` requests in flight; open: a seeded schedule at ``rate``; locust: Locust users;
    stream: a frame source's batches, at most ``concurrency`` of them in flight (the video pipeline)."""

    mode: str  # one of LOAD_MODES: closed | open | locust | stream
    concurrency: int | None = None
    rate: float | None = None  # requests/s, open loop
    arrival: str | None = None  # poisson | constant (open loop)
    processes: int = 1

    @property
    def in_flight(self) -> int:
        """Requests in flight for closed loops and Locust users; 0 for open loop (the schedule decides)."""
        return (self.concurrency or 1) if self.mode != "open" else 0

    def level(self) -> str:
        """Short label: ``c8`` or ``50/s``."""
        return f"{self.rate:g}/s" if self.mode == "open" else f"c{self.concurrency or 1}"

    def describe(self) -> str:
        """``concurrency 8``, ``50 req/s poisson`` or ``8 Locust users``."""
        if self.mode == "open":
            return f"{self.rate:g} req/s {self.arrival or 'poisson'}"
        if self.mode == "locust":
            return f"{self.concurrency or 1} Locust users"
        if self.mode == STREAM_MODE:
            return f"stream of {self.concurrency or 1} batches in flight"
        return f"concurrency {self.concurrency or 1}"


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class Point:
    """One measured (target, batch size, load) point.

    ``key`` names the grid point (resume, compare); ``id`` names this measurement of
    it. A point that re-measures another carries ``supersedes=<old id>``; readers
    skip superseded points. Build one from an analysis with ``Point.measured``.
    """

    target: Target
    model: str
    signature: str
    payload: str  # one of PAYLOAD_KINDS: float | jpeg (where the images came from is ``inputs``)
    batch_size: int
    load: LoadInfo
    duration_s: float
    counts: Counts
    throughput: Throughput
    latency: Latency
    stability: Stability
    client: ClientView
    codec: Codec
    server: ServerView | None = None  # None: not scraped (imported, synthetic); unavailable: scrape failed
    energy: EnergyView | None = None  # None: no telemetry asked for; else measured figures or why not
    server_config: tuple[tuple[str, str], ...] = ()  # tune: the (knob, value) pairs of the server measured
    inputs: InputSource | None = None  # what the requests carried (None: synthetic images)
    pipeline: StreamFigures | None = None  # a video-pipeline point's own figures
    repeat: int = 0
    key: str = ""
    id: str = field(default_factory=_new_id)
    supersedes: str = ""
    started_at: str = ""
    warmup_s: float = 0.0
    cut_off: str = ""  # why the point ended early (target down); "" when it ran its course
    notes: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def measured(
        cls,
        figures: Figures,
        *,
        target: Target,
        model: str,
        signature: str,
        payload: str,
        batch_size: int,
        load: LoadInfo,
        **extra: Any,
    ) -> Point:
        """A point from an analysis (load.analyze) plus where and what was measured.

        ``extra`` takes the remaining fields (server, repeat, key, started_at, warmup_s, …);
        notes given there are added after the analysis' own.
        """
        values = {f.name: getattr(figures, f.name) for f in fields(figures)}
        values["notes"] = (*figures.notes, *extra.pop("notes", ()))
        return cls(
            target=target,
            model=model,
            signature=signature,
            payload=payload,
            batch_size=batch_size,
            load=load,
            **values,
            **extra,
        )

    @property
    def limited(self) -> bool:
        return self.client.limited

    @property
    def error_count(self) -> int:
        return self.counts.error_count

    @property
    def items_per_s(self) -> float:
        return self.throughput.items_per_s

    @property
    def is_client_batching(self) -> bool:
        """A closed loop at one request in flight, of float images, that ran its course without errors:
        B images per request and nothing queued beside them (what predict calibrates on and compares with)."""
        return (
            self.load.mode == "closed"
            and self.load.in_flight == 1
            and self.payload == "float"
            and not self.cut_off
            and self.error_count == 0
        )

    @property
    def needs_remeasure(self) -> bool:
        """True when the point says nothing about the server's speed: no request succeeded, or it was cut off."""
        return self.counts.ok == 0 or bool(self.cut_off)

    def flags(self) -> tuple[str, ...]:
        """Every flag of every record, in one order: what a table's flags column shows."""
        flags: list[str] = []
        if self.cut_off:
            flags.append("cut off")
        flags += self.counts.flags()
        flags += self.stability.flags()
        flags += self.client.flags()
        if self.server is not None and self.server.available:  # no metrics is not a fault of the figures
            flags += self.server.flags()
        return tuple(flags)

    def describe(self) -> str:
        """One line a perf_analyzer user reads at a glance."""
        text = (
            f"{self.target.name} b{self.batch_size} {self.load.describe()}: {self.throughput.describe()}, "
            f"{self.latency.describe()}"
        )
        if self.server is not None and self.server.available:
            server = self.server.describe()
            if server:
                text += f", {server}"
        problems = []
        if self.cut_off:
            problems.append(f"CUT OFF: {self.cut_off}")
        if self.counts.ok == 0:
            problems.append("NO SUCCESSES")
        if not self.stability.stable or not self.stability.enough_requests:
            problems.append(self.stability.describe().upper().split(":")[0])
        if self.client.limited:
            problems.append("CLIENT-LIMITED: " + "; ".join(self.client.reasons))
        if self.counts.errors:
            problems.append(self.counts.describe())
        return text + (f" [{', '.join(problems)}]" if problems else "")

    def with_notes(self, *notes: str) -> Point:
        return replace(self, notes=(*self.notes, *notes))

    @property
    def grid_id(self) -> PointId:
        return PointId(
            self.target.name, self.model, self.signature, self.payload, self.batch_size, self.load, self.repeat
        )

    def superseding(self, old: Point) -> Point:
        """This point as the re-measurement of ``old`` (whose line stays in the file, marked superseded)."""
        return replace(self, supersedes=old.id)


@dataclass(frozen=True)
class PointId:
    """Where a point sits in a grid: the one identity behind its ``key`` (resume, tune's configurations),
    a report's cells (``repeat`` 0: the repeats together) and compare's matching of two runs (``target``
    the protocol: the runs' target names differ). Tune names each target after its configuration."""

    target: str
    model: str
    signature: str
    payload: str
    batch_size: int
    load: LoadInfo
    repeat: int = 0

    @property
    def key(self) -> str:
        """``target|model|signature|payload|b<batch>|<mode>|<c<n> or r<rate>-<arrival>>|#<repeat>``."""
        load = self.load
        level = f"c{load.concurrency}" if load.mode != "open" else f"r{load.rate:g}-{load.arrival}"
        return (
            f"{self.target}|{self.model}|{self.signature}|{self.payload}|b{self.batch_size}|{load.mode}|{level}"
            f"|#{self.repeat}"
        )


def point_key(
    target: str, model: str, signature: str, payload: str, batch_size: int, load: LoadInfo, repeat: int
) -> str:
    """Identifies a grid point across runs (resume) and between runs (compare): ``PointId(...).key``."""
    return PointId(target, model, signature, payload, batch_size, load, repeat).key
