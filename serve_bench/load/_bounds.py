"""The bound on each number a user types for a point, from the memory it implies on the client.

Every figure below was measured (``benchmarks/client_memory.py``; the table of bounds and reasons is
docs/bounds.md), and every check runs before the memory it guards is allocated:

* ``check_schedule`` (the plan and the settings, before connecting): what the load keeps whatever the
  model: a record per request (open loop: rate x scheduled seconds; closed loop: the generator's ceiling
  x the longest the point may run), the state of each request in flight, a process per ``--processes``.
* ``check_request`` (after the signature is known, before the batch is drawn): the batch drawn and
  encoded once per process (a REST body costs about 7x its JSON size to build), a copy of the body per
  gRPC request in flight, and what the server declared it refuses (protobuf's 2 GB message, the local
  server's ``--max_body_bytes``, its batcher's ``max_batch_size``).

A refusal is ``InvalidValue`` naming the parameter to lower and the largest value that fits, why, and how
to raise the bound; the CLI says it in one line with the flag's name.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from serve_bench.errors import InvalidValue
from serve_bench.load._generators import PointSettings
from serve_bench.load._payload import largest_batch
from serve_bench.load._plan import PointPlan
from serve_bench.load._schedule import _count
from serve_bench.stats import LoadInfo

__all__ = [
    "DRAW_FACTOR",
    "ENCODE_FACTOR",
    "MEMORY_SHARE",
    "Declared",
    "Memory",
    "RequestCost",
    "check_batch",
    "check_request",
    "check_schedule",
    "memory_available",
    "point_memory",
]

MEMORY_SHARE = 0.8  # of what this process may still use: the rest is the interpreter's, the OS's, the unforeseen
GIB = 1 << 30

# Measured with benchmarks/client_memory.py (2000 float32 64x64 images; peak RSS growth).
DRAW_FACTOR = 3.0  # synthetic float images: int64 draws, then float32 (make_inputs): 3x the batch at the peak
# Peak while the drawn batch is encoded, x the body: the protobuf message and its serialized copy (gRPC);
# orjson writing numpy floats as text into a buffer it grows, then copies (TF Serving's REST JSON: 5.8-7.1x
# measured, 7.5 used); the v2 REST body, JSON or binary, hid under the draw's peak (at most 2x).
ENCODE_FACTOR = {"grpc": 3.0, "v2-grpc": 3.0, "rest": 7.5, "v2-rest": 2.0}
# What one request waiting for its answer holds beyond its body: the gRPC call's state (28.7 KiB measured)
# or aiohttp's task and request (8.6 KiB), with the recorder's coroutine.
IN_FLIGHT_BYTES = {"grpc": 32 << 10, "v2-grpc": 32 << 10, "rest": 12 << 10, "v2-rest": 12 << 10}
# gRPC copies the request into each call (0.99 copies per request measured); aiohttp writes the one body,
# copied only into the transport's buffer of a connection the server is slow to read: 100 connections.
REST_CONNECTIONS = 100
RECORD_BYTES = 256  # one RequestRecord kept for the point's analysis (216 B measured, with its list slot)
PROCESS_BYTES = 128 << 20  # a --processes child: Python, numpy, gRPC and aiohttp imported (64 MB measured)
GENERATOR_CEILING = 20_000  # requests/s one process sends at most (benchmarks/README.md: ~10^4)


@dataclass(frozen=True)
class Memory:
    """What this process may still allocate, and what limits it (said in a refusal, with how to raise it)."""

    available: int
    limited_by: str

    @property
    def usable(self) -> int:
        return int(self.available * MEMORY_SHARE)

    def describe(self) -> str:
        return f"{_size(self.usable)} may be used ({MEMORY_SHARE:.0%} of {_size(self.available)}, {self.limited_by})"


def memory_available() -> Memory:
    """The least of: the host's available memory, this cgroup's limit less its usage, and the address
    space ``ulimit -v`` (RLIMIT_AS) leaves this process."""
    import psutil

    found = [(int(psutil.virtual_memory().available), "the memory available on this host")]
    cgroup = _cgroup_room()
    if cgroup is not None:
        found.append((cgroup, "this container's memory limit (cgroup)"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        found.append((max(0, soft - _address_space()), "this process's address-space limit (ulimit -v)"))
    available, limited_by = min(found)
    return Memory(available, limited_by)


def _address_space() -> int:
    try:
        return int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _cgroup_room() -> int | None:
    """limit - usage of this process's memory cgroup (v2, else v1), None when unlimited or unknown."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit_text = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit_text == "max" or int(limit_text) >= 1 << 60:
            return None
        return max(0, int(limit_text) - usage)
    return None


def _size(n: float) -> str:
    if n >= 1e21:  # past any memory (2**62 records, _whole's cap, are 1.2e21 B); 400 digits are past float's range
        return "over 1e9 TB"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


# --- before connecting: what the load keeps, whatever the model -----------------------------------------


def _in_flight(load: LoadInfo, settings: PointSettings) -> int:
    """Requests waiting for their answers at once: the concurrency, or (open loop) what the rate sends
    within a timeout, capped by the generator's safety cap."""
    if load.mode != "open":  # closed loop, Locust users (each its own request), the pipeline's batches
        return load.concurrency or 1
    return min(settings.safety_cap, max(1, math.ceil((load.rate or 1.0) * settings.timeout_s)))


def _records(load: LoadInfo, settings: PointSettings) -> int:
    """Records a point may keep: every scheduled request (open loop), or as many as the generator can
    send while the point may run (closed loop: it ends at max_duration_s at the latest)."""
    if load.mode == "open":
        return _whole((load.rate or 1.0) * (settings.warmup_s + settings.min_duration_s))
    if load.mode in ("locust", "stream"):  # Locust keeps its own statistics; a stream, a record per batch of a video
        return 0
    seconds = settings.warmup_s + settings.max_duration_s  # the closed loop stops there, until stable or not
    return _whole(GENERATOR_CEILING * min(load.processes, _HUGE) * seconds)  # 400-digit processes: no OverflowError


_HUGE = 10**30  # a count no memory holds; what a count past it costs is computed as if it were this


def _whole(count: float) -> int:
    """``ceil(count)``, held at 2**62 (no memory holds more records): 1e308 s of warm-up is refused, not an
    OverflowError."""
    return math.ceil(min(count, 2.0**62))


def check_window(load: LoadInfo, settings: PointSettings) -> None:
    """Refuse an open loop whose window schedules no request (``InvalidValue`` naming rate): each process's window
    holds round(rate / processes x min_duration_s) requests (_schedule.py), and a window of none measures nothing,
    its "0 of 0 requests answered" blaming the server. bench, a sweep's spec and a tune's spec ask it."""
    processes = max(1, load.processes)
    if load.mode == "open" and load.rate is not None and _count(load.rate / processes, settings.min_duration_s) == 0:
        each = f" over {processes} processes" if processes > 1 else ""
        raise InvalidValue(
            "rate",
            load.rate,
            f"more than {0.5 * processes / settings.min_duration_s:.4g} requests/s{each} for a "
            f"{settings.min_duration_s:g} s window: at {load.rate:g} a window schedules no request, and a point of "
            "none measures nothing; raise the rate or the duration",
        )


def check_schedule(plan: PointPlan, settings: PointSettings, memory: Memory | None = None) -> None:
    """Refuse a load whose records, requests in flight and processes alone need more memory than this
    process may use (``InvalidValue`` naming rate, max_duration_s, concurrency or processes), and an open loop
    whose window would schedule no request (``rate``)."""
    load = plan.load
    check_window(load, settings)
    memory = memory or memory_available()
    usable = memory.usable
    records = _records(load, settings) * RECORD_BYTES
    if records > usable:
        if load.mode == "open":
            seconds = settings.warmup_s + settings.min_duration_s
            most = usable // RECORD_BYTES / seconds
            raise InvalidValue(
                "rate",
                load.rate,
                f"at most {most:.4g} requests/s for a {seconds:g} s schedule (warm-up + duration): each scheduled "
                f"request keeps a {RECORD_BYTES}-byte record for the analysis, {_size(records)} in all, and "
                f"{memory.describe()}; shorten the point or free memory",
            )
        if load.processes > 1 and _records(replace(load, processes=1), settings) * RECORD_BYTES <= usable:
            most = usable // (_records(replace(load, processes=1), settings) * RECORD_BYTES)
            raise InvalidValue(
                "processes",
                load.processes,
                f"at most {most}: each process keeps a {RECORD_BYTES}-byte record per answer, up to "
                f"{GENERATOR_CEILING} answers/s, for as long as the point may run, {_size(records)} in all, and "
                f"{memory.describe()}; free memory, shorten the point, or measure from more machines",
            )
        most_s = usable // RECORD_BYTES / (GENERATOR_CEILING * load.processes) - settings.warmup_s
        if most_s <= 0:  # the warm-up alone runs past it: name the flag to lower
            most_warmup = usable // RECORD_BYTES / (GENERATOR_CEILING * load.processes) - settings.max_duration_s
            raise InvalidValue(
                "warmup_s",
                settings.warmup_s,
                f"at most {max(0.0, most_warmup):.4g} s with max_duration_s {settings.max_duration_s:g}: a closed "
                f"loop keeps a {RECORD_BYTES}-byte record per answer, up to {GENERATOR_CEILING} answers/s per "
                f"process, warm-up included, {_size(records)} in all, and {memory.describe()}; shorten the warm-up",
            )
        raise InvalidValue(
            "max_duration_s",
            settings.max_duration_s,
            f"at most {max(0.0, most_s):.4g} s: a closed loop keeps a {RECORD_BYTES}-byte record per answer, up "
            f"to {GENERATOR_CEILING} answers/s per process, {_size(records)} in all, and {memory.describe()}; "
            "shorten the point or free memory",
        )
    per_request = IN_FLIGHT_BYTES[plan.target.protocol]
    in_flight = _in_flight(load, settings) * per_request
    if load.mode == "closed" and records + in_flight > usable:
        most = (usable - records) // per_request
        raise InvalidValue(
            "concurrency",
            load.concurrency,
            f"at most {most}: each request in flight holds {_size(per_request)} of call state before its body "
            f"over {plan.target.protocol}, {_size(in_flight)} in all, and {memory.describe()}; "
            "free memory, or measure from more machines",
        )
    children = (load.processes - 1) * PROCESS_BYTES if load.processes > 1 else 0
    if children and records + children > usable:
        most = 1 + (usable - records) // PROCESS_BYTES
        raise InvalidValue(
            "processes",
            load.processes,
            f"at most {most}: each extra process costs {_size(PROCESS_BYTES)} (Python, numpy, gRPC, aiohttp) "
            f"before its payload, and {memory.describe()}; free memory (more processes than cores gain nothing: "
            f"this host has {os.cpu_count()})",
        )


# --- after the signature is known, before the batch is drawn ---------------------------------------------


@dataclass(frozen=True)
class RequestCost:
    """What one request of the point's payload costs, from requests of one and two items encoded."""

    one: int  # body bytes of a one-item request
    two: int  # body bytes of a two-item request
    drawn_per_item: int  # bytes one item is drawn as (float pixels, JPEG bytes) before encoding
    synthetic_float: bool  # drawn by make_inputs as int64 then float32 (DRAW_FACTOR at the peak)

    @property
    def per_item(self) -> int:
        return max(1, self.two - self.one)

    def body(self, batch: int) -> int:
        return self.one + (batch - 1) * self.per_item


@dataclass(frozen=True)
class Declared:
    """What the server said it refuses; 0 where it said nothing."""

    max_body_bytes: int = 0  # the local server's --max_body_bytes (REST)
    max_batch_size: int = 0  # the batcher's max_batch_size: a larger task is INVALID_ARGUMENT


def point_memory(plan: PointPlan, settings: PointSettings, cost: RequestCost, batch: int | None = None) -> int:
    """Bytes the point may need on the client at ``batch`` (default the plan's) with the plan's load."""
    batch = plan.batch_size if batch is None else batch
    return _memory(plan.target.protocol, plan.load, settings, cost, batch)


def _memory(protocol: str, load: LoadInfo, settings: PointSettings, cost: RequestCost, batch: int) -> int:
    # counts past any memory held at _HUGE: a batch, users or processes of 400 digits are past float's range
    batch = min(batch, _HUGE)
    load = replace(
        load, processes=min(load.processes, _HUGE), concurrency=load.concurrency and min(load.concurrency, _HUGE)
    )
    body = cost.body(batch)
    drawn = batch * cost.drawn_per_item
    # the batch, drawn and encoded once per process (each child of --processes prepares its own)
    build = max(DRAW_FACTOR * drawn if cost.synthetic_float else drawn, drawn + ENCODE_FACTOR[protocol] * body)
    in_flight = _in_flight(load, settings)
    # gRPC copies the body into each call; each Locust user builds and keeps a body of its own
    own_copy = protocol in ("grpc", "v2-grpc") or load.mode == "locust"
    copies = in_flight if own_copy else min(in_flight, REST_CONNECTIONS * load.processes)
    held = drawn + body  # what stays once built: the drawn batch (kept for the point) and its body
    children = (load.processes - 1) * PROCESS_BYTES if load.processes > 1 else 0
    return int(
        load.processes * max(build, held)
        + in_flight * IN_FLIGHT_BYTES[protocol]
        + copies * body
        + _records(load, settings) * RECORD_BYTES
        + children
    )


def _largest(fits: Callable[[int], bool], upper: int) -> int:
    """The largest n in [1, upper] with fits(n) (fits is monotone, decreasing), 0 when none."""
    if not fits(1):
        return 0
    low, high = 1, upper
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def check_request(
    plan: PointPlan,
    settings: PointSettings,
    cost: RequestCost,
    declared: Declared | None = None,
    memory: Memory | None = None,
    *,
    model: str = "",
) -> None:
    """Refuse the plan's batch (or its load, when the batch alone fits) before anything of it is drawn."""
    check_batch(plan.target.protocol, model or plan.model, plan.batch_size, plan.load, settings, cost, declared, memory)


def check_batch(
    protocol: str,
    model: str,
    batch: int,
    load: LoadInfo,
    settings: PointSettings,
    cost: RequestCost,
    declared: Declared | None = None,
    memory: Memory | None = None,
) -> None:
    """``check_request`` for a load no PointPlan describes: Locust's users (``LoadInfo("locust",
    concurrency=users)``: each builds and keeps its own body) or the pipeline's batches in flight."""
    declared = declared or Declared()
    if protocol in ("grpc", "v2-grpc"):
        most = largest_batch(cost.one, cost.two)
        if batch > most:
            raise InvalidValue(
                "batch_size",
                batch,
                f"at most {most} for {model}'s input over gRPC ({cost.per_item} bytes per item): a request is one "
                "protobuf message and protobuf serializes none past 2 GB",
            )
    if declared.max_batch_size and batch > declared.max_batch_size:
        raise InvalidValue(
            "batch_size",
            batch,
            f"at most {declared.max_batch_size}: the server batches at most max_batch_size {declared.max_batch_size} "
            "rows and refuses a larger request (INVALID_ARGUMENT); raise its max_batch_size (batching parameters) "
            "or lower the batch",
        )
    if declared.max_body_bytes and cost.body(batch) > declared.max_body_bytes:
        most = max(0, (declared.max_body_bytes - cost.one) // cost.per_item + 1)
        raise InvalidValue(
            "batch_size",
            batch,
            f"at most {most} for {model}'s input over REST: a batch of {batch} is a {_size(cost.body(batch))} body "
            f"and the server refuses any past {_size(declared.max_body_bytes)} (its --max_body_bytes); raise that, "
            "lower the batch, or use grpc://",
        )
    memory = memory or memory_available()
    usable = memory.usable

    def fits_batch(b: int) -> bool:
        return _memory(protocol, load, settings, cost, b) <= usable

    if fits_batch(batch):
        return
    needed = _memory(protocol, load, settings, cost, batch)
    why = (
        f"a batch of {batch} is a {_size(cost.body(batch))} body over {protocol}, built at about "
        f"{ENCODE_FACTOR[protocol]:g}x its size"
        + (f", sent by {load.processes} processes" if load.processes > 1 else "")
        + (
            f", {load.concurrency} users each keeping its own"
            if load.mode == "locust"
            else f", {_in_flight(load, settings)} requests in flight"
            if _in_flight(load, settings) > 1
            else ""
        )
        + f": about {_size(needed)} in all, and {memory.describe()}"
    )
    remedy = "free memory, lower it" + (
        ", or use grpc:// (a smaller body, cheaper to build)" if protocol == "rest" else ""
    )

    def fits_load(concurrency: int | None, processes: int) -> bool:
        changed = replace(load, concurrency=concurrency, processes=processes)
        return _memory(protocol, changed, settings, cost, batch) <= usable

    # the batch fits on its own: name the number of the load that does not
    if load.processes > 1 and fits_load(load.concurrency, 1):
        most = _largest(lambda p: fits_load(load.concurrency, p), load.processes)
        raise InvalidValue("processes", load.processes, f"at most {most} at batch {batch}: {why}; {remedy}")
    if load.mode != "open" and (load.concurrency or 1) > 1 and fits_load(1, load.processes):
        most = _largest(lambda c: fits_load(c, load.processes), load.concurrency or 1)
        raise InvalidValue("concurrency", load.concurrency, f"at most {most} at batch {batch}: {why}; {remedy}")
    most = _largest(fits_batch, batch)
    where = "" if most else " (not even 1 with this load)"
    raise InvalidValue("batch_size", batch, f"at most {most}{where}: {why}; {remedy}")
