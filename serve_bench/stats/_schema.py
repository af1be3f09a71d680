"""The points.jsonl and run.json formats: versions, their history, and the migration of old files.

Each line of points.jsonl is one point as a JSON object carrying ``schema_version``.
The reader migrates older versions in memory (the file is never rewritten) and
refuses newer ones.

History of ``schema_version`` (points.jsonl):

1. First format (serve-bench 0.1). Figures as free-form objects: ``counts``
   (errors as ``{status: n}``), ``throughput``, ``latency_us``,
   ``latency_uncorrected_us``, ``schedule_lag_us``, ``codec_us``, ``client``,
   ``server`` (``{"available": false, "reason": …}`` when metrics were not
   reachable, plus telemetry keys), ``stability`` (``spread`` by figure);
   ``target`` with ``protocol`` and ``server_kind``; ``notes`` a list.
2. Typed records (serve-bench 0.2). ``latency`` = ``{due, sent, histogram,
   p50_ci, p99_ci}`` (``due`` from the time each request was due; ``sent``
   open loop from the actual send); ``counts.errors`` as ``[[status, n], …]``;
   ``throughput.items_per_s_ci``; ``client.schedule_lag``; ``codec`` =
   ``{encode_once_us, decode_mean_us, request_bytes}``; ``stability`` with
   ``items_spread``, ``latency_spread``, ``judged_on``; ``server`` is the server
   view (``available`` false with a ``reason`` when the scrape failed) or null
   when not scraped; ``server_config`` (tune); ``target.server`` is the server
   kind; new ``id``, ``supersedes`` (the id of the point this one re-measured)
   and ``cut_off`` (why the point ended early).

3. Servers nobody here wrote (serve-bench 0.3). ``target.protocol`` may be ``v2-grpc`` or
   ``v2-rest`` (the Open Inference Protocol); ``target.http_url`` (the server's v2 HTTP URL
   beside a gRPC target); the server view gains ``source`` and the figures of Triton and
   MLServer (compute input/infer/output, executions, per-batch-size counts, runtime). A
   version-2 point reads as is: every new field has a default.
4. The video pipeline as a load mode (serve-bench 0.4). ``load.mode`` may be ``stream``
   (at most ``concurrency`` batches in flight, each sent as a frame source fills it);
   ``payload`` is ``float`` or ``jpeg`` for every point, and the reader refuses any other
   payload or mode. Versions 2 and 3 wrote a pipeline point's payload as ``video``: it
   reads as the point's ``pipeline.payload`` (the video itself is ``inputs``), and its
   ``key`` is rewritten to match.
5. Which software stack (serve-bench 0.5). ``target.runtime``: ``tensorflow``,
   ``onnxruntime`` or ``openvino`` (what a launched local server ran, or what the spec
   declared), ``""`` when not stated. A version-4 point reads as is: the field has a default.

Every version: ``target.server`` says a kind by its one name (local, tfserving, triton, mlserver:
serve_bench/servers/' registry). Points written before said the local server
``serve-bench-local`` and TF Serving ``tensorflow-serving`` (or a spec's ``tf-serving``): they are read
under the one name (``server_kind_name``), so an old run and a new one group and report alike.

History of ``schema_version`` (run.json):

1. No version field: host metadata, settings, spec name.
2. ``schema_version`` added; otherwise as 1.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types
import typing
from collections.abc import Mapping
from typing import Any

from serve_bench._server_facts import LOCAL, LOCAL_IDENTITY, TFSERVING
from serve_bench.stats._point import LOAD_MODES, PAYLOAD_KINDS, SCHEMA_VERSION, Point

__all__ = [
    "OLD_SERVER_KINDS",
    "RUN_SCHEMA_VERSION",
    "SCHEMA_HISTORY",
    "from_data",
    "migrate_run",
    "point_from_data",
    "point_to_data",
    "server_kind_name",
    "to_data",
]

RUN_SCHEMA_VERSION = 2
SCHEMA_HISTORY = {
    1: "free-form figure objects (serve-bench 0.1)",
    2: "typed records, id/supersedes/cut_off (serve-bench 0.2)",
    3: "Triton and MLServer: v2 protocols, target.http_url, their server views (serve-bench 0.3)",
    4: "the video pipeline: load mode stream, payload float|jpeg for every point, both checked (serve-bench 0.4)",
    5: "which software stack: target.runtime (serve-bench 0.5)",
}


# --- generic (de)serialisation of frozen dataclasses -------------------------


def to_data(value: Any) -> Any:
    """A frozen record as JSON-ready data: dataclasses -> objects, tuples -> lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [to_data(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_data(v) for k, v in value.items()}
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number"
    )


def from_data(tp: Any, value: Any, where: str) -> Any:
    """Rebuild a value of type ``tp`` from JSON data, checking types; ValueError names ``where``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return from_data(option, value, where)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(errors[0] if errors else f"{where}: unexpected null")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object, found {_kind(value)}")
        hints = _hints(tp)
        known = {f.name: f for f in dataclasses.fields(tp) if f.init}
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}")
        args = {}
        for name, spec in known.items():
            if name in value:
                args[name] = from_data(hints[name], value[name], f"{where}.{name}" if where else name)
            elif spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise ValueError(f"{where or 'point'}: missing field {name!r}")
        return tp(**args)
    if origin is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, found {_kind(value)}")
        parts = typing.get_args(tp)
        if len(parts) == 2 and parts[1] is Ellipsis:
            return tuple(from_data(parts[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(parts) != len(value):
            raise ValueError(f"{where}: expected {len(parts)} values, found {len(value)}")
        return tuple(from_data(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(parts, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object, found {_kind(value)}")
        _, value_type = typing.get_args(tp)
        return {str(k): from_data(value_type, v, f"{where}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true/false, found {_kind(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, found {_kind(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: expected a number, found {_kind(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, found {_kind(value)}")
        return value
    raise TypeError(f"{where}: cannot read values of type {tp!r}")  # a record uses a type this reader lacks


# --- points ---------------------------------------------------------------------


# the spellings points and specs used for a server kind before each had one name (servers.KINDS)
OLD_SERVER_KINDS = {
    LOCAL_IDENTITY: LOCAL,
    "tensorflow-serving": TFSERVING,
    "tf-serving": TFSERVING,
    "tensorflow_serving": TFSERVING,
}


def server_kind_name(spelling: str) -> str:
    """The one name of the server kind an old ``spelling`` (any case) says; any other spelling as given."""
    return OLD_SERVER_KINDS.get(spelling.strip().lower(), spelling)


def point_to_data(point: Point) -> dict[str, Any]:
    data: dict[str, Any] = to_data(point)
    return data


def point_from_data(data: Any, line_text: str = "") -> Point:
    """A Point from one parsed JSON line of any known version; ValueError says what does not fit."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a point (a JSON object), found {_kind(data)}")
    if "schema_version" not in data:
        raise ValueError("JSON but not a serve-bench point (no schema_version)")
    version = data["schema_version"]
    if version == 1:
        data = _v1_to_v2(data, line_text)
    elif version in (2, 3):  # 3 only added fields, each with a default; 4 names a pipeline point's payload
        data = _v3_to_v4(data)
    elif version == 4:  # 5 only added target.runtime, with a default
        data = {**data, "schema_version": SCHEMA_VERSION}
    elif version != SCHEMA_VERSION:
        raise ValueError(
            f"point has schema_version {version!r}; this serve-bench reads 1 to {SCHEMA_VERSION} "
            "(a newer serve-bench wrote it)"
        )
    target = data.get("target")
    if isinstance(target, dict) and isinstance(target.get("server"), str):
        data = {**data, "target": {**target, "server": server_kind_name(target["server"])}}
    point: Point = from_data(Point, data, "")
    if point.payload not in PAYLOAD_KINDS:
        raise ValueError(f"payload: expected one of {', '.join(PAYLOAD_KINDS)}, found {point.payload!r}")
    if point.load.mode not in LOAD_MODES:
        raise ValueError(f"load.mode: expected one of {', '.join(LOAD_MODES)}, found {point.load.mode!r}")
    if point.batch_size < 1:  # a point is per image and per request: every figure divides by it
        raise ValueError(f"batch_size: expected a whole number >= 1, found {point.batch_size!r}")
    if point.load.mode == "open" and not (point.load.rate is not None and point.load.rate > 0):
        raise ValueError(f"load.rate: an open-loop point needs its rate (requests/s > 0), found {point.load.rate!r}")
    return point


def _v3_to_v4(old: dict[str, Any]) -> dict[str, Any]:
    """A version-2 or -3 point as version 4: a pipeline point's payload ``video`` becomes the payload it
    sent (``pipeline.payload``, float or jpeg), in ``payload`` and in the key."""
    data = {**old, "schema_version": SCHEMA_VERSION}
    pipeline = old.get("pipeline")
    if old.get("payload") == "video" and isinstance(pipeline, dict):
        payload = pipeline.get("payload", "float")
        data["payload"] = payload
        key = old.get("key")
        parts = key.split("|") if isinstance(key, str) else []
        if len(parts) > 3 and parts[3] == "video":  # target|model|signature|payload|b…|mode|level|#repeat
            data["key"] = "|".join((*parts[:3], str(payload), *parts[4:]))
    return data


def _percentiles(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: value[k] for k in ("p50", "p90", "p95", "p99", "p99_9", "max", "mean", "count") if k in value}


def _v1_to_v2(old: dict[str, Any], line_text: str) -> dict[str, Any]:
    """A version-1 point as version-2 data (missing fields get the defaults of the new records)."""
    from serve_bench.stats._server_view import ServerView

    def get(name: str) -> Any:
        if name not in old:
            raise ValueError(f"schema_version 1 point without {name!r}")
        return old[name]

    target = dict(get("target"))
    kind = target.pop("server_kind", "unknown")
    target["server"] = "" if kind == "unknown" else kind
    counts = dict(get("counts"))
    errors = counts.get("errors") or {}
    counts["errors"] = sorted([str(k), v] for k, v in errors.items()) if isinstance(errors, dict) else errors
    client = dict(get("client"))
    client.pop("locust_users", None)
    client["schedule_lag"] = _percentiles(old.get("schedule_lag_us"))
    stability = dict(get("stability"))
    spread = stability.pop("spread", {}) or {}
    stability["items_spread"] = spread.get("items_per_s", 0.0)
    stability["latency_spread"] = spread.get("mean_latency", 0.0)
    codec_us = old.get("codec_us") or {}
    notes = list(old.get("notes") or [])
    server_old = old.get("server") or {}
    server: dict[str, Any] = {"available": False, "reason": str(server_old.get("reason", ""))}
    if server_old.get("available"):
        names = {f.name for f in dataclasses.fields(ServerView)}
        server = {k: v for k, v in server_old.items() if k in names}
    return {
        "target": target,
        "model": get("model"),
        "signature": get("signature"),
        "payload": get("payload"),
        "batch_size": get("batch_size"),
        "load": get("load"),
        "duration_s": get("duration_s"),
        "counts": counts,
        "throughput": get("throughput"),
        "latency": {
            "due": _percentiles(get("latency_us")),
            "sent": _percentiles(old.get("latency_uncorrected_us")),
            "histogram": old.get("histogram", ""),
        },
        "stability": stability,
        "client": client,
        "codec": {
            "encode_once_us": codec_us.get("encode_once", 0.0),
            "decode_mean_us": codec_us.get("decode_mean", 0.0),
            "request_bytes": codec_us.get("request_bytes", 0),
        },
        "server": server,
        "repeat": old.get("repeat", 0),
        "key": old.get("key", ""),
        # a stable id for an old line, so that a re-measurement can name it
        "id": "v1-" + hashlib.sha256(line_text.encode()).hexdigest()[:10],
        "started_at": old.get("started_at", ""),
        "warmup_s": old.get("warmup_s", 0.0),
        "notes": notes,
        "schema_version": SCHEMA_VERSION,
    }


# --- run.json ---------------------------------------------------------------------


def migrate_run(data: Any, where: str) -> dict[str, Any]:
    """run.json of any known version as the current version's dict."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object, found {_kind(data)}")
    version = data.get("schema_version", 1)
    if version not in SCHEMA_HISTORY:
        raise ValueError(f"{where} has schema_version {version!r}; this serve-bench reads 1 to {RUN_SCHEMA_VERSION}")
    return {**data, "schema_version": RUN_SCHEMA_VERSION}
