"""Load generation: closed loop (concurrency), open loop (seeded Poisson/constant schedule), payloads,
and what to measure at a point (``PointPlan``) with the one set of checks of a point's batch size,
load and settings (``check_batch_size``, ``check_load``, ``check_settings``) and the bounds on what they
ask of the client's memory (``check_schedule``, ``check_request``; docs/bounds.md)."""

from serve_bench.load._analysis import MIN_WINDOW_REQUESTS, analyze, is_stable, stability_of
from serve_bench.load._bounds import (
    Declared,
    Memory,
    RequestCost,
    check_batch,
    check_request,
    check_schedule,
    check_window,
    memory_available,
    point_memory,
)
from serve_bench.load._checks import (
    check_batch_size,
    check_load,
    check_seed,
    check_settings,
    check_timeout,
    positive_int,
    positive_number,
)
from serve_bench.load._digest import RunDigest, digest_records, merge_digests
from serve_bench.load._generators import DOWN_AFTER, LoadRun, PointSettings, run_closed_loop, run_open_loop
from serve_bench.load._inputs import InputSet, load_input_data
from serve_bench.load._locust import LOCUST_NOTE, import_locust
from serve_bench.load._multiproc import run_in_processes, split
from serve_bench.load._payload import (
    PAYLOADS,
    PROTOBUF_LIMIT,
    image_size_of,
    largest_batch,
    make_inputs,
    signature_for_payload,
)
from serve_bench.load._plan import PointPlan
from serve_bench.load._recorder import FIRST_ERROR, Recorder, RecordingClient, first_errors, what_failed
from serve_bench.load._schedule import ARRIVALS, MAX_RATE, ArrivalSchedule, arrival_offsets

__all__ = [
    "ARRIVALS",
    "DOWN_AFTER",
    "FIRST_ERROR",
    "LOCUST_NOTE",
    "MAX_RATE",
    "MIN_WINDOW_REQUESTS",
    "PAYLOADS",
    "PROTOBUF_LIMIT",
    "ArrivalSchedule",
    "Declared",
    "InputSet",
    "LoadRun",
    "Memory",
    "PointPlan",
    "PointSettings",
    "Recorder",
    "RecordingClient",
    "RequestCost",
    "RunDigest",
    "analyze",
    "arrival_offsets",
    "check_batch",
    "check_batch_size",
    "check_load",
    "check_request",
    "check_schedule",
    "check_seed",
    "check_settings",
    "check_timeout",
    "check_window",
    "digest_records",
    "first_errors",
    "image_size_of",
    "import_locust",
    "is_stable",
    "largest_batch",
    "load_input_data",
    "make_inputs",
    "memory_available",
    "merge_digests",
    "point_memory",
    "positive_int",
    "positive_number",
    "run_closed_loop",
    "run_in_processes",
    "run_open_loop",
    "signature_for_payload",
    "split",
    "stability_of",
    "what_failed",
]
