"""ONNX Runtime on the CPU, running the exported signature converted to ONNX by tf2onnx.

Its copy is ``exported_models/onnx/<model>/<version>/model.onnx`` (the layout of Triton's onnxruntime
backend). tf2onnx 1.17 converts the loaded ``serving_default`` (``convert.from_function``; Keras 3's own
``export(format="onnx")`` calls the same function, on the Keras model without preprocessing), at an
opset that Triton 2.51's ONNX Runtime (1.19) and ONNX Runtime 1.31 both run.

Where TensorFlow cannot run (the GPU host) and the weights cannot travel (InceptionV3's and ResNet-50's copies are
83 and 90 MiB), the copy is built there from a *skeleton*: the same tf2onnx graph, converted here, whose
large float weights are left out and replaced by their mean and spread (:func:`strip_weights`, run by
``make gpu-wheels``); :func:`fill_weights` draws each again, uniform with that mean and spread (Keras' random
initializers are uniform, and a folded batch normalization only scales them), so the copy computes with weights
of the scale a random Keras model has (timing does not depend on the values, but underflow to subnormal numbers
would: the scale keeps the activations where a random export's are). Everything else in the graph (shapes, axes,
biases, small constants) travels whole. The folder of skeletons is named by ``SERVE_BENCH_ONNX_SKELETONS``.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from serve_bench.errors import UserError, first_line
from serve_bench.runtimes._record import CONVERSION_FILE, RuntimeRecord
from serve_bench.runtimes._runners import OnnxRunner

if TYPE_CHECKING:  # the registry's RuntimeSettings validates against the records: no import at run time
    from serve_bench.runtimes._settings import Runner, RuntimeSettings

__all__ = ["ONNXRUNTIME", "SKELETONS_ENV", "fill_weights", "strip_weights", "write_random_copy"]

ONNX_OPSET = 17
SKELETONS_ENV = "SERVE_BENCH_ONNX_SKELETONS"  # a folder of <model>.onnx skeletons (make gpu-wheels: .whl/onnx)
# a float32 initializer of this many elements or more travels as its mean and spread alone: every convolution's
# kernel; biases, shapes and axes stay whole (InceptionV3: an 83 MiB copy, a 105 KiB skeleton)
STRIP_FROM_ELEMENTS = 1024
_FILL_TAG = "serve-bench fill: "  # an initializer's doc_string, then {"mean": m, "std": s}
_SKELETON_KEY = "serve-bench skeleton"  # the model's metadata_props entry: the weights it left out
FILL_SEED = 1234  # as the jax runtime's random copies


def strip_weights(source: Path, destination: Path) -> int:
    """Write ``source`` (a model.onnx) to ``destination`` without its large float weights, each replaced by its
    mean and standard deviation (its name, type and shape kept); the number left out."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    stripped = 0
    for tensor in model.graph.initializer:
        if tensor.data_type == onnx.TensorProto.FLOAT and math.prod(tensor.dims) >= STRIP_FROM_ELEMENTS:
            values = numpy_helper.to_array(tensor).astype(np.float64)
            tensor.doc_string = _FILL_TAG + json.dumps({"mean": float(values.mean()), "std": float(values.std())})
            tensor.ClearField("raw_data")
            tensor.ClearField("float_data")
            stripped += 1
    props = {prop.key: prop.value for prop in model.metadata_props}
    onnx.helper.set_model_props(model, {**props, _SKELETON_KEY: str(stripped)})
    destination.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(destination))
    return stripped


def fill_weights(skeleton: Path, destination: Path, seed: int = FILL_SEED) -> int:
    """Write a runnable model.onnx from ``skeleton``: each weight left out drawn again, uniform with its recorded
    mean and standard deviation (numpy, ``seed``); the number drawn. UserError for a file that is no skeleton."""
    import onnx

    try:
        model = onnx.load(str(skeleton))
    except Exception as exc:  # onnx raises DecodeError, OSError, ...: all mean "not an ONNX file"
        reason = first_line(exc)
        raise UserError(f"{skeleton} is not an ONNX skeleton ({reason}); make gpu-wheels writes them") from None
    props = {prop.key: prop.value for prop in model.metadata_props}
    if _SKELETON_KEY not in props:
        raise UserError(f"{skeleton} is a model.onnx, not a skeleton of one (make gpu-wheels writes those)")
    onnx.helper.set_model_props(model, {k: v for k, v in props.items() if k != _SKELETON_KEY})
    rng = np.random.default_rng(seed)
    drawn = 0
    for tensor in model.graph.initializer:
        if tensor.doc_string.startswith(_FILL_TAG):
            moments = json.loads(tensor.doc_string[len(_FILL_TAG) :])
            half = moments["std"] * math.sqrt(3.0)  # a uniform's spread is its half-width over sqrt(3)
            count = math.prod(tensor.dims)
            values = rng.uniform(moments["mean"] - half, moments["mean"] + half, count).astype(np.float32)
            tensor.raw_data = values.tobytes()
            tensor.doc_string = ""
            drawn += 1
    if drawn != int(props[_SKELETON_KEY]):
        raise UserError(f"{skeleton} left out {props[_SKELETON_KEY]} weights but describes {drawn}: write it again")
    destination.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(destination))
    return drawn


def write_random_copy(models_dir: Path, model: str, version: int) -> Path:
    """An ONNX Runtime copy of catalogue ``model`` ``version`` for a host without TensorFlow: its skeleton (from
    the folder ``SERVE_BENCH_ONNX_SKELETONS`` names) with the weights drawn again; its model.onnx path."""
    from serve_bench.catalogue import get_spec
    from serve_bench.runtimes._tensorflow import TENSORFLOW

    get_spec(model)
    folder = os.environ.get(SKELETONS_ENV)
    if not folder and TENSORFLOW.missing() is not None:  # converting is the way anywhere but a GPU visit
        raise UserError(
            f"export needs TensorFlow to convert {model} for onnxruntime, which is not installed: {TENSORFLOW.extra} "
            f"(where it cannot run, a copy is drawn from a skeleton: set {SKELETONS_ENV}; make gpu-wheels writes them)"
        )
    ONNXRUNTIME.require()
    skeleton = Path(folder) / f"{model}.onnx" if folder else None
    if skeleton is None or not skeleton.is_file():
        where = f"{skeleton} does not exist" if skeleton else f"{SKELETONS_ENV} is not set"
        raise UserError(
            f"no ONNX skeleton of {model} ({where}): a copy with random weights is drawn from one where TensorFlow "
            f"cannot convert (make gpu-wheels writes them into .whl/onnx; set {SKELETONS_ENV} to that folder)"
        )
    directory = models_dir / ONNXRUNTIME_DIRECTORY / model / str(version)
    path = directory / MODEL_FILE
    fill_weights(skeleton, path)
    record = {
        "runtime": "onnxruntime",
        "model": model,
        "weights": f"random: drawn per weight with its mean and spread in a random export's (seed {FILL_SEED})",
        "converter": f"drawn from skeleton {skeleton.name} (a tf2onnx graph converted where TensorFlow runs)",
        "path": str(path),
    }
    (directory / CONVERSION_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return path


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


class OnnxFloorRunner:
    """A catalogue model's ONNX Runtime copy as the floor measures it (``serve_bench.runtimes._floor``): ONNX
    Runtime builds no program per shape, so a size's "compile" is nothing and its first run (where ORT plans the
    size's memory) is timed apart, as the jax runner's first run is."""

    def __init__(self, copy: Path, device: str = "cpu", precision: str = "fp32") -> None:
        from serve_bench.catalogue import get_spec

        ONNXRUNTIME.check_device(device)
        ONNXRUNTIME.check_precision(precision)
        try:
            self.spec = get_spec(copy.parent.parent.name)  # exported_models/onnx/<model>/<version>/model.onnx
        except UserError as exc:
            raise UserError(
                f"{copy}: the floor runs a catalogue model's copy, <models>/onnx/<model>/<version>/model.onnx ({exc})"
            ) from None
        try:
            self._runner = OnnxRunner(str(copy))
        except Exception as exc:  # ORT's own kinds for a missing or damaged file
            raise UserError(f"{copy} does not load in onnxruntime: {first_line(exc)}") from None
        self.in_effect = {**self._runner.in_effect, "device": device, "precision": precision}
        self.compile_seconds: dict[int, float] = {}
        self.first_run_seconds: dict[int, float] = {}

    def compile(self, batch_size: int) -> float:
        """Run ``batch_size`` once (the first run, timed) unless it ran; the seconds it took (0 if it had)."""
        if batch_size in self.compile_seconds:
            return 0.0
        images = np.zeros((batch_size, *self.spec.input_shape), np.float32)
        started = time.perf_counter()
        self._runner({"images": images})
        self.compile_seconds[batch_size] = 0.0
        self.first_run_seconds[batch_size] = time.perf_counter() - started
        return self.first_run_seconds[batch_size]

    def precision_witness(self) -> dict[str, float]:
        """The precision ORT's CPU convolutions run at here (``_floor.precision_witness``): an ONNX Conv on
        its CPU provider, as the model's run; float32 gives about 1e-6."""
        from onnx import TensorProto, helper, numpy_helper

        from serve_bench.runtimes._floor import precision_witness

        def convolve(images: np.ndarray, kernel: np.ndarray) -> Any:
            size, channels = kernel.shape[0], kernel.shape[3]
            shape = [1, images.shape[3], images.shape[1], images.shape[2]]
            node = helper.make_node("Conv", ["x", "k"], ["y"], pads=[size // 2] * 4)
            graph = helper.make_graph(
                [node],
                "witness",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, *shape[2:]])],
                [numpy_helper.from_array(np.ascontiguousarray(kernel.transpose(3, 2, 0, 1)), "k")],
            )
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)])
            model.ir_version = 8  # what ONNX Runtime 1.19 (Triton 2.51's) and later read
            answer = OnnxRunner(model.SerializeToString())({"x": np.ascontiguousarray(images.transpose(0, 3, 1, 2))})
            return answer["y"].transpose(0, 2, 3, 1)

        return precision_witness(convolve, FILL_SEED)

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._runner(inputs)


def _open(path: Path, settings: RuntimeSettings) -> Runner:
    return OnnxRunner(str(path), settings.intra_op_threads, inter_op_threads=settings.inter_op_threads)


ONNXRUNTIME_DIRECTORY = "onnx"
MODEL_FILE = "model.onnx"

ONNXRUNTIME = RuntimeRecord(
    name="onnxruntime",
    display="ONNX Runtime",
    directory=ONNXRUNTIME_DIRECTORY,
    model_file=MODEL_FILE,
    packages=("onnx", "onnxruntime"),  # onnx: a copy drawn from its skeleton
    convert_packages=("tf2onnx",),
    extra="pip install 'serve-bench[runtimes]'",
    converter="tf2onnx",
    short="ort",
    standalone=True,  # from a skeleton where TensorFlow cannot run (the GPU host's CPU)
    write_random=lambda models_dir, model, version: write_random_copy(models_dir, model, version),
    floor=OnnxFloorRunner,
    convert=_convert,
    open=_open,
    runner=OnnxRunner,
)
