"""Targets serve-bench starts itself: ``launch = "local" | "triton" | "mlserver"`` in a sweep spec.

    [[targets]]
    name = "triton"
    launch = "triton"             # real tritonserver (servers' environment), Python backend, free ports
    protocol = "grpc"             # grpc | rest: which of its URLs the load uses
    runtime = "tensorflow"        # tensorflow | onnxruntime | openvino: serve --runtime, or what Triton's
                                  # and MLServer's Python models run (export --runtimes' copy)
    [targets.batching]            # the server's own knobs, in its own names
    max_batch_size = 32
    max_queue_delay_microseconds = 2000

Each launched server serves the spec's model from ``models_dir`` (top level, default
``exported_models``), is started before the first point and stopped after the last, and
its URL, metrics endpoint and pid replace the target's. The batching tables take:

* local: ``batching_parameters_file`` (TF Serving's file; none: batching off);
* triton: ``max_batch_size``, ``max_queue_delay_microseconds``, ``preferred_batch_size``,
  ``instance_count``, ``dynamic_batching`` (config.pbtxt's names);
* mlserver: ``max_batch_size``, ``max_batch_time`` (seconds), ``parallel_workers``
  (model-settings.json's names).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench.errors import InvalidValue, UserError
from serve_bench.export import MLServerBatching, TritonBatching
from serve_bench.servers import LocalServerProcess, MLServerServer, ServerProcess, TritonServer
from serve_bench.stats import Target

__all__ = ["LAUNCH_KINDS", "Launch", "launched_target", "launched_targets", "parse_launch"]

LAUNCH_KINDS = ("local", "triton", "mlserver")
_KNOBS: dict[str, dict[str, Any]] = {
    "local": {"batching_parameters_file": str},
    "triton": {
        "max_batch_size": int,
        "max_queue_delay_microseconds": int,
        "preferred_batch_size": list,
        "instance_count": int,
        "dynamic_batching": bool,
    },
    "mlserver": {"max_batch_size": int, "max_batch_time": (int, float), "parallel_workers": int},
}
_SERVER_KIND = {"local": "serve-bench-local", "triton": "triton", "mlserver": "mlserver"}


@dataclass(frozen=True)
class Launch:
    """A server the sweep starts for one target."""

    kind: str  # local | triton | mlserver
    protocol: str = "grpc"  # grpc | rest
    knobs: tuple[tuple[str, Any], ...] = ()
    startup_timeout_s: float = 300.0
    runtime: str = "tensorflow"  # local: serve --runtime; triton, mlserver: what their Python models run
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def knob_pairs(self) -> tuple[tuple[str, str], ...]:
        """The configuration as (knob, value) text, for points' ``server_config``."""
        pairs = tuple((k, ",".join(map(str, v)) if isinstance(v, list | tuple) else str(v)) for k, v in self.knobs)
        # local: always (its --runtime); Triton, MLServer: when not the SavedModel, so older runs' points
        # (TensorFlow, no runtime pair) keep the configuration they were measured with
        if self.kind == "local" or self.runtime != "tensorflow":
            return (("runtime", self.runtime), *pairs)
        return pairs


def path_exists(path: str) -> bool:
    """Whether a path a spec names exists; False, not OSError, for one the OS cannot even look up (a name
    past NAME_MAX: ENAMETOOLONG), so the spec's own "no such file" refusal names it."""
    try:
        return Path(path).exists()
    except OSError:
        return False


def parse_launch(raw: dict[str, Any], where: str, source: str) -> Launch:
    """The launch keys of one ``[[targets]]`` table (``launch``, ``protocol``, ``batching``)."""
    kind = raw["launch"]
    if kind not in LAUNCH_KINDS:
        raise UserError(f"{source}: {where}.launch must be one of {', '.join(LAUNCH_KINDS)}, got {kind!r}")
    protocol = raw.get("protocol", "grpc")
    if protocol not in ("grpc", "rest"):
        raise UserError(f"{source}: {where}.protocol must be grpc or rest, got {protocol!r}")
    table = raw.get("batching", {})
    if not isinstance(table, dict):
        raise UserError(f"{source}: {where}.batching must be a table of {kind}'s knobs")
    known = _KNOBS[kind]
    for key, value in table.items():
        if key not in known:
            raise UserError(f"{source}: {where}.batching.{key} is not a {kind} knob; it takes {', '.join(known)}")
        wanted = known[key]
        if (isinstance(value, bool) and wanted is not bool) or not isinstance(value, wanted):
            raise UserError(f"{source}: {where}.batching.{key} has the wrong type ({type(value).__name__})")
    launch = Launch(kind, protocol, tuple(sorted(table.items())), runtime=raw.get("runtime", "tensorflow"))
    try:
        _server_batching(launch)
    except InvalidValue as exc:
        raise UserError(f"{source}: {where}.batching: {exc}") from None
    if kind == "local" and "batching_parameters_file" in table and not path_exists(table["batching_parameters_file"]):
        raise UserError(f"{source}: {where}.batching.batching_parameters_file: no such file")
    return launch


def _server_batching(launch: Launch) -> TritonBatching | MLServerBatching | None:
    knobs = dict(launch.knobs)
    if launch.kind == "triton":
        return TritonBatching(
            max_batch_size=knobs.get("max_batch_size", 32),
            dynamic_batching=knobs.get("dynamic_batching", True),
            max_queue_delay_us=knobs.get("max_queue_delay_microseconds", 0),
            preferred_batch_sizes=tuple(knobs.get("preferred_batch_size", ())),
            instance_count=knobs.get("instance_count", 1),
        )
    if launch.kind == "mlserver":
        return MLServerBatching(
            max_batch_size=knobs.get("max_batch_size", 32),
            max_batch_time_s=float(knobs.get("max_batch_time", 0.002)),
            parallel_workers=knobs.get("parallel_workers"),
        )
    return None


def _process(launch: Launch, models_dir: Path, model: str, work_dir: Path) -> ServerProcess:
    batching = _server_batching(launch)
    if isinstance(batching, TritonBatching):
        return TritonServer(
            models_dir,
            model,
            batching,
            runtime=launch.runtime,
            work_dir=work_dir,
            startup_timeout_s=launch.startup_timeout_s,
        )
    if isinstance(batching, MLServerBatching):
        return MLServerServer(
            models_dir,
            model,
            batching,
            runtime=launch.runtime,
            work_dir=work_dir,
            startup_timeout_s=launch.startup_timeout_s,
        )
    return LocalServerProcess(
        models_dir,
        model,
        batching_file=dict(launch.knobs).get("batching_parameters_file"),
        extra_flags=(f"--runtime={launch.runtime}",),
        work_dir=work_dir,
        startup_timeout_s=launch.startup_timeout_s,
    )


def launched_target(target: Target, server: ServerProcess, kind: str, protocol: str) -> Target:
    """``target`` pointed at ``server``, a ``kind`` (local | triton | mlserver) serve-bench started: the URL
    of ``protocol`` (grpc | rest), its metrics page and pid, and for Triton and MLServer their HTTP URL,
    where Triton's statistics API (the per-batch-size executions) answers when the load goes over gRPC.
    Sweep and tune both build a launched server's Target here."""
    return dataclasses.replace(
        target,
        url=server.grpc_url if protocol == "grpc" else server.http_url,
        protocol="",  # derived again from the launched URL
        metrics_url=server.metrics_url,
        server=_SERVER_KIND[kind],
        pid=server.pid,
        http_url=server.http_url if kind != "local" else "",
    )


@contextlib.contextmanager
def launched_targets(
    targets: tuple[Target, ...], launches: dict[str, Launch], models_dir: Path, model: str, work_dir: Path
) -> Iterator[tuple[Target, ...]]:
    """Start every launched target's server, yield the targets pointing at them, stop them all."""
    started: list[ServerProcess] = []
    try:
        result = []
        for target in targets:
            launch = launches.get(target.name)
            if launch is None:
                result.append(target)
                continue
            server = _process(launch, models_dir, model, work_dir / "servers" / target.name)
            server.start()
            started.append(server)
            result.append(launched_target(target, server, launch.kind, launch.protocol))
        yield tuple(result)
    finally:
        for server in reversed(started):
            server.stop()
