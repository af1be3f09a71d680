"""The sweep spec (TOML): targets × payloads × batch sizes × load levels × repeats.

    name = "local-cpu"
    model = "inception_v3"
    batch_sizes = [1, 2, 4, 8]
    payloads = ["float"]          # float | jpeg
    input_data = "frames/"        # optional: a directory of images or a video to send (default: synthetic)
    currency = "USD"              # the unit of every price_per_hour (named once)
    [load]
    concurrency = [1, 4]          # closed-loop points
    server_batching_concurrency = [8]   # batch-1 points only: the server's own batching
    rates = [5, 10]               # open-loop points (requests/s)
    arrival = "poisson"
    [durations]
    warmup_s = 2
    min_duration_s = 5
    until_stable = true           # the default (here, in tune specs and bench): run each closed-loop
    max_duration_s = 60           #   point until its windows agree, at most this long
    [slo]
    percentile = "p99"
    max_ms = 100
    search = true                 # open loop: bisect for the highest rate meeting the SLO
    search_steps = 4
    [[targets]]
    name = "cpu"
    url = "grpc://localhost:8500"
    device = "cpu"
    runtime = "tensorflow"        # optional label: tensorflow | onnxruntime | openvino (launched: runs it)
    price_per_hour = 0.68         # optional: cost per million images in the report
    telemetry = ["http://localhost:9100/metrics"]   # optional: energy counters (node exporter, dcgm-exporter)

Every key is checked: an unknown or mistyped key is an error naming it and where; every
number goes through the same checks as the CLI's flags (load/_checks.py).
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench.errors import InvalidValue, UserError
from serve_bench.export import check_version
from serve_bench.load import (
    MAX_RATE,
    PAYLOADS,
    PointSettings,
    check_load,
    check_seed,
    check_settings,
    check_window,
    positive_int,
)
from serve_bench.metrics import check_endpoint
from serve_bench.runtimes import check_runtime, record
from serve_bench.stats import PERCENTILE_NAMES, InvalidTarget, LoadInfo, Slo, Target, parse_target
from serve_bench.sweep._launch import Launch, parse_launch, path_exists
from serve_bench.sweep._toml import check_keys, checked, typed, typed_list

__all__ = [
    "UNTIL_STABLE",
    "SweepSpec",
    "load_spec",
    "parse_spec",
    "target_metrics",
    "target_pricing",
    "target_telemetry",
]

# Every closed-loop point runs until its windows agree (capped by max_duration_s) unless told
# otherwise, as perf_analyzer measures until stable: one-shot points on a busy machine are noise.
# One default for sweep and tune specs and bench's --until-stable.
UNTIL_STABLE = True


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
    slo_search_steps: int = 0  # open loop: bisection steps for the highest rate meeting the SLO (0: none)
    stop_on_error: bool = False
    out: str = "results"
    input_data: str = ""  # a directory of images or a video to send; "" sends synthetic images
    text: str = ""  # the spec as written, for the config hash
    launches: dict[str, Launch] = field(default_factory=dict)  # target name -> the server serve-bench starts for it
    models_dir: str = "exported_models"  # where launched servers find the model

    def levels(self, batch_size: int) -> list[LoadInfo]:
        """The load levels measured at ``batch_size``: each closed-loop concurrency, each open-loop rate, and at
        batch 1 the server-batching concurrencies not already among them."""
        levels = [LoadInfo("closed", concurrency=c, processes=self.processes) for c in self.concurrency]
        levels += [LoadInfo("open", rate=float(r), arrival=self.arrival, processes=self.processes) for r in self.rates]
        if batch_size == 1:
            levels += [
                LoadInfo("closed", concurrency=c, processes=self.processes)
                for c in self.server_batching_concurrency
                if c not in self.concurrency
            ]
        return levels

    def level_count(self) -> int:
        """The batch sizes' load levels, all of them: one target's and payload's points in one repeat."""
        return sum(len(self.levels(batch)) for batch in self.batch_sizes)

    def size(self) -> int:
        """How many points the grid has (targets x payloads x batch sizes' load levels x repeats), counted
        without building them."""
        return len(self.targets) * len(self.payloads) * self.level_count() * self.repeats


# The most points one sweep plans. At the default durations (2 s warm-up, 5 s measured) 100,000 points are
# eight days of measuring, more than any grid anybody means; past it is a typo, and `repeats = 1000000000` built a
# list of a billion plans that died of MemoryError, a traceback, before its first point (2026-11-27).
MAX_POINTS = 100_000


# Bisection steps of the SLO search: 30 halve MAX_RATE below the 0.001 requests/s a searched rate is rounded to;
# past that every step lands on a rate already measured, and 1,000,000,000 steps looped for ever (2026-11-27).
MAX_SEARCH_STEPS = math.ceil(math.log2(MAX_RATE / 0.001))


def _at(exc: InvalidValue, where: str, source: str) -> UserError:
    return UserError(f"{source}: {exc.named(where)}")


def parse_durations(table: dict[str, Any], source: str, **defaults: Any) -> PointSettings:
    """A spec's ``[durations]`` (sweep and tune alike): known keys, their types, then the settings' own checks.

    ``until_stable`` defaults to ``UNTIL_STABLE`` in both."""
    check_keys(table, _DURATIONS, "[durations]", source)
    values = {
        "until_stable": UNTIL_STABLE,
        **defaults,
        **{k: typed(v, _DURATIONS[k], f"durations.{k}", source) for k, v in table.items()},
    }
    settings = PointSettings(**values)
    try:
        check_settings(settings)
    except InvalidValue as exc:
        raise _at(exc, f"durations.{exc.name}", source) from None
    return settings


def _positive_ints(value: Any, where: str, source: str) -> tuple[int, ...]:
    items = typed_list(value, int, where, source, positive=False)
    for i, item in enumerate(items):
        checked(positive_int, where, item, where=f"{where}[{i}]", source=source)
    return _distinct(items, where, source)


def _distinct(items: tuple[Any, ...], where: str, source: str) -> tuple[Any, ...]:
    """``items`` when no value is listed twice: each is one point of the grid (the same point twice was measured
    twice, the first marked superseded by the second, as if it had failed)."""
    seen: set[Any] = set()
    for item in items:
        if item in seen:
            raise UserError(f"{source}: {where} lists {item!r} twice; list each once (repeats = N measures each again)")
        seen.add(item)
    return items


# Old private names, kept while serve_bench.tune moves to the public ones.
_check_keys, _typed, _list = check_keys, typed, typed_list
PERCENTILE_KEYS = tuple(PERCENTILE_NAMES)


_TOP = {
    "name": str,
    "model": str,
    "signature": str,
    "version": int,
    "batch_sizes": list,
    "payloads": list,
    "repeats": int,
    "seed": int,
    "stop_on_error": bool,
    "out": str,
    "load": dict,
    "durations": dict,
    "slo": dict,
    "targets": list,
    "currency": str,
    "input_data": str,
    "models_dir": str,
}
_LOAD = {"concurrency": list, "rates": list, "arrival": str, "processes": int, "server_batching_concurrency": list}
_DURATIONS = {
    "warmup_s": (int, float),
    "min_duration_s": (int, float),
    "min_requests": int,
    "windows": int,
    "tolerance": (int, float),
    "until_stable": bool,
    "max_duration_s": (int, float),
    "timeout_s": (int, float),
    "safety_cap": int,
    "drain_s": (int, float),
}
_SLO = {"percentile": str, "max_ms": (int, float), "search": bool, "search_steps": int}
_TARGET = {
    "name": str,
    "url": str,
    "device": str,
    "metrics": str,
    "server": str,
    "pid": int,
    "price_per_hour": (int, float),
    "telemetry": list,
    "currency": str,  # refused with its own message: the currency is named once, at the top level
    "launch": str,  # local | triton | mlserver: serve-bench starts this server itself (_launch.py)
    "protocol": str,
    "batching": dict,
    "runtime": str,  # tensorflow | onnxruntime | openvino: a launched server runs it; else a label
}


def _duplicate_currency(text: str, source: str) -> None:
    """tomllib refuses a key given twice with a message about "overwriting"; say which key and what to do."""
    if len(re.findall(r"(?m)^\s*currency\s*=", text)) > 1:
        raise UserError(f"{source}: currency is given twice; name it once, at the top level")


def target_pricing(raw: dict[str, Any], where: str, source: str, currency: str) -> tuple[float | None, str]:
    """(price_per_hour, currency) of one target table: a finite number >= 0, and the spec's one currency."""
    if "currency" in raw:
        raise UserError(f"{source}: {where}.currency: the currency is named once, at the top level (currency = ...)")
    if "price_per_hour" not in raw:
        return None, ""
    price = typed(raw["price_per_hour"], (int, float), f"{where}.price_per_hour", source)
    if not math.isfinite(price) or price < 0:
        raise UserError(f"{source}: {where}.price_per_hour must be a finite number >= 0, got {price!r}")
    if not currency:
        raise UserError(
            f"{source}: {where}.price_per_hour needs the currency it is in: "
            'add currency = "USD" (or another) at the top level'
        )
    return float(price), currency


def target_metrics(raw: dict[str, Any], where: str, source: str) -> str | None:
    """The target's own metrics page (``metrics``): None for the server's default, "" for none, else an http(s)
    URL ("notaurl" was measured and said only as a note in points.jsonl)."""
    if "metrics" not in raw:
        return None
    url = str(typed(raw["metrics"], str, f"{where}.metrics", source))
    if url:
        checked(check_endpoint, url, "metrics_url", where=f"{where}.metrics", source=source)
    return url


def target_telemetry(raw: dict[str, Any], where: str, source: str) -> tuple[str, ...]:
    """The target's telemetry endpoints (http(s) URLs of Prometheus pages)."""
    urls = typed_list(raw.get("telemetry", []), str, f"{where}.telemetry", source, positive=False)
    for i, url in enumerate(urls):
        checked(check_endpoint, url, where=f"{where}.telemetry[{i}]", source=source)
    return urls


def parse_spec(text: str, source: str = "spec") -> SweepSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        _duplicate_currency(text, source)
        raise UserError(f"{source} is not valid TOML: {exc}") from None
    check_keys(data, _TOP, "the top level", source)
    for key, kind in _TOP.items():
        if key in data:
            typed(data[key], kind, key, source)
    for required in ("model", "batch_sizes", "targets"):
        if required not in data:
            raise UserError(f"{source}: missing required key {required!r} at the top level")

    load = data.get("load", {})
    check_keys(load, _LOAD, "[load]", source)
    settings = parse_durations(data.get("durations", {}), source)

    concurrency = _positive_ints(load.get("concurrency", []), "load.concurrency", source)
    rates = typed_list(load.get("rates", []), (int, float), "load.rates", source, positive=False)
    _distinct(tuple(float(r) for r in rates), "load.rates", source)
    server_batching = _positive_ints(
        load.get("server_batching_concurrency", []), "load.server_batching_concurrency", source
    )
    if not concurrency and not rates:
        if "concurrency" in load:  # said empty: as batch_sizes = [] it would measure nothing, not one in flight
            raise UserError(f"{source}: load.concurrency is empty; give at least one, e.g. concurrency = [1, 8]")
        concurrency = (1,)
    arrival = typed(load.get("arrival", "poisson"), str, "load.arrival", source)
    processes = typed(load.get("processes", 1), int, "load.processes", source)
    input_data = data.get("input_data", "")
    if input_data and not path_exists(input_data):
        raise UserError(f"{source}: input_data {input_data!r}: no such file or directory")
    if input_data and processes > 1:
        raise UserError(f"{source}: input_data needs load.processes = 1 (worker processes send synthetic images)")
    levels = [
        (f"load.concurrency[{i}]", LoadInfo("closed", concurrency=c, processes=processes))
        for i, c in enumerate(concurrency)
    ]
    levels += [
        (f"load.rates[{i}]", LoadInfo("open", rate=r, arrival=arrival, processes=processes))
        for i, r in enumerate(rates)
    ]
    for where, level in levels:
        try:
            check_load(level)
            check_window(level, settings)
        except InvalidValue as exc:
            raise _at(exc, where if exc.name in ("rate", "concurrency") else f"load.{exc.name}", source) from None
    rates = tuple(float(r) for r in rates)

    payloads = _distinct(
        typed_list(data.get("payloads", ["float"]), str, "payloads", source, positive=False), "payloads", source
    )
    for payload in payloads:
        if payload not in PAYLOADS:
            raise UserError(f"{source}: payload {payload!r} is not one of {', '.join(PAYLOADS)}")
    batch_sizes = _positive_ints(data["batch_sizes"], "batch_sizes", source)
    for key, given, example in (("batch_sizes", batch_sizes, "[1, 8]"), ("payloads", payloads, '["float"]')):
        if not given:  # the grid would have no point: the sweep would "succeed" measuring nothing
            raise UserError(f"{source}: {key} is empty; give at least one, e.g. {key} = {example}")
    repeats = checked(positive_int, "repeats", data.get("repeats", 1), where="repeats", source=source)
    seed = checked(check_seed, data.get("seed", 0), where="seed", source=source)

    slo = None
    search_steps = 0
    if "slo" in data:
        check_keys(data["slo"], _SLO, "[slo]", source)
        values = {k: typed(v, _SLO[k], f"slo.{k}", source) for k, v in data["slo"].items()}
        try:
            slo = Slo(values.get("percentile", "p99"), values.get("max_ms", 100.0))
        except InvalidValue as exc:
            raise _at(exc, f"slo.{exc.name}", source) from None
        if values.get("search", False):
            search_steps = checked(
                positive_int, "search_steps", values.get("search_steps", 4), where="slo.search_steps", source=source
            )
            if search_steps > MAX_SEARCH_STEPS:
                raise UserError(
                    f"{source}: slo.search_steps must be at most {MAX_SEARCH_STEPS}: each step halves the bracket, "
                    f"and {MAX_SEARCH_STEPS} halve the widest ({MAX_RATE:g} requests/s) below the 0.001 requests/s "
                    f"a searched rate is rounded to, got {search_steps}"
                )
            if not rates:
                raise UserError(f"{source}: slo.search needs load.rates to start the search from")

    targets = []
    launches: dict[str, Launch] = {}
    names = set()
    if not data["targets"]:
        raise UserError(f"{source}: [[targets]] is empty; name at least one server")
    for i, raw in enumerate(data["targets"]):
        where = f"targets[{i}]"
        typed(raw, dict, where, source)
        check_keys(raw, _TARGET, f"[[targets]] #{i + 1}", source)
        for required in ("name", "url") if "launch" not in raw else ("name",):
            if required not in raw:
                raise UserError(f'{source}: {where} is missing {required!r} (or launch = "local|triton|mlserver")')
        values = {k: typed(v, _TARGET[k], f"{where}.{k}", source) for k, v in raw.items()}
        if "launch" in raw:
            if "url" in raw:
                raise UserError(f"{source}: {where} has both url and launch; a launched server's URL is chosen for it")
            launches[values["name"]] = parse_launch(raw, where, source, batch_sizes)
            values["url"] = "grpc://127.0.0.1:0"  # replaced by the launched server's when it starts
        elif "protocol" in raw or "batching" in raw:
            raise UserError(f"{source}: {where}: protocol and batching are for launched targets (launch = ...)")
        else:
            try:
                parse_target(values["url"])
            except InvalidTarget as exc:
                raise UserError(f"{source}: {where}.url: {exc}") from None
        if not values["name"].strip():  # it names the target's points, its report rows and its verdict
            raise UserError(f'{source}: {where}.name is empty; name the target, e.g. name = "gpu"')
        if values["name"] in names:
            raise UserError(f"{source}: two targets are named {values['name']!r}")
        names.add(values["name"])
        price, currency = target_pricing(raw, where, source, data.get("currency", ""))
        runtime = launches[values["name"]].runtime if "launch" in raw else values.get("runtime", "")
        if runtime:  # a launched target's was checked with its launch; "" labels none
            check_runtime(runtime, source, name=f"{where}.runtime")
        if runtime and record(runtime).converted and "jpeg" in payloads:
            raise UserError(
                f"{source}: {where}.runtime {runtime!r}: the jpeg payload (serving_bytes) always runs on TensorFlow; "
                "measure jpeg in a spec of its own, or leave this target's runtime out"
            )
        targets.append(
            Target(
                values["name"],
                values["url"],
                values.get("device", "cpu"),
                target_metrics(raw, where, source),
                values.get("server", ""),
                values.get("pid"),
                price_per_hour=price,
                currency=currency,
                telemetry=target_telemetry(raw, where, source),
                runtime=runtime,
            )
        )

    # a request's model_spec.version is an int64: past it, a protobuf ValueError traceback at the first request
    checked(check_version, data.get("version"), where="version", source=source)
    spec = SweepSpec(
        name=data.get("name", "sweep"),
        model=data["model"],
        targets=tuple(targets),
        batch_sizes=batch_sizes,
        payloads=payloads,
        signature=data.get("signature", ""),
        version=data.get("version"),
        concurrency=concurrency,
        rates=rates,
        server_batching_concurrency=server_batching,
        arrival=arrival,
        processes=processes,
        repeats=repeats,
        seed=seed,
        settings=settings,
        slo=slo,
        slo_search_steps=search_steps,
        stop_on_error=data.get("stop_on_error", False),
        out=data.get("out", "results"),
        input_data=input_data,
        text=text,
        launches=launches,
        models_dir=data.get("models_dir", "exported_models"),
    )
    points = spec.size()
    if points > MAX_POINTS:
        raise UserError(
            f"{source}: the grid has {points:,} points ({len(spec.targets)} targets x {len(spec.payloads)} payloads x "
            f"{spec.level_count():,} batch sizes' load levels x "
            f"repeats {spec.repeats:,}); at most {MAX_POINTS:,}: lower repeats or split the grid into several sweeps"
        )
    return spec


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read sweep spec {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 text; a sweep spec is a TOML file") from None
    return parse_spec(text, str(path))
