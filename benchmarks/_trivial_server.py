"""A trivial TF-Serving-shaped server for benchmarks: answers with prebuilt bytes, parses nothing.

Run as a separate process so the measuring process's CPU is the client's alone:
    python -m benchmarks._trivial_server GRPC_PORT REST_PORT
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
from aiohttp import web
from grpc import aio

from serve_bench import _protos
from serve_bench.client._rest import encode_rest_body
from serve_bench.codec import to_tensor_proto

FEATURES = np.zeros((1, 2048), np.float32)


def _signature_map() -> bytes:
    response = _protos.message("tensorflow.serving.GetModelMetadataResponse")()
    response.model_spec.name = "trivial"
    signature_map = _protos.message("tensorflow.serving.SignatureDefMap")()
    sig = signature_map.signature_def["serving_default"]
    for alias, dims, target in (("images", (-1, 8, 8, 3), sig.inputs), ("features", (-1, 2048), sig.outputs)):
        info = target[alias]
        info.dtype = 1
        for d in dims:
            info.tensor_shape.dim.add(size=d)
    response.metadata["signature_def"].Pack(signature_map)
    return response.SerializeToString()


async def serve(grpc_port: int, rest_port: int) -> None:
    predict_response = _protos.message("tensorflow.serving.PredictResponse")()
    to_tensor_proto(FEATURES, predict_response.outputs["features"])
    predict_bytes = predict_response.SerializeToString()
    metadata_bytes = _signature_map()
    rest_bytes = encode_rest_body({"features": FEATURES}, "").replace(b'"inputs"', b'"outputs"')

    async def predict(request: bytes, context: aio.ServicerContext) -> bytes:
        return predict_bytes

    async def metadata(request: bytes, context: aio.ServicerContext) -> bytes:
        return metadata_bytes

    server = aio.server(options=[("grpc.max_receive_message_length", -1)])
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "tensorflow.serving.PredictionService",
                {
                    "Predict": grpc.unary_unary_rpc_method_handler(predict),
                    "GetModelMetadata": grpc.unary_unary_rpc_method_handler(metadata),
                },
            ),
        )
    )
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()

    async def rest(request: web.Request) -> web.Response:
        if request.method == "POST":
            await request.read()
            return web.Response(body=rest_bytes, content_type="application/json")
        return web.json_response({"model_version_status": [{"version": "1", "state": "AVAILABLE"}]})

    app = web.Application(client_max_size=1 << 30)
    app.router.add_route("*", "/v1/models/{tail:.*}", rest)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", rest_port).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


class TrivialServer:
    def __init__(self) -> None:
        import socket

        ports = []
        for _ in range(2):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                ports.append(s.getsockname()[1])
        self.grpc_port, self.rest_port = ports
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> TrivialServer:
        root = Path(__file__).resolve().parent.parent
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._trivial_server", str(self.grpc_port), str(self.rest_port)],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2])))
