"""The load generator's own ceiling.

    .venv/bin/python -m benchmarks.generator_ceiling [--seconds 5]

1. requests/s one process sustains: closed loop, 64 in flight, against a trivial
   gRPC server in another process (prebuilt answers).
2. bookkeeping per request: run_closed_loop over an in-memory transport that
   answers at once, beside a bare asyncio loop calling the same transport and
   client (same predict_prepared, no records); the difference per request is
   the generator's bookkeeping. Plus analyze() cost per record, paid after the point.
3. schedule lag (sent - due) at 1000 req/s: open loop, constant and Poisson arrivals, sends timed
   by a timerfd on the event loop (the default on Linux) and by the fallback schedule thread,
   alternating rounds against the trivial server.
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
    return {
        "requests_per_s": figures.throughput.requests_per_s,
        "loop_cpu": figures.client.loop_cpu_percent,
        "p50_us": figures.latency.p50,
    }


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
    return {
        "bare_us": statistics.median(bare_us),
        "ours_us": statistics.median(ours_us),
        "analysis_us": statistics.median(analysis_us),
    }


async def lag_at_rate(port: int, rate: float, seconds: float, arrival: str, timerfd: bool) -> dict[str, float]:
    from serve_bench.client import connect
    from serve_bench.load import PointSettings, _generators, analyze, arrival_offsets, make_inputs, run_open_loop

    _generators.USE_TIMERFD = timerfd
    settings = PointSettings(warmup_s=1.0, min_duration_s=seconds)
    try:
        async with connect(f"grpc://127.0.0.1:{port}", "trivial") as client:
            prepared = client.prepare(make_inputs("float", 1, client.signature_info))
            offsets = arrival_offsets(rate, seconds, arrival, warmup_s=settings.warmup_s)
            run = await run_open_loop(client, prepared, rate, offsets, settings)
    finally:
        _generators.USE_TIMERFD = True
    figures = analyze(run, "open", settings)
    lag = figures.client.schedule_lag
    assert lag is not None
    return {
        "lag_p50": lag.p50,
        "lag_p99": lag.p99,
        "achieved": figures.throughput.achieved_rate or 0.0,
        "limited": float(figures.client.limited),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each open-loop variant")
    args = parser.parse_args()
    load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    print(f"generator ceiling: {os.cpu_count()} cores, trivial server in another process, load average {load}")
    with TrivialServer() as server:
        closed = asyncio.run(closed_ceiling(server.grpc_port, args.seconds))
        print(
            f"  one process, closed loop, 64 in flight (gRPC): {closed['requests_per_s']:.0f} req/s, "
            f"event loop busy {closed['loop_cpu']:.0f}%, p50 {closed['p50_us'] / 1000:.2f} ms"
        )
        # alternating rounds, so a burst of load from elsewhere on the machine does not land on one variant only
        variants = [(arrival, timerfd) for arrival in ("constant", "poisson") for timerfd in (True, False)]
        results: dict[tuple[str, bool], list[dict[str, float]]] = {v: [] for v in variants}
        for _ in range(args.rounds):
            for arrival, timerfd in variants:
                results[(arrival, timerfd)].append(
                    asyncio.run(lag_at_rate(server.grpc_port, args.rate, args.seconds, arrival, timerfd))
                )
        for (arrival, timerfd), rounds in results.items():
            p50s = [r["lag_p50"] for r in rounds]
            p99s = [r["lag_p99"] for r in rounds]
            how = "timerfd on the loop" if timerfd else "schedule thread   "
            print(
                f"  open loop {args.rate:g} req/s {arrival:8s} {how}: schedule lag p50 {statistics.median(p50s):.0f} "
                f"µs, p99 median {statistics.median(p99s):.0f} µs (rounds: {', '.join(f'{v:.0f}' for v in p99s)}); "
                f"achieved {statistics.median(r['achieved'] for r in rounds):.1f} req/s; "
                f"client-limited in {sum(int(r['limited']) for r in rounds)} of {len(rounds)}"
            )
    book = asyncio.run(bookkeeping(2.0, 3))
    print(
        f"  bookkeeping: bare loop {book['bare_us']:.1f} µs/request, generator {book['ours_us']:.1f} µs/request: "
        f"{book['ours_us'] - book['bare_us']:.1f} µs of bookkeeping per request (goal < 5 µs); analysis after the "
        f"point {book['analysis_us']:.2f} µs/record"
    )


if __name__ == "__main__":
    main()
