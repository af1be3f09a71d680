"""The model in process on the same frames: no server, no network, no encoding.

TensorFlow runs the SavedModel; another runtime runs the copy ``serve-bench export`` converted
for it (``--runtime``), so a served runtime is compared with itself. The runtime
is imported only when this runs, and only if it is installed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench._tf import tensorflow_installed
from serve_bench.runtimes import RECORDS, record

__all__ = ["RUNTIME_NAMES", "InProcessModel", "find_saved_model", "tensorflow_installed"]

RUNTIME_NAMES = {kept.name: kept.display for kept in RECORDS.values()}


def find_saved_model(models_dir: Path, model: str) -> Path | None:
    """``models_dir/model/<highest version>`` if it holds a SavedModel."""
    base = models_dir / model
    if not base.is_dir():
        return None
    versions = sorted((int(p.name), p) for p in base.iterdir() if p.name.isdigit() and (p / "saved_model.pb").exists())
    return versions[-1][1] if versions else None


@dataclass
class InProcessModel:
    """serving_default, called directly: the SavedModel at ``path``, or its copy for ``runtime``."""

    path: Path
    runtime: str = "tensorflow"
    _call: Callable[[np.ndarray], np.ndarray] | None = None
    _loaded: Any = None  # the SavedModel object: keeps the graph alive as long as the function

    @property
    def in_effect(self) -> dict[str, str]:
        """The converted runtime's settings as it reports them (threads, hint, precision); {} for TensorFlow."""
        return dict(getattr(self._loaded, "in_effect", {}))

    def load(self) -> InProcessModel:
        if record(self.runtime).converted:
            return self._load_converted()
        from serve_bench._tf import import_tensorflow

        tf = import_tensorflow()
        loaded = tf.saved_model.load(str(self.path))
        function = loaded.signatures["serving_default"]
        (input_name,) = function.structured_input_signature[1].keys()

        def call(images: np.ndarray) -> np.ndarray:
            outputs: dict[str, Any] = function(**{input_name: tf.constant(images)})
            name = "features" if "features" in outputs else next(iter(outputs))
            return np.asarray(outputs[name].numpy(), dtype=np.float32)

        self._loaded = loaded
        self._call = call
        return self

    def _load_converted(self) -> InProcessModel:
        from serve_bench.export import converted_files
        from serve_bench.runtimes import RuntimeSettings, open_runner

        version = int(self.path.name)
        converted, *_ = converted_files(self.path.parent.parent, self.runtime, self.path.parent.name, version)
        runner = open_runner(self.runtime, converted, RuntimeSettings(self.runtime))
        (input_name,) = runner.input_names

        def call(images: np.ndarray) -> np.ndarray:
            outputs = runner({input_name: np.ascontiguousarray(images)})
            name = "features" if "features" in outputs else next(iter(outputs))
            return np.asarray(outputs[name], dtype=np.float32)

        self._loaded = runner
        self._call = call
        return self

    def features(self, frames: np.ndarray, batch_size: int) -> np.ndarray:
        assert self._call is not None, "load() first"
        parts = [self._call(frames[i : i + batch_size].astype(np.float32)) for i in range(0, len(frames), batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)

    def frames_per_s(self, frames: np.ndarray, batch_size: int) -> float:
        """Frames/s over ``frames`` in batches of ``batch_size``, after one untimed warm-up batch."""
        assert self._call is not None, "load() first"
        self._call(frames[:batch_size].astype(np.float32))  # first call per shape traces/allocates
        started = time.perf_counter()
        self.features(frames, batch_size)
        return len(frames) / max(time.perf_counter() - started, 1e-9)
