"""The local server's configuration: tensorflow_model_server's flags and config files."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from serve_bench import _protos
from serve_bench.errors import UserError

__all__ = [
    "BatchingParams",
    "ModelEntry",
    "ServerConfig",
    "build_arg_parser",
    "config_from_args",
    "parse_batching_parameters",
    "parse_monitoring_config",
]

DEFAULT_METRICS_PATH = "/monitoring/prometheus/metrics"


@dataclass(frozen=True)
class BatchingParams:
    """TF Serving's BatchingParameters with its defaults (batching_session / shared_batch_scheduler)."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = os.cpu_count() or 1
    thread_pool_name: str = "batch_threads"
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False


@dataclass(frozen=True)
class ModelEntry:
    name: str
    base_path: Path
    version_labels: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ServerConfig:
    models: tuple[ModelEntry, ...]
    host: str = "127.0.0.1"
    port: int = 8500
    rest_api_port: int = 8501
    batching: BatchingParams | None = None
    metrics_path: str | None = None
    enable_model_warmup: bool = True
    max_body_bytes: int = 256 * 1024 * 1024
    unbatched_threads: int = 16
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    ignored_flags: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()


def _parse_text(path: str, message_name: str, what: str) -> Any:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"cannot read {what} {path!r}: {exc.strerror or exc}") from exc
    try:
        return text_format.Parse(text, _protos.message(message_name)())
    except text_format.ParseError as exc:
        # ParseError's text starts with "line:column : problem"
        raise UserError(f"{what} {path} does not parse at line {exc.GetLine()}: {str(exc).split(' : ', 1)[-1]}") from exc


def parse_batching_parameters(path: str) -> BatchingParams:
    proto = _parse_text(path, "tensorflow.serving.BatchingParameters", "batching parameters file")
    defaults = BatchingParams()
    values: dict[str, Any] = {}
    for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads",
                 "thread_pool_name"):
        if proto.HasField(name):
            values[name] = getattr(proto, name).value
    values["allowed_batch_sizes"] = tuple(proto.allowed_batch_sizes)
    values["pad_variable_length_inputs"] = proto.pad_variable_length_inputs
    params = BatchingParams(**{**defaults.__dict__, **values})
    for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
        if getattr(params, name) < 1:
            raise UserError(f"batching parameters file {path}: {name} must be at least 1")
    if params.batch_timeout_micros < 0:
        raise UserError(f"batching parameters file {path}: batch_timeout_micros must not be negative")
    allowed = params.allowed_batch_sizes
    if allowed:
        if list(allowed) != sorted(set(allowed)) or allowed[0] < 1:
            raise UserError(f"batching parameters file {path}: allowed_batch_sizes must be increasing positive sizes")
        if allowed[-1] != params.max_batch_size:
            raise UserError(
                f"batching parameters file {path}: the last allowed_batch_sizes entry ({allowed[-1]}) "
                f"must equal max_batch_size ({params.max_batch_size}), as TF Serving requires"
            )
    return params


def parse_monitoring_config(path: str) -> str | None:
    """The metrics path when Prometheus export is enabled, else None."""
    proto = _parse_text(path, "tensorflow.serving.MonitoringConfig", "monitoring config file")
    if not proto.prometheus_config.enable:
        return None
    return proto.prometheus_config.path or DEFAULT_METRICS_PATH


def _resolve_base_path(base_path: str, models_dir: Path, name: str) -> Path:
    path = Path(base_path)
    if path.is_dir():
        return path
    # models.config names container paths (/models/<name>); map them onto models_dir here.
    parts = path.parts
    if len(parts) >= 2 and parts[0] == "/" and parts[1] == "models":
        candidate = models_dir.joinpath(*parts[2:])
        if candidate.is_dir():
            return candidate
    raise UserError(
        f"model {name!r}: base path {base_path} does not exist"
        + (f" (nor {models_dir.joinpath(*parts[2:])})" if len(parts) > 2 and parts[1] == "models" else "")
        + "; export it first (serve-bench export) or pass --models_dir"
    )


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


# tensorflow_model_server flags the local server accepts (so one compose file or
# script drives either server) but does not act on.
_ACCEPTED_IGNORED = (
    "file_system_poll_wait_seconds",
    "model_config_file_poll_wait_seconds",
    "tensorflow_session_parallelism",
    "rest_api_num_threads",
    "rest_api_timeout_in_ms",
    "grpc_channel_arguments",
    "grpc_max_threads",
    "enable_signature_method_name_check",
    "xla_cpu_compilation_enabled",
    "allow_version_labels_for_unavailable_models",
    "per_process_gpu_memory_fraction",
)


def build_arg_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="serve-bench serve")
    flag = p.add_argument
    flag("--port", type=int, default=8500, help="gRPC port (default 8500)")
    flag("--rest_api_port", type=int, default=8501, help="REST port (default 8501; 0 disables)")
    flag("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    flag("--model_name", default=None, help="serve one model under this name")
    flag("--model_base_path", default=None, help="that model's base path (holding version directories)")
    flag("--model_config_file", default=None, help="text model_config_list (e.g. exported_models/models.config)")
    flag("--models_dir", default="exported_models",
         help="where /models/<name> base paths resolve when /models does not exist (default exported_models/)")
    flag("--enable_batching", type=_bool, nargs="?", const=True, default=False, help="batch concurrent requests")
    flag("--batching_parameters_file", default=None, help="TF Serving batching_parameters.txt")
    flag("--monitoring_config_file", default=None, help="text MonitoringConfig enabling Prometheus metrics")
    flag("--enable_model_warmup", type=_bool, nargs="?", const=True, default=True,
         help="replay assets.extra/tf_serving_warmup_requests at load (default true)")
    flag("--tensorflow_intra_op_parallelism", type=int, default=0, help="TensorFlow intra-op threads (0: auto)")
    flag("--tensorflow_inter_op_parallelism", type=int, default=0, help="TensorFlow inter-op threads (0: auto)")
    flag("--max_body_bytes", type=int, default=256 * 1024 * 1024, help="largest REST request body (default 256 MiB)")
    for name in _ACCEPTED_IGNORED:
        flag(f"--{name}", default=None, help=argparse.SUPPRESS)
    return p


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    models_dir = Path(args.models_dir)
    entries: list[ModelEntry] = []
    notices: list[str] = []
    if args.model_config_file:
        if args.model_name or args.model_base_path:
            raise UserError("give either --model_config_file or --model_name/--model_base_path, not both")
        proto = _parse_text(args.model_config_file, "tensorflow.serving.ModelServerConfig", "model config file")
        for entry in proto.model_config_list.config:
            platform = entry.model_platform or "tensorflow"
            if platform != "tensorflow":
                raise UserError(f"model {entry.name!r}: model_platform {platform!r} is not served here (tensorflow only)")
            if entry.HasField("model_version_policy") and not entry.model_version_policy.HasField("latest"):
                notices.append(f"model {entry.name!r}: model_version_policy is not honoured by the local server; "
                               "it serves the latest version only")
            entries.append(ModelEntry(entry.name, _resolve_base_path(entry.base_path, models_dir, entry.name),
                                      dict(entry.version_labels)))
        if not entries:
            raise UserError(f"model config file {args.model_config_file} lists no models; export one first")
    elif args.model_base_path:
        name = args.model_name or "default"
        entries.append(ModelEntry(name, _resolve_base_path(args.model_base_path, models_dir, name)))
    else:
        raise UserError("no model to serve: pass --model_config_file, or --model_name and --model_base_path")

    batching = None
    if args.enable_batching:
        batching = parse_batching_parameters(args.batching_parameters_file) if args.batching_parameters_file \
            else BatchingParams()
    elif args.batching_parameters_file:
        raise UserError("--batching_parameters_file needs --enable_batching=true")
    metrics_path = parse_monitoring_config(args.monitoring_config_file) if args.monitoring_config_file else None
    for port_flag in ("port", "rest_api_port"):
        if not 0 <= getattr(args, port_flag) <= 65535:
            raise UserError(f"--{port_flag} must be between 0 and 65535")
    if args.port == 0:
        raise UserError("--port must be a real port (gRPC cannot be disabled)")
    if metrics_path and not args.rest_api_port:
        raise UserError("metrics are served on the REST port: --monitoring_config_file needs --rest_api_port")
    ignored = tuple(name for name in _ACCEPTED_IGNORED if getattr(args, name) is not None)
    return ServerConfig(
        models=tuple(entries), host=args.host, port=args.port, rest_api_port=args.rest_api_port,
        batching=batching, metrics_path=metrics_path, enable_model_warmup=args.enable_model_warmup,
        max_body_bytes=args.max_body_bytes, intra_op_threads=args.tensorflow_intra_op_parallelism,
        inter_op_threads=args.tensorflow_inter_op_parallelism, ignored_flags=ignored, notices=tuple(notices),
    )
