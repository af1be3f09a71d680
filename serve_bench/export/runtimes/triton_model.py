"""Triton Python-backend model: the exported model's ``serving_default``, batched by Triton.

Copied by ``serve-bench export`` to ``triton/<model>/<version>/model.py``. The version
directory holds what the ``runtime`` parameter runs: ``model.savedmodel/`` for TensorFlow
(the default), ``model.onnx`` for ONNX Runtime, ``model.xml``/``model.bin`` for OpenVINO
(the names Triton's own TensorFlow, ONNX Runtime and OpenVINO backends expect). Triton's
dynamic batcher hands ``execute`` every request of one scheduled batch; they are run as one
call, as TF Serving's batching session does, and the output rows are handed back to each
request in order.

Threads are set explicitly (``intra_op_threads``; 0 leaves the runtime's default) and what
runs is printed once at load into Triton's log, so a result can say what served it.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def _tensorflow(here, params, threads):
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    path = params.get("saved_model") or os.path.join(here, "model.savedmodel")
    signature = tf.saved_model.load(path).signatures[params.get("signature") or "serving_default"]

    def run(feeds):
        return {k: v.numpy() for k, v in signature(**{k: tf.constant(v) for k, v in feeds.items()}).items()}

    return run, f"tensorflow {tf.__version__}"


def _onnxruntime(here, params, threads):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3  # errors only
    path = os.path.join(here, "model.onnx")
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]

    def run(feeds):
        return dict(zip(names, session.run(names, feeds)))

    return run, f"onnxruntime {onnxruntime.__version__} ({session.get_providers()[0]})"


def _openvino(here, params, threads):
    import openvino

    # LATENCY: one stream, Triton batches; f32: OpenVINO's own default on an AVX512-BF16 CPU is bf16
    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = openvino.Core().compile_model(os.path.join(here, "model.xml"), "CPU", config)
    request = compiled.create_infer_request()  # one instance runs one batch at a time
    names = [output.get_any_name() for output in compiled.outputs]

    def run(feeds):
        results = request.infer(feeds)
        return {name: np.array(results[name]) for name in names}  # copies: the request is reused

    return run, f"openvino {openvino.get_version()}"


_RUNTIMES = {"tensorflow": _tensorflow, "onnxruntime": _onnxruntime, "openvino": _openvino}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        here = os.path.join(args["model_repository"], args["model_version"])
        runtime = params.get("runtime") or "tensorflow"
        if runtime not in _RUNTIMES:
            raise ValueError(f"parameter runtime is {runtime!r}; it takes {', '.join(_RUNTIMES)}")
        threads = int(params.get("intra_op_threads") or 0)
        self.run, what = _RUNTIMES[runtime](here, params, threads)
        print(
            f"serve-bench: {args['model_name']} version {args['model_version']} runs serving_default on {what}, "
            f"intra_op_threads={threads or 'the runtime default'}",
            flush=True,
        )

    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, self.input_name).as_numpy() for r in requests]
        batch = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        outputs = self.run({self.input_name: np.ascontiguousarray(batch)})[self.output_name]
        responses = []
        start = 0
        for array in arrays:
            rows = outputs[start : start + len(array)]
            start += len(array)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(self.output_name, rows)]))
        return responses
