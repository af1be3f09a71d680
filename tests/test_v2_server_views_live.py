"""The server view against real Triton 2.51 and MLServer 1.7.1 (serve_bench.servers, on free ports).

Load is plain v2 JSON over HTTP from threads (urllib), so these tests need nothing of the
serve-bench client. The servers' environment is `make servers-env`; without it the `triton` and `mlserver` fixtures
(conftest.py) skip each test, or fail it where CI is set.
"""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from serve_bench.metrics import page_kind, read_server, read_settled, server_breakdown

N, IN_FLIGHT = 64, 8


def _infer(base: str, body: bytes) -> int:
    request = urllib.request.Request(f"{base}/v2/models/tiny/infer", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()
        return int(response.status)


def _send(base: str, n: int, in_flight: int) -> None:
    images = np.random.default_rng(0).uniform(0, 255, (1, 64, 64, 3)).astype(np.float32)
    body = json.dumps(
        {
            "inputs": [
                {"name": "images", "shape": list(images.shape), "datatype": "FP32", "data": images.ravel().tolist()}
            ]
        }
    ).encode()
    with ThreadPoolExecutor(in_flight) as pool:
        assert set(pool.map(lambda _: _infer(base, body), range(n))) == {200}


def _stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        entry: dict[str, Any] = json.loads(response.read())["model_stats"][0]
        return entry


async def test_triton_view_counts_every_request_and_agrees_with_its_statistics_api(triton):
    """N single-image requests at 8 in flight through Triton's dynamic batcher (2 ms): the view counts
    exactly N requests (success is counted per request, core src/infer_stats.cc:104-121, after the
    response was sent, python_backend src/pb_metric_reporter.cc:44-79: the reading waits for it), and
    its mean executed batch is the statistics API's inference_count / execution_count over the point
    (core src/infer_stats.cc:109 and :418), above 1 with requests batched together."""
    before, why = await read_server(triton.metrics_url, "tiny", kind="triton", target_url=triton.http_url)
    assert before is not None, why
    truth_before = _stats(triton.stats_url)
    _send(triton.http_base, N, IN_FLIGHT)
    after, why, late = await read_settled(
        triton.metrics_url, "tiny", before, N, "REST", target_url=triton.http_url, settle_s=30
    )
    assert after is not None and not late, why or late
    truth_after = _stats(triton.stats_url)
    view = server_breakdown(before, after, "REST")

    assert view.requests == N and view.errors == 0
    executions = truth_after["execution_count"] - truth_before["execution_count"]
    rows = truth_after["inference_count"] - truth_before["inference_count"]
    assert view.executions == executions
    assert view.processed_batch_mean == pytest.approx(rows / executions)
    assert view.processed_batch_mean > 1
    assert sum(count for _, count in view.batch_executions) == executions
    assert sum(size * count for size, count in view.batch_executions) == rows == N
    assert view.request_us_mean is not None and view.queue_us_mean is not None and view.compute_us_mean is not None
    assert view.queue_us_mean + view.compute_us_mean <= view.request_us_mean + 1  # 1 µs: truncation
    assert view.describe().endswith(f"executed batch {rows / executions:.1f}")


async def test_mlserver_view_counts_every_request_on_its_real_page(mlserver):
    """The metric names read here are on a real MLServer 1.7.1 page (mlserver/handlers/dataplane.py:42-56,
    parallel/dispatcher.py:41-75, batching/adaptive.py:65-68), and the view counts exactly N requests
    and fewer executions than requests with adaptive batching at 8 in flight."""
    with urllib.request.urlopen(mlserver.metrics_url, timeout=10) as response:
        assert page_kind(response.read().decode()) == "mlserver"
    before, why = await read_server(mlserver.metrics_url, "tiny", kind="mlserver")
    assert before is not None, why
    _send(mlserver.http_base, N, IN_FLIGHT)
    after, why, late = await read_settled(mlserver.metrics_url, "tiny", before, N, "REST", settle_s=30)
    assert after is not None and not late, why or late
    view = server_breakdown(before, after, "REST")

    assert view.requests == N and view.errors == 0 and view.batching
    assert view.executions is not None and 0 < view.executions < N
    assert view.requests_per_execution == pytest.approx(N / view.executions)
    assert view.runtime_us_mean is not None and view.request_us_mean is not None
    assert view.request_us_mean >= view.runtime_us_mean  # the front end's time holds the data plane's
