"""What a point costs the client's memory, per protocol: the figures behind serve_bench/load/_bounds.py
(issue 34, item 1; docs/bounds.md).

Two measurements, each in a fresh process (peak RSS, ``ru_maxrss``, is per process):

* **build**: the peak while the synthetic batch is drawn and encoded once, per byte of the body it makes
  (float32 images of 64x64, as the `tiny` model takes; 2000 items, ~98 MB of pixels);
* **in flight**: what each request waiting for its answer adds, against the delay server answering after
  60 s, 2000 requests in flight, with a body of 64 bytes and of 48 KiB (the second minus the first is
  how many copies of its body one request in flight holds).

    .venv/bin/python -m benchmarks.client_memory
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import subprocess
import sys

import numpy as np

BUILD_ITEMS = 2000
IN_FLIGHT = 2000
KINDS = ("grpc", "rest", "rest-rows", "v2-rest-json", "v2-rest-binary", "v2-grpc")


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _encoder(kind: str):  # type: ignore[no-untyped-def]
    from serve_bench.client._grpc import encode_predict_request
    from serve_bench.client._rest import encode_rest_body
    from serve_bench.client._v2_grpc import encode_infer_request
    from serve_bench.client._v2_rest import encode_rest_request

    return {
        "grpc": lambda x: encode_predict_request("tiny", None, "serving_default", x),
        "rest": lambda x: encode_rest_body(x, "serving_default"),
        "rest-rows": lambda x: encode_rest_body(x, "serving_default", row_format=True),
        "v2-rest-json": lambda x: encode_rest_request(x, False).body,
        "v2-rest-binary": lambda x: encode_rest_request(x, True).body,
        "v2-grpc": lambda x: encode_infer_request("tiny", None, x),
    }[kind]


def build(kind: str) -> dict[str, float]:
    from serve_bench.client import SignatureInfo, TensorInfo
    from serve_bench.load import make_inputs

    info = SignatureInfo("serving_default", {"images": TensorInfo(1, (-1, 64, 64, 3))}, {})
    encode = _encoder(kind)
    encode(make_inputs("float", 2, info, image_size=(64, 64)))  # every import and first-call cost, first
    gc.collect()
    start = _peak()
    inputs = make_inputs("float", BUILD_ITEMS, info, image_size=(64, 64))
    drawn = _peak()
    pixels = inputs["images"].nbytes
    body = encode(inputs)
    end = _peak()
    return {
        "pixels": pixels,
        "body": len(body),
        "draw_x_pixels": (drawn - start) / pixels,
        "encode_x_body": (end - max(drawn, start + pixels)) / len(body),
        "total_x_body": (end - start) / len(body),
    }


async def _in_flight(kind: str, url: str, width: int) -> float:
    from serve_bench.client import connect

    async with connect(url, "delay", timeout=120, fetch_metadata=False) as client:
        prepared = client.prepare({"x": np.ones((1, width), np.float32)})
        await asyncio.sleep(0.5)
        gc.collect()
        before = _rss()
        calls = [asyncio.ensure_future(client.predict_prepared(prepared)) for _ in range(IN_FLIGHT)]
        await asyncio.sleep(8)  # every request sent and waiting (the server answers after 60 s)
        after = _rss()
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        return (after - before) / IN_FLIGHT


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _child(argv: list[str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.client_memory", *argv], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--build":
        print(json.dumps(build(sys.argv[2])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--in-flight":
        kind, url, width = sys.argv[2], sys.argv[3], int(sys.argv[4])
        print(json.dumps({"bytes": asyncio.run(_in_flight(kind, url, width))}))
        return
    print(f"build: {BUILD_ITEMS} float32 64x64 images ({BUILD_ITEMS * 64 * 64 * 3 * 4 / 1e6:.0f} MB), peak RSS growth")
    print(f"  {'protocol':<16} {'body MB':>8} {'draw/pixels':>12} {'encode/body':>12} {'total/body':>11}")
    for kind in KINDS:
        r = _child(["--build", kind])
        print(
            f"  {kind:<16} {r['body'] / 1e6:>8.1f} {r['draw_x_pixels']:>12.2f} {r['encode_x_body']:>12.2f} "
            f"{r['total_x_body']:>11.2f}"
        )
    from tests._delay_server import DelayServer

    server = DelayServer(delay=60).start()
    try:
        print(f"in flight: {IN_FLIGHT} requests waiting on the delay server, RSS growth per request")
        for kind, url in (("grpc", server.grpc_url), ("rest", server.rest_url)):
            small = _child(["--in-flight", kind, url, "16"])["bytes"]
            large = _child(["--in-flight", kind, url, "12288"])["bytes"]
            print(
                f"  {kind:<6} body 64 B: {small / 1024:6.1f} KiB; body 48 KiB: {large / 1024:6.1f} KiB "
                f"({(large - small) / (12288 * 4 - 64):.2f} body copies each)"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
