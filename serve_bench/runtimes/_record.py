"""What serve-bench knows about one runtime, in one record.

A runtime is what executes the model's ``serving_default`` behind the local server, in process,
and (where its package runs there) inside Triton's and MLServer's models. A record holds its
names, its copy's layout under ``exported_models/``, the packages and the pip extra it needs,
its converter, how the local server opens its runner and which runner Triton's and MLServer's
models make, what it accepts for the device and the precision, and how it behaves as a server
runtime (whether it compiles one program per batch shape, whether it can serve without the
SavedModel). The record lives in the runtime's own module, beside its converter; the runners
that also run inside Triton and MLServer are in ``_runners.py``, the one file those servers'
model repositories carry.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from serve_bench.errors import InvalidValue, UserError

if TYPE_CHECKING:  # RuntimeSettings validates against the records: no import at run time
    from serve_bench.runtimes._settings import Runner, RuntimeSettings

__all__ = ["CONVERSION_FILE", "RuntimeRecord"]

# a copy's facts, in its version directory beside its model file: which runtime, model, weights and converter (the jax
# runtime's model file is this file itself: the model is built from the catalogue)
CONVERSION_FILE = "conversion.json"


@dataclass(frozen=True)
class RuntimeRecord:
    name: str  # as flags and results spell it
    display: str  # as a report prints it
    # its copies: exported_models/<directory>/<model>/<version>/; None: it runs the SavedModel export writes
    directory: str | None
    model_file: str  # the file in that directory the runner loads
    packages: tuple[str, ...]  # modules that must import for it to run (the one that runs it last)
    extra: str  # the pip command that installs them
    converter: str  # what makes its copy from an export
    short: str  # its tag in tune's configuration ids ("" leaves it out: the default runtime's alone)
    convert_packages: tuple[str, ...] = ()  # and, beside those, for export to convert a SavedModel for it
    companions: tuple[str, ...] = ()  # suffixes of files beside model_file that belong to it (OpenVINO's .bin)
    devices: tuple[str, ...] = ("cpu",)  # --device values it accepts, the default first
    precisions: tuple[str, ...] = ("fp32",)  # --precision values it accepts, the default first
    # it builds one program per input shape (XLA): warm-up compiles every batch size the server can form
    compiles_per_shape: bool = False
    # it can serve a catalogue model with no SavedModel beside it (no TensorFlow on the host)
    standalone: bool = False
    # the local server loads TensorFlow beside it where TensorFlow is installed (the SavedModel's signatures,
    # serving_bytes); False: never in its process (Keras on JAX cannot share one with TensorFlow's Keras)
    beside_tensorflow: bool = True
    # `serve-bench export` without --runtimes converts for it when it is installed
    converted_by_default: bool = True
    # export on a host without TensorFlow (standalone runtimes): write a copy with random weights of
    # (models directory, catalogue name, version), its model file's path
    write_random: Callable[[Path, str, int], Path] | None = None
    # export: write the copy of (Keras model, catalogue name) into a directory, naming its source
    write: Callable[[Any, str, Path, str], Path] | None = None
    # export: convert the loaded serving_default signature (TensorFlow module, signature) into a file; the
    # converter as the copy's conversion.json names it (with its version)
    convert: Callable[[Any, Any, Path], str] | None = None
    # export's check: the copy's outputs for {input name: images}, computed however the runtime must
    # (None: in this process, with the runner ``open`` makes)
    answer: Callable[[Path, dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None
    # the local server and in-process runs: its runner on the copy's model file (None: TensorFlow, which the
    # local server runs with TF Serving's semantics itself)
    open: Callable[[Path, RuntimeSettings], Runner] | None = None
    # the class of _runners.py that Triton's and MLServer's models make (None: it runs behind the local server only)
    runner: type | None = None
    # the floor's runner (serve_bench.runtimes._floor) on a catalogue model's copy, given (copy, device, precision):
    # compile(size), compile_seconds, first_run_seconds, spec, in_effect, precision_witness(), and the call
    floor: Callable[[Path, str, str], Any] | None = None

    @property
    def converted(self) -> bool:
        """It runs a copy export converts from the SavedModel (not the SavedModel itself)."""
        return self.directory is not None

    def copy_files(self, models_dir: Path, model: str, version: int) -> list[Path]:
        """The files of ``model`` ``version``'s copy under ``models_dir``, the model file first."""
        if self.directory is None:
            raise UserError(f"the {self.name} runtime runs the SavedModel itself: it has no copy of its own")
        path = models_dir / self.directory / model / str(version) / self.model_file
        return [path, *(path.with_suffix(suffix) for suffix in self.companions)]

    def missing(self, *, converting: bool = False) -> str | None:
        """One line naming what to install when the packages this runtime needs to run (and with ``converting``,
        to be converted for) are absent, else None."""
        wanted = (*self.convert_packages, *self.packages) if converting else self.packages
        absent = [package for package in wanted if importlib.util.find_spec(package) is None]
        if not absent:
            return None
        return f"{self.name} needs {', '.join(absent)}, which is not installed: {self.extra}"

    def require(self, *, converting: bool = False) -> None:
        line = self.missing(converting=converting)
        if line:
            raise UserError(line)

    def check_device(self, device: str) -> None:
        if device not in self.devices:
            raise InvalidValue("device", device, f"{' | '.join(self.devices)} for the {self.name} runtime")

    def check_precision(self, precision: str) -> None:
        if precision not in self.precisions:
            raise InvalidValue("precision", precision, f"{' | '.join(self.precisions)} for the {self.name} runtime")
