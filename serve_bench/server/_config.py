"""The local server's configuration: tensorflow_model_server's flags and config files."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from serve_bench import _protos
from serve_bench._server_facts import TF_SERVING_METRICS_PATH
from serve_bench.errors import UserError
from serve_bench.export import (
    BatchingParametersError,
    BatchingParams,
    parse_batch_sizes,
    read_metadata,
)
from serve_bench.runtimes import OPENVINO, OPENVINO_HINTS, OPENVINO_PRECISIONS, RUNTIMES, RuntimeSettings, record

__all__ = [
    "BatchingParametersError",
    "BatchingParams",
    "ModelEntry",
    "ServerConfig",
    "build_arg_parser",
    "compile_sizes",
    "config_from_args",
    "parse_batching_parameters",
    "parse_monitoring_config",
]


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
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    compile_batch_sizes: tuple[int, ...] = ()  # --compile_batch_sizes: () lets compile_sizes choose
    ignored_flags: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()


# serve's OpenVINO flags and their defaults: given with another --runtime, they are named in a notice
_OPENVINO_DEFAULTS: dict[str, object] = {
    "openvino_performance_hint": "LATENCY",
    "openvino_num_streams": 0,
    "openvino_inference_precision": "f32",
}


# a batcher without allowed_batch_sizes forms every size up to its largest: compiled at load up to this many
MAX_FORMED_SIZES = 64


def compile_sizes(config: ServerConfig, servable: Any) -> tuple[int, ...]:
    """The batch sizes a runtime that compiles per shape builds at load (() for other runtimes):
    --compile_batch_sizes; else the batcher's allowed_batch_sizes (it pads to them, as TF Serving does);
    else every size it can form, up to MAX_FORMED_SIZES (past that, powers of two and its largest);
    else the sizes of the export's warm-up records (what TF Serving replays at load), else 1."""
    if not record(config.runtime.runtime).compiles_per_shape:
        return ()
    if config.compile_batch_sizes:
        return config.compile_batch_sizes
    batching = config.batching
    if batching is not None:
        largest = batching.execution_batch_size
        if batching.allowed_batch_sizes:
            return tuple(batching.allowed_batch_sizes)
        if largest <= MAX_FORMED_SIZES:
            return tuple(range(1, largest + 1))
        return tuple(sorted({*(1 << i for i in range(largest.bit_length()) if 1 << i <= largest), largest}))
    facts = read_metadata(servable.path) or {}
    return tuple(int(size) for size in facts.get("warmup_batch_sizes") or (1,))


def _batch_sizes(text: str) -> tuple[int, ...]:
    try:
        return parse_batch_sizes(text, "compile_batch_sizes")
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _read_text(path: str, what: str) -> str:
    """A config file's text; UserError naming the file when it cannot be read or is not UTF-8 (a text
    proto is UTF-8: protobuf's parser would refuse it too)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {what} {path!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{what} {path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        ) from None


def _parse_text(path: str, message_name: str, what: str) -> Any:
    text = _read_text(path, what)
    try:
        return text_format.Parse(text, _protos.message(message_name)())
    except text_format.ParseError as exc:
        # ParseError's text starts with "line:column : problem"
        raise UserError(
            f"{what} {path} does not parse at line {exc.GetLine()}: {str(exc).split(' : ', 1)[-1]}"
        ) from exc


def parse_batching_parameters(path: str) -> BatchingParams:
    """Read and validate a batching_parameters.txt as tensorflow_model_server does (UserError if refused)."""
    text = _read_text(path, "batching parameters file")
    return BatchingParams.from_text(text, f"batching parameters file {path}")


def parse_monitoring_config(path: str) -> str | None:
    """The metrics path when Prometheus export is enabled, else None."""
    proto = _parse_text(path, "tensorflow.serving.MonitoringConfig", "monitoring config file")
    if not proto.prometheus_config.enable:
        return None
    return proto.prometheus_config.path or TF_SERVING_METRICS_PATH


def _resolve_base_path(base_path: str, models_dir: Path, name: str, runtime: str = "tensorflow") -> Path:
    path = Path(base_path)
    if path.is_dir():
        return path
    kept = record(runtime)
    if kept.standalone and kept.directory is not None:
        # a host without TensorFlow has the runtime's own copy only: exported_models/<directory>/<model>
        for candidate in (path, models_dir.joinpath(*path.parts[2:]) if path.parts[:2] == ("/", "models") else path):
            if (candidate.parent / kept.directory / candidate.name).is_dir():
                return candidate
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
    "rest_api_num_threads",
    "rest_api_timeout_in_ms",
    "grpc_channel_arguments",
    "grpc_max_threads",
    "enable_signature_method_name_check",
    "xla_cpu_compilation_enabled",
    "allow_version_labels_for_unavailable_models",
    "per_process_gpu_memory_fraction",
    # the rest of main.cc's flag list (tensorflow_serving/model_servers/main.cc:87-317)
    "grpc_socket_path",
    "rest_api_enable_cors_support",
    "enable_per_model_batching_parameters",
    "num_load_threads",
    "num_unload_threads",
    "max_num_load_retries",
    "load_retry_interval_micros",
    "flush_filesystem_caches",
    "tensorflow_session_config_file",
    "use_alts_credentials",
    "ssl_config_file",
    "platform_config_file",
    "saved_model_tags",
    "num_request_iterations_for_warmup",
    "remove_unused_fields_from_bundle_metagraph",
    "prefer_tflite_model",
    "num_tflite_pools",
    "num_tflite_interpreters_per_pool",
    "xla_gpu_compilation_enabled",
    "enable_profiler",
    "thread_pool_factory_config_file",
    "mixed_precision",
    "skip_initialize_tpu",
    "enable_grpc_healthcheck_service",
    "enable_serialization_as_tensor_content",
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
    flag(
        "--models_dir",
        default="exported_models",
        help="where /models/<name> base paths resolve when /models does not exist (default exported_models/)",
    )
    flag("--enable_batching", type=_bool, nargs="?", const=True, default=False, help="batch concurrent requests")
    flag("--batching_parameters_file", default=None, help="TF Serving batching_parameters.txt")
    flag("--monitoring_config_file", default=None, help="text MonitoringConfig enabling Prometheus metrics")
    flag(
        "--enable_model_warmup",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        help="replay assets.extra/tf_serving_warmup_requests at load (default true)",
    )
    flag(
        "--tensorflow_intra_op_parallelism",
        type=int,
        default=0,
        help="threads TensorFlow uses inside one op (default 0: auto)",
    )
    flag(
        "--tensorflow_inter_op_parallelism",
        type=int,
        default=0,
        help="ops TensorFlow runs at the same time (default 0: auto)",
    )
    flag(
        "--tensorflow_session_parallelism",
        type=int,
        default=0,
        help="both of the above at once, when neither is given (default 0: auto)",
    )
    # serve-bench's own flags (tensorflow_model_server has none of these): which runtime runs serving_default
    flag(
        "--runtime",
        choices=RUNTIMES,
        default="tensorflow",
        help="run serving_default on this runtime (the copy export made under exported_models/onnx|openvino|jax); "
        "serving_bytes runs on TensorFlow (not served with jax, which runs without it). The intra/inter-op "
        "flags above set ONNX Runtime's and OpenVINO's threads too",
    )
    flag(
        "--openvino_performance_hint",
        choices=OPENVINO_HINTS,
        default=_OPENVINO_DEFAULTS["openvino_performance_hint"],
        help="OpenVINO's PERFORMANCE_HINT (default LATENCY: one stream; the server batches)",
    )
    flag(
        "--openvino_num_streams",
        type=int,
        default=_OPENVINO_DEFAULTS["openvino_num_streams"],
        help="OpenVINO's NUM_STREAMS (default 0: as the hint says)",
    )
    flag(
        "--openvino_inference_precision",
        choices=OPENVINO_PRECISIONS,
        default=_OPENVINO_DEFAULTS["openvino_inference_precision"],
        help="OpenVINO's INFERENCE_PRECISION_HINT (default f32: its own default is bf16 where the CPU has it)",
    )
    flag(
        "--device",
        default="cpu",
        help="where the runtime runs the model: cpu or gpu (the jax runtime; the others run on the CPU)",
    )
    flag(
        "--precision",
        default="fp32",
        help="the runtime's arithmetic: fp32, tf32 (GPU tensor cores with TF32 inputs) or bf16 "
        "(the jax runtime; the others compute float32)",
    )
    flag(
        "--compile_batch_sizes",
        type=_batch_sizes,
        default=(),
        help="batch sizes a runtime that compiles per shape (jax) builds before the model is AVAILABLE "
        "(default: the batcher's allowed_batch_sizes, else every size it can form up to 64, else the export's "
        "warm-up sizes)",
    )
    flag("--max_body_bytes", type=int, default=256 * 1024 * 1024, help="largest REST request body (default 256 MiB)")
    for name in _ACCEPTED_IGNORED:
        # nargs="?": TF's boolean flags may be given bare (--enable_profiler)
        flag(f"--{name}", nargs="?", const="true", default=None, help=argparse.SUPPRESS)
    return p


# The most op threads the local server starts: beyond the largest machines' hardware threads (100000 grew the
# server by ~70 MB/s until memory ran out, and it never served)
MAX_OP_THREADS = 1024


def _parallelism(args: argparse.Namespace) -> tuple[int, int]:
    """(intra, inter) op threads from the three flags, as model_servers/server.cc:256-279 combines them."""
    intra, inter = args.tensorflow_intra_op_parallelism, args.tensorflow_inter_op_parallelism
    session = args.tensorflow_session_parallelism
    for name, value in (
        ("tensorflow_intra_op_parallelism", intra),
        ("tensorflow_inter_op_parallelism", inter),
        ("tensorflow_session_parallelism", session),
    ):
        if value < 0:
            raise UserError(f"--{name} must be 0 (auto) or a number of threads; got {value}")
        if value > MAX_OP_THREADS:  # TF Serving takes any int32; a pool that large grows without end and never serves
            raise UserError(
                f"--{name} {value}: at most {MAX_OP_THREADS} threads (this machine has {os.cpu_count()} CPUs; "
                "0 lets the runtime choose)"
            )
    if intra > 0 and inter > 0 and session > 0:
        raise UserError(
            "Either configure --tensorflow_session_parallelism or (--tensorflow_intra_op_parallelism, "
            "--tensorflow_inter_op_parallelism) separately. You cannot configure all."
        )
    if intra > 0 or inter > 0:
        return intra, inter
    return session, session


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
                raise UserError(
                    f"model {entry.name!r}: model_platform {platform!r} is not served here (tensorflow only)"
                )
            if entry.HasField("model_version_policy") and not entry.model_version_policy.HasField("latest"):
                notices.append(
                    f"model {entry.name!r}: model_version_policy is not honoured by the local server; "
                    "it serves the latest version only"
                )
            entries.append(
                ModelEntry(
                    entry.name,
                    _resolve_base_path(entry.base_path, models_dir, entry.name, args.runtime),
                    dict(entry.version_labels),
                )
            )
        if not entries:
            raise UserError(f"model config file {args.model_config_file} lists no models; export one first")
    elif args.model_base_path:
        name = args.model_name or "default"
        entries.append(ModelEntry(name, _resolve_base_path(args.model_base_path, models_dir, name, args.runtime)))
    else:
        raise UserError("no model to serve: pass --model_config_file, or --model_name and --model_base_path")

    batching = None
    if args.enable_batching:
        # without a file TF Serving only names the pool (model_servers/server.cc:229-231)
        batching = (
            parse_batching_parameters(args.batching_parameters_file)
            if args.batching_parameters_file
            else BatchingParams(thread_pool_name="model_server_batch_threads")
        )
    elif args.batching_parameters_file:
        raise UserError("--batching_parameters_file needs --enable_batching=true")
    for port_flag in ("port", "rest_api_port"):
        if not 0 <= getattr(args, port_flag) <= 65535:
            raise UserError(f"--{port_flag} must be between 0 and 65535")
    if args.port == 0:
        raise UserError("--port must be a real port (gRPC cannot be disabled)")
    if args.max_body_bytes < 1:  # 0 or less is no body at all (a body smaller than any request's is the user's call)
        raise UserError(f"--max_body_bytes must be a whole number of bytes >= 1, got {args.max_body_bytes}")
    shared = args.rest_api_port == args.port  # it was bound after loading and said as "address already in use"
    if shared:  # as TF Serving: said, then served without REST (server.cc:455-459, 9d981c5)
        notices.append(
            "server_options.http_port cannot be same as grpc_port. Please use a different port for HTTP/REST API. "
            "Skipped exporting HTTP/REST API."
        )
    rest_api_port = 0 if shared else args.rest_api_port
    # TF Serving reads its monitoring config inside its HTTP branch only (server.cc:437-444): without REST, unread
    watched = args.monitoring_config_file and not shared
    metrics_path = parse_monitoring_config(args.monitoring_config_file) if watched else None
    if metrics_path and not rest_api_port:
        raise UserError("metrics are served on the REST port: --monitoring_config_file needs --rest_api_port")
    ignored = tuple(name for name in _ACCEPTED_IGNORED if getattr(args, name) is not None)
    intra, inter = _parallelism(args)
    if args.runtime != OPENVINO.name:
        given = [f"--{name}" for name, default in _OPENVINO_DEFAULTS.items() if getattr(args, name) != default]
        if given:
            notices.append(
                f"{', '.join(given)} set OpenVINO only and --runtime is {args.runtime}: ignored "
                "(add --runtime openvino to serve the OpenVINO copy)"
            )
    kept = record(args.runtime)
    if kept.compiles_per_shape and batching is not None and not args.compile_batch_sizes:
        if not batching.allowed_batch_sizes and batching.execution_batch_size > MAX_FORMED_SIZES:
            notices.append(
                f"the {args.runtime} runtime compiles one program per batch size: without allowed_batch_sizes the "
                f"batcher forms any size up to {batching.execution_batch_size}, and those not compiled at load "
                "(powers of two and the largest are) compile on first use, seconds inside a request; set "
                "allowed_batch_sizes or --compile_batch_sizes"
            )
    if not kept.compiles_per_shape and args.compile_batch_sizes:
        notices.append(f"--compile_batch_sizes is for runtimes that compile per shape; {args.runtime} does not")
    return ServerConfig(
        models=tuple(entries),
        host=args.host,
        port=args.port,
        rest_api_port=rest_api_port,
        batching=batching,
        metrics_path=metrics_path,
        enable_model_warmup=args.enable_model_warmup,
        max_body_bytes=args.max_body_bytes,
        intra_op_threads=intra,
        inter_op_threads=inter,
        runtime=RuntimeSettings(
            args.runtime,
            intra,
            inter,
            args.openvino_performance_hint,
            args.openvino_num_streams,
            args.openvino_inference_precision,
            args.device,
            args.precision,
        ),
        compile_batch_sizes=args.compile_batch_sizes,
        ignored_flags=ignored,
        notices=tuple(notices),
    )
