"""The runners: a runtime's copy of ``serving_default``, called with numpy arrays by input name.

Written once, used wherever a model runs: the local server, in-process runs, export's check of a
copy, and inside Triton's and MLServer's models. Those two servers run in an environment of their
own (their containers, ``.venv-servers``) that has no serve-bench, so ``serve-bench export`` copies
this file into each model repository, beside the model that imports it (``RUNNERS_FILE`` in
:mod:`serve_bench.runtimes`). Hence it imports nothing of serve-bench, and no package but numpy
until a runner is made; TensorFlow is handed in by the caller (serve-bench's own import silences
TensorFlow's start-up logs).

Every runner takes ``path`` (what ``export`` wrote for its runtime) and ``intra_op_threads`` (0: the
runtime's default), sets each thread setting explicitly, keeps what the runtime then reports in
``in_effect`` (so a result can say what ran), and is safe to call from several threads at once (the
local server's batch threads do).
"""

from __future__ import annotations

import importlib.metadata
import os
import queue
from typing import Any

import numpy as np

__all__ = ["OnnxRunner", "OpenVinoRunner", "TensorFlowRunner"]


class TensorFlowRunner:
    """One signature of a SavedModel on TensorFlow (``tf``: the caller's tensorflow module)."""

    def __init__(self, path: str, intra_op_threads: int = 0, *, tf: Any, signature: str = "serving_default") -> None:
        if intra_op_threads:
            tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)
        self._tf = tf
        self._loaded = tf.saved_model.load(str(path))  # keeps the variables alive
        self.signature = self._loaded.signatures[signature]
        self.input_names = list(self.signature.structured_input_signature[1])
        self.in_effect = {"runtime": f"tensorflow {tf.__version__}"}

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        tf = self._tf
        outputs = self.signature(**{name: tf.constant(array) for name, array in inputs.items()})
        return {name: tensor.numpy() for name, tensor in outputs.items()}


class OnnxRunner:
    """A model.onnx on ONNX Runtime's CPU provider."""

    def __init__(self, path: str | bytes, intra_op_threads: int = 0, *, inter_op_threads: int = 0) -> None:
        """``path``: a model.onnx, or a model's serialized bytes."""
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = inter_op_threads
        options.log_severity_level = 3  # errors only: its warnings are about unused initializers
        model = path if isinstance(path, bytes) else str(path)
        self._session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self._outputs = [output.name for output in self._session.get_outputs()]
        self.input_names = [tensor.name for tensor in self._session.get_inputs()]
        self.in_effect = {
            "runtime": f"onnxruntime {onnxruntime.__version__}",
            "provider": self._session.get_providers()[0],
            "intra_op_threads": _onnx_intra_op(intra_op_threads),
            # ORT runs a graph's nodes one after another unless execution_mode is ORT_PARALLEL, which is not set
            "inter_op_threads": str(inter_op_threads or "0 (nodes run in sequence: no inter-op pool)"),
        }

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self._outputs, self._session.run(self._outputs, inputs)))


def _onnx_intra_op(asked: int) -> str:
    """The intra-op pool ORT makes: ``asked`` threads, or for 0 its default, which ORT does not report.

    With 0, ORT sizes the pool from Env::GetNumPhysicalCpuCores() (onnxruntime/core/platform/posix/env.cc:
    cpuinfo's core count, else hardware_concurrency() / 2): the physical cores, counted here the same way
    (psutil where it is installed, as in serve-bench's environment).
    """
    if asked:
        return str(asked)
    try:
        import psutil

        cores = psutil.cpu_count(logical=False)
    except ImportError:
        cores = None
    cores = cores or max(1, (os.cpu_count() or 2) // 2)
    return f"{cores} (0 asked: ORT's default, one per physical core)"


class OpenVinoRunner:
    """An OpenVINO IR (model.xml beside its model.bin) compiled for the CPU.

    ``hint`` is PERFORMANCE_HINT (LATENCY: one stream, since the server in front batches), ``streams``
    NUM_STREAMS (0: as the hint decides), ``precision`` INFERENCE_PRECISION_HINT: f32, because OpenVINO's
    own default is bf16 on CPUs with AVX512-BF16, which moved InceptionV3's features by 4e-3 of their range.
    """

    def __init__(
        self, path: str, intra_op_threads: int = 0, *, hint: str = "LATENCY", streams: int = 0, precision: str = "f32"
    ) -> None:
        import openvino

        config: dict[str, Any] = {"PERFORMANCE_HINT": hint, "INFERENCE_PRECISION_HINT": precision}
        if streams:
            config["NUM_STREAMS"] = streams
        if intra_op_threads:
            config["INFERENCE_NUM_THREADS"] = intra_op_threads
        self._compiled = openvino.Core().compile_model(str(path), "CPU", config)
        self._outputs = [output.get_any_name() for output in self._compiled.outputs]
        self.input_names = [tensor.get_any_name() for tensor in self._compiled.inputs]
        # an infer request runs one inference at a time: one per concurrent caller, reused
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.in_effect = {"runtime": f"openvino {importlib.metadata.version('openvino')}"}
        for name in ("PERFORMANCE_HINT", "INFERENCE_PRECISION_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS"):
            value = self._compiled.get_property(name)
            # a precision is an openvino.Type ("<Type: 'float32'>" as str): its short name, as the hint takes it
            self.in_effect[name] = value.to_string() if hasattr(value, "to_string") else str(value)

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            request = self._idle.get_nowait()
        except queue.Empty:
            request = self._compiled.create_infer_request()
        try:
            results = request.infer(inputs)
            return {name: np.array(results[name]) for name in self._outputs}  # copies: the request is reused
        finally:
            self._idle.put(request)
