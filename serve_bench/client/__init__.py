"""serve_bench.client: async gRPC and REST clients for TF Serving (and the local server), and for
the Open Inference Protocol (KServe v2) of Triton and MLServer.

    async with connect("grpc://localhost:8500", "inception_v3") as client:
        features = (await client.predict({"images": batch}))["features"]

    async with connect("v2+grpc://localhost:8001", "inception_v3") as client:  # or v2+http://localhost:8000
        ...

Importing this package does not import TensorFlow.
"""

from serve_bench.client._base import ModelStatus, PreparedRequest, SignatureInfo, TensorInfo, Transport
from serve_bench.client._client import Client, Response, connect, server_kind, server_runtime
from serve_bench.client._errors import (
    ConnectError,
    InvalidArgument,
    NotFound,
    RequestTimeout,
    ServeBenchError,
    ServerError,
    Unavailable,
    user_error,
)
from serve_bench.client._fake import FakeTransport, fake_client
from serve_bench.client._pipeline import BatchFailed, BatchResult, StreamStats, predict_stream
from serve_bench.client._sync import SyncClient, connect_sync

__all__ = [
    "BatchFailed",
    "BatchResult",
    "Client",
    "ConnectError",
    "FakeTransport",
    "InvalidArgument",
    "ModelStatus",
    "NotFound",
    "PreparedRequest",
    "RequestTimeout",
    "Response",
    "ServeBenchError",
    "ServerError",
    "SignatureInfo",
    "StreamStats",
    "SyncClient",
    "TensorInfo",
    "Transport",
    "Unavailable",
    "connect",
    "connect_sync",
    "fake_client",
    "predict_stream",
    "server_kind",
    "server_runtime",
    "user_error",
]
