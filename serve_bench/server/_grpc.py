"""TF Serving's gRPC API: PredictionService.Predict/GetModelMetadata, ModelService.GetModelStatus.

Methods not registered here (Classify, Regress, MultiInference,
HandleReloadConfigRequest, ...) answer UNIMPLEMENTED, which grpc does for any
unknown method.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
import numpy as np
from grpc import aio

from serve_bench import __version__, _protos
from serve_bench.codec import CodecError, from_tensor_proto, proto_shape, to_tensor_proto
from serve_bench.server._core import ServingCore, record_request
from serve_bench.server._errors import ServingError
from serve_bench.server._runtime import Signature, tf_type_name

__all__ = ["IDENTITY", "SERVER_OPTIONS", "add_services"]

# Sent on metadata and status calls (not Predict), so results can say which server they measured.
IDENTITY = (("x-serve-bench-server", f"serve-bench-local/{__version__}"),)

# No server-side message size limit (TF Serving's own default is unlimited too).
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.so_reuseport", 0),
]


def _version(spec: Any) -> tuple[int | None, str | None]:
    choice = spec.WhichOneof("version_choice")
    if choice == "version":
        return spec.version.value, None
    if choice == "version_label":
        return None, spec.version_label
    return None, None


def _require_spec(request: Any) -> None:
    """Each API's first check: servables/tensorflow/predict_impl.cc:37-41 and the same in
    get_model_metadata_impl.cc and get_model_status_impl.cc."""
    if not request.HasField("model_spec"):
        raise ServingError("INVALID_ARGUMENT", "Missing ModelSpec")


def _grpc_message(message: str) -> str:
    """Long messages cut as model_servers/grpc_status_util.cc:25-33 ToGRPCStatus cuts them."""
    return message if len(message) <= 1024 else message[:1024] + "...TRUNCATED"


class _Service:
    def __init__(self, core: ServingCore) -> None:
        self.core = core
        # The most elements one input may declare: what a body of the REST limit could carry as
        # float32 tensor_content. Larger declared shapes are refused before allocating.
        self.max_elements = max(core.config.max_body_bytes // 4, 1 << 20)
        self.predict_response = _protos.message("tensorflow.serving.PredictResponse")
        self.metadata_response = _protos.message("tensorflow.serving.GetModelMetadataResponse")
        self.status_response = _protos.message("tensorflow.serving.GetModelStatusResponse")
        self.signature_map = _protos.message("tensorflow.serving.SignatureDefMap")

    async def predict(self, request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        # request_latency starts before the tensors are parsed (prediction_service_impl.cc:41)
        started = time.perf_counter()
        try:
            response = await self._predict(request, started, context.time_remaining())
        except ServingError as exc:
            code, message = exc.code, exc.message
            # Its traceback's frames hold the request's decoded tensors; the abort below raises
            # again from here and gRPC keeps that exception, so drop every link first.
            exc.__traceback__ = exc.__context__ = exc.__cause__ = None
            del exc
        else:
            return response
        await context.abort(getattr(grpc.StatusCode, code), _grpc_message(message))

    async def _predict(self, request: Any, started: float, timeout: float | None = None) -> Any:
        """Predict as servables/tensorflow/predict_util.cc:79-119 RunPredict orders its checks: servable
        (NOT_FOUND), signature (FAILED_PRECONDITION), input names, then each tensor parsed."""
        spec = request.model_spec
        version, label = _version(spec)
        reached_core = False
        status = "OK"
        try:
            _require_spec(request)
            servable = self.core.registry.get(spec.name, version, label)
            signature = servable.signature(spec.signature_name)
            inputs = self._decode_inputs(request, signature)
            reached_core = True  # ServingCore.predict counts the request from here on
            servable, outputs = await self.core.predict(
                spec.name,
                version,
                label,
                spec.signature_name,
                inputs,
                list(request.output_filter),
                "GRPC",
                started=started,
                timeout=timeout,  # the deadline, as TF Serving's RunOptions timeout
            )
        except ServingError as exc:
            status = exc.code
            raise
        finally:
            if not reached_core:
                record_request(self.core.metrics, spec.name, "Predict", "GRPC", status, started)
        del inputs
        response = self.predict_response()
        # MakeModelSpec (servables/tensorflow/util.cc:261): name as asked, signature defaulted, version served
        response.model_spec.name = spec.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = signature.name
        for alias, array in outputs.items():
            # typed value fields, as RunPredict's default kAsProtoField (predict_util.cc:177-182)
            to_tensor_proto(array, response.outputs[alias], typed_fields=True)
        return response

    def _decode_inputs(self, request: Any, signature: Signature) -> dict[str, np.ndarray]:
        """Each input checked against the signature on its DECLARED dtype and shape before any value
        is read, so a 40-byte request declaring 300M floats costs nothing (serve-bench's own rule;
        TF Serving would allocate and pad it, tensor.cc FromProto)."""
        signature.check_names(set(request.inputs))
        inputs: dict[str, np.ndarray] = {}
        for position, alias in enumerate(sorted(request.inputs)):
            tensor = request.inputs[alias]
            want = signature.inputs[alias].dtype
            if tensor.dtype != want:
                raise ServingError(
                    "INVALID_ARGUMENT",
                    f"Expects arg[{position}] to be {tf_type_name(want)} but {tf_type_name(tensor.dtype)} is provided",
                )
            try:
                shape = proto_shape(tensor)
            except CodecError:
                raise ServingError("INVALID_ARGUMENT", f"tensor parsing error: {alias}") from None
            signature.check_shape(alias, shape)
            try:
                inputs[alias] = from_tensor_proto(tensor, max_elements=self.max_elements)
            except CodecError as exc:
                message = str(exc)
                raise ServingError("INVALID_ARGUMENT", f"tensor parsing error: {alias} ({message})") from None
        return inputs

    async def get_model_metadata(self, request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        await context.send_initial_metadata(IDENTITY)
        spec = request.model_spec
        version, label = _version(spec)
        fields = list(request.metadata_field)
        try:
            _require_spec(request)  # get_model_metadata_impl.cc:70-74
            # servables/tensorflow/get_model_metadata_impl.cc:31-44 ValidateGetModelMetadataRequest
            if not fields:
                raise ServingError(
                    "INVALID_ARGUMENT", "GetModelMetadataRequest must specify at least one metadata_field"
                )
            for field in fields:
                if field != "signature_def":
                    raise ServingError("INVALID_ARGUMENT", f"Metadata field {field} is not supported")
            servable, defs = self.core.signature_defs(spec.name, version, label)
        except ServingError as exc:
            await context.abort(getattr(grpc.StatusCode, exc.code), exc.message)
        response = self.metadata_response()
        response.model_spec.name = spec.name
        response.model_spec.version.value = servable.version
        signature_map = self.signature_map()
        for key, sig in defs.items():
            signature_map.signature_def[key].CopyFrom(sig)
        response.metadata["signature_def"].Pack(signature_map)
        return response

    async def get_model_status(self, request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        await context.send_initial_metadata(IDENTITY)
        spec = request.model_spec
        version, label = _version(spec)
        try:
            _require_spec(request)  # get_model_status_impl.cc:71-73
            states = self.core.status(spec.name, version, label)
        except ServingError as exc:
            await context.abort(getattr(grpc.StatusCode, exc.code), exc.message)
        response = self.status_response()
        available = _protos.enum_value("tensorflow.serving.ModelVersionStatus.State", "AVAILABLE")
        for number, _state in states:
            entry = response.model_version_status.add(version=number, state=available)
            entry.status.error_code = 0
        return response


def add_services(server: aio.Server, core: ServingCore) -> None:
    service = _Service(core)

    def handler(method: Any, request_name: str, response_name: str) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(
            method,
            request_deserializer=_protos.message(request_name).FromString,
            response_serializer=_protos.message(response_name).SerializeToString,
        )

    prediction = grpc.method_handlers_generic_handler(
        "tensorflow.serving.PredictionService",
        {
            "Predict": handler(
                service.predict, "tensorflow.serving.PredictRequest", "tensorflow.serving.PredictResponse"
            ),
            "GetModelMetadata": handler(
                service.get_model_metadata,
                "tensorflow.serving.GetModelMetadataRequest",
                "tensorflow.serving.GetModelMetadataResponse",
            ),
        },
    )
    model = grpc.method_handlers_generic_handler(
        "tensorflow.serving.ModelService",
        {
            "GetModelStatus": handler(
                service.get_model_status,
                "tensorflow.serving.GetModelStatusRequest",
                "tensorflow.serving.GetModelStatusResponse",
            ),
        },
    )
    server.add_generic_rpc_handlers((prediction, model))
