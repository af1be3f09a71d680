"""The one door to TensorFlow, for export/, server/ and predict/ (and the pipeline's in-process run).

TensorFlow is an extra (``serve-bench[tensorflow]``): the plain install has none, and whatever
needs it says so in one line, naming the extra.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from serve_bench.errors import UserError, first_line

TENSORFLOW_EXTRA = "pip install 'serve-bench[tensorflow]'"


def tensorflow_installed() -> bool:
    """TensorFlow can be imported here (found, not imported)."""
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


# Who needs TensorFlow, by the calling module, for the one line a user reads when it is missing.
_NEEDED_BY = (
    ("serve_bench.export", "export"),
    ("serve_bench.server", "the local server"),
    ("serve_bench.predict", "predict (the exported graph's costs)"),
    ("serve_bench.pipeline", "the pipeline's in-process run"),
)


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


class TensorFlowMissing(UserError, ImportError):
    """TensorFlow is not installed (or does not import): one line naming the extra that brings it.

    A UserError, so the CLI prints it as one line (exit status 2); an ImportError too, so code that
    asks "is TensorFlow here?" with ``except ImportError`` keeps working.
    """


def import_tensorflow(needed_by: str | None = None) -> ModuleType:
    """Import TensorFlow quietly (its start-up logs are noise in a CLI), once per process.

    Without TensorFlow this raises TensorFlowMissing saying what needed it (``needed_by``; by default
    the calling part of serve-bench, e.g. "export") and which extra installs it.
    """
    try:
        return _import_quietly()
    except ImportError as exc:
        who = needed_by or _caller()
        if isinstance(exc, ModuleNotFoundError) and exc.name == "tensorflow":
            message = f"{who} needs TensorFlow, which is not installed: {TENSORFLOW_EXTRA}"
        else:  # installed but broken (a missing dependency, a bad wheel): say what failed
            message = f"{who} needs TensorFlow, which fails to import ({first_line(exc)}): {TENSORFLOW_EXTRA}"
        raise TensorFlowMissing(message) from exc


def _caller() -> str:
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    module = str(frame.f_globals.get("__name__", ""))
    return next((who for prefix, who in _NEEDED_BY if module.startswith(prefix)), "this command")


@functools.cache
def _import_quietly() -> ModuleType:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with _captured_stderr_fd():
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")
        tf.config.list_physical_devices()  # device discovery logs cuInit failures
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
