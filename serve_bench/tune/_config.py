"""One server configuration: TF Serving's batching parameters plus its thread flags.

A knob left as None is not written, so TF Serving applies its own default
(tensorflow_serving/servables/tensorflow/bundle_factory_util.h:104, GetQueueOptions,
copies a field only when it ``has_`` a value). The rules checked in ``validate`` are
TF Serving's: bundle_factory_util.cc:113-124 (the last allowed batch size must equal
max_batch_size, whose default is the queue's input_batch_size_limit, 1000) and the
comments of session_bundle_config.proto's BatchingParameters (num_batch_threads >= 1;
max_batch_size >= max_execution_batch_size when splitting large batches).
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar, Protocol

from google.protobuf import text_format

from serve_bench import _protos
from serve_bench.errors import UserError

__all__ = [
    "BATCHING_KNOBS",
    "FLAG_KNOBS",
    "KNOBS",
    "RECIPE_ORDER",
    "TF_SERVING_DEFAULT_MAX_BATCH_SIZE",
    "ServerConfig",
    "TuneConfig",
    "config_of",
]

# SharedBatchScheduler::QueueOptions().input_batch_size_limit, the max_batch_size TF Serving
# validates allowed_batch_sizes against when the file sets none (bundle_factory_util.cc:117-119)
TF_SERVING_DEFAULT_MAX_BATCH_SIZE = 1000

BATCHING_KNOBS = (
    "max_batch_size",
    "batch_timeout_micros",
    "num_batch_threads",
    "max_enqueued_batches",
    "allowed_batch_sizes",
    "enable_large_batch_splitting",
    "max_execution_batch_size",
)
FLAG_KNOBS = ("tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism")
KNOBS = ("batching", *BATCHING_KNOBS, *FLAG_KNOBS)


class ServerConfig(Protocol):
    """What the search, the run and the answer need of a configuration, whichever server it is for:
    TF Serving's ``TuneConfig`` here, ``TritonConfig`` and ``MLServerConfig`` in _v2config.py."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # a dataclass: configs.jsonl holds its fields

    @property
    def id(self) -> str: ...

    def knobs(self) -> tuple[tuple[str, str], ...]: ...

    def value_of(self, knob: str) -> str: ...

    def validate(self, where: str = ...) -> None: ...


_SHORT = {
    "max_batch_size": "mbs",
    "batch_timeout_micros": "to",
    "num_batch_threads": "th",
    "max_enqueued_batches": "q",
    "max_execution_batch_size": "mx",
    "tensorflow_intra_op_parallelism": "intra",
    "tensorflow_inter_op_parallelism": "inter",
}


@dataclass(frozen=True)
class TuneConfig:
    """A configuration to measure. ``batching`` False means ``--enable_batching=false`` (other batching knobs unset)."""

    batching: bool = True
    max_batch_size: int | None = None
    batch_timeout_micros: int | None = None
    num_batch_threads: int | None = None
    max_enqueued_batches: int | None = None
    allowed_batch_sizes: tuple[int, ...] = ()
    enable_large_batch_splitting: bool | None = None
    max_execution_batch_size: int | None = None
    tensorflow_intra_op_parallelism: int | None = None
    tensorflow_inter_op_parallelism: int | None = None

    def __post_init__(self) -> None:
        if not self.batching:
            # without batching the batching file is not read: collapse every such config into one
            for name in BATCHING_KNOBS:
                object.__setattr__(self, name, () if name == "allowed_batch_sizes" else None)
        if not self.enable_large_batch_splitting:
            # GetQueueOptions reads max_execution_batch_size only when splitting is on
            object.__setattr__(self, "max_execution_batch_size", None)

    @property
    def id(self) -> str:
        """A short readable name, stable across runs: ``nobatch``, ``defaults``, ``mbs8-to1000-th2``."""
        parts = [] if self.batching else ["nobatch"]
        for name in (*BATCHING_KNOBS, *FLAG_KNOBS):
            value = getattr(self, name)
            if value is None or value == ():
                continue
            if name == "allowed_batch_sizes":
                parts.append("pad" + ".".join(map(str, value)))
            elif name == "enable_large_batch_splitting":
                parts.append("split" if value else "nosplit")
            else:
                parts.append(f"{_SHORT[name]}{value}")
        return "-".join(parts) or "defaults"

    def knobs(self) -> tuple[tuple[str, str], ...]:
        """Every knob as (name, value text), "default" for one TF Serving decides: what a point records."""
        pairs = [("config", self.id)]
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                text = "default" if self.batching or f.name in FLAG_KNOBS else "off"
            elif isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, tuple):
                text = ",".join(map(str, value))
            else:
                text = str(value)
            pairs.append((f.name, text))
        return tuple(pairs)

    def value_of(self, knob: str) -> str:
        return dict(self.knobs())[knob]

    def validate(self, where: str = "configuration") -> None:
        """Raise UserError when TF Serving would refuse this configuration."""

        def positive(name: str) -> None:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"{where}: {name} must be at least 1 (TF Serving refuses {value})")

        for name in ("max_batch_size", "num_batch_threads", "max_enqueued_batches", "max_execution_batch_size"):
            positive(name)
        if self.batch_timeout_micros is not None and self.batch_timeout_micros < 0:
            raise UserError(f"{where}: batch_timeout_micros must not be negative, got {self.batch_timeout_micros}")
        for name in FLAG_KNOBS:
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UserError(f"{where}: {name} must be 0 (TensorFlow decides) or more, got {value}")
        max_size = self.max_batch_size or TF_SERVING_DEFAULT_MAX_BATCH_SIZE
        allowed = self.allowed_batch_sizes
        if allowed:
            if list(allowed) != sorted(set(allowed)) or allowed[0] < 1:
                raise UserError(f"{where}: allowed_batch_sizes must be increasing positive sizes, got {list(allowed)}")
            if allowed[-1] != max_size:
                raise UserError(
                    f"{where}: the last allowed_batch_sizes entry ({allowed[-1]}) must equal "
                    f"max_batch_size ({max_size}), as TF Serving requires"
                )
        if self.max_execution_batch_size is not None and self.max_execution_batch_size > max_size:
            raise UserError(
                f"{where}: max_execution_batch_size ({self.max_execution_batch_size}) must not exceed "
                f"max_batch_size ({max_size})"
            )

    def to_text(self) -> str:
        """The batching_parameters.txt TF Serving reads (text BatchingParameters); "" when batching is off.

        Written by hand so that a value of 0 (a timeout of 0) is spelt out: the protobuf printer would
        write ``batch_timeout_micros {}``, which means the same to TF Serving but not to a reader.
        """
        if not self.batching:
            return ""
        lines = [f"# serve-bench tune configuration {self.id} (unset fields keep TF Serving's defaults)"]
        for name in BATCHING_KNOBS:
            value = getattr(self, name)
            if name == "allowed_batch_sizes":
                lines += [f"allowed_batch_sizes: {size}" for size in value]
            elif isinstance(value, bool):
                lines.append(f"{name} {{ value: {'true' if value else 'false'} }}")
            elif value is not None:
                lines.append(f"{name} {{ value: {value} }}")
        text = "\n".join(lines) + "\n"
        text_format.Parse(text, _protos.message("tensorflow.serving.BatchingParameters")())  # must read back
        return text

    def server_flags(self, batching_file: str) -> tuple[str, ...]:
        """tensorflow_model_server flags for this configuration (the batching file at ``batching_file``)."""
        flags = (
            ["--enable_batching=true", f"--batching_parameters_file={batching_file}"]
            if self.batching
            else ["--enable_batching=false"]
        )
        for name in FLAG_KNOBS:
            value = getattr(self, name)
            if value is not None:
                flags.append(f"--{name}={value}")
        return tuple(flags)


def _allowed_sizes(value: Any, max_batch_size: int | None, where: str) -> tuple[int, ...]:
    if value == "none":
        return ()
    if value == "powers_of_two":
        top = max_batch_size or 1000
        sizes = [1 << i for i in range(top.bit_length()) if 1 << i < top]
        return (*sizes, top)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    raise UserError(f'{where}: each value must be "none", "powers_of_two" or a list of sizes, got {value!r}')


def config_of(values: dict[str, Any], source: str = "spec") -> TuneConfig:
    """The configuration for one value of each knob (as written in [space]), checked against TF Serving's rules."""
    values = dict(values)
    raw_allowed = values.pop("allowed_batch_sizes", "none")
    allowed = _allowed_sizes(raw_allowed, values.get("max_batch_size"), f"{source}: space.allowed_batch_sizes")
    config = TuneConfig(allowed_batch_sizes=allowed, **values)
    config.validate(f"{source}: space combination {config.id}")
    return config


# knobs a search varies, in the batching guide's order (threads first, then batch size, then timeout)
RECIPE_ORDER = (
    "batching",
    "num_batch_threads",
    *FLAG_KNOBS,
    "max_batch_size",
    "batch_timeout_micros",
    "allowed_batch_sizes",
    "max_enqueued_batches",
    "enable_large_batch_splitting",
    "max_execution_batch_size",
)
assert set(RECIPE_ORDER) == set(KNOBS) and len(BATCHING_KNOBS) == 7
