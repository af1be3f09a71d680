"""What one server kind is: its knobs (name, type, the server's own default, where that default is written),
its configuration type, the process that serves a model with it, and the Target it makes.

Each kind's module (_local.py, _tfserving.py, _triton.py, _mlserver.py) builds one ``ServerKind``; the
registry (_registry.py) lists them, and sweep, tune, demo and report look a kind up there.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench._server_facts import V2
from serve_bench.errors import InvalidValue, UserError
from serve_bench.runtimes import RuntimeRecord, record, record_in_servers
from serve_bench.servers._process import ServerProcess

__all__ = ["SIZES", "Knob", "Serve", "ServerKind"]

SIZES = "sizes"  # a knob whose value is a list of batch sizes


@dataclass(frozen=True)
class Knob:
    """One knob, in the server's own name, with the server's own default and where that default is written."""

    name: str
    type: Any  # bool, int, float (an int is taken too), str, or SIZES
    default: Any
    cited: str

    def check(self, value: Any) -> str:
        """ "" when ``value`` has this knob's type, else the type it has (for the one-line error)."""
        if self.type is SIZES:
            ok = isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        elif self.type is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif self.type is bool:
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, self.type) and not isinstance(value, bool)
        return "" if ok else type(value).__name__


@dataclass(frozen=True)
class Serve:
    """What a kind's process is made from: its configuration (``ServerKind.config``), the knob values given, the
    exported model it serves, what runs it, and where its files go."""

    config: Any
    values: Mapping[str, Any]
    models_dir: Path
    model: str
    runtime: str
    work_dir: Path
    startup_timeout_s: float


Starter = Callable[[Serve], ServerProcess]  # the server for a Serve, not started


@dataclass(frozen=True)
class ServerKind:
    """One server kind: its one name, its knobs, its configuration and, when serve-bench starts it, its process."""

    name: str  # the one name: specs, points' target.server and the metrics reader all say it
    label: str  # as a sentence names the server
    knobs: tuple[Knob, ...]
    configure: Callable[[Mapping[str, Any]], Any] | None = None  # knob values -> its configuration (validated)
    start: Starter | None = None  # None: serve-bench does not start it (TF Serving: compose or a command)
    max_batch_knob: str = ""  # the knob above which a request's batch is refused by the server ("" none)
    # it runs from the servers' environment (.venv-servers), not serve-bench's own interpreter, and its models
    # through the runners of runtimes/_runners.py: a runtime needs a runner there and its package installed there
    in_servers_env: bool = False
    # the runtime is a flag of the server's own (serve --runtime): a point's configuration always names it
    runtime_flag: bool = False
    # knobs that act only together (one given alone leaves the server as its default runs it), and why
    together: tuple[str, ...] = ()
    together_reason: str = ""
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def v2(self) -> bool:
        """It speaks the Open Inference Protocol: its HTTP URL goes beside a gRPC target."""
        return self.name in V2

    @property
    def knob_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        raise UserError(f"{name} is not a {self.name} knob; it takes {', '.join(self.knob_names)}")

    def defaults(self) -> dict[str, Any]:
        """Every knob at the server's own default."""
        return {k.name: k.default for k in self.knobs}

    def config(self, values: Mapping[str, Any]) -> Any:
        """The configuration for ``values`` (knobs left out: the server's own default), checked; None for a
        kind without a configuration of its own. InvalidValue (one line) where the server would refuse it."""
        for name, value in values.items():
            wrong = self.knob(name).check(value)
            if wrong:
                raise InvalidValue(name, value, f"a {_type_name(self.knob(name).type)} (not {wrong})")
        if self.configure is None:
            return None
        return self.configure({**self.defaults(), **values})

    def process(
        self, values: Mapping[str, Any], models_dir: Path, model: str, runtime: str, work_dir: Path, timeout_s: float
    ) -> ServerProcess:
        """The server serving ``model`` from ``models_dir`` with ``values`` (checked), its files in ``work_dir``;
        not started."""
        if self.start is None:
            raise UserError(f"serve-bench does not start {self.label}; give its URL")
        return self.start(Serve(self.config(values), values, models_dir, model, runtime, work_dir, timeout_s))

    def check_together(self, given: Collection[str]) -> None:
        """UserError, one line, when ``given`` (a spec's knob names) names some of the knobs that act only
        together but not all: the one left out would keep the server's default and quietly undo the others."""
        named = [k for k in self.together if k in given]
        if named and len(named) < len(self.together):
            missing = [k for k in self.together if k not in given]
            raise UserError(
                f"gives {', '.join(named)} but not {', '.join(missing)}: {self.together_reason}, so give both"
            )

    def runtime(self, name: str) -> RuntimeRecord:
        """The record of runtime ``name``, which this kind can run; UserError, one line, for a runtime it cannot
        (one with no runner inside Triton's and MLServer's models)."""
        return record_in_servers(name) if self.in_servers_env else record(name)

    def max_batch_size(self, values: Mapping[str, Any]) -> int | None:
        """The largest batch one request may carry with ``values`` (None: no limit of the server's)."""
        if not self.max_batch_knob:
            return None
        return int({**self.defaults(), **values}[self.max_batch_knob])


def _type_name(kind: Any) -> str:
    return "list of batch sizes" if kind is SIZES else {float: "number"}.get(kind, getattr(kind, "__name__", str(kind)))
