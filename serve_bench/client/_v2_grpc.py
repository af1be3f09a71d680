"""Open Inference Protocol gRPC transport (Triton, MLServer): ``inference.GRPCInferenceService``.

Requests are serialized ModelInferRequests sent as raw bytes (no per-call serializers), the
tensors in ``raw_input_contents`` as tritonclient sends them. Responses are read from
``raw_output_contents`` (Triton; MLServer when the request was raw) or from the typed
``contents`` fields, both without a per-value Python loop.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from grpc import aio

from serve_bench.client._base import ModelStatus, PreparedRequest, SignatureInfo, probe_timeout
from serve_bench.client._errors import (
    ConnectError,
    InvalidArgument,
    RequestTimeout,
    ServeBenchError,
    error_for_rpc,
    serialize_request,
)
from serve_bench.client._v2_codec import DATATYPES, datatype_of, from_raw, listed_versions, signatures, to_raw
from serve_bench.client._v2_descriptor import SERIALIZED
from serve_bench.codec import CodecError

__all__ = [
    "V2_CHANNEL_OPTIONS",
    "V2GrpcTransport",
    "decode_infer_response",
    "encode_infer_request",
    "message",
    "open_inference_server",
]

# No message size limits (an InceptionV3 batch passes 4 MiB), and keepalive pings no more often than
# Triton's gRPC server accepts them: it counts a ping less than 5 minutes after the previous one, with no
# data between, as a strike and sends GOAWAY "too_many_pings" after 2 (tritonserver --help, 2.51:
# --grpc-http2-min-recv-ping-interval-without-data 300000, --grpc-http2-max-ping-strikes 2), which TF
# Serving's 30 s pings (client/_grpc.py) drew from Triton during long InceptionV3 points.
V2_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.keepalive_time_ms", 360_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 0),
]

_SERVICE = "/inference.GRPCInferenceService/"

# Which typed field of InferTensorContents carries each datatype (grpc_service.proto); FP16 and
# BF16 have none and travel raw only.
_CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


@functools.cache
def _pool() -> descriptor_pool.DescriptorPool:
    # A private pool, as serve_bench._protos keeps TF Serving's: never clashes with tritonclient's or
    # MLServer's own `inference` classes if one of them is imported into the same process.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(SERIALIZED))
    return pool


@functools.cache
def message(name: str) -> Any:
    """The message class for a name in package ``inference``, e.g. ``ModelInferRequest``."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"inference.{name}"))


def encode_infer_request(model: str, version: int | None, inputs: dict[str, np.ndarray]) -> bytes:
    """A serialized ModelInferRequest, every tensor in ``raw_input_contents`` (in input order)."""
    request = message("ModelInferRequest")(model_name=model, model_version="" if version is None else str(version))
    for name, array in inputs.items():
        tensor = request.inputs.add(name=name, datatype=datatype_of(array))
        tensor.shape.extend(array.shape)
        request.raw_input_contents.append(to_raw(array))
    return serialize_request(request)


def _from_contents(contents: Any, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    field_name = _CONTENTS_FIELD.get(datatype)
    if field_name is None:
        raise CodecError(f"a {datatype} output must come in raw_output_contents; it has no typed field")
    field = getattr(contents, field_name)
    count = int(np.prod(shape, dtype=np.int64))
    if len(field) != count:
        raise CodecError(f"{field_name} holds {len(field)} values; shape {list(shape)} needs {count}")
    if datatype == "BYTES":
        out = np.empty(count, dtype=object)
        out[:] = list(field)
        return out.reshape(shape)
    # upb's repeated scalars implement __array__ (one memcpy), as codec._typed_values relies on
    return np.asarray(field).astype(DATATYPES[datatype], copy=False).reshape(shape)


def decode_infer_response(raw: bytes) -> dict[str, np.ndarray]:
    """A serialized ModelInferResponse's outputs as arrays (raw or typed contents)."""
    response = message("ModelInferResponse").FromString(raw)
    raws = response.raw_output_contents
    if raws and len(raws) != len(response.outputs):
        raise CodecError(f"{len(response.outputs)} outputs but {len(raws)} raw_output_contents")
    outputs = {}
    for i, output in enumerate(response.outputs):
        shape = tuple(output.shape)
        if raws:
            outputs[output.name] = from_raw(raws[i], output.datatype, shape)
        else:
            outputs[output.name] = _from_contents(output.contents, output.datatype, shape)
    return outputs


async def open_inference_server(channel: aio.Channel, timeout: float | None) -> str | None:
    """What the server at ``channel`` answers to the Open Inference Protocol's ServerMetadata ("triton/2.51.0"),
    or None where it does not answer it: how TF Serving's client, told UNIMPLEMENTED, names the scheme to use."""
    stub: Any = channel.unary_unary(_SERVICE + "ServerMetadata")  # no serializers: bytes both ways
    try:
        raw = await stub(b"", timeout=probe_timeout(timeout))
        server = message("ServerMetadataResponse").FromString(bytes(raw))
    except (aio.AioRpcError, DecodeError):
        return None
    # a name is what the protocol's server metadata must hold: an empty answer (a generic handler) proves nothing
    return f"{server.name}/{server.version}" if server.name else None


class V2GrpcTransport:
    """``v2+grpc://host:port``: ModelInfer, ModelMetadata, ModelReady, ServerMetadata, ServerLive."""

    def __init__(
        self, authority: str, model: str, version: int | None, url: str, channel: aio.Channel | None = None
    ) -> None:
        # authority: ``host:port`` as the target's parse gives it (an IPv6 host in brackets, as gRPC wants)
        self.url = url
        self.authority = authority
        self.model = model
        self.version = version
        self._channel = channel or aio.insecure_channel(authority, options=V2_CHANNEL_OPTIONS)
        # No serializers: requests are bytes already, responses are decoded apart from the call.
        self._infer: Any = self._channel.unary_unary(_SERVICE + "ModelInfer")
        self.server_identity = ""  # "triton/2.51.0", "mlserver/1.7.1": from ServerMetadata when the client opens
        self.extensions: tuple[str, ...] = ()
        self.output_dtypes: dict[str, int] = {}  # unused: responses carry their datatype

    def encode(self, inputs: dict[str, np.ndarray], signature: str) -> bytes:
        # v2 has no signatures: the client refused any but serving_default when it opened
        try:
            return encode_infer_request(self.model, self.version, inputs)
        except CodecError as exc:
            raise InvalidArgument(f"{self.url}: {exc}", url=self.url) from exc

    async def _call(self, method: str, request: Any, response: str, timeout: float | None) -> Any:
        raw = await self._raw_call(self._channel.unary_unary(_SERVICE + method), request.SerializeToString(), timeout)
        try:
            return message(response).FromString(raw)
        except DecodeError as exc:
            raise ServeBenchError(f"{self.url}: malformed {response}: {exc}", url=self.url) from exc

    async def _raw_call(self, stub: Any, payload: bytes, timeout: float | None) -> bytes:
        try:
            return bytes(await stub(payload, timeout=timeout))
        except aio.AioRpcError as exc:
            raise error_for_rpc(exc, self.url, timeout) from exc

    async def send(self, request: PreparedRequest, timeout: float | None) -> bytes:
        return await self._raw_call(self._infer, request.payload, timeout)

    def decode(self, raw: bytes) -> dict[str, np.ndarray]:
        try:
            return decode_infer_response(raw)
        except (DecodeError, ValueError, KeyError, TypeError) as exc:  # CodecError is a ValueError
            raise ServeBenchError(f"{self.url}: malformed ModelInferResponse: {exc!r}", url=self.url) from exc

    async def live(self, timeout: float | None) -> bool:
        """ServerLive: the server process answers (not that the model is loaded)."""
        return bool(
            (await self._call("ServerLive", message("ServerLiveRequest")(), "ServerLiveResponse", timeout)).live
        )

    async def _model_metadata(self, timeout: float | None) -> Any:
        request = message("ModelMetadataRequest")(
            name=self.model, version="" if self.version is None else str(self.version)
        )
        return await self._call("ModelMetadata", request, "ModelMetadataResponse", timeout)

    async def metadata(self, timeout: float | None) -> dict[str, SignatureInfo]:
        unnamed: str | None = None  # ServerMetadata's failure status
        try:
            server = await self._call(
                "ServerMetadata", message("ServerMetadataRequest")(), "ServerMetadataResponse", timeout
            )
        except (ConnectError, RequestTimeout):
            raise
        except ServeBenchError as exc:
            server = None  # a server without ServerMetadata: unnamed
            unnamed = exc.status
        if server is not None and server.name:
            self.server_identity = f"{server.name}/{server.version}"
            self.extensions = tuple(server.extensions)
        try:
            meta = await self._model_metadata(timeout)
        except ServeBenchError as exc:
            # Every server of the protocol has both ("must implement the health, metadata, and inference APIs":
            # kserve/open-inference-protocol, specification/protocol/inference_grpc.md). UNIMPLEMENTED for both is a
            # gRPC server without the service, e.g. TF Serving's port: every request would fail the same way.
            if server is None and unnamed == exc.status == "UNIMPLEMENTED":
                tf_serving = f"grpc://{self.authority}"  # the port as parsed: v2+grpc://host alone means 8001
                raise ConnectError(
                    f"{self.url}: the server there does not implement the Open Inference Protocol (ServerMetadata "
                    f"and ModelMetadata: UNIMPLEMENTED); for TF Serving's API use {tf_serving}",
                    status=exc.status,
                    url=self.url,
                ) from exc
            raise
        return signatures(
            ((t.name, t.datatype, t.shape) for t in meta.inputs), ((t.name, t.datatype, t.shape) for t in meta.outputs)
        )

    async def status(self, timeout: float | None) -> ModelStatus:
        """ModelReady per version the metadata lists (NotFound for an unknown model).

        A server that lists no versions (MLServer without ``versions`` in model-settings.json) is
        reported as version 0, or as the version this client asked for.
        """
        meta = await self._model_metadata(timeout)
        states = {}
        for number, name in listed_versions(meta.versions, self.version).items():
            request = message("ModelReadyRequest")(name=self.model, version=name)
            ready = (await self._call("ModelReady", request, "ModelReadyResponse", timeout)).ready
            states[number] = "AVAILABLE" if ready else "UNAVAILABLE"
        return ModelStatus(states)

    async def aclose(self) -> None:
        await self._channel.close()
