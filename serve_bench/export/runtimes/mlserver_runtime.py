"""MLServer runtime: the exported SavedModel's ``serving_default``, batched by MLServer.

Copied by ``serve-bench export`` to ``mlserver/<model>/serve_bench_runtime.py`` and named
in that folder's ``model-settings.json`` (``"implementation":
"serve_bench_runtime.TFSavedModelRuntime"``). With adaptive batching on, MLServer merges
the queued requests into one along the first axis before ``predict`` is called
(``mlserver/batching/requests.py``), so one TensorFlow call runs the whole batch.
"""

import numpy as np
import tensorflow as tf
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse
from mlserver.utils import get_model_uri


class TFSavedModelRuntime(MLModel):
    async def load(self) -> bool:
        extra = (self.settings.parameters.extra or {}) if self.settings.parameters else {}
        threads = int(extra.get("intra_op_threads") or 0)
        if threads:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
        path = await get_model_uri(self.settings)
        self._signature = tf.saved_model.load(path).signatures[extra.get("signature") or "serving_default"]
        self._input = next(iter(self._signature.structured_input_signature[1]))
        self._output = next(iter(self._signature.structured_outputs))
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        request_input = next((i for i in payload.inputs if i.name == self._input), None)
        if request_input is None:
            names = [i.name for i in payload.inputs]
            raise ValueError(f"input {self._input!r} missing; got {names}")
        array = NumpyCodec.decode_input(request_input)
        if array.dtype != np.float32:
            raise ValueError(f"input {self._input!r} is {array.dtype}; the model takes float32")
        outputs = self._signature(**{self._input: tf.constant(array)})[self._output].numpy()
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            outputs=[NumpyCodec.encode_output(self._output, outputs)],
        )
