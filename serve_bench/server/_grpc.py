"""TF Serving's gRPC API: PredictionService.Predict/GetModelMetadata, ModelService.GetModelStatus.

Methods not registered here (Classify, Regress, MultiInference,
HandleReloadConfigRequest, ...) answer UNIMPLEMENTED, which grpc does for any
unknown method.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import numpy as np
from google.protobuf.message import DecodeError
from grpc import aio

from serve_bench import _protos
from serve_bench.codec import (
    DT_STRING,
    DTYPE_TO_NUMPY,
    CodecError,
    element_count,
    from_tensor_proto,
    proto_shape,
    to_tensor_proto,
)
from serve_bench.server._budget import COST_FACTOR, TRIM_AFTER_BYTES, trim_soon
from serve_bench.server._core import ServingCore, record_request
from serve_bench.server._errors import ServingError
from serve_bench.server._runtime import Signature, tf_type_name
from serve_bench.server._wire import split_contents

__all__ = ["IDENTITY_KEY", "SERVER_OPTIONS", "GrpcService", "add_services"]

# Sent on metadata and status calls (not Predict), so results can say which server they measured.
IDENTITY_KEY = "x-serve-bench-server"  # its value: ServingCore.identity

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


# quiesce() returns once no Predict call has arrived or run for this long.
_QUIET_S = 0.25

# From this size on, a Predict request is parsed without its tensor_content (server/_wire.py finds and
# leaves them out, ~10-20 µs a request) and each is decoded as a view of the bytes gRPC received:
# protobuf copies a bytes field when parsing and again at every read (~29 µs per MB here, 150 ms for
# 275 MB in fresh pages), the walk's cost at ~256 KiB.
_VIEW_FROM_BYTES = 1 << 18


def _broadcast(tensor: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """A tensor without tensor_content, of many elements given by ONE typed value, as a read-only view of that value.

    TensorFlow fills every element past the values sent with the last one (tensor.cc
    FromProtoField: copy_n, then fill_n with the last value), so one value means all equal; the
    view costs nothing until TensorFlow fills its own tensor (Servable.run). None otherwise."""
    if tensor.dtype == DT_STRING or tensor.dtype in (8, 18):  # complex: 2 values each
        return None
    if element_count(shape) <= 1:
        return None
    if [len(values) for field, values in tensor.ListFields() if field.is_repeated] != [1]:
        return None
    single = type(tensor)()
    single.CopyFrom(tensor)
    single.ClearField("tensor_shape")  # a scalar: its one value
    return np.broadcast_to(from_tensor_proto(single), shape)


def _grpc_message(message: str) -> str:
    """Long messages cut as model_servers/grpc_status_util.cc:25-33 ToGRPCStatus cuts them."""
    return message if len(message) <= 1024 else message[:1024] + "...TRUNCATED"


class GrpcService:
    def __init__(self, core: ServingCore) -> None:
        self.core = core
        # The most elements one input may declare: what a body of the REST limit could carry as
        # float32 tensor_content. Larger declared shapes are refused before allocating.
        self.max_elements = max(core.config.max_body_bytes // 4, 1 << 20)
        self.predict_response = _protos.message("tensorflow.serving.PredictResponse")
        self.metadata_response = _protos.message("tensorflow.serving.GetModelMetadataResponse")
        self.status_response = _protos.message("tensorflow.serving.GetModelStatusResponse")
        self.signature_map = _protos.message("tensorflow.serving.SignatureDefMap")
        self.draining = False  # set by quiesce(): new Predict calls are answered UNAVAILABLE
        self.active = 0  # Predict calls inside their handler now
        self.calls = 0  # Predict calls that reached a handler, ever

    async def predict(self, received: Received, context: aio.ServicerContext[Any, Any]) -> Any:
        # request_latency starts before the tensors are parsed (prediction_service_impl.cc:41)
        started = time.perf_counter()
        request, spans = received.message, received.spans
        held: list[int] = []
        self.calls += 1
        if self.draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down; retry on another")
        self.active += 1
        try:
            response = await self._predict(request, received.data, spans, started, context.time_remaining(), held)
        except ServingError as exc:
            code, message = exc.code, exc.message
            # Its traceback's frames hold the request's decoded tensors; the abort below raises
            # again from here and gRPC keeps that exception, so drop every link first.
            exc.__traceback__ = exc.__context__ = exc.__cause__ = None
            del exc
            # That exception keeps this frame and the handler's too: let go of the request's bytes in both.
            received.message, received.data, received.spans = None, b"", None
            del request
        else:
            return response
        finally:
            self.active -= 1
            if held and held[0] >= TRIM_AFTER_BYTES:  # the request's tensors are gone: return their pages
                trim_soon(asyncio.get_running_loop())
        await context.abort(getattr(grpc.StatusCode, code), _grpc_message(message))

    async def quiesce(self, timeout: float) -> None:
        """Answer new Predict calls UNAVAILABLE and wait (up to ``timeout``) until no call is running.

        grpc core's shutdown cancels every call it has received but not yet handed to Python
        (grpc.aio asks core for one call at a time), so a busy server stopped at once answers
        CANCELLED to requests sent before the signal. Draining here first lets each of those
        reach a handler and get a retryable answer, and each running one finish.
        """
        self.draining = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        quiet_since = loop.time()
        seen = self.calls
        while loop.time() < deadline:
            if self.active or self.calls != seen:
                seen, quiet_since = self.calls, loop.time()
            elif loop.time() - quiet_since >= _QUIET_S:
                return
            await asyncio.sleep(0.01)

    async def _predict(
        self,
        request: Any,
        data: bytes,
        spans: dict[str, tuple[int, int]] | None,
        started: float,
        timeout: float | None,
        held: list[int],
    ) -> Any:
        """Predict as servables/tensorflow/predict_util.cc:79-119 RunPredict orders its checks: servable
        (NOT_FOUND), signature (FAILED_PRECONDITION), input names, then each tensor parsed."""
        spec = request.model_spec
        version, label = _version(spec)
        reached_core = False
        status = "OK"
        try:  # what the request reserved goes back however it ends: refused, failed in the run, answered
            try:
                _require_spec(request)
                servable = self.core.registry.get(spec.name, version, label)
                signature = servable.signature(spec.signature_name)
                shapes = self._check_inputs(request, signature)
                held.append(self._reserve(request, shapes))
                inputs = self._decode_inputs(request, data, spans, shapes)
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
            del outputs
            return response
        finally:
            self.core.budget.give(sum(held))

    def _reserve(self, request: Any, shapes: dict[str, tuple[int, ...]]) -> int:
        """Reserve what the request's tensors will hold (declared elements x dtype size, times the
        cost of TensorFlow's copy and the run) before any is allocated, from the budget REST bodies
        share. TF Serving has none (it allocates what is declared, tensor.cc FromProto); past it the
        codes are the ones TF Serving gives for memory it cannot have now (RESOURCE_EXHAUSTED, as
        TensorFlow's allocator reports an OOM) or for a server that is busy (UNAVAILABLE)."""
        declared = 0
        for alias, shape in shapes.items():
            tensor = request.inputs[alias]
            count = element_count(shape)
            if tensor.dtype == DT_STRING:  # one reference per element plus the bytes sent
                declared += 8 * count + sum(len(value) for value in tensor.string_val)
            else:
                declared += count * DTYPE_TO_NUMPY[tensor.dtype].itemsize
        needed = COST_FACTOR * declared
        budget = self.core.budget
        if budget.try_take(needed):
            return needed
        if needed > budget.total:
            raise ServingError(
                "RESOURCE_EXHAUSTED",
                f"the request's tensors declare {declared} bytes; serving them needs more than the {budget.total} "
                "bytes this server lets requests hold (serve-bench serve --max_body_bytes)",
            )
        raise ServingError("UNAVAILABLE", "too many large requests are being served at once; retry shortly")

    def _check_inputs(self, request: Any, signature: Signature) -> dict[str, tuple[int, ...]]:
        """Each input checked against the signature on its DECLARED dtype and shape before any value
        is read, so a 40-byte request declaring 300M floats costs nothing (serve-bench's own rule;
        TF Serving would allocate and pad it, tensor.cc FromProto). Returns the declared shapes."""
        signature.check_names(set(request.inputs))
        shapes: dict[str, tuple[int, ...]] = {}
        for position, alias in enumerate(sorted(request.inputs)):
            tensor = request.inputs[alias]
            try:
                shape = proto_shape(tensor)
            except CodecError as exc:
                # TF's GetInputValues (tensorflow/cc/saved_model/util.cc:73-77, called at
                # servables/tensorflow/predict_util.cc:129) says only "tensor parsing error: <alias>" when
                # Tensor::FromProto fails, here on TensorShape::IsValid (a dimension < 0, more than 254, or
                # more than 2**63 - 1 elements), before the Session checks any dtype; the reason in
                # parentheses is serve-bench's, as for the other parsing errors below.
                message = str(exc)
                raise ServingError("INVALID_ARGUMENT", f"tensor parsing error: {alias} ({message})") from None
            want = signature.inputs[alias].dtype
            if tensor.dtype != want:
                raise ServingError(
                    "INVALID_ARGUMENT",
                    f"Expects arg[{position}] to be {tf_type_name(want)} but {tf_type_name(tensor.dtype)} is provided",
                )
            signature.check_shape(alias, shape)
            count = element_count(shape)
            if count > self.max_elements:  # the cap from_tensor_proto applies, before the budget is asked
                raise ServingError(
                    "INVALID_ARGUMENT",
                    f"tensor parsing error: {alias} (tensor shape {list(shape)} holds {count} elements, "
                    f"more than the {self.max_elements} allowed)",
                )
            shapes[alias] = shape
        return shapes

    def _decode_inputs(
        self,
        request: Any,
        data: bytes,
        spans: dict[str, tuple[int, int]] | None,
        shapes: dict[str, tuple[int, ...]],
    ) -> dict[str, np.ndarray]:
        """``spans``: where each input's tensor_content lies in ``data`` when ``request`` was parsed without them."""
        inputs: dict[str, np.ndarray] = {}
        view = memoryview(data)
        for alias, shape in shapes.items():
            tensor = request.inputs[alias]
            content: bytes | memoryview
            if spans is not None:  # the parse holds no content: an alias the walk did not find has none
                offset, size = spans.get(alias, (0, 0))
                content = view[offset : offset + size]
            else:
                # read once: protobuf copies a bytes field at every read (InceptionV3 at batch 8: 8.6 MB, 0.26 ms)
                content = tensor.tensor_content
            try:
                single = None if content else _broadcast(tensor, shape)
                inputs[alias] = (
                    single
                    if single is not None
                    else from_tensor_proto(tensor, max_elements=self.max_elements, tensor_content=content)
                )
            except CodecError as exc:
                message = str(exc)
                raise ServingError("INVALID_ARGUMENT", f"tensor parsing error: {alias} ({message})") from None
        return inputs

    async def get_model_metadata(self, request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        await context.send_initial_metadata(((IDENTITY_KEY, self.core.identity),))
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
        await context.send_initial_metadata(((IDENTITY_KEY, self.core.identity),))
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


# What the request deserializer gives for bytes that are not a message of its type.
_UNPARSEABLE = object()


class Received:
    """A Predict request as parsed, the bytes received, and (for a large one, parsed without its
    tensor_content) where each input's content lies in them: its tensors are decoded as views."""

    __slots__ = ("data", "message", "spans")

    def __init__(self, message: Any, data: bytes, spans: dict[str, tuple[int, int]] | None) -> None:
        self.message = message
        self.data = data
        self.spans = spans


def _parser(message_type: Any, keep_bytes: bool = False) -> Any:
    """The request deserializer; with ``keep_bytes`` (Predict) it gives a Received."""

    def parse(data: bytes) -> Any:
        split = split_contents(data) if keep_bytes and len(data) >= _VIEW_FROM_BYTES else None
        try:
            message = message_type.FromString(data if split is None else split[0])
        except DecodeError:
            return _UNPARSEABLE
        if not keep_bytes:
            return message
        return Received(message, data, None if split is None else split[1])

    return parse


def add_services(server: aio.Server, core: ServingCore) -> GrpcService:
    service = GrpcService(core)

    def handler(
        method: Any, request_name: str, response_name: str, keep_bytes: bool = False
    ) -> grpc.RpcMethodHandler[Any, Any]:
        async def guarded(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
            if request is _UNPARSEABLE:
                # What TF Serving's C++ gRPC server answers for bytes its protobuf cannot parse (grpc 1.51.1
                # include/grpcpp/impl/codegen/proto_utils.h:88-89 GenericDeserialize, now
                # include/grpcpp/impl/generic_serialize.h): INTERNAL with msg->InitializationErrorString(),
                # the missing required fields (protobuf message.h:277-279), of which proto3 has none: "".
                # RpcMethodHandler::RunHandler (grpcpp/support/method_handler.h:107-118) sends that status
                # without calling the service. grpc.aio would say UNKNOWN.
                await context.abort(grpc.StatusCode.INTERNAL, "")
            return await method(request, context)

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=_parser(_protos.message(request_name), keep_bytes),
            response_serializer=_protos.message(response_name).SerializeToString,
        )

    prediction = grpc.method_handlers_generic_handler(
        "tensorflow.serving.PredictionService",
        {
            "Predict": handler(
                service.predict,
                "tensorflow.serving.PredictRequest",
                "tensorflow.serving.PredictResponse",
                keep_bytes=True,
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
    return service
