"""The measurer measured: known service times, a stall, the achieved rate, items vs requests."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from serve_bench.client import connect
from serve_bench.load import PointSettings, analyze, arrival_offsets, make_inputs, run_closed_loop, run_open_loop
from tests._delay_server import MODEL, DelayServer


@pytest.fixture(scope="module")
def delay_server():
    with DelayServer(delay=0.02) as server:
        yield server


@pytest.mark.parametrize("transport", ["grpc", "rest"])
async def test_p50_at_low_load_matches_service_time(delay_server, transport):
    delay_server.delay = 0.02
    url = delay_server.grpc_url if transport == "grpc" else delay_server.rest_url
    settings = PointSettings(warmup_s=0.3, min_duration_s=2.0, min_requests=30)
    async with connect(url, MODEL) as client:
        prepared = client.prepare(make_inputs("float", 1, client.signature_info))
        run = await run_closed_loop(client, prepared, 1, settings)
    figures = analyze(run, "closed", settings)
    p50_ms = figures["latency_us"]["p50"] / 1000
    assert 20.0 <= p50_ms <= 22.0, p50_ms
    assert figures["counts"]["errors"] == {}


async def test_open_loop_stall_shows_in_corrected_not_uncorrected(delay_server):
    # wrk2's demonstration: one connection's worth of in-flight (safety cap 1), a 1 s
    # stall mid-run. Requests due during the stall wait in the client; counted from
    # their schedule they are late by up to a second, counted from their actual send
    # they look fine.
    delay_server.delay = 0.002
    settings = PointSettings(warmup_s=0.5, min_duration_s=5.0, safety_cap=1)
    offsets = arrival_offsets(100, settings.warmup_s + settings.min_duration_s, "constant")
    async with connect(delay_server.grpc_url, MODEL) as client:
        prepared = client.prepare(make_inputs("float", 1, client.signature_info))
        import threading

        staller = threading.Timer(2.5, delay_server.stall, [1.0])  # the control call blocks: not on the loop
        staller.start()
        run = await run_open_loop(client, prepared, 100, offsets, settings)
    figures = analyze(run, "open", settings)
    corrected_p99 = figures["latency_us"]["p99"] / 1000
    uncorrected_p99 = figures["latency_uncorrected_us"]["p99"] / 1000
    assert corrected_p99 > 300, corrected_p99
    assert uncorrected_p99 < 50, uncorrected_p99
    assert figures["client"]["safety_cap_hits"] > 50


async def test_achieved_rate_within_2_percent_at_200_per_second(delay_server):
    delay_server.delay = 0.001
    settings = PointSettings(warmup_s=0.5, min_duration_s=4.0)
    offsets = arrival_offsets(200, settings.warmup_s + settings.min_duration_s, "constant")
    async with connect(delay_server.grpc_url, MODEL) as client:
        prepared = client.prepare(make_inputs("float", 1, client.signature_info))
        run = await run_open_loop(client, prepared, 200, offsets, settings)
    figures = analyze(run, "open", settings)
    assert figures["throughput"]["achieved_rate"] == pytest.approx(200, rel=0.02)
    assert figures["throughput"]["requests_per_s"] == pytest.approx(200, rel=0.02)
    assert not figures["client"]["limited"], figures["client"]
    assert figures["schedule_lag_us"]["p99"] < 5000


@pytest.mark.parametrize("batch", [1, 8])
async def test_items_per_second_is_requests_times_batch(delay_server, batch):
    delay_server.delay = 0.005
    settings = PointSettings(warmup_s=0.2, min_duration_s=1.0, min_requests=10)
    async with connect(delay_server.rest_url, MODEL) as client:
        prepared = client.prepare(make_inputs("float", batch, client.signature_info))
        run = await run_closed_loop(client, prepared, 3, settings)
    figures = analyze(run, "closed", settings)
    throughput = figures["throughput"]
    assert throughput["items_per_s"] == throughput["requests_per_s"] * batch
    assert figures["counts"]["items"] == figures["counts"]["ok"] * batch


def test_poisson_schedule_is_seeded_and_has_the_rate():
    a = arrival_offsets(500, 20, "poisson", seed=3)
    b = arrival_offsets(500, 20, "poisson", seed=3)
    np.testing.assert_array_equal(a, b)
    assert len(a) == pytest.approx(500 * 20, rel=0.03)
    gaps = np.diff(a)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)  # exponential: cv = 1
    assert not np.array_equal(a, arrival_offsets(500, 20, "poisson", seed=4))
