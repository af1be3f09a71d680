"""serve-bench against the servers' own records: real Triton 2.51 and MLServer 1.7.1, no fakes.

The issue's acceptance test. For the same point, what serve-bench reports is checked against
what the server itself recorded, read here without serve-bench's metrics code:

* the requests serve-bench sent, against Triton's statistics API (``/v2/models/tiny/stats``,
  ``inference_stats.success.count``) and MLServer's ``model_infer_request_success`` counter
  (MLServer has no statistics API: that counter is its own record), within 2%;
* the point's mean executed batch size (``point.server.processed_batch_mean``, read by
  serve-bench from Triton's metrics page) against the statistics API's
  Δinference_count / Δexecution_count, within 2%;
* serve-bench's closed-loop p50 against a bare ``grpc.aio`` loop sending the same bytes in the
  same run, within 10%.

Where the sources are cited: core at 84868f1 (2024-09-20, the main-branch commit nearest
before 2.51's r24.10 branch; the core mirror here has no r24.10, and its HEAD, 73aad7c of
2026-06-09, is newer than 2.51; src/infer_stats.cc is identical at both), server at tag
v2.51.0, python_backend at a2564ea (2024-10-08), MLServer at tag 1.7.1.

The servers come from the module-scoped fixtures ``triton`` and ``mlserver`` (tests/conftest.py);
without the servers' environment (``make servers-env``) these tests skip.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import statistics
import time
import urllib.request
from typing import Any

import grpc
import numpy as np
import pytest

from serve_bench.client import connect
from serve_bench.load import PointSettings, image_size_of, make_inputs
from serve_bench.stats import LoadInfo, Point
from serve_bench.sweep import measure, measure_async

IN_FLIGHT = 8
# No warm-up: the measured window then opens before the first send, so the only requests it
# leaves out are those still in flight when it closes (see _check_sent).
COUNT_SETTINGS = PointSettings(warmup_s=0.0, min_duration_s=2.0, min_requests=500)
POLL_S = 10.0  # longest wait for a server's own record to take in the point's last requests

ROUNDS = 30  # (bare loop, serve-bench) pairs for the p50 check, their order swapped every round
ROUND_WARMUP_S, ROUND_S = 0.2, 0.4
P50_MARGIN = 0.10


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: bytes = response.read()
        return body


def _triton_stats(url: str) -> dict[str, Any]:
    """The statistics API's figures for `tiny` (one version), as Triton serialises them."""
    (entry,) = (e for e in json.loads(_get(url))["model_stats"] if e["name"] == "tiny")
    return {
        "success": int(entry["inference_stats"]["success"]["count"]),
        "inference_count": int(entry["inference_count"]),
        "execution_count": int(entry["execution_count"]),
        # executed rows: batch_stats holds one count per execution, under its batch size
        "rows": sum(int(b["batch_size"]) * int(b["compute_infer"]["count"]) for b in entry["batch_stats"]),
    }


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in before}


_SUCCESS = re.compile(r"^model_infer_request_success_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)


def _mlserver_successes(metrics_url: str) -> float:
    """``model_infer_request_success_total`` for model `tiny`, summed over its `version` labels
    (MLServer labels the version a request named: "" over gRPC, "None" over REST)."""
    page = _get(metrics_url).decode()
    return sum(float(m["value"]) for m in _SUCCESS.finditer(page) if 'model="tiny"' in m["labels"].split(","))


def _poll(read: Any, done: Any) -> Any:
    """Read until ``done(value)`` or POLL_S passed; the last value read either way."""
    deadline = time.monotonic() + POLL_S
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.01)  # between polls of the endpoint, not a wait for something to happen
        value = read()
    return value


def _check_sent(point: Point, server_successes: float) -> None:
    """The server counted the requests serve-bench sent: exactly bounded, and within 2%.

    The Point counts the requests answered inside its window, not every one sent. With no
    warm-up the window opens before the first send and closes while the closed loop has
    exactly IN_FLIGHT requests out (no await between the window's end and the stop), which
    are answered and left out: sent is in [requests, requests + IN_FLIGHT]. The server's
    count must lie in that interval; the interval is itself within 2% of the Point's count.
    """
    counts = point.counts
    assert counts.errors == () and counts.ok == counts.requests > 0, counts
    sent_low, sent_high = counts.requests, counts.requests + IN_FLIGHT
    assert IN_FLIGHT / sent_low < 0.02, f"too few requests for a 2% check: {sent_low}"
    assert sent_low <= server_successes <= sent_high, (
        f"the server counted {server_successes:g} successful requests; serve-bench sent {sent_low}..{sent_high}"
    )
    assert server_successes == pytest.approx(counts.requests, rel=0.02)


@pytest.mark.parametrize("url_attr", ["grpc_url", "http_url"])
def test_triton_counts_what_serve_bench_sent_and_the_batches_it_reports(triton, url_attr):
    """One closed-loop point (batch 1, 8 in flight, 2 ms queue delay) over v2+grpc or v2+http: Triton's
    statistics API, read before and after by this test, counted the requests serve-bench sent
    (±2%, and within the exact bound of ``_check_sent``), and executed them in batches of the
    mean serve-bench reports (±2%), above 1.

    Triton's record: core src/infer_stats.cc:104-121 (``UpdateSuccessWithDuration``: per successful
    request ``success_count_`` +1 and ``inference_count_`` + its rows) and :400-433
    (``UpdateInferBatchStatsWithDuration``: per execution ``execution_count_`` +1 and the
    ``batch_stats`` entry of its batch size +1), serialised by core src/tritonserver.cc:3014
    (``inference_stats.success``) and :3098-3101 (``inference_count``, ``execution_count``; at
    core HEAD 3015 and 3100-3102), served by server src/http_server.cc:1753-1789
    (``HandleModelStats``, v2.51.0). The Python backend reports each request's statistics, then
    the execution's, after the responses went out (python_backend src/pb_metric_reporter.cc:44-79):
    the "after" reading is polled until it holds the point's last requests and executions.

    Measured on a 2-core VM (2026, tiny, Triton 2.51): ~4,600 requests in 3 s; Triton's
    count was serve-bench's + 8 (the requests in flight when the window closed) in every run,
    over both protocols; executed batch 8.0 over gRPC, 6.2-8.0 over HTTP.
    """
    url = getattr(triton, url_attr)
    before = _triton_stats(triton.stats_url)
    point = measure(
        url,
        "tiny",
        batch_size=1,
        load=LoadInfo("closed", concurrency=IN_FLIGHT),
        settings=COUNT_SETTINGS,
        metrics_url=triton.metrics_url,
    )
    upper = point.counts.requests + IN_FLIGHT
    after = _poll(
        lambda: _delta(before, _triton_stats(triton.stats_url)),
        lambda d: d["success"] >= upper and d["rows"] == d["inference_count"],
    )

    _check_sent(point, after["success"])
    assert after["inference_count"] == after["success"]  # batch 1: one row per request
    view = point.server
    assert view is not None and view.available and view.source == "triton", point.notes
    executed_batch = after["inference_count"] / after["execution_count"]
    assert view.processed_batch_mean == pytest.approx(executed_batch, rel=0.02), (
        f"serve-bench reports executed batch {view.processed_batch_mean}; Triton's statistics API "
        f"{after['inference_count']} rows / {after['execution_count']} executions = {executed_batch:.3f}"
    )
    assert executed_batch > 1  # 8 in flight, 2 ms delay: the dynamic batcher merged requests


def test_mlserver_counts_what_serve_bench_sent(mlserver):
    """One closed-loop point (batch 1, 8 in flight) over v2+grpc: MLServer's own success counter
    counted the requests serve-bench sent (±2%, and within the exact bound of ``_check_sent``).

    MLServer's record: ``model_infer_request_success`` (mlserver/handlers/dataplane.py:42-46, a
    prometheus_client Counter, written ``…_total``), incremented once per infer call that returned
    from the model, before the answer leaves (``_infer_contextmanager``, dataplane.py:172-191).
    It has no statistics API; this counter is what it records itself.

    Measured on a 2-core VM (2026, tiny, MLServer 1.7.1, adaptive batching 32 / 2 ms): see
    benchmarks/README.md; MLServer's count was serve-bench's + 8 in every run.
    """
    before = _mlserver_successes(mlserver.metrics_url)
    point = measure(
        mlserver.grpc_url,
        "tiny",
        batch_size=1,
        load=LoadInfo("closed", concurrency=IN_FLIGHT),
        settings=COUNT_SETTINGS,
        metrics_url=mlserver.metrics_url,
    )
    upper = point.counts.requests + IN_FLIGHT
    counted = _poll(lambda: _mlserver_successes(mlserver.metrics_url) - before, lambda n: n >= upper)
    _check_sent(point, counted)


async def _bare_p50_us(target: str, payload: bytes) -> tuple[float, float]:
    """p50 (µs) of a bare grpc.aio loop, one request in flight: ROUND_WARMUP_S discarded, then ROUND_S;
    with the process's CPU µs per request over the measured part (for the failure message)."""
    async with grpc.aio.insecure_channel(target) as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")  # raw bytes both ways
        latencies: list[float] = []
        perf = time.perf_counter
        started = perf()
        cpu_start = None
        while True:
            sent = perf()
            await infer(payload)
            done = perf()
            if sent - started >= ROUND_WARMUP_S:
                latencies.append(done - sent)
            elif done - started >= ROUND_WARMUP_S:
                cpu_start = time.process_time()
            if done - started >= ROUND_WARMUP_S + ROUND_S:
                cpu = (time.process_time() - cpu_start) / len(latencies) if cpu_start is not None else 0.0
                return float(np.median(latencies)) * 1e6, cpu * 1e6


async def _alternate(url: str) -> tuple[list[float], list[float], list[float]]:
    """ROUNDS pairs of (bare loop p50, serve-bench point p50), one request in flight; which of the two
    goes first alternates, so a machine that speeds up or slows down over the test favours neither."""
    async with connect(url, "tiny") as client:
        # the bytes measure() sends: the same synthetic batch (seed 0), encoded by the same client
        image_size = image_size_of(client.signatures.get("serving_default"))
        payload = client.prepare(make_inputs("float", 1, client.signature_info, seed=0, image_size=image_size)).payload
    settings = PointSettings(warmup_s=ROUND_WARMUP_S, min_duration_s=ROUND_S, min_requests=50)
    bare: list[float] = []
    served: list[float] = []
    cpu: list[float] = []  # µs of this process's CPU per request: (bare, serve-bench) per round

    async def bare_p50() -> None:
        p50, cpu_us = await _bare_p50_us(url.removeprefix("v2+grpc://"), payload)
        bare.append(p50)
        cpu.append(cpu_us)

    async def serve_bench_p50() -> None:
        point = await measure_async(
            url, "tiny", load=LoadInfo("closed", concurrency=1), settings=settings, metrics_url=""
        )
        assert point.counts.errors == (), point.counts
        served.append(point.latency.p50)
        cpu.append(point.client.process_cpu_percent / 100 * point.duration_s / point.counts.requests * 1e6)

    for turn in range(ROUNDS):
        first, second = (serve_bench_p50, bare_p50) if turn % 2 else (bare_p50, serve_bench_p50)
        await first()
        await second()
    return bare, served, cpu


def test_closed_loop_p50_matches_a_bare_grpc_loop(triton):
    """serve-bench's closed-loop p50 at 1 in flight over v2+grpc is within 10% of a bare ``grpc.aio``
    loop's (method ``/inference.GRPCInferenceService/ModelInfer``, the same pre-encoded
    ModelInferRequest bytes, no serializers, no decoding), run in turns in this test: ROUNDS (30) rounds
    of (bare loop, serve-bench point), 0.4 s each after 0.2 s of warm-up, which of the two goes first
    swapped every round; the median of the 30 rounds' ratios (each round's pair shares the machine's
    state) is compared, so drift and a few disturbed rounds hit neither side alone.

    Triton's side is the same for both: the ``triton`` fixture's dynamic batcher holds a lone
    request up to its 2 ms queue delay (core src/dynamic_batch_scheduler.cc), so the p50 is
    ~4 ms and serve-bench's own share (decoding the answer, its record) shows as a few %.

    The margin, from the spread measured on the 2-core VM (AMD EPYC), 2026-11-29, Triton started once
    and this test's rounds run 3 times per case (the median of the rounds' ratios; in brackets the
    median's 95% distribution-free interval, order statistics of the 30 ratios, which the failure
    message also gives):
      - as is: 1.040, 1.010, 1.032 idle and 1.045, 0.992, 1.020 with one core kept busy (intervals
        no higher than 1.095);
      - 0.4 ms busy-wait added inside the client's timed send (``V2GrpcTransport.send``, 10% of the
        p50): 1.137, 1.171, 1.136 idle, 1.121, 1.163, 1.154 busy (lower ends 1.09-1.13);
      - 0.7 ms: 1.236-1.260 (lower ends 1.19-1.23).
    So 10% falls between serve-bench as is (at most 1.045) and a 10% addition (at least 1.121).
    With 15 rounds of 0.6 s (until 2026-11-29) the as-is median reached 1.105 and 1.126 in 2 of about
    20 full-suite runs on a loaded machine (rounds 0.94-1.41): too few rounds for the rounds' spread.
    Earlier history: a median of each side's rounds, unpaired, failed at 1.154 when the machine
    drifted from ~5.0 to ~3.6 ms a request within the test, and each side's best round let one lucky
    bare round decide: paired ratios it is. The failure message gives every round, each side's
    client CPU per request and the CPU model.
    """
    bare, served, cpu = asyncio.run(_alternate(triton.grpc_url))
    ratios = [s / b for b, s in zip(bare, served)]
    ratio = statistics.median(ratios)  # paired: see the docstring
    low, high = median_interval(ratios)
    assert abs(ratio - 1) <= P50_MARGIN, (
        f"serve-bench p50 / bare loop p50, median of {ROUNDS} rounds' ratios = {ratio:.3f} (95% interval "
        f"{low:.3f}-{high:.3f}), best rounds' "
        f"{min(served) / min(bare):.3f}, medians' {statistics.median(served) / statistics.median(bare):.3f} "
        f"(rounds {[round(r, 3) for r in ratios]}; serve-bench {[round(v) for v in served]} µs, "
        f"bare {[round(v) for v in bare]} µs; client CPU µs/request in the order run {[round(c) for c in cpu]}; "
        f"{_cpu_model()})"
    )


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """The median's distribution-free interval: the k-th smallest and k-th largest of ``values``, k the
    largest with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2 (for 30 values, the 10th and 21st)."""
    ordered = sorted(values)
    n = len(ordered)
    k, below = 0, 0.0
    while k < n and below + math.comb(n, k) / 2**n <= (1 - confidence) / 2:
        below += math.comb(n, k) / 2**n
        k += 1
    return (ordered[k - 1], ordered[n - k]) if k else (ordered[0], ordered[-1])


def test_median_interval_is_the_order_statistics_table():
    """Binomial tables' values: n=30 gives the 10th and 21st (coverage 95.7%), n=15 the 4th and 12th."""
    assert median_interval([float(i) for i in range(1, 31)]) == (10.0, 21.0)
    assert median_interval([float(i) for i in range(15, 0, -1)]) == (4.0, 12.0)
    assert median_interval([1.0, 2.0]) == (1.0, 2.0)  # too few for 95%: the whole range


def _cpu_model() -> str:
    with open("/proc/cpuinfo") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "CPU unknown")
