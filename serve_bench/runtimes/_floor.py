"""The floor: a runtime's copy called in this process, no server, no network, no encoding.

``python -m serve_bench.runtimes._floor COPY --device gpu --precision tf32 --batch-sizes 1,8,64``
compiles each batch size (timed apart; sizes in the order that covers the curve soonest, so that
``--max-seconds`` cuts the resolution, not an end), then calls it until ``--min-seconds`` and ``--min-calls`` are
both reached, and prints one JSON line per batch size as it finishes: images/s over the timed calls (with
its 95% interval, blocks of calls resampled as a served point's time slices are),
the calls' median and 99th-percentile latency, the compile time and the first run's, and the median of a
few calls given the pixels as the local server gives them (a read-only view of a request's bytes, not
aligned), and at batch 1 of a few calls each after the device sat idle for ``GAP_MS`` (as a served request at one
in flight leaves it). Every call copies its images from the host to the device and its features back, as a served
request's do, so what the server adds is everything else. ``--beyond`` goes on doubling past the last
size while throughput still grows by more than ``--growth`` and the device has the memory: the size where
it stops growing, and the largest that fits (a size that does not fit is one line saying so, not a failure).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench.errors import UserError, first_line
from serve_bench.stats import MAX_BLOCKS, rate_interval

__all__ = ["coverage_order", "measure_floor", "precision_witness"]

AS_SERVED_OFFSET = 78  # where a Predict request puts InceptionV3's pixels from batch 2 to 64 (2 mod 4)
AS_SERVED_CALLS = 10  # at InceptionV3's batch 256 on an H100, about 0.6 s a size
AS_SERVED_SECONDS = 0.5  # or fewer, at least 3, where calls are slower (a CPU's large batches: a second or more each)
# the idle time before each gapped call: what the second H100 visit's served batch-1 requests left between runtime
# calls at one request in flight (1.6-3.8 ms: gRPC, the client, the server's decoding)
GAP_MS = 2.0


def precision_witness(convolve: Callable[[np.ndarray, np.ndarray], Any], seed: int = 1234) -> dict[str, float]:
    """The precision a runtime's convolutions actually run at, measured rather than assumed: the largest relative
    error, against float64, of a 3×3 and a 1×1 stride-1 SAME convolution (64 channels in and out, 28×28), which
    ``convolve(images NHWC, kernel HWIO)`` (float32 arrays) computes as the runtime computes the model's. float32
    throughout gives about 1e-6; TF32 inputs (10-bit mantissa) about 1e-3; bfloat16 about 1e-2."""
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((1, 28, 28, 64))
    errors = {}
    for size in (3, 1):
        kernel = rng.standard_normal((size, size, 64, 64)) / np.sqrt(size * size * 64)
        got = np.asarray(convolve(images.astype(np.float32), kernel.astype(np.float32)), dtype=np.float64)
        pad = size // 2
        padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        exact = np.zeros((1, 28, 28, 64))
        for dy in range(size):
            for dx in range(size):
                exact += padded[:, dy : dy + 28, dx : dx + 28, :] @ kernel[dy, dx]
        errors[f"conv{size}x{size}_max_relative_error"] = float(np.abs(got - exact).max() / np.abs(exact).max())
    return errors


def _point(runner: Any, size: int, min_seconds: float, min_calls: int, seed: int) -> dict[str, Any]:
    runner.compile(size)  # and on a GPU runs it once: a program's first execution has costs of its own
    height, width, _ = runner.spec.input_shape
    images = np.random.default_rng(seed).uniform(0, 255, (size, height, width, 3)).astype(np.float32)
    runner({"images": images})  # untimed too: these pixels' first copy to the device
    latencies: list[float] = []
    started = time.perf_counter()
    while len(latencies) < min_calls or time.perf_counter() - started < min_seconds:
        begun = time.perf_counter()
        runner({"images": images})
        latencies.append(time.perf_counter() - begun)
    seconds = time.perf_counter() - started
    ms = np.array(latencies) * 1e3
    images_per_s = size * len(latencies) / seconds
    as_served = _as_served(runner, images)
    line = {
        "batch_size": size,
        "compile_s": round(runner.compile_seconds[size], 3),
        "first_run_s": round(runner.first_run_seconds[size], 4) if size in runner.first_run_seconds else None,
        "calls": len(latencies),
        "seconds": round(seconds, 4),
        "images_per_s": images_per_s,
        "images_per_s_ci": _interval(latencies, size, images_per_s),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "as_served_p50_ms": float(np.percentile(as_served, 50)),
    }
    if size == 1:  # where the served request's time was compared (a GPU's larger sizes' time goes to its curve)
        gapped = _few_calls(runner, images, gap_s=GAP_MS / 1e3)
        line |= {"gap_ms": GAP_MS, "gapped_p50_ms": float(np.percentile(gapped, 50))}
    return line


def _as_served(runner: Any, images: np.ndarray) -> np.ndarray:
    """The call's latencies (ms) with the same pixels as the local server hands them to the runtime: a read-only
    view of the request's bytes, at an offset a Predict request puts them, which is never 4-byte aligned (71 to
    82 for InceptionV3, ResNet-50 and MobileNetV2 at batch 1 to 256, 2 or 3 mod 4; float32 wants 4; one offset
    stands for them all here: the floor knows no request). On the H100 the server's runtime call at batch 1 took
    0.4 ms over the floor's 4.5, and whether such a view costs a GPU's host-to-device copy more than a fresh array
    does is one candidate this CPU cannot answer (here both are copied alike).
    AS_SERVED_CALLS calls after the timed ones (fewer past AS_SERVED_SECONDS, at least 3), and one untimed before
    them: the timed figures stay the fresh array's."""
    received = bytes(AS_SERVED_OFFSET) + images.tobytes()
    view = np.frombuffer(memoryview(received)[AS_SERVED_OFFSET:], dtype=np.float32).reshape(images.shape)
    return _few_calls(runner, view)


def _few_calls(runner: Any, images: np.ndarray, gap_s: float = 0.0) -> np.ndarray:
    """The latencies (ms) of AS_SERVED_CALLS calls on ``images`` (fewer past AS_SERVED_SECONDS, at least 3) after
    one untimed; with ``gap_s``, each timed call after the host slept that long, the device idle. On the second
    H100 visit the tf32 servers' batch-1 runtime call took 0.3-1.1 ms over the floor's back-to-back calls, with the
    GPU idle between requests for the 1.6-3.8 ms the request path took (fp32's 0.01-0.05 ms): a device slower
    to start after idling (clocks, power states, a waiting host thread asleep) would show here, in process."""
    runner({"images": images})
    latencies: list[float] = []
    while len(latencies) < AS_SERVED_CALLS and (len(latencies) < 3 or sum(latencies) < AS_SERVED_SECONDS):
        if gap_s:
            time.sleep(gap_s)
        begun = time.perf_counter()
        runner({"images": images})
        latencies.append(time.perf_counter() - begun)
    return np.array(latencies) * 1e3


def _interval(latencies: list[float], size: int, images_per_s: float) -> list[float] | None:
    """The 95% interval of images/s: consecutive calls in up to MAX_BLOCKS equal blocks, resampled as a served
    point's time slices are (stats' block bootstrap), so an in-process gain carries an interval of the same
    kind; None with fewer calls than blocks need. Seeded by the calls, so the same calls give the same."""
    calls = np.asarray(latencies)
    blocks = np.array_split(calls, min(MAX_BLOCKS, len(calls)))
    seconds = np.array([block.sum() for block in blocks])
    items = np.array([size * len(block) for block in blocks], dtype=float)
    found = rate_interval(items, seconds, seed=len(calls) * 1_000_003 + size, estimate=images_per_s)
    return None if found is None else [found.low, found.high]


def coverage_order(sizes: tuple[int, ...]) -> list[int]:
    """``sizes`` in the order that covers the curve soonest: the smallest and the largest, then the middle
    of each gap, breadth first (1..256 in nine: 1, 256, 16, 4, 64, 2, 8, 32, 128), so a run cut short
    still has both ends and an even spread between them."""
    ordered = sorted(set(sizes))
    if len(ordered) <= 2:
        return ordered
    chosen = [0, len(ordered) - 1]
    gaps = [(0, len(ordered) - 1)]
    while gaps:
        next_gaps = []
        for low, high in gaps:
            if high - low > 1:
                middle = (low + high) // 2
                chosen.append(middle)
                next_gaps += [(low, middle), (middle, high)]
        gaps = next_gaps
    return [ordered[i] for i in chosen]


def measure_floor(
    copy: Path,
    device: str,
    precision: str,
    batch_sizes: tuple[int, ...],
    *,
    min_seconds: float = 1.0,
    min_calls: int = 5,
    beyond: int = 0,
    growth: float = 0.03,
    max_seconds: float | None = None,
    out: Any = sys.stdout,
    runtime: str = "jax",
) -> list[dict[str, Any]]:
    """Measure each of ``batch_sizes`` in :func:`coverage_order` (then up to ``beyond`` doublings past the
    largest while throughput grows); each line is also written to ``out`` as JSON the moment it is measured.
    Past ``max_seconds`` (compiling included) no further size is started once both ends are measured, and a
    line says which were left. ``runtime``: a runtime whose record has a floor runner (jax, onnxruntime)."""
    from serve_bench.runtimes import RECORDS, record

    started = time.perf_counter()
    kept = record(runtime)
    if kept.floor is None:
        floors = ", ".join(r.name for r in RECORDS.values() if r.floor is not None)
        raise UserError(f"the floor measures {floors}, not {runtime}")
    kept.require()
    runner = kept.floor(copy, device, precision)
    header = {"model": runner.spec.name, "in_effect": runner.in_effect, "device": device, "precision": precision}
    header["runtime"] = runtime
    header["copy"] = str(copy)
    header["precision_witness"] = runner.precision_witness()  # the precision measured, not only asked for
    print(json.dumps(header), file=out, flush=True)
    lines: list[dict[str, Any]] = []
    sizes = coverage_order(batch_sizes)
    doublings = 0
    while sizes:
        ends = len([x for x in lines if "images_per_s" in x]) >= 2  # the smallest and the largest, always
        if max_seconds is not None and ends and time.perf_counter() - started > max_seconds:
            left = {"left_out": sorted(sizes), "reason": f"past {max_seconds:.0f} s"}
            print(json.dumps(left), file=out, flush=True)
            lines.append(left)
            break
        size = sizes.pop(0)
        try:
            line = _point(runner, size, min_seconds, min_calls, seed=size)
        except Exception as exc:  # XLA's RESOURCE_EXHAUSTED: this size does not fit; anything else is an error
            said = first_line(exc)[:300]
            memory = "RESOURCE_EXHAUSTED" in said or "out of memory" in said.lower()
            line = {"batch_size": size, ("does_not_fit" if memory else "error"): said}
            print(json.dumps(line), file=out, flush=True)
            lines.append(line)
            break
        print(json.dumps(line), file=out, flush=True)
        lines.append(line)
        if not sizes and doublings < beyond:
            by_size = sorted((x["batch_size"], x["images_per_s"]) for x in lines if "images_per_s" in x)
            measured = [rate for _, rate in by_size]
            if len(measured) < 2 or measured[-1] > measured[-2] * (1 + growth):
                sizes.append(by_size[-1][0] * 2)
                doublings += 1
    return lines


def _batch_sizes(text: str) -> tuple[int, ...]:
    """``--batch-sizes 1,8,32``: positive whole numbers (the floor is measured below export, with no catalogue)."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: positive whole numbers separated by commas, e.g. 1,8,32")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve_bench.runtimes._floor", description=__doc__)
    parser.add_argument(
        "copy",
        type=Path,
        help="the runtime's copy: exported_models/jax/<model>/<v>/conversion.json, or onnx/<model>/<v>/model.onnx",
    )
    from serve_bench.runtimes import RECORDS

    floors = " or ".join(r.name for r in RECORDS.values() if r.floor is not None)
    parser.add_argument("--runtime", default="jax", help=f"{floors} (the runtimes with a floor runner)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--batch-sizes", type=_batch_sizes, default=(1, 8, 32))
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument("--min-calls", type=int, default=5)
    parser.add_argument("--beyond", type=int, default=0, help="doublings past the last size while throughput grows")
    parser.add_argument("--growth", type=float, default=0.03)
    parser.add_argument("--max-seconds", type=float, default=None, help="start no size past this (compiling too)")
    args = parser.parse_args(argv)
    try:
        measure_floor(
            args.copy,
            args.device,
            args.precision,
            args.batch_sizes,
            min_seconds=args.min_seconds,
            min_calls=args.min_calls,
            beyond=args.beyond,
            growth=args.growth,
            max_seconds=args.max_seconds,
            runtime=args.runtime,
        )
    except UserError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
