"""How fast Python gRPC moves one large Predict request over localhost, against a raw TCP socket.

    .venv/bin/python -m benchmarks.grpc_transport                       # 1, 17, 68, 275 MB
    .venv/bin/python -m benchmarks.grpc_transport --sizes 17,68 --rounds 5

One request in flight, answered with 2 KB (a batch's features are small beside its images), each
figure a median over rounds that alternate the ways, all in this one process (server and client
share the cores, as with the local server):

- tcp: the bytes through an asyncio stream to a plain socket thread (what loopback and a copy cost);
- grpc: a bare grpc.aio server taking the bytes without parsing, with the local server's and the
  client's channel options;
- +parse, old decode: the server parses the PredictRequest and reads tensor_content from the message
  (a copy), as the local server did before reading it off the wire;
- +parse, view: the server parses it without its tensor_content and decodes a view of the bytes
  received, as the local server does now (server/_wire.py).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import numpy as np
from grpc import aio

from serve_bench import _protos
from serve_bench.client._grpc import CHANNEL_OPTIONS, encode_predict_request
from serve_bench.codec import from_tensor_proto
from serve_bench.server._grpc import SERVER_OPTIONS
from serve_bench.server._wire import split_contents

_ANSWER = b"\0" * 2000


def _tcp_server() -> tuple[int, socket.socket]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        while header := conn.recv(8, socket.MSG_WAITALL):
            size = int.from_bytes(header, "little")
            buffer = memoryview(bytearray(size))
            got = 0
            while got < size:
                got += conn.recv_into(buffer[got:])
            conn.sendall(_ANSWER)

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], listener


async def _main(sizes: list[float], rounds: int) -> None:
    request_type = _protos.message("tensorflow.serving.PredictRequest")

    def old(data: bytes) -> bytes:
        tensor = request_type.FromString(data).inputs["images"]
        from_tensor_proto(tensor, tensor_content=tensor.tensor_content)
        return _ANSWER

    def view(data: bytes) -> bytes:
        split = split_contents(data)
        assert split is not None
        tensor = request_type.FromString(split[0]).inputs["images"]
        offset, size = split[1]["images"]
        from_tensor_proto(tensor, tensor_content=memoryview(data)[offset : offset + size])
        return _ANSWER

    handlers = {"Raw": lambda data: _ANSWER, "Old": old, "View": view}
    server = aio.server(options=SERVER_OPTIONS)
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "Echo", {name: grpc.unary_unary_rpc_method_handler(_async(f)) for name, f in handlers.items()}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
    tcp_port, listener = _tcp_server()
    reader, writer = await asyncio.open_connection("127.0.0.1", tcp_port)

    async def tcp(data: bytes) -> None:
        writer.write(len(data).to_bytes(8, "little"))
        writer.write(data)
        await writer.drain()
        await reader.readexactly(len(_ANSWER))

    ways: dict[str, Any] = {"tcp": tcp}
    for label, name in (("grpc", "Raw"), ("+parse, old decode", "Old"), ("+parse, view", "View")):
        ways[label] = channel.unary_unary(f"/Echo/{name}")
    print(f"one request in flight, {rounds} rounds; ms per request, median (range), and MB/s at the median")
    for megabytes in sizes:
        images = np.ones(int(megabytes * 1e6 / 4), np.float32)
        data = encode_predict_request("m", None, "serving_default", {"images": images})
        times: dict[str, list[float]] = {way: [] for way in ways}
        repeats = max(1, int(20e6 / len(data)))  # ~20 MB per figure per round
        for send in ways.values():
            await send(data)  # warm
        for _ in range(rounds):
            for way, send in ways.items():
                started = time.perf_counter()
                for _ in range(repeats):
                    await send(data)
                times[way].append((time.perf_counter() - started) / repeats)
        print(f"{len(data) / 1e6:.1f} MB")
        for way, values in times.items():
            median = statistics.median(values)
            print(
                f"  {way:20s} {median * 1e3:9.2f} ({min(values) * 1e3:.2f}-{max(values) * 1e3:.2f})"
                f"  {len(data) / median / 1e6:6.0f} MB/s"
            )
    writer.close()
    listener.close()
    await channel.close()
    await server.stop(None)


def _async(handler: Callable[[bytes], bytes]) -> Callable[[bytes, object], Awaitable[bytes]]:
    async def call(data: bytes, context: object) -> bytes:
        return handler(data)

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,17,68,275", help="request sizes in MB")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(_main([float(s) for s in args.sizes.split(",")], args.rounds))


if __name__ == "__main__":
    main()
