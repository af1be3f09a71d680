"""One server configuration: TF Serving's batching parameters plus its thread flags.

A knob left as None is not written, so TF Serving applies its own default
(tensorflow_serving/servables/tensorflow/bundle_factory_util.h:104, GetQueueOptions,
copies a field only when it ``has_`` a value). What TF Serving refuses is decided by the
one model of its BatchingParameters, ``serve_bench.export.BatchingParams``, which the
local server reads too: ``validate`` fills the unset knobs with TF Serving's defaults and
asks it.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields, replace
from typing import Any, ClassVar, Protocol

from serve_bench.errors import UserError
from serve_bench.export import BatchingParams, batching_parameters_text
from serve_bench.runtimes import DEFAULT_RUNTIME, RECORDS, check_runtime, record

__all__ = [
    "BATCHING_KNOBS",
    "FLAG_KNOBS",
    "KNOBS",
    "RECIPE_ORDER",
    "RUNTIME_SHORT",
    "SIZES_WORDS",
    "ServerConfig",
    "TuneConfig",
    "config_of",
]

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
# what runs the model (the local server's --runtime; Triton's and MLServer's Python models likewise)
KNOBS = ("batching", *BATCHING_KNOBS, *FLAG_KNOBS, "runtime")
RUNTIME_SHORT = {r.name: r.short for r in RECORDS.values()}  # a runtime's tag in a configuration's id


class ServerConfig(Protocol):
    """What the search, the run and the answer need of a configuration, whichever server it is for:
    TF Serving's ``TuneConfig`` here, ``TritonConfig`` and ``MLServerConfig`` in _v2config.py."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # a dataclass: configs.jsonl holds its fields

    @property
    def id(self) -> str: ...

    @property
    def runtime(self) -> str: ...

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
    runtime: str = DEFAULT_RUNTIME

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
        if RUNTIME_SHORT.get(self.runtime):
            parts.append(RUNTIME_SHORT[self.runtime])
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

    def params(self) -> BatchingParams:
        """The BatchingParameters TF Serving runs with: the knobs set here, its defaults for the rest."""
        values = {name: getattr(self, name) for name in BATCHING_KNOBS if getattr(self, name) is not None}
        return replace(BatchingParams(), **values)

    def validate(self, where: str = "configuration") -> None:
        """Raise UserError (BatchingParametersError for the batching knobs) when TF Serving would refuse this."""
        for name in FLAG_KNOBS:
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UserError(f"{where}: {name} must be 0 (auto) or a number of threads; got {value}")
        check_runtime(self.runtime, where)
        if self.batching:
            self.params().checked(where)

    def to_text(self) -> str:
        """The batching_parameters.txt TF Serving reads (text BatchingParameters); "" when batching is off."""
        if not self.batching:
            return ""
        values = {name: getattr(self, name) for name in BATCHING_KNOBS if getattr(self, name) not in (None, ())}
        header = f"serve-bench tune configuration {self.id} (unset fields keep TF Serving's defaults)"
        return batching_parameters_text(values, header)

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
        if record(self.runtime).converted:  # serve-bench serve's flag: TF Serving runs SavedModels only
            flags.append(f"--runtime={self.runtime}")
        return tuple(flags)


# what allowed_batch_sizes takes besides a list: none, or every power of two below max_batch_size and itself
SIZES_WORDS = ("none", "powers_of_two")


def _allowed_sizes(value: Any, max_batch_size: int | None, where: str) -> tuple[int, ...]:
    if value == "none":
        return ()
    if value == "powers_of_two":
        top = max_batch_size or BatchingParams.max_batch_size
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
    "runtime",  # what runs the model first: every batching knob is then tuned on it
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
