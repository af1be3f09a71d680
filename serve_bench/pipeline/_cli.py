"""`serve-bench pipeline VIDEO`: flags, the run, the terminal summary, points.jsonl and features.npy."""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from pathlib import Path

import numpy as np

from serve_bench.errors import UserError
from serve_bench.export import parse_batch_sizes
from serve_bench.load import PAYLOADS, check_timeout
from serve_bench.pipeline._inprocess import RUNTIME_NAMES
from serve_bench.pipeline._run import PipelineConfig, PipelineOutcome, run_pipeline
from serve_bench.runtimes import RUNTIMES, record

__all__ = ["add_pipeline_arguments", "config_from_args", "print_summary", "run_pipeline_command"]


def add_pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `serve-bench pipeline` that are its own; the CLI adds the shared ones (--url, --timeout,
    --target-name, --device, --models-dir, --run-dir) and the old names (serve_bench/_cli_args.py)."""
    parser.add_argument("video", help="a video file FFmpeg can read (mp4, avi, mkv, ...)")
    parser.add_argument("--model", default="inception_v3")
    parser.add_argument("--batch-sizes", default="1,4,16,32", help="frames per request to sweep (default 1,4,16,32)")
    parser.add_argument("--max-in-flight", default="1,2,4", help="batches outstanding to sweep (default 1,2,4)")
    parser.add_argument(
        "--payload",
        default="float",
        help="float (pixels, serving_default), jpeg (bytes, serving_bytes), or both: float,jpeg",
    )
    parser.add_argument("--max-delay-ms", type=float, default=50.0, help="send a partial batch after this wait")
    parser.add_argument("--max-frames", type=int, default=None, help="use only the first N frames")
    parser.add_argument(
        "--runtime",
        default="",
        help="what runs the model at the server (tensorflow, onnxruntime, openvino), as bench's --runtime: "
        "recorded with each point, and run in process on its exported copy for the comparison (default: not "
        "stated, recorded as such; TensorFlow runs in process)",
    )
    parser.add_argument("--no-inprocess", action="store_true", help="skip the in-process comparison")
    parser.add_argument(
        "--compare-frames", type=int, default=64, help="frames used by the in-process comparison (default 64)"
    )
    parser.add_argument(
        "--features", metavar="FILE", default=None, help="write the features, in frame order, to this .npy file"
    )


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    asked = {p.strip() for p in args.payload.split(",") if p.strip()}
    if not asked or not asked <= set(PAYLOADS):
        raise UserError(f"--payload {args.payload!r}: use float, jpeg or float,jpeg")
    payloads = tuple(p for p in PAYLOADS if p in asked)  # float first: --features gets exact pixels
    if args.max_frames is not None and args.max_frames < 1:
        raise UserError("--max-frames must be >= 1")
    if args.runtime and args.runtime not in RUNTIMES:
        raise UserError(f"--runtime {args.runtime!r}: use one of {', '.join(RUNTIMES)}, or leave it out")
    if args.runtime and record(args.runtime).converted and "jpeg" in payloads:  # serving_bytes: the SavedModel's
        raise UserError(
            f"--runtime {args.runtime} with --payload jpeg: the jpeg payload (serving_bytes) always runs on "
            "TensorFlow; use --payload float"
        )
    for flag, value, fine, requirement in (  # NaN fails each comparison, so it is refused too
        ("--timeout", args.timeout, args.timeout > 0, "a number > 0"),
        ("--compare-frames", args.compare_frames, args.compare_frames >= 1, "a whole number >= 1"),
        ("--max-delay-ms", args.max_delay_ms, 0 <= args.max_delay_ms < math.inf, "a finite number >= 0"),
    ):
        if not fine:
            raise UserError(f"{flag} must be {requirement}, got {value:g}")
    check_timeout("timeout_s", args.timeout)  # past a day gRPC's deadline overflows: every request would fail
    from serve_bench.stats import InvalidTarget, parse_target

    try:
        parse_target(args.url)
    except InvalidTarget as exc:
        raise UserError(f"--url: {exc}") from None
    return PipelineConfig(
        video=Path(args.video),
        target=args.url,
        model=args.model,
        batch_sizes=parse_batch_sizes(args.batch_sizes, "--batch-sizes"),
        max_in_flight=parse_batch_sizes(args.max_in_flight, "--max-in-flight"),
        payloads=payloads,
        max_delay_ms=args.max_delay_ms,
        max_frames=args.max_frames,
        timeout_s=args.timeout,
        name=args.target_name,
        device=args.device,
        models_dir=Path(args.models_dir),
        inprocess=not args.no_inprocess,
        compare_frames=args.compare_frames,
        keep_features=args.features is not None,
        runtime=args.runtime,
    )


def run_pipeline_command(args: argparse.Namespace) -> int:
    """Run `serve-bench pipeline`; UserError for bad input (the CLI prints it, exit 2)."""
    from serve_bench.media import probe_video
    from serve_bench.stats import ResultsWriter, choose_run_dir, collect_run_metadata

    config = config_from_args(args)
    probe_video(config.video)  # a missing or non-video file fails before a results directory is made
    out = Path(args.features) if args.features else None
    if out is not None and out.is_dir():
        raise UserError(f"--features {out} is a directory; give the .npy file to write, e.g. {out / 'features.npy'}")
    if out is not None and out.suffix != ".npy":  # np.save appends .npy: say the file it writes
        out = out.with_name(out.name + ".npy")
    if out is not None and not out.parent.is_dir():  # checked now: np.save would fail after the whole run
        raise UserError(f"--features {out}: {out.parent} is not a directory")
    run_dir = choose_run_dir(args.run_dir, "results", "pipeline")
    with ResultsWriter(run_dir) as writer:
        writer.write_run(collect_run_metadata(str(vars(args)), command="pipeline"))
        outcome = asyncio.run(
            run_pipeline(config, on_point=writer.append, on_progress=lambda text: print(text, flush=True))
        )
    print_summary(outcome)
    print(f"points: {run_dir / 'points.jsonl'}")
    if out is not None and outcome.features is not None:
        np.save(out, outcome.features)
        print(f"features: {out} {list(outcome.features.shape)} float32, in frame order")
    failed = sum(run.failed_frames for _, run in outcome.runs)
    if failed:
        print(f"warning: {failed} frames were in batches that failed; see errors in the points", file=sys.stderr)
        return 1
    return 0


def print_summary(outcome: PipelineOutcome) -> None:
    from rich.console import Console
    from rich.table import Table

    info = outcome.info
    height, width = outcome.image_size
    # piped or captured output has no width: do not let rich squeeze the table into 80 columns
    console = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=True)
    console.print(
        f"video {info.path}: {info.codec} {info.width}x{info.height}, {outcome.frames} frames decoded"
        + (f" ({outcome.skipped} damaged packets skipped)" if outcome.skipped else "")
        + f"; decoder alone {outcome.decoder_fps:.1f} fps (scaled to {width}x{height})"
    )
    if outcome.inprocess_fps:
        console.print(
            f"in-process {RUNTIME_NAMES[outcome.inprocess_runtime]}: "
            + ", ".join(f"batch {b} {fps:.1f} fps" for b, fps in outcome.inprocess_fps.items())
        )
    table = Table(title="frames through the server, end to end (decode -> features)")
    for column in (
        "payload",
        "batch",
        "in flight",
        "frames/s",
        "±",
        "frame p50 ms",
        "frame p99 ms",
        "decoder held",
        "server idle",
        "KiB/frame sent",
        "limit",
    ):
        table.add_column(column, justify="left" if column in ("payload", "limit") else "right")
    for (payload, run), point in zip(outcome.runs, outcome.points):
        latency = (run.done_at - run.ready_at) * 1000 if len(run.done_at) else np.zeros(1)
        spread = point.stability.items_spread
        table.add_row(
            payload,
            str(run.batch_size),
            str(run.max_in_flight),
            f"{run.frames_per_s:.1f}",
            f"{spread / 2:.0%}",
            f"{np.percentile(latency, 50):.0f}",
            f"{np.percentile(latency, 99):.0f}",
            f"{run.held_seconds / run.duration:.0%}",
            f"{run.server_idle_seconds / run.duration:.0%}",
            f"{run.request_bytes / max(run.frames, 1) / 1024:.1f}",
            outcome.limits.get(id(run), ""),
        )
    console.print(table)
    for note in outcome.notes:
        console.print(f"note: {note}")
    console.print(outcome.answer)
