"""The measurer measured, against references in the same run: no absolute time windows.

Every timing assertion compares serve-bench with a reference measuring the same
server at the same time on the same machine — a bare blocking client, MLPerf
LoadGen, the OS's own wake-up latency — so a slower machine or a busy one moves
both sides. Margins come from the spread measured over repeated runs on the
2-core development VM while other jobs loaded it (figures beside each margin).
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest

from serve_bench.client import ConnectError, FakeTransport, connect, fake_client
from serve_bench.client._fake import image_signature
from serve_bench.load import (
    PointSettings,
    _generators,
    analyze,
    arrival_offsets,
    make_inputs,
    run_closed_loop,
    run_open_loop,
)
from serve_bench.load._generators import DOWN_AFTER
from tests._baselines import bare_grpc_latencies, bare_rest_latencies, loadgen_server
from tests._delay_server import MODEL, DelayServer

X = {"x": np.ones((1, 4), np.float32)}


@pytest.fixture(scope="module")
def delay_server():
    with DelayServer(delay=0.02) as server:
        yield server


async def _serve_bench_closed(url: str, settings: PointSettings, concurrency: int = 1, batch: int = 1):
    async with connect(url, MODEL) as client:
        prepared = client.prepare(make_inputs("float", batch, client.signature_info))
        run = await run_closed_loop(client, prepared, concurrency, settings)
    return run, analyze(run, "closed", settings)


async def _serve_bench_open(url: str, rate: float, arrival: str, settings: PointSettings, seed: int = 0):
    offsets = arrival_offsets(rate, settings.min_duration_s, arrival, seed, warmup_s=settings.warmup_s)
    async with connect(url, MODEL) as client:
        prepared = client.prepare(make_inputs("float", 1, client.signature_info))
        run = await run_open_loop(client, prepared, rate, offsets, settings)
    return run, analyze(run, "open", settings)


@pytest.mark.parametrize("transport", ["grpc", "rest"])
async def test_p50_matches_a_bare_client_on_the_same_server(delay_server, transport):
    # The earlier form asserted p50 in 20-22 ms for a 20 ms service; on another machine the server
    # itself took 22.2-23.8 ms. Here the reference is a bare blocking client (prebuilt bytes, one
    # connection) on a thread, measuring the same server AT THE SAME TIME, so whatever else the
    # machine does hits both sides alike.
    delay_server.delay = 0.02
    url = delay_server.grpc_url if transport == "grpc" else delay_server.rest_url
    bare = bare_grpc_latencies if transport == "grpc" else bare_rest_latencies
    settings = PointSettings(warmup_s=0.3, min_duration_s=2.0, min_requests=30)
    theirs, (_, figures) = await asyncio.gather(
        asyncio.to_thread(bare, url, MODEL, X, 100, 15), _serve_bench_closed(url, settings)
    )
    assert figures.counts.errors == ()
    ratio = figures.latency.p50 / 1e6 / float(np.median(theirs))
    # measured over 16 runs (gRPC and REST) at load average 3-11 from other jobs: 0.937-1.034
    assert 0.90 <= ratio <= 1.10, (figures.latency.p50, np.median(theirs))


async def test_open_loop_latency_matches_mlperf_loadgen(delay_server):
    # Same server, same Poisson rate, latency from the scheduled time in both (LoadGen's Server
    # scenario). LoadGen runs in another process at the same time (agreed CLOCK_MONOTONIC start),
    # issuing from its own C++ thread through a non-blocking gRPC call.
    delay_server.delay = 0.01
    rate, seconds = 100.0, 5.0
    settings = PointSettings(warmup_s=0.5, min_duration_s=seconds)
    start_at = time.perf_counter() + 4.0  # time for the child to import and connect
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        theirs = asyncio.get_running_loop().run_in_executor(
            pool, loadgen_server, delay_server.grpc_url, MODEL, X, rate, seconds + settings.warmup_s, 1, start_at
        )
        offsets = arrival_offsets(rate, seconds, "poisson", 1, warmup_s=settings.warmup_s)
        async with connect(delay_server.grpc_url, MODEL) as client:
            prepared = client.prepare(make_inputs("float", 1, client.signature_info))
            run = await run_open_loop(client, prepared, rate, offsets, settings, start_at=start_at)
        lg = await theirs
    figures = analyze(run, "open", settings)
    assert figures.counts.errors == ()
    p50_ratio = figures.latency.p50 / 1e6 / lg.percentile(50)
    p99_ratio = figures.latency.p99 / 1e6 / lg.percentile(99)
    # measured over 5 runs at load average 10 from other jobs: p50 ratio 1.016-1.164, p99 ratio
    # 0.61-1.19 (p99 of 500 requests rests on its 5 slowest, i.e. on whatever else the machine did
    # at that moment; on a quiet machine benchmarks/vs_loadgen.py holds both within 10%)
    assert 0.85 <= p50_ratio <= 1.25, (figures.latency.p50, lg.percentile(50))
    assert 0.50 <= p99_ratio <= 2.00, (figures.latency.p99, lg.percentile(99))


def _wake_up_lateness(rate: float, seconds: float) -> np.ndarray:
    """How late a bare thread sleeping to each due time wakes: what the OS alone costs a schedule."""
    due = time.perf_counter() + np.arange(int(rate * seconds)) / rate
    late = np.empty(len(due))
    for i, when in enumerate(due):
        delay = when - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        late[i] = time.perf_counter() - when
    return late


async def test_open_loop_sends_the_requested_rate_on_time(delay_server):
    # The earlier form was flagged client-limited at 200 req/s (lag p99 9.6 ms) on another machine.
    # Now: the schedule holds exactly rate x window requests, all are sent inside the window, and the
    # generator adds little lag beyond what the OS costs any sleeping thread at the same moment
    # (a bare thread keeping the same schedule beside it).
    delay_server.delay = 0.001
    rate = 200.0
    settings = PointSettings(warmup_s=0.5, min_duration_s=4.0)
    os_late, (run, figures) = await asyncio.gather(
        asyncio.to_thread(_wake_up_lateness, rate, settings.warmup_s + settings.min_duration_s),
        _serve_bench_open(delay_server.grpc_url, rate, "constant", settings),
    )
    throughput = figures.throughput
    assert run.scheduled == int(rate * settings.min_duration_s)
    assert throughput.scheduled_rate == pytest.approx(rate, rel=1e-6)
    assert throughput.requested_rate == rate
    # every request due in the window was sent and answered (how late: the lag, below)
    assert figures.counts.requests == figures.counts.ok == run.scheduled
    lag_p99_s = figures.client.schedule_lag.p99 / 1e6
    os_p99_s = float(np.percentile(os_late, 99))
    # measured over 5 runs at load average 9-10 from other jobs: lag p99 3.9-167 ms beside OS wake-up
    # p99 7.4-190 ms; lag p99 at most the OS's + 2.7 ms, at most 1.23x it
    assert lag_p99_s <= 1.5 * os_p99_s + 0.002, (lag_p99_s, os_p99_s)


async def test_open_loop_stall_shows_in_corrected_not_uncorrected(delay_server):
    # wrk2's demonstration: one request in flight at most (safety cap 1), a 1 s stall mid-run.
    # Requests due during the stall wait in the client; counted from their schedule they are late
    # by up to the stall, counted from their actual send they look like the service time.
    delay_server.delay = 0.002
    stall = 1.0
    settings = PointSettings(warmup_s=0.5, min_duration_s=5.0, safety_cap=1)
    staller = threading.Timer(2.5, delay_server.stall, [stall])  # the control call blocks: not on the loop
    staller.start()
    _, figures = await _serve_bench_open(delay_server.grpc_url, 100, "constant", settings)
    corrected_p99 = figures.latency.p99 / 1e6
    uncorrected_median = figures.latency.sent.p50 / 1e6
    # ~100 of 500 requests fall in the stall and its catch-up: p99 sits well inside it
    assert corrected_p99 > 0.3 * stall, corrected_p99
    assert corrected_p99 > 20 * uncorrected_median, (corrected_p99, uncorrected_median)
    assert figures.client.safety_cap_hits > 50


async def test_throughput_is_counted_in_items(delay_server):
    # A fixed service time per request whatever its size: batch 8 must show 8x the items/s of batch 1
    # at the same requests/s. Both closed loops run at the same time (2 in flight each, 10 ms per
    # request, a client far from busy), so the machine's load hits both alike.
    delay_server.delay = 0.01
    settings = PointSettings(warmup_s=0.2, min_duration_s=2.0, min_requests=10)
    (_, one), (_, eight) = await asyncio.gather(
        _serve_bench_closed(delay_server.grpc_url, settings, concurrency=2, batch=1),
        _serve_bench_closed(delay_server.grpc_url, settings, concurrency=2, batch=8),
    )
    # measured over 5 runs at load average 11 from other jobs: requests/s ratio 0.994-1.007
    assert 0.9 <= eight.throughput.requests_per_s / one.throughput.requests_per_s <= 1.1
    assert 7.2 <= eight.throughput.items_per_s / one.throughput.items_per_s <= 8.8


@pytest.mark.parametrize("transport", ["grpc", "rest"])
@pytest.mark.parametrize("mode", ["closed", "open"])
async def test_dead_target_ends_the_point_at_once(mode, transport):
    # The server dies after the client connected: the old closed loop spun at ~12k failing
    # requests/s for the whole point. Now DOWN_AFTER connection errors in a row end it, as "target down".
    settings = PointSettings(warmup_s=5.0, min_duration_s=30.0, timeout_s=5.0)
    with DelayServer(delay=0.001) as server:
        client = await connect(server.grpc_url if transport == "grpc" else server.rest_url, MODEL)
        server.stop()
    prepared = client.prepare(make_inputs("float", 1, client.signature_info))
    started = time.perf_counter()
    try:
        if mode == "closed":
            run = await run_closed_loop(client, prepared, 4, settings)
        else:
            offsets = arrival_offsets(500, settings.min_duration_s, "constant", warmup_s=settings.warmup_s)
            run = await run_open_loop(client, prepared, 500, offsets, settings)
    finally:
        await client.aclose()
    elapsed = time.perf_counter() - started
    assert run.cut_off.startswith("target down"), run.cut_off
    assert elapsed < settings.warmup_s  # it never got to the measured window, let alone through it
    assert DOWN_AFTER <= len(run.records) <= DOWN_AFTER + 4 + 500 * elapsed
    assert all(r.error is not None and issubclass(r.error, ConnectError) for r in run.records)
    figures = analyze(run, mode, settings)
    assert figures.cut_off == run.cut_off
    assert not figures.client.limited, figures.client.reasons  # a dead target, not a slow client


async def test_no_garbage_collection_while_a_point_runs():
    # Each request leaves reference cycles behind; without the pause they would trigger collections.
    collections: list[float] = []
    requests: list[float] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(time.perf_counter())

    def handler(inputs):
        requests.append(time.perf_counter())
        for _ in range(50):
            a: list = []
            a.append(a)  # a cycle: only the cyclic collector frees it
        return {"features": np.zeros((1, 2), np.float32)}

    transport = FakeTransport(handler, signatures=image_signature(4, 4, 2))
    client = fake_client(transport)
    prepared = client.prepare({"images": np.zeros((1, 4, 4, 3), np.float32)})
    settings = PointSettings(warmup_s=0.05, min_duration_s=0.3, min_requests=10)
    was_enabled = gc.isenabled()
    gc.callbacks.append(count)
    try:
        run = await run_closed_loop(client, prepared, 2, settings)
    finally:
        gc.callbacks.remove(count)
    # 50 cycles x thousands of requests: gen-0 collections every few requests if the collector ran
    assert len(run.records) > 100
    during = [t for t in collections if requests[0] <= t <= requests[-1]]
    assert during == [], f"{len(during)} collections while requests were being sent"
    assert any(t < requests[0] for t in collections)  # the one collection before the point
    assert gc.isenabled() == was_enabled


async def test_processes_started_together_count_over_one_agreed_window(monkeypatch):
    """--processes children run a closed loop from an agreed instant for a fixed time, and the parent
    divides their summed counts by the window they all share (merge_digests). Each child's window is
    therefore the agreed one, to the float: [start_at + warm-up, that + the fixed duration]. It used to
    end when the child's loop noticed the time was up (a 50 ms poll later, or more on a busy loop) and
    start when the child woke, so each child counted over a longer window than the one the parent
    divided by, and the rate came out high by up to a poll over the duration."""
    transport = FakeTransport(
        lambda inputs: {"features": np.zeros((1, 2), np.float32)}, delay=0.002, signatures=image_signature(4, 4, 2)
    )
    client = fake_client(transport)
    prepared = client.prepare({"images": np.zeros((1, 4, 4, 3), np.float32)})
    settings = PointSettings(warmup_s=0.1, min_duration_s=0.3)
    start_at = time.perf_counter() + 0.2
    run = await run_closed_loop(client, prepared, 2, settings, start_at=start_at, fixed_duration=0.3)
    assert (run.window_start, run.window_end) == (start_at + 0.1, start_at + 0.1 + 0.3)
    finished = [r.done for r in run.records]
    assert min(finished) > start_at and max(finished) >= run.window_end  # sends ran past the window's end
    assert all(r.sent >= start_at for r in run.records)  # and none before the agreed instant

    # a child whose target went down mid-window ends its window there, not at the agreed end
    def dies(inputs):
        if time.perf_counter() > down_at:
            raise ConnectError("connection refused")
        return {"features": np.zeros((1, 2), np.float32)}

    # (when a worker took it for down, not when the loop noticed: a CI run's loop noticed 0.245 s late, past the
    # agreed end; the window never ends past it, and 0.9 s of headroom here, where 0.2 s failed once)
    transport.handler = dies
    start_at = time.perf_counter() + 0.2
    down_at = start_at + 0.1 + 0.1
    run = await run_closed_loop(client, prepared, 2, settings, start_at=start_at, fixed_duration=1.0)
    assert run.cut_off.startswith("target down"), run.cut_off
    assert run.window_start == start_at + 0.1 and down_at <= run.window_end < start_at + 0.1 + 1.0

    # the loop stalled just after a worker took the target for down (a busy machine: 0.4 s, in the event's
    # set): the window still ends at the failure, not when the loop got round to it
    class Stalling(asyncio.Event):
        def set(self) -> None:
            super().set()
            time.sleep(0.4)

    # the loop's own events only (asyncio itself, which others share, left alone)
    monkeypatch.setattr(_generators, "asyncio", SimpleNamespace(**{**vars(asyncio), "Event": Stalling}))
    start_at = time.perf_counter() + 0.2
    down_at = start_at + 0.1 + 0.1
    run = await run_closed_loop(client, prepared, 2, settings, start_at=start_at, fixed_duration=1.0)
    assert run.cut_off.startswith("target down"), run.cut_off
    # when the DOWN_AFTER-th error in a row came back, the worker took the target for down: measured from that
    # record, not from down_at (a clean CI run with a core busy started its loop 0.19 s late, so its failures
    # came late too, and the window ended 0.21 s after down_at, at its failure); the stall alone is 0.4 s
    failures = sorted(r.done for r in run.records if r.status != "OK" and r.done >= down_at)
    taken = failures[_generators.DOWN_AFTER - 1]
    assert taken <= run.window_end < taken + 0.2, run.window_end - taken
    monkeypatch.undo()

    # the target taken for down after the agreed end, before the loop's next look (its looks stretched from
    # 0.05 s to 3 s: the first at 3 s into a 0.7 s window, the failure at 0.8, which wakes the loop): the window
    # ends at the agreed end, never past it, as the other children's do. (Looks of 0.5 s failed a clean CI run:
    # the first came 0.2 s late, past the agreed end, and ended the point before the target failed.)
    polls = _generators._wait

    async def slow_looks(event: asyncio.Event, seconds: float) -> bool:
        return await polls(event, 3.0 if seconds == 0.05 else seconds)

    monkeypatch.setattr(_generators, "_wait", slow_looks)
    start_at = time.perf_counter() + 0.2
    down_at = start_at + 0.1 + 0.8
    run = await run_closed_loop(client, prepared, 2, settings, start_at=start_at, fixed_duration=0.7)
    assert run.cut_off.startswith("target down"), run.cut_off
    assert run.window_end == start_at + 0.1 + 0.7


def test_poisson_schedule_has_exactly_the_rate_in_the_window():
    # A seeded "50 req/s" point used to send 45.9 req/s: cumulated exponential gaps give a Poisson
    # count. Conditioned on the count, the window holds exactly rate x duration arrivals.
    for seed in range(5):
        offsets = arrival_offsets(50, 10, "poisson", seed=seed, warmup_s=2)
        in_window = offsets[(offsets >= 2) & (offsets < 12)]
        assert len(in_window) == 500 and len(offsets) == 600
        assert np.all(np.diff(offsets) >= 0)
    a = arrival_offsets(500, 20, "poisson", seed=3)
    np.testing.assert_array_equal(a, arrival_offsets(500, 20, "poisson", seed=3))
    assert not np.array_equal(a, arrival_offsets(500, 20, "poisson", seed=4))
    gaps = np.diff(a)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)  # still exponential gaps: cv = 1
    assert len(arrival_offsets(200, 4, "constant", warmup_s=0.5)) == 900


@pytest.mark.parametrize("rate", [float("nan"), float("inf"), 0.0, -1.0])
def test_bad_rates_are_refused(rate):
    with pytest.raises(ValueError, match="rate"):
        arrival_offsets(rate, 1.0)


@pytest.mark.parametrize("timerfd", [True, False], ids=["timerfd", "thread"])
async def test_open_loop_sends_every_request_never_early(monkeypatch, timerfd):
    # Both ways of timing sends (timerfd on the loop; the fallback thread) send each scheduled
    # request exactly once, and none before it is due.
    from serve_bench.load import _generators

    monkeypatch.setattr(_generators, "USE_TIMERFD", timerfd)
    transport = FakeTransport(
        lambda inputs: {"features": np.zeros((1, 2), np.float32)}, signatures=image_signature(4, 4, 2)
    )
    client = fake_client(transport)
    prepared = client.prepare({"images": np.zeros((1, 4, 4, 3), np.float32)})
    settings = PointSettings(warmup_s=0.1, min_duration_s=0.5)
    offsets = arrival_offsets(400, settings.min_duration_s, "poisson", 7, warmup_s=settings.warmup_s)
    run = await run_open_loop(client, prepared, 400, offsets, settings)
    # Compared as differences from the schedule's start, in absolute seconds: perf_counter values are
    # the host's uptime, so a relative tolerance on them (pytest.approx's 1e-6) allows seconds of error.
    # Each request's due time is the schedule's start plus its offset, exact to float rounding (1 µs
    # allows for it); the send comes after it. A record whose "due" time was its send time would
    # miss by the send's lag (a wake-up and a task switch), and show no lag at all.
    t0 = run.window_start - settings.warmup_s
    due = np.sort([r.intended - t0 for r in run.records])
    np.testing.assert_allclose(due, np.sort(offsets), rtol=0, atol=1e-6)
    lag = np.array([r.sent - r.intended for r in run.records])
    assert lag.min() >= 0 and lag.max() > 0  # all exactly 0: "due" was taken at the send
    assert run.scheduled == 200 and transport.calls == len(offsets) == 240
