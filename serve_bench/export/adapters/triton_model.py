"""Triton Python-backend model: the exported model's ``serving_default``, batched by Triton.

Copied by ``serve-bench export`` to ``triton/<model>/<version>/model.py``, with serve-bench's
runners beside it (``serve_bench_runners.py``: Triton's environment has no serve-bench). The
version directory holds what the ``runner`` parameter runs: ``model.savedmodel/`` for TensorFlow
(the default), or the ``model_file`` of another runtime's copy (``model.onnx`` for ONNX Runtime,
``model.xml``/``model.bin`` for OpenVINO: the names Triton's own backends expect). Triton's
dynamic batcher hands ``execute`` every request of one scheduled batch; they are run as one
call, as TF Serving's batching session does, and the output rows are handed back to each
request in order.

Threads are set explicitly (``intra_op_threads``; 0 leaves the runtime's default) and what
runs is printed once at load into Triton's log, so a result can say what served it.
"""

import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        here = os.path.join(args["model_repository"], args["model_version"])
        sys.path.insert(0, here)  # serve_bench_runners.py, copied beside this file
        import serve_bench_runners as runners

        threads = int(params.get("intra_op_threads") or 0)
        kind = getattr(runners, params.get("runner") or "TensorFlowRunner")
        if kind is runners.TensorFlowRunner:
            import tensorflow as tf

            path = params.get("saved_model") or os.path.join(here, "model.savedmodel")
            signature = params.get("signature") or "serving_default"
            self.run = kind(path, threads, tf=tf, signature=signature)
        else:
            self.run = kind(os.path.join(here, params["model_file"]), threads)
        print(
            f"serve-bench: {args['model_name']} version {args['model_version']} runs serving_default on "
            f"{self.run.in_effect['runtime']}, intra_op_threads={threads or 'the runtime default'}",
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
