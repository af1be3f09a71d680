"""gRPC transport: grpc.aio with pre-serialized PredictRequests (tensor_content straight from numpy)."""

from __future__ import annotations

from typing import Any

import numpy as np
from grpc import aio

from serve_bench import _protos
from serve_bench.client._base import ModelStatus, PreparedRequest, SignatureInfo, TensorInfo
from serve_bench.client._errors import ConnectError, ServeBenchError, error_for_rpc, serialize_request
from serve_bench.client._v2_grpc import open_inference_server
from serve_bench.codec import from_tensor_proto, to_tensor_proto

__all__ = ["CHANNEL_OPTIONS", "GrpcTransport", "decode_predict_response", "encode_predict_request"]

# InceptionV3 at batch 4 is ~4.3 MB of float32, past gRPC's 4 MiB default: lift the limits.
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
_PREDICT = "/tensorflow.serving.PredictionService/Predict"
_METADATA = "/tensorflow.serving.PredictionService/GetModelMetadata"
_STATUS = "/tensorflow.serving.ModelService/GetModelStatus"


def _signature_info(name: str, sig_def: Any) -> SignatureInfo:
    def info(t: Any) -> TensorInfo:
        shape = None if t.tensor_shape.unknown_rank else tuple(int(d.size) for d in t.tensor_shape.dim)
        return TensorInfo(t.dtype, shape)

    return SignatureInfo(
        name, {k: info(v) for k, v in sig_def.inputs.items()}, {k: info(v) for k, v in sig_def.outputs.items()}
    )


def _fill_model_spec(spec: Any, model: str, version: int | None, signature: str | None = None) -> None:
    spec.name = model
    if version is not None:
        spec.version.value = version
    if signature:
        spec.signature_name = signature


def encode_predict_request(model: str, version: int | None, signature: str, inputs: dict[str, np.ndarray]) -> bytes:
    """A serialized PredictRequest, tensors as tensor_content straight from numpy."""
    request = _protos.message("tensorflow.serving.PredictRequest")()
    _fill_model_spec(request.model_spec, model, version, signature)
    for alias, array in inputs.items():
        to_tensor_proto(array, request.inputs[alias])
    return serialize_request(request)


def decode_predict_response(raw: bytes) -> dict[str, np.ndarray]:
    """A serialized PredictResponse's outputs as arrays: typed value fields (``float_val`` ...,
    what TF Serving answers) or ``tensor_content``, both without a per-value Python loop."""
    response = _protos.message("tensorflow.serving.PredictResponse").FromString(raw)
    return {alias: from_tensor_proto(tensor) for alias, tensor in response.outputs.items()}


class GrpcTransport:
    def __init__(
        self, authority: str, model: str, version: int | None, url: str, channel: aio.Channel | None = None
    ) -> None:
        # authority: ``host:port`` as the target's parse gives it (an IPv6 host in brackets, as gRPC wants)
        self.url = url
        self.authority = authority
        self.model = model
        self.version = version
        self._channel = channel or aio.insecure_channel(authority, options=CHANNEL_OPTIONS)
        # No serializers: requests are bytes already, responses are decoded apart from the call.
        self._predict: Any = self._channel.unary_unary(_PREDICT)
        self._metadata: Any = self._channel.unary_unary(_METADATA)
        self._status: Any = self._channel.unary_unary(_STATUS)
        self.server_identity = ""
        self.output_dtypes: dict[str, int] = {}  # unused: responses carry their dtype

    def _model_spec(self, spec: Any) -> None:
        _fill_model_spec(spec, self.model, self.version)

    def encode(self, inputs: dict[str, np.ndarray], signature: str) -> bytes:
        return encode_predict_request(self.model, self.version, signature, inputs)

    async def _call(self, method: Any, payload: bytes, timeout: float | None, identify: bool = False) -> bytes:
        try:
            if identify:
                call = method(payload, timeout=timeout)
                metadata = await call.initial_metadata()
                self.server_identity = dict(metadata or ()).get("x-serve-bench-server", "")
                return bytes(await call)
            return bytes(await method(payload, timeout=timeout))
        except aio.AioRpcError as exc:
            raise error_for_rpc(exc, self.url, timeout) from exc

    async def send(self, request: PreparedRequest, timeout: float | None) -> bytes:
        return await self._call(self._predict, request.payload, timeout)

    def decode(self, raw: bytes) -> dict[str, np.ndarray]:
        return decode_predict_response(raw)

    async def metadata(self, timeout: float | None) -> dict[str, SignatureInfo]:
        request = _protos.message("tensorflow.serving.GetModelMetadataRequest")()
        self._model_spec(request.model_spec)
        request.metadata_field.append("signature_def")
        try:
            raw = await self._call(self._metadata, request.SerializeToString(), timeout, identify=True)
        except ServeBenchError as exc:
            # UNIMPLEMENTED: a server without TF Serving's PredictionService, or one that serves Predict alone (its
            # requests are then sent unchecked). Triton and MLServer serve the Open Inference Protocol instead.
            if exc.status == "UNIMPLEMENTED" and (server := await open_inference_server(self._channel, timeout)):
                v2_url = f"v2+grpc://{self.authority}"  # the port as parsed: grpc://host alone means 8500
                raise ConnectError(
                    f"{self.url}: the server there serves the Open Inference Protocol ({server}), not TF Serving's "
                    f"API (GetModelMetadata: UNIMPLEMENTED); for Triton's or MLServer's API use {v2_url}",
                    status=exc.status,
                    url=self.url,
                ) from exc
            raise
        response = _protos.message("tensorflow.serving.GetModelMetadataResponse").FromString(raw)
        signature_map = _protos.message("tensorflow.serving.SignatureDefMap")()
        if not response.metadata["signature_def"].Unpack(signature_map):
            raise ServeBenchError(f"{self.url}: metadata holds no signature_def map", url=self.url)
        return {k: _signature_info(k, v) for k, v in signature_map.signature_def.items()}

    async def status(self, timeout: float | None) -> ModelStatus:
        request = _protos.message("tensorflow.serving.GetModelStatusRequest")()
        self._model_spec(request.model_spec)
        raw = await self._call(self._status, request.SerializeToString(), timeout)
        response = _protos.message("tensorflow.serving.GetModelStatusResponse").FromString(raw)
        states = "tensorflow.serving.ModelVersionStatus.State"
        return ModelStatus({s.version: _protos.enum_name(states, s.state) for s in response.model_version_status})

    async def aclose(self) -> None:
        await self._channel.close()
