"""The sweep spec (TOML): targets × payloads × batch sizes × load levels × repeats.

    name = "local-cpu"
    model = "inception_v3"
    batch_sizes = [1, 2, 4, 8]
    payloads = ["float"]          # float | jpeg
    [load]
    concurrency = [1, 4]          # closed-loop points
    server_batching_concurrency = [8]   # batch-1 points only: the server's own batching
    rates = [5, 10]               # open-loop points (requests/s)
    arrival = "poisson"
    [durations]
    warmup_s = 2
    min_duration_s = 5
    [slo]
    percentile = "p99"
    max_ms = 100
    [[targets]]
    name = "cpu"
    url = "grpc://localhost:8500"
    device = "cpu"

Every key is checked: an unknown or mistyped key is an error naming it and where.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError
from serve_bench.load import ARRIVALS, PAYLOADS, PointSettings
from serve_bench.sweep._measure import Target

__all__ = ["SweepSpec", "Slo", "load_spec", "parse_spec"]

PERCENTILE_KEYS = ("p50", "p90", "p95", "p99", "p99_9")


@dataclass(frozen=True)
class Slo:
    percentile: str = "p99"
    max_ms: float = 100.0
    search: bool = False  # open loop: bisect for the highest rate meeting the SLO
    search_steps: int = 4


@dataclass(frozen=True)
class SweepSpec:
    name: str
    model: str
    targets: tuple[Target, ...]
    batch_sizes: tuple[int, ...]
    payloads: tuple[str, ...] = ("float",)
    signature: str = ""
    version: int | None = None
    concurrency: tuple[int, ...] = ()
    # extra closed-loop points at batch size 1 only: the server's batching of concurrent single images
    server_batching_concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    arrival: str = "poisson"
    processes: int = 1
    repeats: int = 1
    seed: int = 0
    settings: PointSettings = field(default_factory=PointSettings)
    slo: Slo | None = None
    stop_on_error: bool = False
    out: str = "results"
    text: str = ""  # the spec as written, for the config hash


def _nearest(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})"


def _check_keys(table: dict[str, Any], allowed: dict[str, Any], where: str, source: str) -> None:
    for key in table:
        if key not in allowed:
            raise UserError(f"{source}: unknown key {key!r} in {where}{_nearest(key, list(allowed))}")


def _typed(value: Any, kind: Any, where: str, source: str) -> Any:
    ok = isinstance(value, kind) and not (kind in (int, float, (int, float)) and isinstance(value, bool))
    if not ok:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise UserError(f"{source}: {where} must be {names}, got {value!r}")
    return value


def _list(value: Any, kind: Any, where: str, source: str, positive: bool = True) -> tuple[Any, ...]:
    if not isinstance(value, list):
        value = [value]
    items = tuple(_typed(v, kind, f"{where}[{i}]", source) for i, v in enumerate(value))
    if positive and any(v <= 0 for v in items):
        raise UserError(f"{source}: every value in {where} must be positive, got {list(items)}")
    return items


_TOP = {"name": str, "model": str, "signature": str, "version": int, "batch_sizes": list, "payloads": list,
        "repeats": int, "seed": int, "stop_on_error": bool, "out": str, "load": dict, "durations": dict, "slo": dict,
        "targets": list}
_LOAD = {"concurrency": list, "rates": list, "arrival": str, "processes": int, "server_batching_concurrency": list}
_DURATIONS = {"warmup_s": (int, float), "min_duration_s": (int, float), "min_requests": int, "windows": int,
              "tolerance": (int, float), "until_stable": bool, "max_duration_s": (int, float),
              "timeout_s": (int, float), "safety_cap": int, "drain_s": (int, float)}
_SLO = {"percentile": str, "max_ms": (int, float), "search": bool, "search_steps": int}
_TARGET = {"name": str, "url": str, "device": str, "metrics": str, "server": str, "pid": int}


def parse_spec(text: str, source: str = "spec") -> SweepSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source} is not valid TOML: {exc}") from None
    _check_keys(data, _TOP, "the top level", source)
    for key, kind in _TOP.items():
        if key in data:
            _typed(data[key], kind, key, source)
    for required in ("model", "batch_sizes", "targets"):
        if required not in data:
            raise UserError(f"{source}: missing required key {required!r} at the top level")

    load = data.get("load", {})
    _check_keys(load, _LOAD, "[load]", source)
    durations = data.get("durations", {})
    _check_keys(durations, _DURATIONS, "[durations]", source)
    settings_values = {k: _typed(v, _DURATIONS[k], f"durations.{k}", source) for k, v in durations.items()}
    settings = PointSettings(**settings_values)
    if settings.windows < 1 or settings.min_duration_s <= 0 or settings.warmup_s < 0 or settings.timeout_s <= 0:
        raise UserError(f"{source}: [durations] needs windows >= 1, min_duration_s > 0, warmup_s >= 0, timeout_s > 0")

    concurrency = _list(load.get("concurrency", []), int, "load.concurrency", source)
    rates = _list(load.get("rates", []), (int, float), "load.rates", source)
    server_batching = _list(load.get("server_batching_concurrency", []), int, "load.server_batching_concurrency",
                            source)
    if not concurrency and not rates:
        concurrency = (1,)
    arrival = _typed(load.get("arrival", "poisson"), str, "load.arrival", source)
    if arrival not in ARRIVALS:
        raise UserError(f"{source}: load.arrival must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    processes = _typed(load.get("processes", 1), int, "load.processes", source)
    if processes < 1:
        raise UserError(f"{source}: load.processes must be at least 1")

    payloads = _list(data.get("payloads", ["float"]), str, "payloads", source, positive=False)
    for payload in payloads:
        if payload not in PAYLOADS:
            raise UserError(f"{source}: payload {payload!r} is not one of {', '.join(PAYLOADS)}")

    slo = None
    if "slo" in data:
        _check_keys(data["slo"], _SLO, "[slo]", source)
        values = {k: _typed(v, _SLO[k], f"slo.{k}", source) for k, v in data["slo"].items()}
        slo = Slo(**values)
        if slo.percentile not in PERCENTILE_KEYS:
            raise UserError(f"{source}: slo.percentile must be one of {', '.join(PERCENTILE_KEYS)}")
        if slo.search and len(rates) < 1:
            raise UserError(f"{source}: slo.search needs load.rates to start the search from")

    targets = []
    names = set()
    if not data["targets"]:
        raise UserError(f"{source}: [[targets]] is empty; name at least one server")
    for i, raw in enumerate(data["targets"]):
        where = f"targets[{i}]"
        _typed(raw, dict, where, source)
        _check_keys(raw, _TARGET, f"[[targets]] #{i + 1}", source)
        for required in ("name", "url"):
            if required not in raw:
                raise UserError(f"{source}: {where} is missing {required!r}")
        values = {k: _typed(v, _TARGET[k], f"{where}.{k}", source) for k, v in raw.items()}
        if not values["url"].startswith(("grpc://", "http://", "https://")):
            raise UserError(f"{source}: {where}.url {values['url']!r} must start with grpc://, http:// or https://")
        if values["name"] in names:
            raise UserError(f"{source}: two targets are named {values['name']!r}")
        names.add(values["name"])
        targets.append(Target(values["name"], values["url"], values.get("device", "cpu"),
                              values.get("metrics"), values.get("server", ""), values.get("pid")))

    return SweepSpec(
        name=data.get("name", "sweep"), model=data["model"], targets=tuple(targets),
        batch_sizes=_list(data["batch_sizes"], int, "batch_sizes", source), payloads=payloads,
        signature=data.get("signature", ""), version=data.get("version"), concurrency=concurrency, rates=rates,
        server_batching_concurrency=server_batching,
        arrival=arrival, processes=processes, repeats=_typed(data.get("repeats", 1), int, "repeats", source),
        seed=data.get("seed", 0), settings=settings, slo=slo, stop_on_error=data.get("stop_on_error", False),
        out=data.get("out", "results"), text=text,
    )


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read sweep spec {path}: {exc.strerror or exc}") from None
    return parse_spec(text, str(path))
