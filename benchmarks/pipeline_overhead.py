"""The video pipeline's own overhead: frames/s of the pipeline vs the decoder alone and the served model alone.

    .venv/bin/python -m benchmarks.pipeline_overhead [--model tiny] [--frames 120] [--rounds 3]

Writes a clip (H.264, 640x360, a moving gradient with noise), starts the local server in
its own process, and for each batch size alternates, in the same run on the same machine:
  decoder   the clip decoded and scaled by FFmpeg to the model's size, nothing else running
  served    the same frames, already decoded, streamed through predict_stream (run_stream)
  pipeline  decoding and streaming together, as `serve-bench pipeline` does
If decoding and serving overlapped perfectly the pipeline would reach min(decoder, served);
run one after the other they would reach 1 / (1/decoder + 1/served). The figures say where
between the two the pipeline lands, and its cost per frame beyond the ideal.

Wall-clock rates move with whatever else the machine runs; this process's CPU time per
frame does much less, so it is reported too: the pipeline's own cost per frame is its CPU
per frame minus the decoder's and the served stream's (client side; the server runs in its
own process).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.server_vs_inprocess import Server, models_dir_with


def write_clip(path: Path, frames: int, width: int, height: int) -> None:
    import av

    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for index in range(frames):
            shift = index * 4
            base = np.stack([(x + shift) % 256, (y + shift) % 256, np.full_like(x, (index * 7) % 256)], axis=-1)
            image = np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def decoder_alone(clip: Path, width: int, height: int) -> tuple[float, float, list[np.ndarray]]:
    """(frames/s, CPU ms per frame, frames)."""
    from serve_bench.media import decode_video

    cpu, started = _cpu(), time.perf_counter()
    frames = list(decode_video(clip, width, height))
    return len(frames) / (time.perf_counter() - started), (_cpu() - cpu) / len(frames) * 1000, frames


async def stream_fps(
    url: str, model: str, source: object, batch: int, in_flight: int
) -> tuple[float, float, float, float]:
    """(frames/s, client CPU ms per frame, decoder-held share, server-idle share) of one stream."""
    from serve_bench.client import connect
    from serve_bench.pipeline import run_stream

    async with connect(url, model) as client:
        first = next(iter(client.signature_info.inputs)) if client.signature_info else "images"
        shape = client.signature_info.inputs[first].shape if client.signature_info else None
        assert shape is not None
        await client.predict({first: np.zeros((batch, *shape[1:]), np.float32)})  # warm-up at this shape
        cpu = _cpu()
        run = await run_stream(client, source, batch, in_flight)  # type: ignore[arg-type]
        cpu_ms = (_cpu() - cpu) / max(run.frames, 1) * 1000
    return run.frames_per_s, cpu_ms, run.held_seconds / run.duration, run.server_idle_seconds / run.duration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--size", default="640x360", help="clip size WxH")
    parser.add_argument("--batch-sizes", default="1,16")
    parser.add_argument("--max-in-flight", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from serve_bench.catalogue import get_spec
    from serve_bench.media import decode_video

    spec = get_spec(args.model)
    width, height = (int(v) for v in args.size.split("x"))
    models = models_dir_with([args.model])
    server = Server(models, None)
    with tempfile.TemporaryDirectory() as tmp:
        clip = Path(tmp) / "clip.mp4"
        write_clip(clip, args.frames, width, height)
        decoder_alone(clip, spec.width, spec.height)  # first open loads codecs and spins up threads: not counted
        try:
            server.wait(args.model)
            url = f"grpc://127.0.0.1:{server.grpc}"
            print(
                f"{args.model}, clip {args.frames} frames H.264 {width}x{height} -> {spec.width}x{spec.height}, "
                f"gRPC, {args.max_in_flight} batches in flight, {args.rounds} alternating rounds, medians"
            )
            print(
                "| batch | decoder fps | served fps | pipeline fps | pipeline / min | pipeline / serial "
                "| decoder held | server idle | client CPU ms/frame: decoder + served = sum | pipeline "
                "| pipeline's own |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            for batch in (int(b) for b in args.batch_sizes.split(",")):
                figures: dict[str, list[float]] = {k: [] for k in ("d", "s", "p", "held", "idle", "dc", "sc", "pc")}
                for _ in range(args.rounds):
                    fps, cpu_ms, frames = decoder_alone(clip, spec.width, spec.height)
                    figures["d"].append(fps)
                    figures["dc"].append(cpu_ms)
                    floats = [f.astype(np.float32) for f in frames]
                    fps, cpu_ms, _, _ = asyncio.run(stream_fps(url, args.model, floats, batch, args.max_in_flight))
                    figures["s"].append(fps)
                    figures["sc"].append(cpu_ms)
                    live = (f.astype(np.float32) for f in decode_video(clip, spec.width, spec.height))
                    fps, cpu_ms, held, idle = asyncio.run(stream_fps(url, args.model, live, batch, args.max_in_flight))
                    for key, value in (("p", fps), ("pc", cpu_ms), ("held", held), ("idle", idle)):
                        figures[key].append(value)
                m = {k: statistics.median(v) for k, v in figures.items()}
                d, s, p = m["d"], m["s"], m["p"]
                ideal, serial = min(d, s), 1 / (1 / d + 1 / s)
                print(
                    f"| {batch} | {d:.0f} | {s:.0f} | {p:.0f} | {p / ideal:.2f} | {p / serial:.2f} | "
                    f"{m['held']:.0%} | {m['idle']:.0%} | {m['dc']:.2f} + {m['sc']:.2f} = {m['dc'] + m['sc']:.2f} | "
                    f"{m['pc']:.2f} | {m['pc'] - m['dc'] - m['sc']:+.2f} |"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
