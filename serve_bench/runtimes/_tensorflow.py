"""TensorFlow: the SavedModel ``serving_default`` that export writes, run as it was exported.

It is the source every other runtime's copy is converted from and checked against, and the one
runtime that also runs ``serving_bytes`` (JPEG decoding is a TensorFlow op). The local server runs
it itself, with TF Serving's semantics (every signature, TF Serving's error codes); Triton's and
MLServer's models run it with :class:`~serve_bench.runtimes._runners.TensorFlowRunner`.
"""

from __future__ import annotations

from serve_bench.runtimes._record import RuntimeRecord
from serve_bench.runtimes._runners import TensorFlowRunner

__all__ = ["TENSORFLOW"]

TENSORFLOW = RuntimeRecord(
    name="tensorflow",
    display="TensorFlow",
    directory=None,  # exported_models/<model>/<version>/ is its copy: the SavedModel
    model_file="saved_model.pb",
    packages=("tensorflow",),
    extra="pip install 'serve-bench[tensorflow]'",
    converter="tf.saved_model.save (the export itself)",
    short="",  # the default runtime: configuration ids leave it out
    runner=TensorFlowRunner,
)
