"""Reference load generators serve-bench is compared with, against the same server in the same run.

- ``bare_grpc_latencies`` / ``bare_rest_latencies``: the plainest client there is — one
  blocking connection, prebuilt request bytes, a loop timing each call.
- ``bare_grpc_closed_loop``: N coroutines on grpc.aio sending prebuilt bytes, counting answers.
- ``loadgen_server``: MLPerf LoadGen's Server scenario (Poisson arrivals, latency from the
  scheduled time) driving a gRPC SUT that issues each query with the non-blocking
  ``future()`` call and completes it from the callback.

The fidelity tests and benchmarks/vs_loadgen.py, vs_wrk.py use them.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import grpc
import numpy as np

from serve_bench import _protos

__all__ = [
    "LoadGenResult",
    "bare_grpc_closed_loop",
    "bare_grpc_latencies",
    "bare_rest_latencies",
    "loadgen_server",
    "predict_request_bytes",
]

_PREDICT = "/tensorflow.serving.PredictionService/Predict"


def predict_request_bytes(model: str, inputs: dict[str, np.ndarray]) -> bytes:
    """A serialized PredictRequest built straight from the proto (float32 tensors as tensor_content)."""
    request = _protos.message("tensorflow.serving.PredictRequest")()
    request.model_spec.name = model
    for name, array in inputs.items():
        tensor = request.inputs[name]
        tensor.dtype = 1  # DT_FLOAT
        for size in array.shape:
            tensor.tensor_shape.dim.add(size=size)
        tensor.tensor_content = np.ascontiguousarray(array, np.float32).tobytes()
    return request.SerializeToString()


def _host_port(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.hostname}:{parsed.port}"


def bare_grpc_latencies(
    url: str, model: str, inputs: dict[str, np.ndarray], count: int, warmup: int = 20
) -> np.ndarray:
    """Seconds per call of ``count`` sequential blocking Predict calls on one channel."""
    body = predict_request_bytes(model, inputs)
    with grpc.insecure_channel(_host_port(url)) as channel:
        call = channel.unary_unary(_PREDICT)  # no (de)serializers: bytes in, bytes out
        for _ in range(warmup):
            call(body, timeout=30)
        times = np.empty(count)
        perf = time.perf_counter
        for i in range(count):
            started = perf()
            call(body, timeout=30)
            times[i] = perf() - started
    return times


def bare_rest_latencies(
    url: str, model: str, inputs: dict[str, np.ndarray], count: int, warmup: int = 20
) -> np.ndarray:
    """Seconds per call of ``count`` sequential :predict POSTs on one keep-alive connection."""
    parsed = urlparse(url)
    body = json.dumps({"inputs": {name: array.tolist() for name, array in inputs.items()}}).encode()
    path = f"/v1/models/{model}:predict"
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    headers = {"Content-Type": "application/json"}

    def one() -> None:
        connection.request("POST", path, body, headers)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"bare REST client got HTTP {response.status}")

    try:
        for _ in range(warmup):
            one()
        times = np.empty(count)
        perf = time.perf_counter
        for i in range(count):
            started = perf()
            one()
            times[i] = perf() - started
    finally:
        connection.close()
    return times


def bare_grpc_closed_loop(
    url: str, model: str, inputs: dict[str, np.ndarray], concurrency: int, seconds: float, warmup_s: float = 1.0
) -> float:
    """Answers per second of ``concurrency`` grpc.aio coroutines each sending the next request at once."""
    body = predict_request_bytes(model, inputs)

    async def run() -> float:
        async with grpc.aio.insecure_channel(_host_port(url)) as channel:
            call = channel.unary_unary(_PREDICT)
            counting = False
            answered = 0
            stop = False

            async def worker() -> None:
                nonlocal answered
                while not stop:
                    await call(body, timeout=30)
                    if counting:
                        answered += 1

            workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
            await asyncio.sleep(warmup_s)
            counting, started = True, time.perf_counter()
            await asyncio.sleep(seconds)
            counting, elapsed = False, time.perf_counter() - started
            stop = True
            await asyncio.gather(*workers)
            return answered / elapsed

    return asyncio.run(run())


class LoadGenResult:
    """Figures from LoadGen's summary log: latency percentiles (s) and the scheduled/completed rates."""

    def __init__(self, summary: str) -> None:
        self.summary = summary

    def _number(self, label: str) -> float:
        match = re.search(re.escape(label) + r"\s*:\s*([0-9.eE+-]+)", self.summary)
        if match is None:
            raise ValueError(f"LoadGen summary has no {label!r}:\n{self.summary}")
        return float(match.group(1))

    def percentile(self, p: float) -> float:
        return self._number(f"{p:.2f} percentile latency (ns)") / 1e9

    @property
    def scheduled_rate(self) -> float:
        return self._number("Scheduled samples per second")

    @property
    def completed_rate(self) -> float:
        return self._number("Completed samples per second")


def loadgen_server(
    url: str,
    model: str,
    inputs: dict[str, np.ndarray],
    rate: float,
    seconds: float,
    seed: int = 0,
    start_at: float | None = None,
) -> LoadGenResult:
    """MLPerf LoadGen, Server scenario at ``rate`` queries/s (Poisson) for ``seconds``, one sample per query.

    ``start_at`` (a time.perf_counter() value, CLOCK_MONOTONIC: the same in every process) lets it
    run in another process at the same time as the generator it is compared with.
    """
    import mlperf_loadgen as lg

    body = predict_request_bytes(model, inputs)
    channel = grpc.insecure_channel(_host_port(url))
    call = channel.unary_unary(_PREDICT)
    call(body, timeout=30)  # connect before the clock starts
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.perf_counter()))
    errors: list[BaseException] = []

    def issue(samples: list) -> None:  # LoadGen's issue thread: must not block
        for sample in samples:
            future = call.future(body, timeout=30)

            def done(f: grpc.Future, sample_id: int = sample.id) -> None:
                if f.exception() is not None:
                    errors.append(f.exception())
                lg.QuerySamplesComplete([lg.QuerySampleResponse(sample_id, 0, 0)])

            future.add_done_callback(done)

    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Server
    settings.mode = lg.TestMode.PerformanceOnly
    settings.server_target_qps = rate
    settings.server_target_latency_ns = 10**9  # a generous bound: only the figures are used, not VALID/INVALID
    settings.min_duration_ms = int(seconds * 1000)
    settings.max_duration_ms = int(seconds * 1000 * 3)
    settings.min_query_count = int(rate * seconds)
    settings.schedule_rng_seed = seed + 1
    with tempfile.TemporaryDirectory() as out:
        output = lg.LogOutputSettings()
        output.outdir = out
        output.copy_summary_to_stdout = False
        log = lg.LogSettings()
        log.log_output = output
        log.enable_trace = False
        sut = lg.ConstructSUT(issue, lambda: None)
        qsl = lg.ConstructQSL(1, 1, lambda indices: None, lambda indices: None)
        try:
            lg.StartTestWithLogSettings(sut, qsl, settings, log)
        finally:
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
            channel.close()
        summary = (Path(out) / "mlperf_log_summary.txt").read_text()
    if errors:
        raise RuntimeError(f"LoadGen SUT: {len(errors)} requests failed, first: {errors[0]}")
    return LoadGenResult(summary)
