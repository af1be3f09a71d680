"""What serve-bench knows about one runtime, in one record.

A runtime is what executes the model's ``serving_default`` behind the local server, in process,
and (where its package runs there) inside Triton's and MLServer's models. A record holds its
names, its copy's layout under ``exported_models/``, the packages and the pip extra it needs,
what it accepts for the device and the precision, and how it behaves as a server runtime
(whether it compiles one program per batch shape, whether it can serve without the SavedModel).
The runner and converter live beside the record, in the runtime's own module.

TensorFlow, ONNX Runtime and OpenVINO still keep their facts in ``export/_convert.py`` and
``export/_runners.py``; new runtimes start here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench.errors import InvalidValue, UserError

__all__ = ["RuntimeRecord"]


@dataclass(frozen=True)
class RuntimeRecord:
    name: str  # as flags and results spell it
    display: str  # as a report prints it
    directory: str  # its copies: exported_models/<directory>/<model>/<version>/
    model_file: str  # the file in that directory the runner loads
    packages: tuple[str, ...]  # modules that must import for it to run
    extra: str  # the pip command that installs them
    converter: str  # what makes its copy from an export
    devices: tuple[str, ...] = ("cpu",)  # --device values it accepts, the default first
    precisions: tuple[str, ...] = ("fp32",)  # --precision values it accepts, the default first
    # it builds one program per input shape (XLA): warm-up compiles every batch size the server can form
    compiles_per_shape: bool = False
    # it can serve a catalogue model with no SavedModel beside it (no TensorFlow on the host)
    standalone: bool = False
    # `serve-bench export` without --runtimes converts for it when it is installed
    converted_by_default: bool = True
    # export: write the copy of (Keras model, catalogue name) into a directory, naming its source
    write: Callable[[Any, str, Path, str], Path] | None = None
    # export's check: the copy's outputs for {input name: images}, computed however the runtime must
    answer: Callable[[Path, dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None

    def missing(self) -> str | None:
        """One line naming what to install when this runtime's packages are absent, else None."""
        absent = [package for package in self.packages if importlib.util.find_spec(package) is None]
        if not absent:
            return None
        return f"{self.name} needs {', '.join(absent)}, which is not installed: {self.extra}"

    def require(self) -> None:
        line = self.missing()
        if line:
            raise UserError(line)

    def check_device(self, device: str) -> None:
        if device not in self.devices:
            raise InvalidValue("device", device, f"{' | '.join(self.devices)} for the {self.name} runtime")

    def check_precision(self, precision: str) -> None:
        if precision not in self.precisions:
            raise InvalidValue("precision", precision, f"{' | '.join(self.precisions)} for the {self.name} runtime")
