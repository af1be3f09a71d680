"""The registry: every runtime's record, and the one check of a runtime's name."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from serve_bench.errors import InvalidValue, UserError
from serve_bench.runtimes._jax import JAX
from serve_bench.runtimes._onnxruntime import ONNXRUNTIME
from serve_bench.runtimes._openvino import OPENVINO
from serve_bench.runtimes._record import RuntimeRecord
from serve_bench.runtimes._tensorflow import TENSORFLOW

if TYPE_CHECKING:  # RuntimeSettings validates against this registry: no import at run time
    from serve_bench.runtimes._settings import Runner, RuntimeSettings

__all__ = [
    "CONVERTED_RUNTIMES",
    "DEFAULT_RUNTIME",
    "RECORDS",
    "RUNNERS_FILE",
    "RUNTIMES",
    "check_runtime",
    "missing_runtime",
    "open_runner",
    "record",
    "record_in_servers",
]

# adding a runtime: its module (record, converter, runner), listed here
RECORDS: dict[str, RuntimeRecord] = {r.name: r for r in (TENSORFLOW, ONNXRUNTIME, OPENVINO, JAX)}
RUNTIMES = tuple(RECORDS)  # as flags, specs and results spell them
# what runs a target that names no runtime: TensorFlow, on the SavedModel export writes (a point from before
# runtimes were recorded, schema 4 and older, ran on it too: nothing else served then)
DEFAULT_RUNTIME = TENSORFLOW.name
CONVERTED_RUNTIMES = tuple(r.name for r in RECORDS.values() if r.converted)  # those with a copy of their own
# the runners' one file, which Triton's and MLServer's model repositories carry (their servers have no serve-bench)
RUNNERS_FILE = Path(__file__).resolve().parent / "_runners.py"


def check_runtime(runtime: str, where: str = "", *, name: str = "runtime") -> None:
    """Unless ``runtime`` is a runtime's name: InvalidValue for parameter ``name``, or a one-line UserError
    prefixed by ``where`` (a spec's file and table) when it is given."""
    if runtime in RECORDS:
        return
    error = InvalidValue(name, runtime, f"one of {', '.join(RUNTIMES)}")
    raise error.named(f"{where}: {name}") if where else error


def record(name: str) -> RuntimeRecord:
    """The record of runtime ``name``; UserError naming the runtimes for any other name."""
    check_runtime(name)
    return RECORDS[name]


def record_in_servers(name: str) -> RuntimeRecord:
    """The record of runtime ``name`` for a model inside Triton or MLServer; UserError, one line, for a
    runtime with no runner there (it runs behind the local server only)."""
    kept = record(name)
    if kept.runner is None:
        raise UserError(
            f"the {name} runtime runs behind the local server only (serve --runtime {name}); Triton's and "
            f"MLServer's models here run {', '.join(r.name for r in RECORDS.values() if r.runner is not None)}"
        )
    return kept


def missing_runtime(runtime: str) -> str | None:
    """One line naming what to install when ``runtime``'s packages are not here, else None."""
    return record(runtime).missing()


def open_runner(runtime: str, path: Path, settings: RuntimeSettings) -> Runner:
    """``runtime``'s runner on ``path`` (its copy's model file); UserError when it is not installed."""
    kept = record(runtime)
    if kept.open is None:
        others = " | ".join(r.name for r in RECORDS.values() if r.open is not None)
        raise UserError(f"runtime must be one of {others} (TensorFlow runs the SavedModel itself), got {runtime!r}")
    kept.require()
    return kept.open(path, settings)
