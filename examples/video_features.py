"""Extract per-frame features from a video through a TF Serving (or serve-bench local) server.

    python examples/video_features.py clip.mp4 --url grpc://localhost:8500 \\
        --model inception_v3 --batch-size 16 --features features.npy

A thin caller of ``serve_bench.pipeline.video_features``: frames are decoded with
PyAV on a worker thread, scaled to the model's input by FFmpeg, sent in batches
(ordered, at most --max-in-flight outstanding), and the features are saved as one
float32 array [frames, D]. `serve-bench pipeline VIDEO --features features.npy` is the
production version, which also measures frames/s by batch size and names the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import numpy as np


async def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from serve_bench.client import ServeBenchError, connect
    from serve_bench.errors import UserError
    from serve_bench.media import probe_video
    from serve_bench.pipeline import video_features

    try:
        total = probe_video(args.video).frames or None
        async with connect(args.url, args.model, timeout=args.timeout) as client:
            with Progress(
                TextColumn("features"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[rate]}"),
                transient=not sys.stdout.isatty(),
            ) as progress:
                task = progress.add_task("frames", total=total, rate="")
                started = time.perf_counter()

                def show(done: int) -> None:
                    progress.update(task, completed=done, rate=f"{done / (time.perf_counter() - started):.1f} frames/s")

                stream = await video_features(
                    client,
                    args.video,
                    batch_size=args.batch_size,
                    max_in_flight=args.max_in_flight,
                    max_delay_ms=args.max_delay_ms,
                    on_progress=show,
                )
    except UserError as exc:  # missing file, not a video, no frames, no input size
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ServeBenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    assert stream.features is not None
    np.save(args.features, stream.features)
    print(
        f"{stream.frames} frames -> {args.features} {list(stream.features.shape)} in {stream.duration:.2f} s: "
        f"{stream.frames_per_s:.1f} frames/s"
    )
    latency_ms = np.array([r.done - r.sent for r in stream.records]) * 1000
    if len(latency_ms):
        print(
            f"per-batch latency (batch {args.batch_size}): p50 {np.percentile(latency_ms, 50):.1f} ms, "
            f"p95 {np.percentile(latency_ms, 95):.1f} ms, max {latency_ms.max():.1f} ms over {len(latency_ms)} "
            f"batches; decoder held back {stream.held_seconds / stream.duration:.0%} of the time, server idle "
            f"{stream.server_idle_seconds / stream.duration:.0%}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("video")
    parser.add_argument("--url", default="grpc://localhost:8500")
    parser.add_argument("--model", default="inception_v3")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-delay-ms", type=float, default=50.0)
    parser.add_argument("--max-in-flight", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--features", default="features.npy")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
