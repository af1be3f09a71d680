"""Triton's and MLServer's batching configurations as tune searches them (TF Serving's: _config.py).

Each knob carries the server's own name and, left out of ``[space]``, the server's own default, so a
configuration differs from the ``defaults`` baseline only where the spec asked it to. The sources
below are the servers' release branches (Triton core ``r24.10`` = tritonserver 2.51, MLServer tag
``1.7.1``); the mirrors' HEADs are newer and keep these rules (line numbers move).

Triton (``config.pbtxt``, written by ``export.triton_config_text``):
- ``dynamic_batching { }`` with nothing in it means: no queue delay (``max_queue_delay_microseconds``
  0, so ``DynamicBatchScheduler::GetDynamicBatch`` sends whatever is queued as soon as an instance is
  free, dynamic_batch_scheduler.cc:619) and one preferred size, ``max_batch_size``
  (``NormalizeModelConfig``, model_config_utils.cc:734-745): batches as large as the queue holds.
- Without the block Triton's default scheduler runs every request alone (backend_model.cc:835-845,
  ``dynamic_batching_enabled`` false); delay and preferred sizes then mean nothing and collapse.
- ``max_batch_size`` has no default in the Python backend; 4 is Triton's ``default-max-batch-size``
  (backend_model.cc:481), what auto-complete gives a batchable TensorFlow or ONNX model together with
  ``dynamic_batching { }`` (server docs/user_guide/model_configuration.md, "Default Max Batch Size").
- One instance is the Python backend's default count (``SetDefaultInstanceCount``,
  model_config_utils.cc:991-1008: two only for the TensorFlow and ONNX Runtime backends).
- Triton refuses a preferred size above ``max_batch_size`` (model_config_utils.cc:1422-1437); that is
  checked here, before anything runs. ``KIND_GPU`` on a host without a GPU is left to Triton to refuse
  (model_config_utils.cc:1660-1680): the tune records its reason.

MLServer (``model-settings.json``, written by ``export.mlserver_settings``; ``settings.json``):
- adaptive batching is loaded only when ``max_batch_size`` > 1 and ``max_batch_time`` > 0
  (mlserver/batching/hooks.py:82-86); otherwise the model serves each request alone, so every such
  configuration collapses into one, ``nobatch`` -- which is also what ModelSettings' defaults (0, 0.0;
  settings.py:457-462) give. ``max_batch_size`` counts requests, not images (batching/adaptive.py:131).
- ``parallel_workers`` is the server's setting (settings.py:170, default 1 at settings.py:37): the
  model-level field is deprecated and honoured only to switch the pool off (parallel/registry.py:196-215),
  so tune writes it to the server's ``settings.json``. 0 runs inference in the main process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from serve_bench.errors import UserError
from serve_bench.export import MLServerBatching, TritonBatching
from serve_bench.runtimes import check_runtime
from serve_bench.tune._config import RUNTIME_SHORT

__all__ = [
    "MLSERVER_KNOBS",
    "TRITON_DEFAULT_MAX_BATCH_SIZE",
    "TRITON_KINDS",
    "TRITON_KNOBS",
    "MLServerConfig",
    "TritonConfig",
    "mlserver_config_of",
    "triton_config_of",
]

TRITON_DEFAULT_MAX_BATCH_SIZE = 4  # core src/backend_model.cc:481 (r24.10), --backend-config default-max-batch-size
TRITON_KINDS = ("KIND_CPU", "KIND_GPU")  # the instance kinds the launcher writes (export.TritonBatching)
TRITON_KNOBS = (
    "dynamic_batching",
    "max_batch_size",
    "max_queue_delay_microseconds",
    "preferred_batch_size",
    "instance_count",
    "instance_kind",
    "runtime",  # what the Python-backend model runs: the SavedModel, or its ONNX or OpenVINO copy
)
MLSERVER_KNOBS = ("max_batch_size", "max_batch_time", "parallel_workers", "runtime")
MLSERVER_DEFAULT_PARALLEL_WORKERS = 1  # mlserver/settings.py:37 (1.7.1)


@dataclass(frozen=True)
class TritonConfig:
    """One Triton configuration; every field defaults to what Triton does when config.pbtxt does not say."""

    dynamic_batching: bool = True
    max_batch_size: int = TRITON_DEFAULT_MAX_BATCH_SIZE
    max_queue_delay_microseconds: int = 0
    preferred_batch_size: tuple[int, ...] = ()  # () : Triton prefers max_batch_size
    instance_count: int = 1
    instance_kind: str = "KIND_CPU"
    runtime: str = "tensorflow"

    def __post_init__(self) -> None:
        object.__setattr__(self, "preferred_batch_size", tuple(sorted(set(self.preferred_batch_size))))
        if not self.dynamic_batching:
            # the default scheduler reads neither: every such configuration is one server
            object.__setattr__(self, "max_queue_delay_microseconds", 0)
            object.__setattr__(self, "preferred_batch_size", ())

    @property
    def id(self) -> str:
        """``defaults``, ``mbs8-d2000``, ``nobatch-i2``: the knobs that differ from Triton's defaults."""
        parts = [] if self.dynamic_batching else ["nobatch"]
        if self.max_batch_size != TRITON_DEFAULT_MAX_BATCH_SIZE:
            parts.append(f"mbs{self.max_batch_size}")
        if self.max_queue_delay_microseconds:
            parts.append(f"d{self.max_queue_delay_microseconds}")
        if self.preferred_batch_size:
            parts.append("pref" + ".".join(map(str, self.preferred_batch_size)))
        if self.instance_count != 1:
            parts.append(f"i{self.instance_count}")
        if self.instance_kind != "KIND_CPU":
            parts.append(self.instance_kind.removeprefix("KIND_").lower())
        if RUNTIME_SHORT.get(self.runtime):
            parts.append(RUNTIME_SHORT[self.runtime])
        return "-".join(parts) or "defaults"

    def knobs(self) -> tuple[tuple[str, str], ...]:
        """Every knob as (name, value text), as a point records it; "off" where the batcher is off."""
        off = not self.dynamic_batching
        return (
            ("config", self.id),
            ("dynamic_batching", "true" if self.dynamic_batching else "false"),
            ("max_batch_size", str(self.max_batch_size)),
            ("max_queue_delay_microseconds", "off" if off else str(self.max_queue_delay_microseconds)),
            ("preferred_batch_size", "off" if off else ",".join(map(str, self.preferred_batch_size)) or "none"),
            ("instance_count", str(self.instance_count)),
            ("instance_kind", self.instance_kind),
            ("runtime", self.runtime),
        )

    def value_of(self, knob: str) -> str:
        return dict(self.knobs())[knob]

    def validate(self, where: str = "configuration") -> None:
        """Raise UserError where Triton (or the launcher) would refuse this configuration before loading it."""
        if self.max_batch_size < 1:
            raise UserError(
                f"{where}: max_batch_size must be at least 1, got {self.max_batch_size} "
                "(0 would make the model refuse batched requests altogether)"
            )
        if self.max_queue_delay_microseconds < 0:
            raise UserError(
                f"{where}: max_queue_delay_microseconds must not be negative, got {self.max_queue_delay_microseconds}"
            )
        if self.instance_count < 1:
            raise UserError(f"{where}: instance_count must be at least 1, got {self.instance_count}")
        check_runtime(self.runtime, where)
        if self.instance_kind not in TRITON_KINDS:
            kinds = ", ".join(TRITON_KINDS)
            raise UserError(f"{where}: instance_kind must be one of {kinds}, got {self.instance_kind!r}")
        for size in self.preferred_batch_size:
            if not 1 <= size <= self.max_batch_size:
                # model_config_utils.cc:1422-1437 (r24.10): "dynamic batching preferred size must be <= max batch size"
                raise UserError(
                    f"{where}: preferred_batch_size {size} must be between 1 and max_batch_size "
                    f"({self.max_batch_size}), as Triton requires"
                )

    def batching(self) -> TritonBatching:
        """The launcher's form of this configuration (what ``export.triton_config_text`` writes)."""
        return TritonBatching(
            max_batch_size=self.max_batch_size,
            dynamic_batching=self.dynamic_batching,
            max_queue_delay_us=self.max_queue_delay_microseconds,
            preferred_batch_sizes=self.preferred_batch_size,
            instance_count=self.instance_count,
            kind=self.instance_kind,
        )


@dataclass(frozen=True)
class MLServerConfig:
    """One MLServer configuration: adaptive batching (model-settings.json) and the worker pool (settings.json)."""

    max_batch_size: int = 0
    max_batch_time: float = 0.0  # seconds, as model-settings.json spells it
    parallel_workers: int = MLSERVER_DEFAULT_PARALLEL_WORKERS
    runtime: str = "tensorflow"

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_batch_time", float(self.max_batch_time))
        if not self.batching_on:
            # hooks.py:82-86 leaves the model unbatched: one configuration, written as ModelSettings' defaults
            object.__setattr__(self, "max_batch_size", 0)
            object.__setattr__(self, "max_batch_time", 0.0)

    @property
    def batching_on(self) -> bool:
        return self.max_batch_size > 1 and self.max_batch_time > 0

    @property
    def id(self) -> str:
        """``nobatch``, ``mbs8-t2ms``, ``mbs8-t2ms-w2``."""
        if self.batching_on:
            parts = [f"mbs{self.max_batch_size}", f"t{self.max_batch_time * 1000:g}ms"]
        else:
            parts = ["nobatch"]
        if self.parallel_workers != MLSERVER_DEFAULT_PARALLEL_WORKERS:
            parts.append(f"w{self.parallel_workers}")
        if RUNTIME_SHORT.get(self.runtime):
            parts.append(RUNTIME_SHORT[self.runtime])
        return "-".join(parts)

    def knobs(self) -> tuple[tuple[str, str], ...]:
        on = self.batching_on
        return (
            ("config", self.id),
            ("max_batch_size", str(self.max_batch_size) if on else "off"),
            ("max_batch_time", f"{self.max_batch_time:g}" if on else "off"),
            ("parallel_workers", str(self.parallel_workers)),
            ("runtime", self.runtime),
        )

    def value_of(self, knob: str) -> str:
        return dict(self.knobs())[knob]

    def validate(self, where: str = "configuration") -> None:
        if self.max_batch_size < 0:
            raise UserError(f"{where}: max_batch_size must be 0 or more, got {self.max_batch_size}")
        if not math.isfinite(self.max_batch_time) or self.max_batch_time < 0:
            raise UserError(f"{where}: max_batch_time must be 0 or more seconds, got {self.max_batch_time}")
        if self.parallel_workers < 0:
            raise UserError(f"{where}: parallel_workers must be 0 or more, got {self.parallel_workers}")
        check_runtime(self.runtime, where)

    def batching(self) -> MLServerBatching:
        """The launcher's form of the model's settings; the worker count goes to the server's settings.json."""
        return MLServerBatching(max_batch_size=self.max_batch_size, max_batch_time_s=self.max_batch_time)


def triton_config_of(values: dict[str, Any], source: str = "spec") -> TritonConfig:
    """The configuration for one value of each knob (as written in [space]), checked against Triton's rules."""
    values = dict(values)
    preferred = values.pop("preferred_batch_size", "none")
    config = TritonConfig(preferred_batch_size=() if preferred == "none" else tuple(preferred), **values)
    config.validate(f"{source}: space combination {config.id}")
    return config


def mlserver_config_of(values: dict[str, Any], source: str = "spec") -> MLServerConfig:
    config = MLServerConfig(**values)
    config.validate(f"{source}: space combination {config.id}")
    return config
