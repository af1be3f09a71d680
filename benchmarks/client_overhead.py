"""Client cost per request vs the bare library loop, and codec throughput.

    .venv/bin/python -m benchmarks.client_overhead [--seconds 4] [--concurrency 16]

Against a trivial server in another process (prebuilt answers), so this
process's CPU time is the client's alone. For each transport, alternating
runs of:
  bare        grpc.aio stub call with a prebuilt request / aiohttp POST of prebuilt bytes
  serve-bench Client.predict_prepared (same prebuilt request; the answer is decoded too)
Reports client CPU µs per request (process user+sys, gRPC's C threads included),
requests/s, and the ratio. Goal: serve-bench <= 1.3x the bare loop.
Then encode/decode MB/s for a 299x299x3 float32 batch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

import numpy as np

from benchmarks._trivial_server import TrivialServer


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _loop(call, seconds: float, concurrency: int) -> tuple[int, float, float]:  # type: ignore[no-untyped-def]
    count = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < stop:
            await call()
            count += 1

    cpu, wall = _cpu(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count, _cpu() - cpu, time.perf_counter() - wall


def _decode_cost(client, raw) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    for _ in range(2000):
        client.transport.decode(raw)
    return (time.perf_counter() - started) / 2000 * 1e6


async def _rounds(
    bare,
    client,
    prepared,
    seconds: float,
    concurrency: int,  # type: ignore[no-untyped-def]
    rounds: int,
) -> dict[str, list[float]]:
    """Alternate the bare loop, serve-bench's predict_prepared, and serve-bench's send path alone."""
    results: dict[str, list[float]] = {"bare_us": [], "ours_us": [], "bare_rps": [], "ours_rps": [], "send_us": []}
    for _ in range(rounds):
        n, cpu, wall = await _loop(bare, seconds, concurrency)
        results["bare_us"].append(cpu / n * 1e6)
        results["bare_rps"].append(n / wall)
        n, cpu, wall = await _loop(lambda: client.predict_prepared(prepared), seconds, concurrency)
        results["ours_us"].append(cpu / n * 1e6)
        results["ours_rps"].append(n / wall)
        n, cpu, wall = await _loop(lambda: client.transport.send(prepared, 10), seconds, concurrency)
        results["send_us"].append(cpu / n * 1e6)
    results["decode_us"] = [_decode_cost(client, await client.transport.send(prepared, 10))]
    return results


async def bench_grpc(port: int, seconds: float, concurrency: int, rounds: int) -> dict[str, list[float]]:
    from grpc import aio

    from serve_bench.client import connect
    from serve_bench.client._grpc import CHANNEL_OPTIONS

    images = np.zeros((1, 8, 8, 3), np.float32)
    async with connect(f"grpc://127.0.0.1:{port}", "trivial") as client:
        prepared = client.prepare({"images": images})
        channel = aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
        stub = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        payload = prepared.payload
        await stub(payload)  # connect
        results = await _rounds(lambda: stub(payload, timeout=10), client, prepared, seconds, concurrency, rounds)
        await channel.close()
    return results


async def bench_rest(port: int, seconds: float, concurrency: int, rounds: int) -> dict[str, list[float]]:
    import aiohttp

    from serve_bench.client import connect

    images = np.zeros((1, 8, 8, 3), np.float32)
    url = f"http://127.0.0.1:{port}"
    async with connect(url, "trivial", fetch_metadata=False, connection_limit=concurrency) as client:
        client.transport.output_dtypes = {"features": 1}
        prepared = client.prepare({"images": images})
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
            body = prepared.payload

            async def bare() -> None:
                async with session.post(
                    f"{url}/v1/models/trivial:predict", data=body, headers={"Content-Type": "application/json"}
                ) as response:
                    await response.read()

            return await _rounds(bare, client, prepared, seconds, concurrency, rounds)


def codec_throughput(batch: int = 8, repeats: int = 5) -> list[tuple[str, float, float]]:
    import orjson

    from serve_bench import _protos
    from serve_bench.client._grpc import encode_predict_request
    from serve_bench.client._rest import encode_rest_body
    from serve_bench.codec import from_tensor_proto, json_value_to_array

    images = np.random.default_rng(0).integers(0, 256, (batch, 299, 299, 3)).astype(np.float32)
    megabytes = images.nbytes / 1e6
    request_type = _protos.message("tensorflow.serving.PredictRequest")

    def timed(fn) -> float:  # type: ignore[no-untyped-def]
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - started)
        return megabytes / best

    proto_bytes = encode_predict_request("m", None, "serving_default", {"images": images})
    rest_bytes = encode_rest_body({"images": images}, "serving_default")
    json_text = json.dumps({"inputs": {"images": images.tolist()}})
    return [
        (
            "tensor_content (gRPC)",
            timed(lambda: encode_predict_request("m", None, "serving_default", {"images": images})),
            timed(lambda: from_tensor_proto(request_type.FromString(proto_bytes).inputs["images"])),
        ),
        (
            "orjson (REST)",
            timed(lambda: encode_rest_body({"images": images}, "serving_default")),
            timed(lambda: json_value_to_array(orjson.loads(rest_bytes)["inputs"]["images"], 1)),
        ),
        (
            "stdlib json (reference)",
            timed(lambda: json.dumps({"inputs": {"images": images.tolist()}})),
            timed(lambda: np.asarray(json.loads(json_text)["inputs"]["images"], np.float32)),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(
        f"client overhead: {args.rounds} alternating rounds of {args.seconds:g} s, {args.concurrency} in flight, "
        f"trivial server in another process, {os.cpu_count()} cores"
    )
    with TrivialServer() as server:
        for name, bench, port in (("gRPC", bench_grpc, server.grpc_port), ("REST", bench_rest, server.rest_port)):
            r = asyncio.run(bench(port, args.seconds, args.concurrency, args.rounds))
            bare, ours = statistics.median(r["bare_us"]), statistics.median(r["ours_us"])
            send = statistics.median(r["send_us"])
            print(
                f"  {name}: bare {bare:.0f} µs CPU/request ({statistics.median(r['bare_rps']):.0f} req/s); "
                f"serve-bench {ours:.0f} µs ({statistics.median(r['ours_rps']):.0f} req/s), ratio {ours / bare:.2f}x "
                f"(goal <= 1.3x); send path alone {send:.0f} µs, ratio {send / bare:.2f}x; decoding the "
                f"[1, 2048] answer {r['decode_us'][0]:.0f} µs (the bare loop does not decode)"
            )
    print("codec, one 8 x 299 x 299 x 3 float32 batch (8.6 MB of tensor), best of 5:")
    for name, encode, decode in codec_throughput():
        print(f"  {name:26s} encode {encode:8.0f} MB/s   decode {decode:8.0f} MB/s")


if __name__ == "__main__":
    main()
