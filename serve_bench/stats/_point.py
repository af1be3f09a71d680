"""A measured point: immutable, versioned, one JSON object per line in points.jsonl."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SCHEMA_VERSION", "TargetInfo", "LoadInfo", "Point", "point_key"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class TargetInfo:
    name: str
    url: str
    protocol: str  # grpc | rest
    device: str  # cpu | gpu | label from the spec
    server_kind: str = "unknown"  # tensorflow-serving | serve-bench-local | unknown
    server_version: str = ""


@dataclass(frozen=True)
class LoadInfo:
    mode: str  # closed | open | locust
    concurrency: int | None = None
    rate: float | None = None  # requests/s, open loop
    arrival: str | None = None  # poisson | constant (open loop)
    processes: int = 1


@dataclass(frozen=True)
class Point:
    target: TargetInfo
    model: str
    signature: str
    payload: str  # float | jpeg
    batch_size: int
    load: LoadInfo
    duration_s: float
    counts: dict[str, Any]  # requests, items, errors {status: n}
    throughput: dict[str, float]  # requests_per_s, items_per_s, achieved_rate (open loop)
    latency_us: dict[str, float]  # from the intended time (corrected for coordinated omission)
    latency_uncorrected_us: dict[str, float] | None  # open loop: from the actual send
    histogram: str  # encoded HdrHistogram of latency_us
    schedule_lag_us: dict[str, float] | None
    codec_us: dict[str, float]  # encode (once, prepared) and mean decode per request
    client: dict[str, Any]  # cpu_percent, limited (bool), reasons, safety_cap_hits
    server: dict[str, Any]  # breakdown from metrics, or {"available": False, "reason": ...}
    stability: dict[str, Any]  # windows, spread, stable, tolerance
    repeat: int = 0
    key: str = ""
    started_at: str = ""
    warmup_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Point":
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"point has schema_version {version!r}; this serve-bench reads {SCHEMA_VERSION}")
        values = dict(data)
        values["target"] = TargetInfo(**values["target"])
        values["load"] = LoadInfo(**values["load"])
        return cls(**values)

    @property
    def limited(self) -> bool:
        return bool(self.client.get("limited"))

    @property
    def error_count(self) -> int:
        return int(sum(self.counts.get("errors", {}).values()))


def point_key(target: str, model: str, signature: str, payload: str, batch_size: int, load: LoadInfo,
              repeat: int) -> str:
    """Identifies a grid point across runs (resume) and between runs (compare)."""
    level = f"c{load.concurrency}" if load.mode != "open" else f"r{load.rate:g}-{load.arrival}"
    return f"{target}|{model}|{signature}|{payload}|b{batch_size}|{load.mode}|{level}|#{repeat}"
