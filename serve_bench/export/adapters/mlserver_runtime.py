"""MLServer runtime: one signature of an exported SavedModel, behind the Open Inference Protocol.

Copied by ``serve-bench export`` to ``mlserver/<model>/serve_bench_runtime.py``, with serve-bench's
runners beside it (``serve_bench_runners.py``: MLServer's environment has no serve-bench).

Runs inside MLServer's own environment (mlserver 1.7.1, TensorFlow, numpy<2), never inside
serve-bench's. A model folder holds ``model-settings.json``:

    {"name": "tiny", "implementation": "serve_bench_runtime.TFSavedModelRuntime",
     "parameters": {"uri": "/abs/path/exported_models/tiny/1", "version": "1",
                    "extra": {"signature": "serving_default"}}}

and MLServer is started with this file's folder on PYTHONPATH (or the file copied next to
``model-settings.json``: MLServer puts the model folder on sys.path before importing the
implementation).

What it does that a bare ``NumpyCodec.decode_input`` runtime does not:
- metadata: the inputs and outputs are read from the signature in ``load()`` and set on the
  model (``self.inputs`` / ``self.outputs``), so ``GET /v2/models/{m}`` and gRPC
  ModelMetadata answer them without repeating them in model-settings.json. ``load()`` runs in
  the inference worker and MLServer asks that worker for metadata (mlserver/parallel/model.py
  ``ParallelModel.metadata``), so this holds with and without parallel workers.
- errors: a request whose input names, datatypes or shapes do not match the signature is
  refused with ``mlserver.errors.InferenceError`` (HTTP 400, gRPC INVALID_ARGUMENT through
  mlserver/grpc/utils.py STATUS_CODE_MAPPING). Any other exception would reach the client as
  HTTP 500 / gRPC INTERNAL, which a benchmark cannot tell from a server crash.
- versions: the served version (``parameters.version``) is listed in the metadata's ``versions``.
- runtimes: ``extra.runner`` names the runner of another runtime (``extra.runtime``), which
  runs the copy ``serve-bench export --runtimes`` converted (``extra.converted``, resolved as
  MLServer resolves ``uri``); the SavedModel's signature still gives the metadata and the
  checks. What runs is printed once at load into MLServer's log.
"""

import os
import sys
from typing import Any

import numpy as np
import tensorflow as tf
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse, MetadataTensor
from mlserver.utils import get_model_uri, to_absolute_path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # serve_bench_runners.py, copied beside this file
import serve_bench_runners as runners

# TensorFlow dtype -> Open Inference Protocol datatype (the ones a SavedModel signature may use)
_DATATYPES = {
    tf.float32: "FP32",
    tf.float64: "FP64",
    tf.float16: "FP16",
    tf.int8: "INT8",
    tf.int16: "INT16",
    tf.int32: "INT32",
    tf.int64: "INT64",
    tf.uint8: "UINT8",
    tf.uint16: "UINT16",
    tf.uint32: "UINT32",
    tf.uint64: "UINT64",
    tf.bool: "BOOL",
    tf.string: "BYTES",
}


def _name(datatype: Any) -> str:
    """A datatype as its name: pydantic keeps a Datatype enum or a plain string depending on the path."""
    return str(getattr(datatype, "value", datatype))


def _metadata(name: str, spec: Any) -> MetadataTensor:
    shape = [-1 if d is None else int(d) for d in spec.shape.as_list()]
    return MetadataTensor(name=name, datatype=_DATATYPES[spec.dtype], shape=shape)


class TFSavedModelRuntime(MLModel):
    async def load(self) -> bool:
        extra: dict[str, Any] = (self.settings.parameters.extra or {}) if self.settings.parameters else {}
        threads = int(extra.get("intra_op_threads") or 0)
        path = await get_model_uri(self.settings)
        signature = extra.get("signature") or "serving_default"
        source = runners.TensorFlowRunner(path, threads, tf=tf, signature=signature)
        self._signature = source.signature  # describes and checks the model whichever runtime runs it
        if extra.get("runner"):
            self._run = getattr(runners, extra["runner"])(to_absolute_path(self.settings, extra["converted"]), threads)
        else:
            self._run = source
        line = f"serve-bench: {self.name} version {self.version} runs on {self._run.in_effect['runtime']}"
        print(f"{line}, intra_op_threads={threads or 'the runtime default'}", flush=True)
        specs = self._signature.structured_input_signature[1]
        self._specs = {name: _metadata(name, spec) for name, spec in specs.items()}
        self.inputs = list(self._specs.values())
        self.outputs = [_metadata(k, v) for k, v in self._signature.structured_outputs.items()]
        if self.version and not self.settings.versions:
            # MLServer's metadata lists settings.versions (model.py metadata()), empty unless declared;
            # list the version being served so clients can tell which one answers
            self.settings.versions = [self.version]
        return True

    def _check(self, payload: InferenceRequest) -> dict[str, np.ndarray]:
        given = {i.name: i for i in payload.inputs}
        if set(given) != set(self._specs):
            raise InferenceError(
                f"model '{self.name}' takes inputs {sorted(self._specs)}, the request has {sorted(given)}"
            )
        arrays = {}
        for name, request_input in given.items():
            want = self._specs[name]
            if _name(request_input.datatype) != _name(want.datatype):
                raise InferenceError(
                    f"input '{name}' has datatype {_name(request_input.datatype)}; model '{self.name}' expects "
                    f"{_name(want.datatype)}"
                )
            shape = list(request_input.shape)
            if len(shape) != len(want.shape) or any(w not in (-1, g) for w, g in zip(want.shape, shape)):
                raise InferenceError(f"input '{name}' has shape {shape}; model '{self.name}' expects {want.shape}")
            try:
                arrays[name] = NumpyCodec.decode_input(request_input)
            except ValueError as exc:  # data that does not fill the declared shape
                raise InferenceError(f"input '{name}': {exc}") from None
        return arrays

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        arrays = self._check(payload)
        outputs = self._run({k: np.ascontiguousarray(v) for k, v in arrays.items()})
        wanted: list[str] = [o.name for o in payload.outputs or []] or list(outputs)
        unknown = sorted(set(wanted) - set(outputs))
        if unknown:
            raise InferenceError(f"model '{self.name}' has no output {unknown[0]!r}; it has {sorted(outputs)}")
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            outputs=[NumpyCodec.encode_output(name, outputs[name]) for name in wanted],
        )
