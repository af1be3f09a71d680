"""ONNX Runtime on the CPU, running the exported signature converted to ONNX by tf2onnx.

Its copy is ``exported_models/onnx/<model>/<version>/model.onnx`` (the layout of Triton's onnxruntime
backend). tf2onnx 1.17 converts the loaded ``serving_default`` (``convert.from_function``; Keras 3's own
``export(format="onnx")`` calls the same function, on the Keras model without preprocessing), at an
opset that Triton 2.51's ONNX Runtime (1.19) and ONNX Runtime 1.31 both run.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from serve_bench.runtimes._record import RuntimeRecord
from serve_bench.runtimes._runners import OnnxRunner

if TYPE_CHECKING:  # the registry's RuntimeSettings validates against the records: no import at run time
    from serve_bench.runtimes._settings import Runner, RuntimeSettings

__all__ = ["ONNXRUNTIME"]

ONNX_OPSET = 17


def _convert(tf: Any, signature: Any, destination: Path) -> str:
    import tf2onnx

    specs = signature.structured_input_signature[1]
    input_signature = [tf.TensorSpec(spec.shape, spec.dtype, name=name) for name, spec in sorted(specs.items())]
    names = [name for name, _ in sorted(specs.items())]

    def forward(*tensors: Any) -> Any:
        return signature(**dict(zip(names, tensors)))

    tf2onnx.convert.from_function(
        tf.function(forward), input_signature=input_signature, opset=ONNX_OPSET, output_path=str(destination)
    )
    return f"tf2onnx {importlib.metadata.version('tf2onnx')} (opset {ONNX_OPSET})"


def _open(path: Path, settings: RuntimeSettings) -> Runner:
    return OnnxRunner(str(path), settings.intra_op_threads, inter_op_threads=settings.inter_op_threads)


ONNXRUNTIME = RuntimeRecord(
    name="onnxruntime",
    display="ONNX Runtime",
    directory="onnx",
    model_file="model.onnx",
    packages=("tf2onnx", "onnx", "onnxruntime"),
    extra="pip install 'serve-bench[runtimes]'",
    converter="tf2onnx",
    short="ort",
    convert=_convert,
    open=_open,
    runner=OnnxRunner,
)
