"""Client CPU per request of the Open Inference Protocol (KServe v2) transports vs the bare library loop.

    .venv/bin/python -m benchmarks.client_overhead_v2 [--requests 3000] [--concurrency 8] [--rounds 3]
    .venv/bin/python -m benchmarks.client_overhead_v2 --triton-http 127.0.0.1:8000 --triton-grpc 127.0.0.1:8001

Against a real Triton 2.51 serving ``tiny`` (started here from the servers' environment,
``make servers-env``, unless its addresses are given), batch 1, float32 [1, 64, 64, 3].
Triton is another process, so this process's CPU time (user + sys, gRPC's C threads
included) is the client's alone. For each transport, alternating rounds of a fixed number
of requests:
  bare         grpc.aio unary call of the prebuilt ModelInferRequest bytes / aiohttp POST of
               the prebuilt body (binary: with Inference-Header-Content-Length), answer read
               but not decoded
  serve-bench  Client.predict_prepared with the same prebuilt request, answer decoded
  send only    serve-bench's transport.send (the timed region of a load run)
Prints client CPU µs per request, requests/s and the ratio to the bare loop.
Goal, as for TF Serving's transports (benchmarks/client_overhead.py): <= 1.3x.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

import numpy as np

Call = Callable[[], Awaitable[Any]]


def _cpu() -> float:
    # CLOCK_PROCESS_CPUTIME_ID: every thread of the process (gRPC's C threads too), in ns, where
    # os.times() counts 10 ms ticks (±1% at 3000 requests of ~250 µs)
    return time.process_time()


async def _loop(call: Call, requests: int, concurrency: int) -> tuple[float, float]:
    """(CPU µs per request, requests/s) over ``requests`` calls, ``concurrency`` in flight."""
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    cpu, wall = _cpu(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (_cpu() - cpu) / requests * 1e6, requests / (time.perf_counter() - wall)


async def _rounds(
    bare: Call, client: Any, prepared: Any, requests: int, concurrency: int, rounds: int
) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {k: [] for k in ("bare_us", "bare_rps", "ours_us", "ours_rps", "send_us")}
    await _loop(bare, 200, concurrency)  # warm both paths (connections, Triton's first batches)
    await _loop(lambda: client.predict_prepared(prepared), 200, concurrency)
    for _ in range(rounds):
        us, rps = await _loop(bare, requests, concurrency)
        results["bare_us"].append(us)
        results["bare_rps"].append(rps)
        us, rps = await _loop(lambda: client.predict_prepared(prepared), requests, concurrency)
        results["ours_us"].append(us)
        results["ours_rps"].append(rps)
        us, _ = await _loop(lambda: client.transport.send(prepared, 30), requests, concurrency)
        results["send_us"].append(us)
    return results


def _images() -> np.ndarray:
    return np.random.default_rng(0).uniform(0, 255, (1, 64, 64, 3)).astype(np.float32)


async def bench_grpc(address: str, requests: int, concurrency: int, rounds: int) -> dict[str, list[float]]:
    from grpc import aio

    from serve_bench.client import connect
    from serve_bench.client._grpc import CHANNEL_OPTIONS

    async with connect(f"v2+grpc://{address}", "tiny") as client:
        prepared = client.prepare({"images": _images()})
        channel = aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        stub: Any = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        payload = prepared.payload
        try:
            return await _rounds(lambda: stub(payload, timeout=30), client, prepared, requests, concurrency, rounds)
        finally:
            await channel.close()


async def bench_rest(
    address: str, requests: int, concurrency: int, rounds: int, binary: bool
) -> dict[str, list[float]]:
    import aiohttp

    from serve_bench.client import connect
    from serve_bench.client._v2_codec import HEADER_LENGTH

    url = f"http://{address}/v2/models/tiny/infer"
    async with connect(f"v2+http://{address}", "tiny", binary=binary, connection_limit=concurrency) as client:
        prepared = client.prepare({"images": _images()})
        body = prepared.payload.body
        headers = (
            {"Content-Type": "application/octet-stream", HEADER_LENGTH: str(prepared.payload.json_length)}
            if binary
            else {"Content-Type": "application/json"}
        )
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

            async def bare() -> None:
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()

            return await _rounds(bare, client, prepared, requests, concurrency, rounds)


@contextlib.contextmanager
def _triton(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(http address, grpc address) of a Triton serving tiny: the one given, else one started here."""
    if args.triton_http and args.triton_grpc:
        yield args.triton_http, args.triton_grpc
        return
    from serve_bench.export import TritonBatching
    from serve_bench.servers import TritonServer

    # no queue delay: at batch 1 the client's cost is measured, not Triton's batching wait
    server = TritonServer(args.models_dir, "tiny", TritonBatching(max_batch_size=32, max_queue_delay_us=0))
    with server:
        yield f"127.0.0.1:{server.http_port}", f"127.0.0.1:{server.grpc_port}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000, help="requests per round and path (default 3000)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models-dir", default="exported_models", help="where `tiny` is exported")
    parser.add_argument("--triton-http", default="", help="host:port of a running Triton's HTTP (else one is started)")
    parser.add_argument("--triton-grpc", default="", help="host:port of the same Triton's gRPC")
    args = parser.parse_args()
    print(
        f"v2 client overhead: {args.rounds} alternating rounds of {args.requests} requests per path, "
        f"{args.concurrency} in flight, batch 1 (tiny, float32 [1, 64, 64, 3]), real Triton in another process, "
        f"{os.cpu_count()} cores"
    )
    with _triton(args) as (http, grpc_address):
        runs: list[tuple[str, Callable[[], Coroutine[Any, Any, dict[str, list[float]]]]]] = [
            ("v2 gRPC", lambda: bench_grpc(grpc_address, args.requests, args.concurrency, args.rounds)),
            ("v2 REST binary", lambda: bench_rest(http, args.requests, args.concurrency, args.rounds, True)),
            ("v2 REST JSON", lambda: bench_rest(http, args.requests, args.concurrency, args.rounds, False)),
        ]
        for name, run in runs:
            r: dict[str, list[float]] = asyncio.run(run())
            bare, ours, send = (statistics.median(r[k]) for k in ("bare_us", "ours_us", "send_us"))
            spread = f"rounds {min(r['ours_us']) / max(r['bare_us']):.2f}-{max(r['ours_us']) / min(r['bare_us']):.2f}x"
            print(
                f"  {name}: bare {bare:.0f} µs CPU/request ({statistics.median(r['bare_rps']):.0f} req/s); "
                f"serve-bench {ours:.0f} µs ({statistics.median(r['ours_rps']):.0f} req/s), ratio {ours / bare:.2f}x "
                f"({spread}; goal <= 1.3x); send path alone {send:.0f} µs, ratio {send / bare:.2f}x"
            )


if __name__ == "__main__":
    main()
