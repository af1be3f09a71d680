"""Extract per-frame features from a video through a TF Serving (or serve-bench local) server.

    python examples/video_features.py clip.mp4 --target grpc://localhost:8500 \
        --model inception_v3 --batch-size 16 --out features.npy

Frames are decoded with PyAV on a worker thread, resized to the model's input,
sent in batches (ordered, at most --max-in-flight outstanding), and the
features are saved as one float32 array [frames, D].
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np


def decoded_frames(path: str, width: int, height: int):
    import av

    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            yield frame.to_ndarray(format="rgb24", width=width, height=height).astype(np.float32)


def frame_count(path: str) -> int | None:
    import av

    with av.open(path) as container:
        return container.streams.video[0].frames or None


async def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from serve_bench.client import ServeBenchError, connect, predict_stream

    try:
        async with connect(args.target, args.model, timeout=args.timeout) as client:
            info = client.signature_info
            if info is None:
                print("error: the server gave no signature metadata; cannot tell the input size", file=sys.stderr)
                return 2
            (input_name, spec), = info.inputs.items()
            _, height, width, _ = spec.shape
            total = frame_count(args.video)
            features: list[np.ndarray] = []
            latencies: list[float] = []
            started = time.perf_counter()
            with Progress(TextColumn("features"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          TextColumn("{task.fields[rate]}"), transient=not sys.stdout.isatty()) as progress:
                task = progress.add_task("frames", total=total, rate="")
                async for result in predict_stream(client, decoded_frames(args.video, width, height), args.batch_size,
                                                   args.max_delay_ms, args.max_in_flight, input_name=input_name):
                    features.append(result.outputs["features"])
                    latencies.append(result.latency_seconds)
                    done = sum(len(f) for f in features)
                    progress.update(task, completed=done,
                                    rate=f"{done / (time.perf_counter() - started):.1f} frames/s")
            elapsed = time.perf_counter() - started
    except ServeBenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    array = np.concatenate(features) if features else np.zeros((0, 0), np.float32)
    np.save(args.out, array)
    lat_ms = np.array(latencies) * 1000
    print(f"{len(array)} frames -> {args.out} {list(array.shape)} in {elapsed:.2f} s: {len(array) / elapsed:.1f} frames/s")
    if len(lat_ms):
        print(f"per-batch latency (batch {args.batch_size}): p50 {np.percentile(lat_ms, 50):.1f} ms, "
              f"p95 {np.percentile(lat_ms, 95):.1f} ms, max {lat_ms.max():.1f} ms over {len(lat_ms)} batches")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("video")
    parser.add_argument("--target", default="grpc://localhost:8500")
    parser.add_argument("--model", default="inception_v3")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-delay-ms", type=float, default=50.0)
    parser.add_argument("--max-in-flight", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--out", default="features.npy")
    args = parser.parse_args(argv)
    if not Path(args.video).is_file():
        print(f"error: no such video file: {args.video}", file=sys.stderr)
        return 2
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
