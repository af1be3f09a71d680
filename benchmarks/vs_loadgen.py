"""serve-bench's open loop beside MLPerf LoadGen's Server scenario: same server, same Poisson rate.

    .venv/bin/python -m benchmarks.vs_loadgen [--rate 200] [--seconds 10] [--delay-ms 5] [--rounds 3]

Both count latency from each query's scheduled time. The server is tests/_delay_server.py
in its own process: a fixed service time (asyncio sleep, + up to 1 ms of timer rounding),
no CPU of its own to speak of, so the figures are the generators'. LoadGen issues from
its C++ thread through grpcio's non-blocking ``future()`` call (tests/_baselines.py).
Rounds alternate (LoadGen, serve-bench, LoadGen, ...); medians are compared.
Goal: p50 and p99 within 10% of LoadGen's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics

import numpy as np

from tests._baselines import loadgen_server
from tests._delay_server import MODEL, DelayServer

X = {"x": np.ones((1, 4), np.float32)}


async def serve_bench_open(url: str, rate: float, seconds: float, seed: int) -> tuple[float, float, float]:
    """(p50 s, p99 s, realized rate) of one serve-bench open-loop point."""
    from serve_bench.client import connect
    from serve_bench.load import PointSettings, analyze, arrival_offsets, make_inputs, run_open_loop

    settings = PointSettings(warmup_s=1.0, min_duration_s=seconds)
    offsets = arrival_offsets(rate, seconds, "poisson", seed, warmup_s=settings.warmup_s)
    async with connect(url, MODEL) as client:
        prepared = client.prepare(make_inputs("float", 1, client.signature_info))
        run = await run_open_loop(client, prepared, rate, offsets, settings)
    figures = analyze(run, "open", settings)
    if figures.counts.errors:
        raise RuntimeError(f"serve-bench saw errors: {figures.counts.errors}")
    return figures.latency.p50 / 1e6, figures.latency.p99 / 1e6, figures.throughput.achieved_rate or 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    print(
        f"serve-bench open loop vs MLPerf LoadGen (Server scenario): {args.rate:g} queries/s Poisson, "
        f"{args.seconds:g} s, delay server {args.delay_ms:g} ms, {os.cpu_count()} cores, load average {load}"
    )
    ours: list[tuple[float, float, float]] = []
    theirs: list[tuple[float, float, float]] = []
    with DelayServer(delay=args.delay_ms / 1000) as server:
        for round_ in range(args.rounds):
            lg = loadgen_server(server.grpc_url, MODEL, X, args.rate, args.seconds, seed=round_)
            theirs.append((lg.percentile(50), lg.percentile(99), lg.scheduled_rate))
            ours.append(asyncio.run(serve_bench_open(server.grpc_url, args.rate, args.seconds, seed=round_)))
            print(
                f"  round {round_ + 1}: LoadGen p50 {theirs[-1][0] * 1e3:.2f} ms p99 {theirs[-1][1] * 1e3:.2f} ms "
                f"({theirs[-1][2]:.1f}/s scheduled) | serve-bench p50 {ours[-1][0] * 1e3:.2f} ms "
                f"p99 {ours[-1][1] * 1e3:.2f} ms ({ours[-1][2]:.1f}/s sent)",
                flush=True,
            )
    for index, name in ((0, "p50"), (1, "p99")):
        a = statistics.median(o[index] for o in ours)
        b = statistics.median(t[index] for t in theirs)
        verdict = "within 10%" if abs(a / b - 1) <= 0.10 else "NOT within 10%"
        print(f"  {name}: serve-bench {a * 1e3:.2f} ms, LoadGen {b * 1e3:.2f} ms, ratio {a / b:.3f} ({verdict})")


if __name__ == "__main__":
    main()
