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
its URL, metrics endpoint and pid replace the target's. The batching table takes the kind's knobs
(``servers.kind(name).knobs``, in the server's own names), and a knob left out is the server's own
default, as tune's is: Triton batches at most 4 images a request unless ``max_batch_size`` says more (a
spec whose ``batch_sizes`` go higher is refused when it is read), MLServer does not batch unless
``max_batch_size`` and ``max_batch_time`` say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench import servers
from serve_bench.errors import UserError
from serve_bench.runtimes import DEFAULT_RUNTIME, check_runtime, record
from serve_bench.servers import ServerProcess
from serve_bench.stats import Target

__all__ = ["LAUNCH_KINDS", "Launch", "launched_target", "launched_targets", "parse_launch"]

LAUNCH_KINDS = servers.LAUNCHABLE  # the kinds serve-bench starts itself; each kind's knobs are in servers/


@dataclass(frozen=True)
class Launch:
    """A server the sweep starts for one target."""

    kind: str  # local | triton | mlserver
    protocol: str = "grpc"  # grpc | rest
    knobs: tuple[tuple[str, Any], ...] = ()
    startup_timeout_s: float = 300.0
    runtime: str = DEFAULT_RUNTIME  # local: serve --runtime; triton, mlserver: what their Python models run
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def knob_pairs(self) -> tuple[tuple[str, str], ...]:
        """The configuration as (knob, value) text, for points' ``server_config``."""
        pairs = tuple((k, ",".join(map(str, v)) if isinstance(v, list | tuple) else str(v)) for k, v in self.knobs)
        # local: always (its --runtime); Triton, MLServer: when not the SavedModel, so older runs' points
        # (TensorFlow, no runtime pair) keep the configuration they were measured with
        if servers.kind(self.kind).runtime_flag or record(self.runtime).converted:
            return (("runtime", self.runtime), *pairs)
        return pairs


def path_exists(path: str) -> bool:
    """Whether a path a spec names exists; False, not OSError, for one the OS cannot even look up (a name
    past NAME_MAX: ENAMETOOLONG), so the spec's own "no such file" refusal names it."""
    try:
        return Path(path).exists()
    except OSError:
        return False


def parse_launch(raw: dict[str, Any], where: str, source: str, batch_sizes: tuple[int, ...] = ()) -> Launch:
    """The launch keys of one ``[[targets]]`` table (``launch``, ``protocol``, ``batching``), checked against
    the kind's knobs; ``batch_sizes`` above what the launched server takes in one request are refused."""
    try:
        kind = servers.kind(raw["launch"], LAUNCH_KINDS)
    except servers.UnknownKind:
        raise UserError(
            f"{source}: {where}.launch must be one of {', '.join(LAUNCH_KINDS)}, got {raw['launch']!r}"
        ) from None
    protocol = raw.get("protocol", "grpc")
    if protocol not in ("grpc", "rest"):
        raise UserError(f"{source}: {where}.protocol must be grpc or rest, got {protocol!r}")
    table = raw.get("batching", {})
    if not isinstance(table, dict):
        raise UserError(f"{source}: {where}.batching must be a table of {kind.name}'s knobs")
    try:
        for key in table:
            servers.kind_knob(kind, key)
        kind.check_together(table)
        kind.config(table)
    except UserError as exc:
        raise UserError(f"{source}: {where}.batching: {exc}") from None
    runtime = raw.get("runtime", DEFAULT_RUNTIME)
    check_runtime(runtime, source, name=f"{where}.runtime")  # launched: it runs what is named, so "" is no runtime
    try:
        kind.runtime(runtime)
    except UserError as exc:
        raise UserError(f"{source}: {where}.runtime: {exc}") from None
    launch = Launch(kind.name, protocol, tuple(sorted(table.items())), runtime=runtime)
    largest = kind.max_batch_size(table)
    if largest is not None and batch_sizes and max(batch_sizes) > largest:
        own = "" if kind.max_batch_knob in table else f", {kind.label}'s default"
        raise UserError(
            f"{source}: {where}: batch_sizes go up to {max(batch_sizes)} but {where}.batching.{kind.max_batch_knob} "
            f"is {largest}{own}, and {kind.label} refuses a larger request; raise it: "
            f"batching = {{ {kind.max_batch_knob} = {max(batch_sizes)} }}"
        )
    return launch


def _process(launch: Launch, models_dir: Path, model: str, work_dir: Path) -> ServerProcess:
    kind = servers.kind(launch.kind)
    return kind.process(dict(launch.knobs), models_dir, model, launch.runtime, work_dir, launch.startup_timeout_s)


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
        server=servers.kind(kind).name,
        pid=server.pid,
        http_url=server.http_url if servers.kind(kind).v2 else "",
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
