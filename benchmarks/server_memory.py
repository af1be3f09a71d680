"""The local server's peak memory under issue 10's bad requests, against its idle RSS.

    .venv/bin/python -m benchmarks.server_memory [--body-mb 200]

Starts ``serve-bench serve`` (tiny model) as its own process, records its idle RSS after one
good request, then sends: four ~40-byte gRPC requests declaring 300M floats, two REST bodies
of --body-mb MB at once (well-formed numbers, one row too many: refused after parsing), a body
of the same size made of tiny strings (refused before parsing), and four more of each of the
first two one after another. Prints the peak RSS (VmHWM) beside the bound
2 x idle + 2 x largest body. tests/test_server_hardening.py enforces the same bound at 64 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from serve_bench.servers import free_port

ROOT = Path(__file__).resolve().parent.parent


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def _post(port: int, path: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body)
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status, response.read(200).decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())["error"][:120]


def _rows_body(megabytes: int) -> bytes:
    pixel = b"[12.5,200.25,3.125]"
    row = b"[" + b",".join([pixel] * 64) + b"]"
    image = b"[" + b",".join([row] * 65) + b"]"  # 65 rows: the signature wants 64
    return b'{"instances": [' + b",".join([image] * (megabytes * 2**20 // len(image))) + b"]}"


def _huge_declared(grpc_port: int) -> str:
    import grpc

    from serve_bench import _protos

    request = _protos.message("tensorflow.serving.PredictRequest")()
    request.model_spec.name = "tiny"
    tensor = request.inputs["images"]
    tensor.dtype = 1
    for size in (24_414, 64, 64, 50):
        tensor.tensor_shape.dim.add(size=size)
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        call = channel.unary_unary(
            "/tensorflow.serving.PredictionService/Predict",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b,
        )
        try:
            call(request, timeout=120)
        except grpc.RpcError as exc:
            return f"{exc.code().name} ({request.ByteSize()}-byte request)"
    return "OK?!"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--body-mb", type=int, default=200)
    args = parser.parse_args()
    from serve_bench.export import export_model

    models = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    export_model("tiny", weights="random", out=models, warmup_batch_sizes=(1,), runtimes=("tensorflow",))
    grpc_port, rest_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "serve_bench",
            "serve",
            "--model_name",
            "tiny",
            "--model_base_path",
            str(models / "tiny"),
            "--port",
            str(grpc_port),
            "--rest_api_port",
            str(rest_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/v1/models/tiny", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        good = json.dumps({"instances": [[[[1.0] * 3] * 64] * 64]}).encode()
        assert _post(rest_port, "/v1/models/tiny:predict", good)[0] == 200
        idle = _status_kb(process.pid, "VmRSS")
        print(f"server idle RSS {idle / 1024:.0f} MiB ({os.cpu_count()} cores)")
        for _ in range(4):
            print("  300M-float declaration:", _huge_declared(grpc_port))
        body = _rows_body(args.body_mb)
        answers: list[tuple[int, str]] = []
        started = time.perf_counter()
        senders = [
            threading.Thread(target=lambda: answers.append(_post(rest_port, "/v1/models/tiny:predict", body)))
            for _ in range(2)
        ]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        print(
            f"  two {len(body) / 2**20:.0f} MiB bodies at once: {answers} in {time.perf_counter() - started:.1f} s; "
            f"peak so far {_status_kb(process.pid, 'VmHWM') / 1024:.0f} MiB"
        )
        strings = b'{"signature_name": "serving_bytes", "instances": [' + b'"a",' * (len(body) // 4) + b'"a"]}'
        print("  body of tiny strings:", _post(rest_port, "/v1/models/tiny:predict", strings))
        del strings
        for _ in range(4):
            _post(rest_port, "/v1/models/tiny:predict", body)
            _huge_declared(grpc_port)
        peak = _status_kb(process.pid, "VmHWM")
        bound = 2 * idle + 2 * len(body) // 1024
        print(
            f"peak RSS {peak / 1024:.0f} MiB; bound 2 x idle + 2 x body = {bound / 1024:.0f} MiB; "
            f"RSS after {_status_kb(process.pid, 'VmRSS') / 1024:.0f} MiB -> {'within' if peak <= bound else 'OVER'}"
        )
    finally:
        process.terminate()
        process.wait(timeout=60)


if __name__ == "__main__":
    main()
