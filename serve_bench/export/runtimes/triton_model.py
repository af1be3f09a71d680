"""Triton Python-backend model: the exported SavedModel's ``serving_default``, batched by Triton.

Copied by ``serve-bench export`` to ``triton/<model>/<version>/model.py`` beside
``model.savedmodel/``. Triton's dynamic batcher hands ``execute`` every request of one
scheduled batch; they are run as one TensorFlow call, as TF Serving's batching session
does, and the output rows are handed back to each request in order.
"""

import json
import os

import numpy as np
import tensorflow as tf
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        here = os.path.join(args["model_repository"], args["model_version"])
        path = params.get("saved_model") or os.path.join(here, "model.savedmodel")
        threads = int(params.get("intra_op_threads") or 0)
        if threads:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
        self.signature = tf.saved_model.load(path).signatures[params.get("signature") or "serving_default"]

    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, self.input_name).as_numpy() for r in requests]
        batch = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        outputs = self.signature(**{self.input_name: tf.constant(batch)})[self.output_name].numpy()
        responses = []
        start = 0
        for array in arrays:
            rows = outputs[start : start + len(array)]
            start += len(array)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(self.output_name, rows)]))
        return responses
