"""Records, latency histograms, the typed results model, the results file format and run metadata."""

from serve_bench.stats._energy import NOT_MEASURED, EnergySource, EnergyView
from serve_bench.stats._figures import (
    PERCENTILE_NAMES,
    ClientView,
    Codec,
    Counts,
    Figures,
    Interval,
    Latency,
    Percentiles,
    Stability,
    Throughput,
    Window,
)
from serve_bench.stats._histogram import (
    decode,
    encode,
    histogram_of,
    merge,
    new_histogram,
)
from serve_bench.stats._inputs import InputSource, StreamFigures
from serve_bench.stats._metadata import collect_run_metadata, config_hash, cpu_model, gpu_names
from serve_bench.stats._point import SCHEMA_VERSION, LoadInfo, Point, Target, point_key
from serve_bench.stats._records import OK, RequestRecord
from serve_bench.stats._results import (
    BEST_BATCHING_FILE,
    BEST_MLSERVER_SERVER_SETTINGS_FILE,
    BEST_MLSERVER_SETTINGS_FILE,
    BEST_TRITON_CONFIG_FILE,
    POINTS_FILE,
    RUN_FILE,
    TUNE_ANSWER_FILE,
    ResultsFileError,
    ResultsWriter,
    read_points,
    read_run,
)
from serve_bench.stats._schema import RUN_SCHEMA_VERSION, SCHEMA_HISTORY
from serve_bench.stats._server_view import IMPRECISE, ServerView
from serve_bench.stats._slo import Slo

__all__ = [
    "BEST_BATCHING_FILE",
    "BEST_MLSERVER_SERVER_SETTINGS_FILE",
    "BEST_MLSERVER_SETTINGS_FILE",
    "BEST_TRITON_CONFIG_FILE",
    "IMPRECISE",
    "NOT_MEASURED",
    "OK",
    "PERCENTILE_NAMES",
    "POINTS_FILE",
    "RUN_FILE",
    "RUN_SCHEMA_VERSION",
    "SCHEMA_HISTORY",
    "SCHEMA_VERSION",
    "TUNE_ANSWER_FILE",
    "ClientView",
    "Codec",
    "Counts",
    "EnergySource",
    "EnergyView",
    "Figures",
    "InputSource",
    "Interval",
    "Latency",
    "LoadInfo",
    "Percentiles",
    "Point",
    "RequestRecord",
    "ResultsFileError",
    "ResultsWriter",
    "ServerView",
    "Slo",
    "Stability",
    "StreamFigures",
    "Target",
    "Throughput",
    "Window",
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
    "read_run",
]
