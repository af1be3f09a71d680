"""Runtimes, one record each: what runs the model, where its copy lives, what it needs and accepts.

``RECORDS`` holds every runtime, the source (TensorFlow) first; ``record(name)`` finds one and is the
one check of a runtime's name. Adding a runtime is one module with its record, listed in
``_registry.py``. Nothing here imports a runtime's package until a runner is made or a copy converted.
"""

from __future__ import annotations

from serve_bench.runtimes._jax import JAX, JaxRunner, features_in_child, keras_on_jax, write_copy, write_random_copy
from serve_bench.runtimes._onnxruntime import ONNXRUNTIME
from serve_bench.runtimes._openvino import OPENVINO
from serve_bench.runtimes._record import CONVERSION_FILE, RuntimeRecord
from serve_bench.runtimes._registry import (
    CONVERTED_RUNTIMES,
    DEFAULT_RUNTIME,
    RECORDS,
    RUNNERS_FILE,
    RUNTIMES,
    check_runtime,
    missing_runtime,
    open_runner,
    record,
    record_in_servers,
)
from serve_bench.runtimes._settings import (
    OPENVINO_HINTS,
    OPENVINO_PRECISIONS,
    CompilingRunner,
    Runner,
    RuntimeSettings,
)
from serve_bench.runtimes._tensorflow import TENSORFLOW

__all__ = [
    "CONVERSION_FILE",
    "CONVERTED_RUNTIMES",
    "DEFAULT_RUNTIME",
    "JAX",
    "ONNXRUNTIME",
    "OPENVINO",
    "OPENVINO_HINTS",
    "OPENVINO_PRECISIONS",
    "RECORDS",
    "RUNNERS_FILE",
    "RUNTIMES",
    "TENSORFLOW",
    "CompilingRunner",
    "JaxRunner",
    "Runner",
    "RuntimeRecord",
    "RuntimeSettings",
    "check_runtime",
    "features_in_child",
    "keras_on_jax",
    "missing_runtime",
    "open_runner",
    "record",
    "record_in_servers",
    "write_copy",
    "write_random_copy",
]
