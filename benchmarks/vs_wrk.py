"""serve-bench's closed loop beside wrk (REST) and a bare grpc.aio client (gRPC) at equal concurrency.

    .venv/bin/python -m benchmarks.vs_wrk [--concurrency 8] [--seconds 5] [--delay-ms 5] [--rounds 3]

wrk (Debian package ``wrk``): one thread, ``--concurrency`` keep-alive connections, a Lua
script POSTing the same :predict body. The bare gRPC client: ``--concurrency`` coroutines on
grpc.aio sending prebuilt bytes (tests/_baselines.py). The server is tests/_delay_server.py
in its own process, a fixed service time per request, so requests/s is what a generator
that keeps ``--concurrency`` requests in flight measures of that server. ``--delay-ms 0``
turns it into a measure of the generators' own ceilings instead (the server answers at once
and the clients share the 2 cores with it). Rounds alternate; medians are compared.
Goal: serve-bench's requests/s within 10% of wrk's (REST) and of the bare client's (gRPC).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tests._baselines import bare_grpc_closed_loop
from tests._delay_server import MODEL, DelayServer

X = {"x": np.ones((1, 4), np.float32)}


def wrk_requests_per_s(url: str, concurrency: int, seconds: float) -> float:
    body = json.dumps({"inputs": {name: array.tolist() for name, array in X.items()}})
    script = f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\nwrk.headers["Content-Type"] = "application/json"\n'
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "predict.lua"
        path.write_text(script)
        target = f"{url}/v1/models/{MODEL}:predict"
        # a short run first: wrk has no warm-up of its own
        subprocess.run(
            ["wrk", "-t1", f"-c{concurrency}", "-d1s", "-s", str(path), target], check=True, capture_output=True
        )
        out = subprocess.run(
            ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds:g}s", "-s", str(path), target],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk got error answers:\n{out}")
    match = re.search(r"Requests/sec:\s*([0-9.]+)", out)
    if match is None:
        raise RuntimeError(f"no Requests/sec in wrk's output:\n{out}")
    return float(match.group(1))


async def serve_bench_closed(url: str, concurrency: int, seconds: float) -> float:
    from serve_bench.client import connect
    from serve_bench.load import PointSettings, analyze, make_inputs, run_closed_loop

    settings = PointSettings(warmup_s=1.0, min_duration_s=seconds, min_requests=10)
    async with connect(url, MODEL) as client:
        prepared = client.prepare(make_inputs("float", 1, client.signature_info))
        run = await run_closed_loop(client, prepared, concurrency, settings)
    figures = analyze(run, "closed", settings)
    if figures.counts.errors:
        raise RuntimeError(f"serve-bench saw errors: {figures.counts.errors}")
    return figures.throughput.requests_per_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    print(
        f"serve-bench closed loop vs wrk (REST) and bare grpc.aio (gRPC): {args.concurrency} in flight, "
        f"{args.seconds:g} s, delay server {args.delay_ms:g} ms, {os.cpu_count()} cores, load average {load}"
    )
    figures: dict[str, list[float]] = {"wrk": [], "ours-rest": [], "bare-grpc": [], "ours-grpc": []}
    with DelayServer(delay=args.delay_ms / 1000) as server:
        for round_ in range(args.rounds):
            figures["wrk"].append(wrk_requests_per_s(server.rest_url, args.concurrency, args.seconds))
            figures["ours-rest"].append(
                asyncio.run(serve_bench_closed(server.rest_url, args.concurrency, args.seconds))
            )
            figures["bare-grpc"].append(
                bare_grpc_closed_loop(server.grpc_url, MODEL, X, args.concurrency, args.seconds)
            )
            figures["ours-grpc"].append(
                asyncio.run(serve_bench_closed(server.grpc_url, args.concurrency, args.seconds))
            )
            print("  round " + str(round_ + 1) + ": " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in figures.items()))
    for ours, theirs, label in (("ours-rest", "wrk", "REST vs wrk"), ("ours-grpc", "bare-grpc", "gRPC vs bare")):
        a, b = statistics.median(figures[ours]), statistics.median(figures[theirs])
        verdict = "within 10%" if abs(a / b - 1) <= 0.10 else "NOT within 10%"
        print(f"  {label}: serve-bench {a:.0f} req/s, reference {b:.0f} req/s, ratio {a / b:.3f} ({verdict})")


if __name__ == "__main__":
    main()
