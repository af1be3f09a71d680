"""The one door to TensorFlow, for export/, server/ and predict/ (and the pipeline's in-process run)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from types import ModuleType
from typing import Any


@contextlib.contextmanager
def _captured_stderr_fd() -> Iterator[None]:
    """TF's C++ start-up lines (oneDNN, cuInit) are written before absl logging is
    initialised, so TF_CPP_MIN_LOG_LEVEL cannot hide them; hold fd 2 aside and
    replay it only when the import fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            sys.stderr.write(sink.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@functools.cache
def import_tensorflow() -> ModuleType:
    """Import TensorFlow quietly (its start-up logs are noise in a CLI)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        with _captured_stderr_fd():
            import tensorflow as tf

            tf.get_logger().setLevel("ERROR")
            tf.config.list_physical_devices()  # device discovery logs cuInit failures
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("TensorFlow is needed here: pip install 'tensorflow==2.21.0'") from exc
    module: ModuleType = tf  # TensorFlow ships no type information: its module is Any to mypy
    return module


def frozen_graph(concrete: Any) -> Any:
    """A concrete function as a tf.Graph with its variables as constants and its calls inlined."""
    tf = import_tensorflow()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2_as_graph

    _, graph_def = convert_variables_to_constants_v2_as_graph(concrete)
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
    return graph
