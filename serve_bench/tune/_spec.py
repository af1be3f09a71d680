"""The tune spec (TOML): which server to restart, the search space, the load, the SLO, the search.

``[load]``, ``[durations]`` and ``[slo]`` use the sweep spec's names, keys and defaults (README,
"Flags and spec keys"); ``[workload]``, tune's old name for ``[load]``, is still read, with one line.

    name = "tune-local-cpu"
    model = "mobilenet_v2"
    payload = "float"              # float | jpeg
    batch_size = 1                 # images per request (production sends 1, or a few)
    input_data = "frames/"         # optional: real images (a directory or a video) instead of synthetic ones
    out = "results"
    [server]
    kind = "local"                 # local | compose | command (TF Serving) | triton | mlserver
    models_dir = "exported_models" # local: where the model was exported
    protocol = "grpc"              # grpc | rest: what the load uses
    [space]                        # every knob a list of values; the grid is their product
    batching = [true]
    max_batch_size = [4, 8, 16]
    batch_timeout_micros = [0, 2000]
    num_batch_threads = [1, 2]
    allowed_batch_sizes = ["none", "powers_of_two"]   # or explicit lists ending at max_batch_size
    runtime = ["tensorflow", "onnxruntime"]           # optional (local, triton, mlserver; not compose/command):
                                                      # what runs the model; export --runtimes first
    [load]                         # as in the sweep spec (rates, concurrency, arrival)
    rates = [20, 40]               # open-loop Poisson points (requests/s)
    concurrency = [8]              # closed-loop points
    [durations]                    # as in the sweep spec, defaults included (until_stable = true)
    [slo]
    percentile = "p99"
    max_ms = 100
    at_rate = 40                   # optional: objective = lowest latency at this rate
    [search]
    method = "bayesian"            # grid | bayesian | coordinate (see _search.py)
    max_configs = 9                # optional cap; default: the grid, or 40% of it for bayesian/coordinate
    order = ["max_batch_size"]     # optional: the coordinate search's knob order (the guide's by default)
    baselines = ["defaults", "no_batching"]

Triton and MLServer (serve-bench starts the real server itself from ``models_dir``, on free ports, once
per configuration; the knobs are the servers' own names, each defaulting to the server's own default,
see _v2config.py for what those are and the source lines they follow):

    [server]
    kind = "triton"                # or "mlserver"
    models_dir = "exported_models"
    protocol = "grpc"              # grpc: v2+grpc://, rest: v2+http:// (the Open Inference Protocol)
    [space]                        # kind "triton": config.pbtxt
    dynamic_batching = [true]                    # false: no dynamic_batching block (each request alone)
    max_batch_size = [4, 8, 16]                  # Triton's default-max-batch-size is 4
    max_queue_delay_microseconds = [0, 2000]
    preferred_batch_size = ["none", [4, 8]]      # "none": Triton prefers max_batch_size
    instance_count = [1, 2]
    instance_kind = ["KIND_CPU"]                 # KIND_GPU on a GPU host
    [space]                        # kind "mlserver": model-settings.json (+ settings.json)
    max_batch_size = [8, 16]                     # requests per batch; batching needs > 1 ...
    max_batch_time = [0.002, 0.01]               # ... and a time > 0 (seconds)
    parallel_workers = [1, 2]                    # the server's inference workers (settings.json)

Baselines per kind (``[search] baselines``): TF Serving's ``defaults`` is batching on with an empty
batching file, ``no_batching`` is ``--enable_batching=false``. Triton's ``defaults`` is
``max_batch_size: 4`` with ``dynamic_batching { }`` (no delay, batches as large as the queue holds: what
Triton's auto-complete gives a batchable model), ``no_batching`` the same without the block. MLServer's
defaults (max_batch_size 0, max_batch_time 0) do not batch, so ``defaults`` and ``no_batching``
(max_batch_size 1) are one configuration, ``nobatch``, measured once. With ``runtime`` in ``[space]``,
``defaults`` is measured on each runtime listed too ("defaults on onnxruntime"): the winner's gain over
the defaults on its own runtime is batching's alone.

Every key is checked: an unknown or mistyped key is an error naming it, and a knob of another server
(``batch_timeout_micros`` in a Triton spec) is an error listing the knobs of the spec's server.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from serve_bench import servers
from serve_bench.errors import InvalidValue, UserError, say_renamed
from serve_bench.export import converted_files, list_versions
from serve_bench.load import ARRIVALS, PAYLOADS, PointSettings, check_batch_size, check_load, check_seed, check_window
from serve_bench.runtimes import record
from serve_bench.servers import require_runtime_package, servers_env
from serve_bench.stats import InvalidTarget, LoadInfo, Slo, parse_target
from serve_bench.sweep import check_keys as _check_keys
from serve_bench.sweep import checked, parse_durations, target_metrics, target_pricing, target_telemetry
from serve_bench.sweep import typed as _typed
from serve_bench.sweep import typed_list as _list
from serve_bench.tune._config import RECIPE_ORDER, ServerConfig, TuneConfig, config_of
from serve_bench.tune._kinds import FAMILIES, Family, family_of

__all__ = [
    "BASELINES",
    "METHODS",
    "RECIPE_ORDER",
    "SERVER_KINDS",
    "ServerSpec",
    "TuneSpec",
    "config_of",
    "expand_space",
    "load_tune_spec",
    "parse_tune_spec",
]

BASELINES: dict[str, TuneConfig] = {
    name: config for name, config in FAMILIES["tfserving"].baselines.items() if isinstance(config, TuneConfig)
}  # TF Serving's; every family's are in _kinds.py
SERVER_KINDS = ("local", "compose", "command", "triton", "mlserver")
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
    # local, triton, mlserver
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
    configs: tuple[ServerConfig, ...]  # the grid, in order
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

    @property
    def family(self) -> Family:
        """The searched server's knobs, baselines and files (TF Serving, Triton or MLServer)."""
        return family_of(self.server.kind)

    def baseline_configs(self) -> dict[str, ServerConfig]:
        """The baselines asked for, by name; with the runtime searched, the defaults also on each other runtime
        ("defaults on onnxruntime"), so a winner on that runtime is set against batching's share alone."""
        named = {name: self.family.baselines[name] for name in self.baselines}
        if "defaults" in named:
            for runtime in dict(self.space).get("runtime", ()):
                if record(runtime).converted:
                    named[f"defaults on {runtime}"] = replace(named["defaults"], runtime=runtime)
        return named


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
    "load": dict,
    "workload": dict,  # the old name of [load]
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
# the keys kinds triton and mlserver read: the others say how to reach or restart a server started elsewhere
_STARTED_HERE_KEYS = {
    "kind",
    "protocol",
    "startup_timeout_s",
    "device",
    "models_dir",
    "metrics",
    "price_per_hour",
    "telemetry",
}
_LOAD = {"rates": list, "concurrency": list, "arrival": str}
_SLO = {"percentile": str, "max_ms": (int, float), "at_rate": (int, float)}
_SEARCH = {"method": str, "max_configs": int, "order": list, "baselines": list}


# The most configurations a [space] may have. Each one restarts a server and measures its load levels (30-40 s
# each here), so 10,000 are four days; three knobs of 200 values each (8 million) built every configuration in
# memory, even for --dry-run, for minutes and gigabytes before the first server started (2026-11-27).
MAX_CONFIGS = 10_000
# A server given a day to become AVAILABLE has failed; nan compared false and failed every configuration.
MAX_STARTUP_S = 86_400.0


def expand_space(
    space: dict[str, tuple[Any, ...]],
    source: str,
    build: Callable[[dict[str, Any], str], ServerConfig] = config_of,
) -> tuple[ServerConfig, ...]:
    """Every combination of the knobs' values, invalid ones refused, duplicates (batching off) merged."""
    names = list(space)
    configs: dict[str, ServerConfig] = {}
    for combo in itertools.product(*(space[n] for n in names)):
        config = build(dict(zip(names, combo)), source)
        configs.setdefault(config.id, config)
    return tuple(configs.values())


def _parse_space(raw: dict[str, Any], source: str, family: Family) -> dict[str, tuple[Any, ...]]:
    space: dict[str, tuple[Any, ...]] = {}
    for knob, values in raw.items():
        if knob not in family.knobs:
            raise family.unknown_knob(knob, source)
        where = f"space.{knob}"
        if not isinstance(values, list) or not values:
            raise UserError(f"{source}: {where} must be a non-empty list of values, got {values!r}")
        space[knob] = family.parse_values(knob, values, source)
        if len(set(map(repr, space[knob]))) != len(space[knob]):
            raise UserError(f"{source}: {where} lists a value twice: {values!r}")
    combinations = math.prod(len(values) for values in space.values())
    if combinations > MAX_CONFIGS:
        sizes = " x ".join(str(len(values)) for values in space.values())
        raise UserError(
            f"{source}: [space] has {combinations:,} combinations ({sizes}); at most {MAX_CONFIGS:,}: list fewer "
            "values per knob (each configuration is a server restarted and measured)"
        )
    try:
        servers.kind(family.name).check_together(space)
    except UserError as exc:
        raise UserError(f"{source}: [space] {exc}") from None
    return space


def _parse_server(raw: dict[str, Any], source: str, currency: str) -> ServerSpec:
    _check_keys(raw, _SERVER, "[server]", source)
    values = {k: _typed(v, _SERVER[k], f"server.{k}", source) for k, v in raw.items()}
    values["price_per_hour"], _ = target_pricing(raw, "server", source, currency)
    values["telemetry"] = target_telemetry(raw, "server", source)
    if "metrics" in values:
        values.pop("metrics")
        values["metrics_url"] = target_metrics(raw, "server", source)
    if "flags" in values:
        values["flags"] = _list(values["flags"], str, "server.flags", source, positive=False)
    spec = ServerSpec(**values)
    if spec.kind not in SERVER_KINDS:
        raise UserError(f"{source}: server.kind must be one of {', '.join(SERVER_KINDS)}, got {spec.kind!r}")
    if spec.protocol not in ("grpc", "rest"):
        raise UserError(f"{source}: server.protocol must be grpc or rest, got {spec.protocol!r}")
    if not (0 < spec.startup_timeout_s <= MAX_STARTUP_S):  # nan failed every configuration "within nan s"
        raise UserError(
            f"{source}: server.startup_timeout_s must be a number of seconds > 0 and at most {MAX_STARTUP_S:g} "
            f"(a day), got {spec.startup_timeout_s}"
        )
    launched = servers.KINDS.get(spec.kind)  # None: compose or command restart a TF Serving started elsewhere
    if launched is not None and launched.in_servers_env:
        unused = sorted(set(raw) - _STARTED_HERE_KEYS)
        if unused:
            raise UserError(
                f"{source}: server.{unused[0]} is not used with kind {spec.kind!r}: serve-bench starts the server "
                f"itself from models_dir (keys: {', '.join(sorted(_STARTED_HERE_KEYS))})"
            )
    elif launched is None:
        try:
            address = parse_target(spec.url) if spec.url else None
        except InvalidTarget as exc:
            raise UserError(f"{source}: server.url: {exc}") from None
        if address is None or address.v2:
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


def _load_table(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``[load]``, or ``[workload]`` (its old name, said once); never both."""
    if "workload" not in data:
        return dict(data.get("load", {}))
    if "load" in data:
        raise UserError(f"{source}: [workload] is the old name of [load]; give the load once, as [load]")
    say_renamed("[workload]", "[load]", source)
    return dict(data["workload"])


def _check_runtimes(runtimes: list[str], server: ServerSpec, payload: str, model: str, source: str) -> None:
    """What [space] runtime asks must be runnable by the server restarted, before anything starts."""
    if not runtimes:
        return
    named = f"{source}: space.runtime {runtimes[0]!r}"
    if server.kind in ("compose", "command"):
        raise UserError(
            f'{named}: TF Serving runs SavedModels only; tune runtimes with [server] kind = "local", "triton" '
            'or "mlserver"'
        )
    if payload == "jpeg":
        raise UserError(f'{named}: the jpeg payload (serving_bytes) always runs on TensorFlow; use payload = "float"')
    kind = servers.kind(server.kind)
    records = {}
    for runtime in runtimes:  # the kind's answer first: no runner inside Triton or MLServer is no install's fault
        try:
            records[runtime] = kind.runtime(runtime)
        except UserError as exc:
            raise UserError(f"{source}: space.runtime {runtime!r}: {exc}") from None
    for runtime, kept in records.items():
        if not kind.in_servers_env:
            line = kept.missing()
            if line:
                raise UserError(f"{source}: space.runtime: {line}")
        else:  # Triton's and MLServer's models run in the servers' environment
            try:
                require_runtime_package(servers_env(), runtime)
            except UserError as exc:
                raise UserError(f"{source}: space.runtime {runtime!r}: {exc}") from None
        versions = list_versions(Path(server.models_dir) / model)
        if versions and kept.converted:
            try:
                converted_files(Path(server.models_dir), runtime, model, versions[-1])
            except UserError as exc:
                raise UserError(f"{source}: space.runtime {runtime!r}: {exc}") from None


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
    family = family_of(server.kind)
    space = _parse_space(data["space"], source, family)
    if not space:
        raise UserError(
            f"{source}: [space] is empty; give at least one knob with its values, e.g. max_batch_size = [4, 8, 16]"
        )
    configs = expand_space(space, source, family.config_of)

    load = _load_table(data, source)
    _check_keys(load, _LOAD, "[load]", source)
    concurrency = _list(load.get("concurrency", []), int, "load.concurrency", source)
    rates = _list(load.get("rates", []), (int, float), "load.rates", source)
    if not concurrency and not rates:
        raise UserError(f"{source}: [load] needs rates (open loop) and/or concurrency (closed loop)")
    arrival = _typed(load.get("arrival", "poisson"), str, "load.arrival", source)
    if arrival not in ARRIVALS:
        raise UserError(f"{source}: load.arrival must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    payload = data.get("payload", "float")
    if payload not in PAYLOADS:
        raise UserError(f"{source}: payload {payload!r} is not one of {', '.join(PAYLOADS)}")
    _check_runtimes(
        sorted({c.runtime for c in configs if record(c.runtime).converted}), server, payload, data["model"], source
    )
    batch_size = checked(check_batch_size, data.get("batch_size", 1), where="batch_size", source=source)

    settings = parse_durations(data.get("durations", {}), source)
    try:
        for level in [LoadInfo("closed", concurrency=c) for c in concurrency] + [
            LoadInfo("open", rate=float(r), arrival=arrival) for r in rates
        ]:
            check_load(level)
            check_window(level, settings)
    except InvalidValue as exc:
        raise UserError(f"{source}: {exc.named('[load]')}") from None

    raw_slo = data.get("slo", {})
    _check_keys(raw_slo, _SLO, "[slo]", source)
    slo_values = {k: _typed(v, _SLO[k], f"slo.{k}", source) for k, v in raw_slo.items()}
    try:
        slo = Slo(slo_values.get("percentile", "p99"), slo_values.get("max_ms", 100.0))
    except InvalidValue as exc:
        raise UserError(f"{source}: {exc.named(f'slo.{exc.name}')}") from None
    at_rate = slo_values.get("at_rate")
    if at_rate is not None and float(at_rate) not in {float(r) for r in rates}:
        raise UserError(f"{source}: slo.at_rate {at_rate:g} must be one of load.rates")

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
    baselines = _list(search.get("baselines", list(family.baselines)), str, "search.baselines", source, positive=False)
    for name in baselines:
        if name not in family.baselines:
            raise UserError(f"{source}: search.baselines: {name!r} is not one of {', '.join(family.baselines)}")
    served = servers.kind(family.name)
    for config in (*configs, *(family.baselines[b] for b in baselines)):
        largest = served.max_batch_size(dict(config.knobs()))  # Triton's: refused above it, batcher or not
        if largest is not None and largest < batch_size:
            raise UserError(
                f"{source}: configuration {config.id} has {served.max_batch_knob} {largest}, less than "
                f"batch_size {batch_size}: {served.label} would refuse every request"
                + ("; drop that baseline or send smaller requests" if config in family.baselines.values() else "")
            )
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
        # refused when read (a negative one was refused only after the first restart, as --seed)
        seed=checked(check_seed, data.get("seed", 0), where="seed", source=source),
        out=data.get("out", "results"),
        currency=data.get("currency", "") if server.price_per_hour is not None else "",
        input_data=data.get("input_data", ""),
        text=text,
    )


def load_tune_spec(path: str | Path) -> TuneSpec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read tune spec {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # as load_spec says it for a sweep spec
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 text; a tune spec is a TOML file") from None
    return parse_tune_spec(text, str(path))
