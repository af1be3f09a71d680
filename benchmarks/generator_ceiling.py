"""The load generator's own ceiling.

    .venv/bin/python -m benchmarks.generator_ceiling [--seconds 5]

1. requests/s one process sustains: closed loop, 64 in flight, against a trivial
   gRPC server in another process (prebuilt answers).
2. bookkeeping per request: run_closed_loop over an in-memory transport that
   answers at once, beside a bare asyncio loop calling the same transport and
   client (same predict_prepared, no records); the difference per request is
   the generator's bookkeeping. Plus analyze() cost per record, paid after the point.
3. schedule lag p99 at 1000 req/s: open loop (constant arrivals) against the trivial server.
Goals: bookkeeping < 5 µs per request; lag p99 < 1 ms at 1000 req/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import numpy as np

from benchmarks._trivial_server import TrivialServer


async def closed_ceiling(port: int, seconds: float) -> dict[str, float]:
    from serve_bench.client import connect
    from serve_bench.load import PointSettings, analyze, make_inputs, run_closed_loop

    settings = PointSettings(warmup_s=1.0, min_duration_s=seconds, min_requests=10)
    async with connect(f"grpc://127.0.0.1:{port}", "trivial") as client:
        prepared = client.prepare(make_inputs("float", 1, client.signature_info))
        run = await run_closed_loop(client, prepared, 64, settings)
    figures = analyze(run, "closed", settings)
    return {"requests_per_s": figures.throughput.requests_per_s,
            "loop_cpu": figures.client.loop_cpu_percent, "p50_us": figures.latency.p50}


async def bookkeeping(seconds: float, rounds: int) -> dict[str, float]:
    from serve_bench.client import Client, FakeTransport
    from serve_bench.client._fake import image_signature
    from serve_bench.load import PointSettings, analyze, run_closed_loop

    answer = {"features": np.zeros((1, 2), np.float32)}
    transport = FakeTransport(lambda inputs: answer, signatures=image_signature(4, 4, 2))
    client = Client(transport, "fake")
    client.signatures = transport.signatures
    prepared = client.prepare({"images": np.zeros((1, 4, 4, 3), np.float32)})
    settings = PointSettings(warmup_s=0.0, min_duration_s=seconds, min_requests=1)

    async def bare() -> tuple[int, float]:
        stop, count = time.perf_counter() + seconds, 0
        started = time.thread_time()
        while time.perf_counter() < stop:
            await client.predict_prepared(prepared, 1.0)
            count += 1
        return count, time.thread_time() - started

    bare_us, ours_us, analysis_us = [], [], []
    for _ in range(rounds):
        n, cpu = await bare()
        bare_us.append(cpu / n * 1e6)
        started = time.thread_time()
        run = await run_closed_loop(client, prepared, 1, settings)
        ours_us.append((time.thread_time() - started) / len(run.records) * 1e6)
        started = time.perf_counter()
        analyze(run, "closed", settings)
        analysis_us.append((time.perf_counter() - started) / len(run.records) * 1e6)
    return {"bare_us": statistics.median(bare_us), "ours_us": statistics.median(ours_us),
            "analysis_us": statistics.median(analysis_us)}


async def lag_at_rate(port: int, rate: float, seconds: float) -> dict[str, float]:
    from serve_bench.client import connect
    from serve_bench.load import PointSettings, analyze, arrival_offsets, make_inputs, run_open_loop

    settings = PointSettings(warmup_s=1.0, min_duration_s=seconds)
    async with connect(f"grpc://127.0.0.1:{port}", "trivial") as client:
        prepared = client.prepare(make_inputs("float", 1, client.signature_info))
        offsets = arrival_offsets(rate, settings.warmup_s + seconds, "constant")
        run = await run_open_loop(client, prepared, rate, offsets, settings)
    figures = analyze(run, "open", settings)
    return {"lag_p50": figures.client.schedule_lag.p50, "lag_p99": figures.client.schedule_lag.p99,
            "achieved": figures.throughput.achieved_rate, "limited": figures.client.limited}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    args = parser.parse_args()
    print(f"generator ceiling: {os.cpu_count()} cores, trivial server in another process")
    with TrivialServer() as server:
        closed = asyncio.run(closed_ceiling(server.grpc_port, args.seconds))
        print(f"  one process, closed loop, 64 in flight (gRPC): {closed['requests_per_s']:.0f} req/s, "
              f"event loop busy {closed['loop_cpu']:.0f}%, p50 {closed['p50_us'] / 1000:.2f} ms")
        lag = asyncio.run(lag_at_rate(server.grpc_port, args.rate, args.seconds))
        print(f"  open loop at {args.rate:g} req/s (constant): achieved {lag['achieved']:.1f} req/s, schedule lag "
              f"p50 {lag['lag_p50']:.0f} µs, p99 {lag['lag_p99']:.0f} µs (goal < 1000 µs); client-limited: "
              f"{lag['limited']}")
    book = asyncio.run(bookkeeping(2.0, 3))
    print(f"  bookkeeping: bare loop {book['bare_us']:.1f} µs/request, generator {book['ours_us']:.1f} µs/request: "
          f"{book['ours_us'] - book['bare_us']:.1f} µs of bookkeeping per request (goal < 5 µs); analysis after the "
          f"point {book['analysis_us']:.2f} µs/record")


if __name__ == "__main__":
    main()
