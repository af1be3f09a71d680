"""Locust scenarios for TF Serving (and the serve-bench local server).

    locust -f loadtests/locustfile.py --host grpc://localhost:8500 --protocol grpc --model inception_v3
    locust -f loadtests/locustfile.py --host http://localhost:8501 --protocol rest --batch-size 8 \
        --headless -u 8 -r 8 -t 60s --csv results/locust/run
    # one run, a whole concurrency sweep: add the step shape
    locust -f loadtests/locustfile.py,loadtests/step_shape.py --host grpc://localhost:8500 --headless \
        --steps 1,2,4,8 --step-seconds 30 --csv results/locust/steps
    # distributed: one master, N workers (same arguments)
    locust -f loadtests/locustfile.py --master ...   /   locust -f loadtests/locustfile.py --worker
    # Triton, MLServer (the Open Inference Protocol): name the host as every serve-bench command does
    locust -f loadtests/locustfile.py --host v2+grpc://localhost:8001 --protocol grpc --model inception_v3
    locust -f loadtests/locustfile.py --host v2+http://localhost:8000 --protocol rest --model inception_v3

Both users fire Locust request events named alike ("predict <model> b<batch>"), so
their rows line up; each request carries --batch-size images, so images/s =
requests/s × batch size (`serve-bench import-locust` does that arithmetic).
The payload is built once per user, outside the timed region.
"""

from __future__ import annotations

import grpc.experimental.gevent as grpc_gevent

grpc_gevent.init_gevent()  # before any gRPC channel exists: make gRPC cooperate with gevent

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from locust import FastHttpUser, User, events, task  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: loadtests._payloads
from loadtests._payloads import (  # noqa: E402
    build_grpc_request,
    build_rest_body,
    build_v2_grpc_request,
    build_v2_rest_body,
    is_v2,
    memory_refusal,
    request_name,
)


@events.init_command_line_parser.add_listener
def _arguments(parser) -> None:  # type: ignore[no-untyped-def]
    group = parser  # options on the top-level parser show in the web UI (groups do not take include_in_web_ui)
    group.add_argument("--model", default="inception_v3", include_in_web_ui=True, help="model name on the server")
    group.add_argument(
        "--signature",
        default="",
        include_in_web_ui=True,
        help="signature (default: serving_default, or serving_bytes for --payload jpeg)",
    )
    group.add_argument("--batch-size", type=int, default=1, include_in_web_ui=True, help="images per request")
    group.add_argument(
        "--payload",
        choices=["float", "jpeg"],
        default="float",
        include_in_web_ui=True,
        help="float32 pixels or JPEG bytes",
    )
    group.add_argument(
        "--protocol",
        choices=["grpc", "rest"],
        default="grpc",
        include_in_web_ui=True,
        help="which user class runs: gRPC (PredictionService) or REST (:predict)",
    )
    group.add_argument("--request-timeout", type=float, default=60.0, include_in_web_ui=True)


@events.init.add_listener
def _check_memory(environment, **kwargs) -> None:  # type: ignore[no-untyped-def]
    """Refuse a --batch-size (or user count) whose payloads this process cannot hold, before any user builds
    one: one line, exit 2, as serve-bench's own commands (docs/bounds.md). The master runs no users."""
    options = environment.parsed_options
    if options is None or getattr(options, "master", False):
        return
    refusal = memory_refusal(options, options.host)
    if refusal:
        print(f"locust: error: {refusal}", file=sys.stderr)
        sys.exit(2)


@events.init.add_listener
def _pick_user_class(environment, **kwargs) -> None:  # type: ignore[no-untyped-def]
    options = environment.parsed_options
    if options is None or environment.user_classes is None:
        return
    chosen = [cls for cls in environment.user_classes if getattr(cls, "protocol", None) == options.protocol]
    if chosen:
        environment.user_classes = chosen


class GrpcPredictUser(User):
    """tensorflow.serving.PredictionService/Predict over a gevent-friendly gRPC channel
    (inference.GRPCInferenceService/ModelInfer for a v2+grpc:// host)."""

    protocol = "grpc"

    def on_start(self) -> None:
        import grpc

        from serve_bench.client._grpc import CHANNEL_OPTIONS
        from serve_bench.client._v2_grpc import V2_CHANNEL_OPTIONS

        options = self.environment.parsed_options
        host = self.host or "grpc://localhost:8500"
        target = host.split("://", 1)[-1]
        self._channel = grpc.insecure_channel(target, options=V2_CHANNEL_OPTIONS if is_v2(host) else CHANNEL_OPTIONS)
        if is_v2(host):
            self._predict = self._channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
            self._payload, self._items = build_v2_grpc_request(options)
        else:
            self._predict = self._channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
            self._payload, self._items = build_grpc_request(options)
        self._name = request_name(options)
        self._timeout = options.request_timeout

    def on_stop(self) -> None:
        self._channel.close()

    @task
    def predict(self) -> None:
        started = time.perf_counter()
        exception = None
        length = 0
        try:
            response = self._predict(self._payload, timeout=self._timeout)
            length = len(response)
        except Exception as exc:  # grpc.RpcError: reported to Locust as a failure
            exception = exc
        self.environment.events.request.fire(
            request_type="grpc",
            name=self._name,
            response_time=(time.perf_counter() - started) * 1000,
            response_length=length,
            exception=exception,
            context={"items": self._items},
        )


class RestPredictUser(FastHttpUser):
    """POST /v1/models/<model>:predict with the columnar JSON body, encoded once
    (POST /v2/models/<model>/infer with JSON tensors for a v2+http(s):// host)."""

    protocol = "rest"

    def __init__(self, environment) -> None:  # type: ignore[no-untyped-def]
        host = self.host or environment.host
        self._v2 = is_v2(host)
        if self._v2:
            self.host = host[3:]  # FastHttpSession's base URL: http(s)://
        super().__init__(environment)

    def on_start(self) -> None:
        options = self.environment.parsed_options
        self._headers = {"Content-Type": "application/json"}
        if self._v2:
            self._path = f"/v2/models/{options.model}/infer"
            self._body, self._headers, self._items = build_v2_rest_body(options)
        else:
            self._path = f"/v1/models/{options.model}:predict"
            self._body, self._items = build_rest_body(options)
        self._name = request_name(options)
        self._timeout = options.request_timeout

    @task
    def predict(self) -> None:
        with self.client.post(
            self._path,
            data=self._body,
            name=self._name,
            catch_response=True,
            headers=self._headers,
            context={"items": self._items},
        ) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {resp.text[:200] if resp.text else ''}")
