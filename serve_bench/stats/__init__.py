"""Records, latency histograms, the results file format and run metadata."""

from serve_bench.stats._histogram import (
    PERCENTILES,
    decode,
    encode,
    histogram_of,
    merge,
    new_histogram,
    summarize,
)
from serve_bench.stats._locust import LOCUST_NOTE, import_locust
from serve_bench.stats._metadata import collect_run_metadata, config_hash, cpu_model, gpu_names
from serve_bench.stats._point import SCHEMA_VERSION, LoadInfo, Point, TargetInfo, point_key
from serve_bench.stats._records import OK, RequestRecord
from serve_bench.stats._results import POINTS_FILE, RUN_FILE, ResultsWriter, read_points

__all__ = [
    "LOCUST_NOTE",
    "import_locust",
    "OK",
    "PERCENTILES",
    "POINTS_FILE",
    "RUN_FILE",
    "SCHEMA_VERSION",
    "LoadInfo",
    "Point",
    "RequestRecord",
    "ResultsWriter",
    "TargetInfo",
    "collect_run_metadata",
    "config_hash",
    "cpu_model",
    "decode",
    "encode",
    "gpu_names",
    "histogram_of",
    "merge",
    "new_histogram",
    "point_key",
    "read_points",
    "summarize",
]
