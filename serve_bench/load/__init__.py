"""Load generation: closed loop (concurrency), open loop (seeded Poisson/constant schedule), payloads."""

from serve_bench.load._analysis import MIN_WINDOW_REQUESTS, analyze, is_stable, stability_of
from serve_bench.load._digest import RunDigest, digest_records, merge_digests
from serve_bench.load._generators import DOWN_AFTER, LoadRun, PointSettings, run_closed_loop, run_open_loop
from serve_bench.load._inputs import InputSet, load_input_data
from serve_bench.load._locust import LOCUST_NOTE, import_locust
from serve_bench.load._multiproc import run_in_processes, split
from serve_bench.load._payload import PAYLOADS, image_size_of, make_inputs, signature_for_payload
from serve_bench.load._schedule import ARRIVALS, arrival_offsets

__all__ = [
    "ARRIVALS",
    "DOWN_AFTER",
    "LOCUST_NOTE",
    "MIN_WINDOW_REQUESTS",
    "PAYLOADS",
    "InputSet",
    "LoadRun",
    "PointSettings",
    "RunDigest",
    "analyze",
    "arrival_offsets",
    "digest_records",
    "image_size_of",
    "import_locust",
    "is_stable",
    "load_input_data",
    "make_inputs",
    "merge_digests",
    "run_closed_loop",
    "run_in_processes",
    "run_open_loop",
    "signature_for_payload",
    "split",
    "stability_of",
]
