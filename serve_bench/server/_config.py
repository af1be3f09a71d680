"""The local server's configuration: tensorflow_model_server's flags and config files."""

from __future__ import annotations

import argparse
import itertools
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from serve_bench import _protos
from serve_bench.errors import UserError

__all__ = [
    "BatchingParametersError",
    "BatchingParams",
    "ModelEntry",
    "ServerConfig",
    "build_arg_parser",
    "config_from_args",
    "parse_batching_parameters",
    "parse_monitoring_config",
]

DEFAULT_METRICS_PATH = "/monitoring/prometheus/metrics"


class BatchingParametersError(UserError):
    """A BatchingParameters value TF Serving refuses (the message uses TF Serving's wording)."""


@dataclass(frozen=True)
class BatchingParams:
    """TF Serving's BatchingParameters (session_bundle_config.proto) with the defaults it applies.

    Defaults are SharedBatchScheduler's QueueOptions/Options (max_batch_size 1000,
    timeout 0, 10 enqueued batches, one batch thread per CPU, pool "batch_threads").
    ``max_execution_batch_size`` None means "not set": with splitting on, TF Serving
    then executes batches of up to max_batch_size (bundle_factory_util.h GetQueueOptions).
    Build one from text with :meth:`from_text`, check it with :meth:`validate` and
    write it for ``--batching_parameters_file`` with :meth:`to_text`.
    """

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = os.cpu_count() or 1
    thread_pool_name: str = "batch_threads"
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int | None = None

    @property
    def execution_batch_size(self) -> int:
        """The largest batch the scheduler forms (shared_batch_scheduler.h GetMaxExecutionBatchSize)."""
        if self.enable_large_batch_splitting and self.max_execution_batch_size is not None:
            return self.max_execution_batch_size
        return self.max_batch_size

    @property
    def queue_capacity_batches(self) -> int:
        """max_enqueued_batches as the scheduler uses it: SharedBatchScheduler::AddQueue turns 0
        into 1 when splitting is off, for old configurations that relied on it."""
        if not self.enable_large_batch_splitting and self.max_enqueued_batches == 0:
            return 1
        return self.max_enqueued_batches

    def validate(self) -> BatchingParams:
        """Refuse what tensorflow_model_server refuses, with its wording; return self when valid.

        Checks follow shared_batch_scheduler.h (Create, AddQueueAfterRewritingOptions) and
        bundle_factory_util.cc WrapSessionForBatching. Raises BatchingParametersError.
        """

        def fail(message: str) -> None:
            raise BatchingParametersError(message)

        if self.num_batch_threads < 1:
            fail(f"num_batch_threads must be positive; was {self.num_batch_threads}")
        if self.max_batch_size < 1:
            # TF Serving maps max_batch_size onto the queue's input_batch_size_limit
            fail(f"input_batch_size_limit (max_batch_size) must be positive; was {self.max_batch_size}")
        if self.batch_timeout_micros < 0:
            fail(f"batch_timeout_micros must be non-negative; was {self.batch_timeout_micros}")
        if self.queue_capacity_batches < 1:
            fail(f"max_enqueued_batches must be positive; was {self.max_enqueued_batches}")
        if self.enable_large_batch_splitting:
            if self.execution_batch_size < 1:
                fail(f"max_execution_batch_size must be positive; was {self.execution_batch_size}")
            if self.max_batch_size < self.execution_batch_size:
                fail(
                    "When enable_large_batch_splitting is true, input_batch_size_limit must be greater than or "
                    f"equal to max_execution_batch_size. (max_batch_size {self.max_batch_size}, "
                    f"max_execution_batch_size {self.execution_batch_size})"
                )
        allowed = self.allowed_batch_sizes
        if allowed:
            if any(size < 1 for size in allowed):
                fail(f"allowed_batch_sizes entries must be positive; got {list(allowed)}")
            if any(b <= a for a, b in itertools.pairwise(allowed)):
                fail("allowed_batch_sizes entries must be monotonically increasing")
            if allowed[-1] != self.max_batch_size:
                fail(
                    "Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
                    f"{allowed[-1]}; expected {self.max_batch_size}"
                )
        return self

    def warnings(self) -> tuple[str, ...]:
        """Valid settings that probably do not do what the user meant (TF Serving accepts them silently)."""
        notes: list[str] = []
        if self.max_execution_batch_size is not None and not self.enable_large_batch_splitting:
            notes.append("max_execution_batch_size is ignored unless enable_large_batch_splitting is true")
        if self.enable_large_batch_splitting and self.allowed_batch_sizes:
            limit = self.execution_batch_size
            fitting = [s for s in self.allowed_batch_sizes if s >= limit]
            if fitting and fitting[0] != limit:
                notes.append(
                    f"batches of up to {limit} (max_execution_batch_size) are padded to the next allowed "
                    f"size; a batch of {limit} becomes {fitting[0]}: add {limit} to allowed_batch_sizes"
                )
        return tuple(notes)

    @classmethod
    def from_text(cls, text: str, source: str = "batching parameters") -> BatchingParams:
        """Parse a text-format BatchingParameters (what TF Serving reads) and validate it.

        Unset fields keep TF Serving's defaults. Raises BatchingParametersError naming ``source``.
        """
        try:
            proto = text_format.Parse(text, _protos.message("tensorflow.serving.BatchingParameters")())
        except text_format.ParseError as exc:
            # ParseError's text starts with "line:column : problem"
            raise BatchingParametersError(
                f"{source} does not parse at line {exc.GetLine()}: {str(exc).split(' : ', 1)[-1]}"
            ) from exc
        values: dict[str, Any] = {}
        for name in (
            "max_batch_size",
            "batch_timeout_micros",
            "max_enqueued_batches",
            "num_batch_threads",
            "thread_pool_name",
            "enable_large_batch_splitting",
            "max_execution_batch_size",
        ):
            if proto.HasField(name):
                values[name] = getattr(proto, name).value
        values["allowed_batch_sizes"] = tuple(proto.allowed_batch_sizes)
        values["pad_variable_length_inputs"] = proto.pad_variable_length_inputs
        params = replace(cls(), **values)
        try:
            return params.validate()
        except BatchingParametersError as exc:
            raise BatchingParametersError(f"{source}: {exc}") from None

    def to_text(self) -> str:
        """Text-format BatchingParameters for ``--batching_parameters_file`` (TF Serving parses it as is)."""
        lines = [
            f"max_batch_size {{ value: {self.max_batch_size} }}",
            f"batch_timeout_micros {{ value: {self.batch_timeout_micros} }}",
            f"max_enqueued_batches {{ value: {self.max_enqueued_batches} }}",
            f"num_batch_threads {{ value: {self.num_batch_threads} }}",
        ]
        if self.thread_pool_name != BatchingParams.thread_pool_name:
            escaped = self.thread_pool_name.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'thread_pool_name {{ value: "{escaped}" }}')
        lines += [f"allowed_batch_sizes: {size}" for size in self.allowed_batch_sizes]
        if self.pad_variable_length_inputs:
            lines.append("pad_variable_length_inputs: true")
        if self.enable_large_batch_splitting:
            lines.append("enable_large_batch_splitting { value: true }")
        if self.max_execution_batch_size is not None:
            lines.append(f"max_execution_batch_size {{ value: {self.max_execution_batch_size} }}")
        return "\n".join(lines) + "\n"


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
        raise UserError(
            f"{what} {path} does not parse at line {exc.GetLine()}: {str(exc).split(' : ', 1)[-1]}"
        ) from exc


def parse_batching_parameters(path: str) -> BatchingParams:
    """Read and validate a batching_parameters.txt as tensorflow_model_server does (UserError if refused)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"cannot read batching parameters file {path!r}: {exc.strerror or exc}") from exc
    return BatchingParams.from_text(text, f"batching parameters file {path}")


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
    flag("--max_body_bytes", type=int, default=256 * 1024 * 1024, help="largest REST request body (default 256 MiB)")
    for name in _ACCEPTED_IGNORED:
        # nargs="?": TF's boolean flags may be given bare (--enable_profiler)
        flag(f"--{name}", nargs="?", const="true", default=None, help=argparse.SUPPRESS)
    return p


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
                    entry.name, _resolve_base_path(entry.base_path, models_dir, entry.name), dict(entry.version_labels)
                )
            )
        if not entries:
            raise UserError(f"model config file {args.model_config_file} lists no models; export one first")
    elif args.model_base_path:
        name = args.model_name or "default"
        entries.append(ModelEntry(name, _resolve_base_path(args.model_base_path, models_dir, name)))
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
    metrics_path = parse_monitoring_config(args.monitoring_config_file) if args.monitoring_config_file else None
    for port_flag in ("port", "rest_api_port"):
        if not 0 <= getattr(args, port_flag) <= 65535:
            raise UserError(f"--{port_flag} must be between 0 and 65535")
    if args.port == 0:
        raise UserError("--port must be a real port (gRPC cannot be disabled)")
    if metrics_path and not args.rest_api_port:
        raise UserError("metrics are served on the REST port: --monitoring_config_file needs --rest_api_port")
    ignored = tuple(name for name in _ACCEPTED_IGNORED if getattr(args, name) is not None)
    intra, inter = _parallelism(args)
    return ServerConfig(
        models=tuple(entries),
        host=args.host,
        port=args.port,
        rest_api_port=args.rest_api_port,
        batching=batching,
        metrics_path=metrics_path,
        enable_model_warmup=args.enable_model_warmup,
        max_body_bytes=args.max_body_bytes,
        intra_op_threads=intra,
        inter_op_threads=inter,
        ignored_flags=ignored,
        notices=tuple(notices),
    )
