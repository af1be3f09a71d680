"""Triton's and MLServer's batching configurations as tune searches them (TF Serving's: _config.py).

Each knob carries the server's own name and, left out of ``[space]``, the server's own default, so a
configuration differs from the ``defaults`` baseline only where the spec asked it to. Each knob's default
and the source line it follows are the kind's ``Knob`` records (servers/_triton.py, servers/_mlserver.py:
Triton core ``r24.10`` = tritonserver 2.51, MLServer tag ``1.7.1``); what is said here is what tune does
with them.

Triton (``config.pbtxt``, written by ``export.triton_config_text``):
- without ``dynamic_batching`` each request runs alone, so a delay and preferred sizes mean nothing and
  such configurations collapse into one.
- Triton refuses a preferred size above ``max_batch_size`` (model_config_utils.cc:1422-1437); that is
  checked here, before anything runs. ``KIND_GPU`` on a host without a GPU is left to Triton to refuse
  (model_config_utils.cc:1660-1680): the tune records its reason.

MLServer (``model-settings.json``, written by ``export.mlserver_settings``; ``settings.json``):
- adaptive batching needs both ``max_batch_size`` > 1 and ``max_batch_time`` > 0 (the kind's
  ``together``); otherwise the model serves each request alone, so every such configuration collapses
  into one, ``nobatch`` -- which is also what the defaults give. ``max_batch_size`` counts requests, not
  images (batching/adaptive.py:131).
- ``parallel_workers`` is the server's setting, not the model's (its knob says why), so tune writes it to
  the server's ``settings.json``. 0 runs inference in the main process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from serve_bench import servers
from serve_bench.errors import UserError
from serve_bench.runtimes import DEFAULT_RUNTIME, check_runtime
from serve_bench.tune._config import RUNTIME_SHORT

__all__ = [
    "MLSERVER_KNOBS",
    "TRITON_KNOBS",
    "MLServerConfig",
    "TritonConfig",
    "mlserver_config_of",
    "triton_config_of",
]

# every knob's default is the server's own, from its kind's table (servers/_triton.py, servers/_mlserver.py):
# the same a sweep's launched server gets
_TRITON = servers.kind("triton").defaults()
_MLSERVER = servers.kind("mlserver").defaults()
# the kinds' knobs, and what the Python-backend model runs: the SavedModel, or its ONNX or OpenVINO copy
TRITON_KNOBS = (*servers.kind("triton").knob_names, "runtime")
MLSERVER_KNOBS = (*servers.kind("mlserver").knob_names, "runtime")


class _OfKind:
    """What Triton's and MLServer's configurations share, both read from their kind (servers/): the knob values,
    one knob's text, and the launcher's form, checked by the kind's one validation."""

    kind_name: ClassVar[str]

    def knobs(self) -> tuple[tuple[str, str], ...]:
        raise NotImplementedError

    def value_of(self, knob: str) -> str:
        return dict(self.knobs())[knob]

    def values(self) -> dict[str, Any]:
        """The configuration as the kind's knob values (in the server's names)."""
        return {knob: getattr(self, knob) for knob in servers.kind(self.kind_name).knob_names}

    def batching(self, where: str = "configuration") -> Any:
        """The launcher's form of this configuration (``export.TritonBatching``, ``export.MLServerBatching``);
        UserError at ``where`` when the server would refuse it."""
        try:
            return servers.kind(self.kind_name).config(self.values())
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class TritonConfig(_OfKind):
    """One Triton configuration; every field defaults to what Triton does when config.pbtxt does not say."""

    kind_name: ClassVar[str] = "triton"

    dynamic_batching: bool = _TRITON["dynamic_batching"]
    max_batch_size: int = _TRITON["max_batch_size"]
    max_queue_delay_microseconds: int = _TRITON["max_queue_delay_microseconds"]
    preferred_batch_size: tuple[int, ...] = _TRITON["preferred_batch_size"]  # () : Triton prefers max_batch_size
    instance_count: int = _TRITON["instance_count"]
    instance_kind: str = _TRITON["instance_kind"]
    runtime: str = DEFAULT_RUNTIME

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
        if self.max_batch_size != _TRITON["max_batch_size"]:
            parts.append(f"mbs{self.max_batch_size}")
        if self.max_queue_delay_microseconds:
            parts.append(f"d{self.max_queue_delay_microseconds}")
        if self.preferred_batch_size:
            parts.append("pref" + ".".join(map(str, self.preferred_batch_size)))
        if self.instance_count != _TRITON["instance_count"]:
            parts.append(f"i{self.instance_count}")
        if self.instance_kind != _TRITON["instance_kind"]:
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

    def validate(self, where: str = "configuration") -> None:
        """Raise UserError where Triton (or the launcher) would refuse this configuration before loading it:
        Triton's kind checks it (servers/_triton.py), as it checks a sweep's."""
        check_runtime(self.runtime, where)
        self.batching(where)


@dataclass(frozen=True)
class MLServerConfig(_OfKind):
    """One MLServer configuration: adaptive batching (model-settings.json) and the worker pool (settings.json)."""

    kind_name: ClassVar[str] = "mlserver"

    max_batch_size: int = _MLSERVER["max_batch_size"]
    max_batch_time: float = _MLSERVER["max_batch_time"]  # seconds, as model-settings.json spells it
    parallel_workers: int = _MLSERVER["parallel_workers"]
    runtime: str = DEFAULT_RUNTIME

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_batch_time", float(self.max_batch_time))
        valid = math.isfinite(self.max_batch_time) and self.max_batch_time >= 0  # else validate() says so
        if not self.batching_on and valid:
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
        if self.parallel_workers != _MLSERVER["parallel_workers"]:
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

    def validate(self, where: str = "configuration") -> None:
        """Raise UserError where MLServer would refuse this configuration: MLServer's kind checks it (its
        export.MLServerBatching, the one check of max_batch_time, a sweep's launched server's too)."""
        check_runtime(self.runtime, where)
        self.batching(where)


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
