"""A TF-Serving-shaped test server with a known service time that can stall on command.

It answers Predict (gRPC and REST), GetModelMetadata and model status for one
model with a [-1, 4] float input and a [-1, 2] output, after ``delay`` seconds
(plus asyncio's rounding to the next millisecond);
``stall(seconds)`` makes every request arriving in that window wait until it
ends. No TensorFlow: it measures the measurer.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import orjson
from aiohttp import web
from grpc import aio

from serve_bench import _protos
from serve_bench.codec import from_tensor_proto, to_tensor_proto
from tests.conftest import free_port

MODEL = "delay"


class _DelayApp:
    """Runs inside the server process."""

    def __init__(self, delay: float = 0.02, grpc_port: int = 0, rest_port: int = 0) -> None:
        self.delay = delay
        self.stall_until = 0.0
        self.requests = 0
        self.capacity = 0  # 0: every request served at once; N: N at a time, the rest queue
        self._slots: asyncio.Semaphore | None = None
        self.loop = asyncio.new_event_loop()
        self.grpc_port = grpc_port
        self.rest_port = rest_port

    def stall(self, seconds: float) -> None:
        self.stall_until = time.perf_counter() + seconds

    # --- behaviour -----------------------------------------------------------
    async def _serve_time(self) -> None:
        self.requests += 1
        if self.capacity:
            if self._slots is None:
                self._slots = asyncio.Semaphore(int(self.capacity))
            async with self._slots:  # a queue forms: latency grows with the offered rate
                await self._service()
        else:
            await self._service()

    async def _service(self) -> None:
        wait = self.stall_until - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        # A plain sleep: asyncio rounds its timers up to whole milliseconds, so the service
        # time is delay + 0..1 ms. The tests compare serve-bench with a reference client on
        # this same server, so it need not be exact; it must not spin, or it would take a
        # core from the clients it is measuring.
        await asyncio.sleep(self.delay)

    @staticmethod
    def _outputs(x: np.ndarray) -> np.ndarray:
        return np.stack([x.sum(axis=1), x.max(axis=1)], axis=1).astype(np.float32)

    def _signature_map(self):
        signature_map = _protos.message("tensorflow.serving.SignatureDefMap")()
        sig = signature_map.signature_def["serving_default"]
        sig.method_name = "tensorflow/serving/predict"
        x = sig.inputs["x"]
        x.dtype = 1
        x.tensor_shape.dim.add(size=-1)
        x.tensor_shape.dim.add(size=4)
        y = sig.outputs["y"]
        y.dtype = 1
        y.tensor_shape.dim.add(size=-1)
        y.tensor_shape.dim.add(size=2)
        return signature_map

    async def _predict(self, request, context):
        if request.model_spec.name != MODEL:
            await context.abort(
                grpc.StatusCode.NOT_FOUND, f"Servable not found for request: Latest({request.model_spec.name})"
            )
        await self._serve_time()
        response = _protos.message("tensorflow.serving.PredictResponse")()
        to_tensor_proto(self._outputs(from_tensor_proto(request.inputs["x"])), response.outputs["y"])
        return response

    async def _metadata(self, request, context):
        response = _protos.message("tensorflow.serving.GetModelMetadataResponse")()
        response.model_spec.name = MODEL
        response.metadata["signature_def"].Pack(self._signature_map())
        return response

    async def _control(self, request: web.Request) -> web.Response:
        body = await request.json()
        if "delay" in body:
            self.delay = float(body["delay"])
        if "stall" in body:
            self.stall(float(body["stall"]))
        if "capacity" in body:
            self.capacity, self._slots = int(body["capacity"]), None
        return web.json_response({"delay": self.delay})

    async def _rest(self, request: web.Request) -> web.Response:
        path = request.path
        if path.endswith(":predict"):
            body = orjson.loads(await request.read())
            x = np.asarray(body["inputs"]["x"] if isinstance(body["inputs"], dict) else body["inputs"], np.float32)
            await self._serve_time()
            return web.Response(
                body=orjson.dumps({"outputs": self._outputs(x)}, option=orjson.OPT_SERIALIZE_NUMPY),
                content_type="application/json",
            )
        if path.endswith("/metadata"):
            from google.protobuf import json_format

            defs = {
                k: json_format.MessageToDict(v, preserving_proto_field_name=True)
                for k, v in self._signature_map().signature_def.items()
            }
            return web.json_response(
                {"model_spec": {"name": MODEL, "version": "1"}, "metadata": {"signature_def": {"signature_def": defs}}}
            )
        return web.json_response({"model_version_status": [{"version": "1", "state": "AVAILABLE"}]})

    # --- lifecycle -----------------------------------------------------------
    async def _start(self) -> None:
        self._grpc = aio.server()

        def handler(method, req, resp):
            return grpc.unary_unary_rpc_method_handler(
                method,
                request_deserializer=_protos.message(req).FromString,
                response_serializer=_protos.message(resp).SerializeToString,
            )

        self._grpc.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "tensorflow.serving.PredictionService",
                    {
                        "Predict": handler(
                            self._predict, "tensorflow.serving.PredictRequest", "tensorflow.serving.PredictResponse"
                        ),
                        "GetModelMetadata": handler(
                            self._metadata,
                            "tensorflow.serving.GetModelMetadataRequest",
                            "tensorflow.serving.GetModelMetadataResponse",
                        ),
                    },
                ),
            )
        )
        self._grpc.add_insecure_port(f"127.0.0.1:{self.grpc_port}")
        await self._grpc.start()
        app = web.Application()
        app.router.add_route("*", "/v1/models/{tail:.*}", self._rest)
        app.router.add_post("/control", self._control)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.rest_port).start()

    async def _stop(self) -> None:
        await self._grpc.stop(0)
        await self._runner.cleanup()

    def serve(self) -> None:
        self.loop.run_until_complete(self._start())
        print("ready", flush=True)
        self.loop.run_forever()


class DelayServer:
    """The delay server in its own process (as a real server is): one gRPC-aio loop per process,
    so the measuring process pays no cross-loop polling cost."""

    def __init__(self, delay: float = 0.02) -> None:
        self._delay = delay
        self.grpc_port = free_port()
        self.rest_port = free_port()
        self._process: subprocess.Popen[str] | None = None

    @property
    def grpc_url(self) -> str:
        return f"grpc://127.0.0.1:{self.grpc_port}"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def _control(self, **values: float) -> None:
        request = urllib.request.Request(
            f"{self.rest_url}/control", data=json.dumps(values).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10):
            pass

    @property
    def delay(self) -> float:
        return self._delay

    @delay.setter
    def delay(self, value: float) -> None:
        self._delay = value
        self._control(delay=value)

    def stall(self, seconds: float) -> None:
        self._control(stall=seconds)

    def set_capacity(self, requests_at_once: int) -> None:
        self._control(capacity=requests_at_once)

    def start(self) -> DelayServer:
        root = Path(__file__).resolve().parent.parent
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests._delay_server", str(self._delay), str(self.grpc_port), str(self.rest_port)],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self._process.stdout.readline() if self._process.stdout else ""
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError("delay server did not start")
        return self

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)

    def __enter__(self) -> DelayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    _DelayApp(float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])).serve()
