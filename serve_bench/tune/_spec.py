"""The tune spec (TOML): which server to restart, the search space, the workload, the SLO, the search.

    name = "tune-local-cpu"
    model = "mobilenet_v2"
    payload = "float"              # float | jpeg
    batch_size = 1                 # images per request (production sends 1, or a few)
    input_data = "frames/"         # optional: real images (a directory or a video) instead of synthetic ones
    out = "results"
    [server]
    kind = "local"                 # local | compose | command
    models_dir = "exported_models" # local: where the model was exported
    protocol = "grpc"              # grpc | rest: what the load uses
    [space]                        # every knob a list of values; the grid is their product
    batching = [true]
    max_batch_size = [4, 8, 16]
    batch_timeout_micros = [0, 2000]
    num_batch_threads = [1, 2]
    allowed_batch_sizes = ["none", "powers_of_two"]   # or explicit lists ending at max_batch_size
    [workload]
    rates = [20, 40]               # open-loop Poisson points (requests/s)
    concurrency = [8]              # closed-loop points
    [durations]                    # as in the sweep spec
    [slo]
    percentile = "p99"
    max_ms = 100
    at_rate = 40                   # optional: objective = lowest latency at this rate
    [search]
    method = "bayesian"            # grid | bayesian | coordinate (see _search.py)
    max_configs = 9                # optional cap; default: the grid, or 40% of it for bayesian/coordinate
    order = ["max_batch_size"]     # optional: the coordinate search's knob order (the guide's by default)
    baselines = ["defaults", "no_batching"]

Every key is checked: an unknown or mistyped key is an error naming it.
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench.errors import InvalidValue, UserError
from serve_bench.load import ARRIVALS, PAYLOADS, PointSettings
from serve_bench.stats import LoadInfo, Slo
from serve_bench.sweep import check_keys as _check_keys
from serve_bench.sweep import check_load, parse_durations, target_pricing, target_telemetry
from serve_bench.sweep import typed as _typed
from serve_bench.sweep import typed_list as _list
from serve_bench.tune._config import BATCHING_KNOBS, FLAG_KNOBS, KNOBS, TuneConfig

__all__ = [
    "BASELINES",
    "METHODS",
    "RECIPE_ORDER",
    "ServerSpec",
    "TuneSpec",
    "config_of",
    "expand_space",
    "load_tune_spec",
    "parse_tune_spec",
]

BASELINES = {"defaults": TuneConfig(), "no_batching": TuneConfig(batching=False)}
SERVER_KINDS = ("local", "compose", "command")
METHODS = ("grid", "bayesian", "coordinate")
# the compose file's tensorflow_model_server flags (docker/compose.yaml, x-tfserving-flags) minus batching
DEFAULT_COMPOSE_FLAGS = (
    "--port=8500",
    "--rest_api_port=8501",
    "--model_config_file=/models/models.config",
    "--monitoring_config_file=/config/monitoring.config",
    "--file_system_poll_wait_seconds=0",
)


@dataclass(frozen=True)
class ServerSpec:
    """How to restart the server with a configuration (see _restart.py)."""

    kind: str = "local"
    protocol: str = "grpc"
    startup_timeout_s: float = 300.0
    device: str = "cpu"
    # local
    models_dir: str = "exported_models"
    # compose and command: where the measured server answers
    url: str = ""
    status_url: str = ""  # REST model status URL; "" derives it (local) or uses gRPC GetModelStatus
    metrics_url: str | None = None
    price_per_hour: float | None = None  # what running the server costs per hour (issue 13)
    telemetry: tuple[str, ...] = ()  # Prometheus pages with its energy counters (dcgm-exporter, node exporter)
    # compose
    compose_file: str = "docker/compose.yaml"
    service: str = ""
    profile: str = ""
    container_batching_file: str = "/config/batching.txt"
    flags: tuple[str, ...] = DEFAULT_COMPOSE_FLAGS
    # command: templates with {batching_file}, {flags}, {config}
    restart: str = ""
    stop: str = ""


@dataclass(frozen=True)
class TuneSpec:
    name: str
    model: str
    server: ServerSpec
    configs: tuple[TuneConfig, ...]  # the grid, in order
    space: tuple[tuple[str, tuple[Any, ...]], ...]  # knob -> values, as the grid was built
    payload: str = "float"
    signature: str = ""
    batch_size: int = 1
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    arrival: str = "poisson"
    settings: PointSettings = field(default_factory=PointSettings)
    slo: Slo = field(default_factory=Slo)
    at_rate: float | None = None  # set: the objective is the lowest latency at this open-loop rate
    method: str = "grid"
    max_configs: int | None = None
    order: tuple[str, ...] = ()
    baselines: tuple[str, ...] = ("defaults", "no_batching")
    seed: int = 0
    out: str = "results"
    currency: str = ""  # the unit of server.price_per_hour
    input_data: str = ""  # a directory of images or a video to send instead of synthetic images
    text: str = ""


_TOP = {
    "name": str,
    "model": str,
    "payload": str,
    "signature": str,
    "batch_size": int,
    "seed": int,
    "out": str,
    "input_data": str,
    "currency": str,
    "server": dict,
    "space": dict,
    "workload": dict,
    "durations": dict,
    "slo": dict,
    "search": dict,
}
_SERVER = {
    "kind": str,
    "protocol": str,
    "startup_timeout_s": (int, float),
    "device": str,
    "models_dir": str,
    "url": str,
    "status_url": str,
    "metrics": str,
    "compose_file": str,
    "service": str,
    "profile": str,
    "container_batching_file": str,
    "flags": list,
    "restart": str,
    "stop": str,
    "price_per_hour": (int, float),
    "telemetry": list,
}
_SPACE = {knob: list for knob in KNOBS}
_WORKLOAD = {"rates": list, "concurrency": list, "arrival": str}
_SLO = {"percentile": str, "max_ms": (int, float), "at_rate": (int, float)}
_SEARCH = {"method": str, "max_configs": int, "order": list, "baselines": list}


def _allowed_sizes(value: Any, max_batch_size: int | None, where: str) -> tuple[int, ...]:
    if value == "none":
        return ()
    if value == "powers_of_two":
        top = max_batch_size or 1000
        sizes = [1 << i for i in range(top.bit_length()) if 1 << i < top]
        return (*sizes, top)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    raise UserError(f'{where}: each value must be "none", "powers_of_two" or a list of sizes, got {value!r}')


def expand_space(space: dict[str, tuple[Any, ...]], source: str) -> tuple[TuneConfig, ...]:
    """Every combination of the knobs' values, invalid ones refused, duplicates (batching off) merged."""
    names = list(space)
    configs: dict[str, TuneConfig] = {}
    for combo in itertools.product(*(space[n] for n in names)):
        config = config_of(dict(zip(names, combo)), source)
        configs.setdefault(config.id, config)
    return tuple(configs.values())


def config_of(values: dict[str, Any], source: str = "spec") -> TuneConfig:
    """The configuration for one value of each knob (as written in [space]), checked against TF Serving's rules."""
    values = dict(values)
    raw_allowed = values.pop("allowed_batch_sizes", "none")
    allowed = _allowed_sizes(raw_allowed, values.get("max_batch_size"), f"{source}: space.allowed_batch_sizes")
    config = TuneConfig(allowed_batch_sizes=allowed, **values)
    config.validate(f"{source}: space combination {config.id}")
    return config


def _parse_space(raw: dict[str, Any], source: str) -> dict[str, tuple[Any, ...]]:
    _check_keys(raw, _SPACE, "[space]", source)
    space: dict[str, tuple[Any, ...]] = {}
    for knob, values in raw.items():
        where = f"space.{knob}"
        if not isinstance(values, list) or not values:
            raise UserError(f"{source}: {where} must be a non-empty list of values, got {values!r}")
        if knob in ("batching", "enable_large_batch_splitting"):
            space[knob] = _list(values, bool, where, source, positive=False)
        elif knob == "allowed_batch_sizes":
            space[knob] = tuple(values)
        else:
            space[knob] = _list(values, int, where, source, positive=False)
        if len(set(map(repr, space[knob]))) != len(space[knob]):
            raise UserError(f"{source}: {where} lists a value twice: {values!r}")
    return space


def _parse_server(raw: dict[str, Any], source: str, currency: str) -> ServerSpec:
    _check_keys(raw, _SERVER, "[server]", source)
    values = {k: _typed(v, _SERVER[k], f"server.{k}", source) for k, v in raw.items()}
    values["price_per_hour"], _ = target_pricing(raw, "server", source, currency)
    values["telemetry"] = target_telemetry(raw, "server", source)
    if "metrics" in values:
        values["metrics_url"] = values.pop("metrics")
    if "flags" in values:
        values["flags"] = _list(values["flags"], str, "server.flags", source, positive=False)
    spec = ServerSpec(**values)
    if spec.kind not in SERVER_KINDS:
        raise UserError(f"{source}: server.kind must be one of {', '.join(SERVER_KINDS)}, got {spec.kind!r}")
    if spec.protocol not in ("grpc", "rest"):
        raise UserError(f"{source}: server.protocol must be grpc or rest, got {spec.protocol!r}")
    if spec.startup_timeout_s <= 0:
        raise UserError(f"{source}: server.startup_timeout_s must be positive")
    if spec.kind != "local":
        if not spec.url.startswith(("grpc://", "http://", "https://")):
            raise UserError(
                f"{source}: server.url must be the measured server's grpc:// or http:// URL "
                f"(needed for kind {spec.kind!r})"
            )
        if spec.kind == "compose" and not spec.service:
            raise UserError(f"{source}: server.service must name the Compose service to restart")
        if spec.kind == "command" and not spec.restart:
            raise UserError(
                f"{source}: server.restart must be the restart command template "
                "(placeholders {batching_file}, {flags}, {config})"
            )
    return spec


def parse_tune_spec(text: str, source: str = "spec") -> TuneSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source} is not valid TOML: {exc}") from None
    _check_keys(data, _TOP, "the top level", source)
    for key, kind in _TOP.items():
        if key in data:
            _typed(data[key], kind, key, source)
    for required in ("model", "space"):
        if required not in data:
            raise UserError(f"{source}: missing required key {required!r} at the top level")
    server = _parse_server(data.get("server", {}), source, data.get("currency", ""))
    space = _parse_space(data["space"], source)
    if not space:
        raise UserError(
            f"{source}: [space] is empty; give at least one knob with its values, e.g. max_batch_size = [4, 8, 16]"
        )
    configs = expand_space(space, source)

    workload = data.get("workload", {})
    _check_keys(workload, _WORKLOAD, "[workload]", source)
    concurrency = _list(workload.get("concurrency", []), int, "workload.concurrency", source)
    rates = _list(workload.get("rates", []), (int, float), "workload.rates", source)
    if not concurrency and not rates:
        raise UserError(f"{source}: [workload] needs rates (open loop) and/or concurrency (closed loop)")
    arrival = _typed(workload.get("arrival", "poisson"), str, "workload.arrival", source)
    if arrival not in ARRIVALS:
        raise UserError(f"{source}: workload.arrival must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    payload = data.get("payload", "float")
    if payload not in PAYLOADS:
        raise UserError(f"{source}: payload {payload!r} is not one of {', '.join(PAYLOADS)}")
    batch_size = data.get("batch_size", 1)
    if batch_size < 1:
        raise UserError(f"{source}: batch_size must be at least 1")

    settings = parse_durations(data.get("durations", {}), source)
    try:
        for level in [LoadInfo("closed", concurrency=c) for c in concurrency] + [
            LoadInfo("open", rate=float(r), arrival=arrival) for r in rates
        ]:
            check_load(level)
    except InvalidValue as exc:
        raise UserError(f"{source}: {exc.named('[workload]')}") from None

    raw_slo = data.get("slo", {})
    _check_keys(raw_slo, _SLO, "[slo]", source)
    slo_values = {k: _typed(v, _SLO[k], f"slo.{k}", source) for k, v in raw_slo.items()}
    try:
        slo = Slo(slo_values.get("percentile", "p99"), slo_values.get("max_ms", 100.0))
    except InvalidValue as exc:
        raise UserError(f"{source}: {exc.named(f'slo.{exc.name}')}") from None
    at_rate = slo_values.get("at_rate")
    if at_rate is not None and float(at_rate) not in {float(r) for r in rates}:
        raise UserError(f"{source}: slo.at_rate {at_rate:g} must be one of workload.rates")

    search = data.get("search", {})
    _check_keys(search, _SEARCH, "[search]", source)
    method = _typed(search.get("method", "grid"), str, "search.method", source)
    if method not in METHODS:
        raise UserError(f"{source}: search.method must be one of {', '.join(METHODS)}, got {method!r}")
    max_configs = search.get("max_configs")
    if max_configs is not None and _typed(max_configs, int, "search.max_configs", source) < 1:
        raise UserError(f"{source}: search.max_configs must be at least 1")
    order = _list(search.get("order", []), str, "search.order", source, positive=False)
    for knob in order:
        if knob not in space:
            raise UserError(f"{source}: search.order names {knob!r}, which is not a knob of [space]")
    baselines = _list(search.get("baselines", list(BASELINES)), str, "search.baselines", source, positive=False)
    for name in baselines:
        if name not in BASELINES:
            raise UserError(f"{source}: search.baselines: {name!r} is not one of {', '.join(BASELINES)}")
    if server.kind == "compose" and not server.flags:
        raise UserError(f"{source}: server.flags must list the service's tensorflow_model_server flags")
    return TuneSpec(
        name=data.get("name", "tune"),
        model=data["model"],
        server=server,
        configs=configs,
        space=tuple(space.items()),
        payload=payload,
        signature=data.get("signature", ""),
        batch_size=batch_size,
        concurrency=concurrency,
        rates=tuple(float(r) for r in rates),
        arrival=arrival,
        settings=settings,
        slo=slo,
        at_rate=None if at_rate is None else float(at_rate),
        method=method,
        max_configs=max_configs,
        order=order,
        baselines=baselines,
        seed=data.get("seed", 0),
        out=data.get("out", "results"),
        currency=data.get("currency", "") if server.price_per_hour is not None else "",
        input_data=data.get("input_data", ""),
        text=text,
    )


def load_tune_spec(path: str | Path) -> TuneSpec:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read tune spec {path}: {exc.strerror or exc}") from None
    return parse_tune_spec(text, str(path))


# knobs a search varies, in the batching guide's order (threads first, then batch size, then timeout)
RECIPE_ORDER = (
    "batching",
    "num_batch_threads",
    *FLAG_KNOBS,
    "max_batch_size",
    "batch_timeout_micros",
    "allowed_batch_sizes",
    "max_enqueued_batches",
    "enable_large_batch_splitting",
    "max_execution_batch_size",
)
assert set(RECIPE_ORDER) == set(KNOBS) and len(BATCHING_KNOBS) == 7
