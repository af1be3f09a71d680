"""The local TF-Serving-compatible server: ``serve-bench serve``.

It speaks TF Serving's gRPC and REST APIs, takes tensorflow_model_server's
flags and config files, batches as TF Serving's batching guide describes, and
exports TF Serving's metric names. It never claims to be TF Serving: it names
itself ``serve-bench-local/<version>``, and results record its kind as ``local``.
"""

from serve_bench.server._app import LocalServer
from serve_bench.server._config import (
    ModelEntry,
    ServerConfig,
    build_arg_parser,
    config_from_args,
    parse_batching_parameters,
    parse_monitoring_config,
)
from serve_bench.server._errors import ServingError

__all__ = [
    "LocalServer",
    "ModelEntry",
    "ServerConfig",
    "ServingError",
    "build_arg_parser",
    "config_from_args",
    "parse_batching_parameters",
    "parse_monitoring_config",
]
