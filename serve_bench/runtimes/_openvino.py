"""OpenVINO on the CPU, running the exported signature converted to OpenVINO IR.

Its copy is ``exported_models/openvino/<model>/<version>/model.xml`` and ``model.bin`` (OpenVINO Model
Server's layout). ``openvino.convert_model`` converts the loaded signature: given the SavedModel's directory
instead it fails on MobileNetV2 and InceptionV3 ("VarHandleOp ... Cannot find requested variable"). The IR
is saved with ``compress_to_fp16=False``: its default halves the weights, which moved InceptionV3's features
by 5e-4 of their range.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from serve_bench.runtimes._record import RuntimeRecord
from serve_bench.runtimes._runners import OpenVinoRunner

if TYPE_CHECKING:  # the registry's RuntimeSettings validates against the records: no import at run time
    from serve_bench.runtimes._settings import Runner, RuntimeSettings

__all__ = ["OPENVINO"]


def _convert(tf: Any, signature: Any, destination: Path) -> str:
    import openvino

    model = openvino.convert_model(signature)
    openvino.save_model(model, str(destination), compress_to_fp16=False)
    return f"openvino.convert_model {importlib.metadata.version('openvino')} (float32 weights)"


def _open(path: Path, settings: RuntimeSettings) -> Runner:
    return OpenVinoRunner(
        str(path),
        settings.intra_op_threads,
        hint=settings.openvino_hint,
        streams=settings.openvino_streams,
        precision=settings.openvino_precision,
    )


OPENVINO = RuntimeRecord(
    name="openvino",
    display="OpenVINO",
    directory="openvino",
    model_file="model.xml",
    companions=(".bin",),
    packages=("openvino",),
    extra="pip install 'serve-bench[runtimes]'",
    converter="openvino.convert_model",
    short="ov",
    convert=_convert,
    open=_open,
    runner=OpenVinoRunner,
)
