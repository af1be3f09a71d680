"""Batch 1 at several requests in flight against a device stand-in: does the Python request path hide behind a call?

    .venv/bin/python -m benchmarks.in_flight                                        # InceptionV3's 1.07 MB, 2.5 ms
    .venv/bin/python -m benchmarks.in_flight --model mobilenet_v2 --device-ms 2.2 --in-flight 1,2,3,4

Issue 31 item 4: at one request in flight, a batch-1 request through serve-bench's Python server and client costs
1.6-3.8 ms over the H100's call (the second visit: 2.2-3.5 ms at tf32, 2.4-6.0 at fp32), so served is 0.40-0.59
of in process at tf32 (0.60-0.72 at fp32) and the served gain is the request path's. A C++ server is measured at
several requests in flight too (perf_analyzer's --concurrency-range); whether two or four in flight hide the Python
path's fixed cost behind the device's call is what the GPU run's in-flight step measures on the next visit. This
says what to expect, on this machine:

- the local server (unbatched) with its runtime replaced by ``server_overhead.StandIn``: each call holds one lock,
  as a GPU runs one program at a time, and sleeps ``--device-ms`` with the GIL released, as a host thread waits
  for a GPU's kernels, answering zeros of the model's output;
- its floor: the same stand-in called back to back in this process (the device's rate, ~1000/device-ms), before
  and after each round's served figures, the faster of the two;
- batch-1 requests of the model's size (float32) through serve-bench's gRPC client at each ``--in-flight``, in
  alternating rounds, with the server's own runtime call (its metrics).

Printed: images/s per in-flight, median over the rounds (range), and over the floor. The stand-in's host threads
use no CPU while "computing"; JAX's do (MobileNetV2's tf32 floor used 3.07 ms of CPU a 2.73 ms call on the H100:
results/h100-2026-11-27/visit-1/overhead-mobilenet_v2-gpu-tf32.txt), and the GPU host has 16 cores where this has
2: a prediction, not a GPU's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.server_overhead import (  # noqa: E402
    StandIn,
    _environment,
    _image_size,
    _load,
    served_point,
    stub_command,
)
from serve_bench.errors import UserError  # noqa: E402


def _floor(model: str, device_ms: float, seconds: float) -> float:
    """The stand-in's images/s at batch 1 called back to back in this process: the device's own rate."""
    import numpy as np

    height, width = _image_size(model)
    stand_in = StandIn(model, device_ms)
    images = {"images": np.zeros((1, height, width, 3), np.float32)}
    calls, started = 0, time.perf_counter()
    while calls < 5 or time.perf_counter() - started < seconds:
        stand_in(images)
        calls += 1
    return calls / (time.perf_counter() - started)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.in_flight", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="inception_v3", help="whose request size and output (default inception_v3)")
    parser.add_argument(
        "--device-ms", type=float, default=2.5, help="the stand-in's call (default 2.5: ResNet-50's tf32 on the H100)"
    )
    parser.add_argument("--in-flight", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="per figure per round")
    parser.add_argument(
        "--triton",
        action="store_true",
        help="also real Triton 2.51 (C++ front end) with the same stand-in in its Python backend, one call at a time",
    )
    parser.add_argument(
        "--perf-analyzer",
        action="store_true",
        help="perf_analyzer 2.51 (C++ client) against the local server (and Triton) at each in-flight level",
    )
    return parser


def measure(args: argparse.Namespace) -> dict[Any, list[dict[str, float]]]:
    """Per round, the floor's images/s ("floor") and each in-flight level's images/s and server runtime call."""
    from benchmarks import perf_analyzer
    from benchmarks.server_overhead import triton_stub
    from serve_bench.export import parse_batch_sizes
    from serve_bench.runtimes import write_random_copy
    from serve_bench.servers import LocalServerProcess

    levels = parse_batch_sizes(args.in_flight, "--in-flight")
    if args.rounds < 1 or not args.device_ms > 0 or not args.seconds > 0:
        raise UserError("--rounds must be 1 or more, --device-ms and --seconds more than 0")
    scratch = tempfile.TemporaryDirectory(prefix="in-flight-")
    models = Path(scratch.name)
    write_random_copy(models, args.model, version=1)  # the server needs a copy to load; the stand-in replaces it

    class StandInServer(LocalServerProcess):
        def command(self) -> list[str]:  # python -m serve_bench serve ARGS -> server_overhead's stub child
            return stub_command(super().command(), args.model, args.device_ms)

        def environment(self) -> dict[str, str]:
            return _environment("cpu")

    server = StandInServer(models, args.model, extra_flags=("--runtime=jax", "--compile_batch_sizes=1"))
    servers = {"local": server}
    if args.triton:
        servers["triton"] = triton_stub(args.model, models / "triton", 1, args.device_ms)
    results: dict[Any, list[dict[str, float]]] = {}
    try:
        for each in servers.values():
            each.start()
        for round_number in range(args.rounds):
            before = _floor(args.model, args.device_ms, args.seconds)
            for level in levels:
                for name, each in servers.items():
                    figures = asyncio.run(served_point(each, args.model, 1, args.seconds, each.pid, in_flight=level))
                    results.setdefault(level if name == "local" else (name, level), []).append(figures)
                for name, each in servers.items() if args.perf_analyzer else ():
                    try:
                        measured = perf_analyzer.measure(each.grpc_url, args.model, concurrency=level)
                        figures = {"images_per_s": measured["Inferences/Second"], "runtime_us": 0.0}
                    except perf_analyzer.PerfAnalyzerFailed as exc:  # the others' figures stand: said, left out
                        print(f"  {exc}", flush=True)
                        figures = {"error": 1.0}
                    results.setdefault(("perf_analyzer " + name, level), []).append(figures)
            # the floor before and after the served figures, the faster: a core busy for one of them slows the
            # stand-in's sleeps, and the served figures are judged against the device's own rate
            after = _floor(args.model, args.device_ms, args.seconds)
            results.setdefault("floor", []).append({"images_per_s": max(before, after)})
            print(f"  round {round_number + 1} of {args.rounds} done; load average {_load()}", flush=True)
    finally:
        for each in reversed(servers.values()):
            each.stop()
        scratch.cleanup()
    return results


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    try:
        return _main(args)
    except UserError as exc:  # --in-flight 0, an unknown --model: one line
        print(f"python -m benchmarks.in_flight: error: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    print(
        f"in flight: {args.model}'s batch-1 request against a stand-in device of {args.device_ms:g} ms a call, "
        f"unbatched local server, {args.rounds} rounds x {args.seconds:g} s per figure; load average {_load()}",
        flush=True,
    )
    results = measure(args)
    floor = [r["images_per_s"] for r in results["floor"]]
    print(f"  in process (the stand-in back to back)  {_spread(floor)} img/s")
    for key in (key for key in results if key != "floor"):
        name, level = key if isinstance(key, tuple) else ("local", key)
        rounds = [(r, f) for r, f in zip(results[key], floor) if "error" not in r]  # a failed run's round left out
        if not rounds:
            print(f"  {key}: failed in every round")
            continue
        rates = [r["images_per_s"] for r, _ in rounds]
        shares = [r["images_per_s"] / f for r, f in rounds]
        runtime = [r["runtime_us"] / 1e3 for r, _ in rounds]
        client = (
            "perf_analyzer -> " + name.split()[-1] if name.startswith("perf_analyzer") else "serve-bench -> " + name
        )
        call = ""
        if any(runtime):
            call = f"; the server's runtime call (its wait for the device included) {statistics.median(runtime):.2f} ms"
        print(
            f"  {client:24s} {level} in flight  {_spread(rates)} img/s, {statistics.median(shares):.2f} "
            f"({min(shares):.2f}-{max(shares):.2f}) of in process{call}"
        )
    print(f"load average {_load()} after", flush=True)
    return 0


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


if __name__ == "__main__":
    sys.exit(main())
