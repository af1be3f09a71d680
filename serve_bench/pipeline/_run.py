"""The video benchmark: decoder alone, in-process model, then every (payload, batch, in-flight) stream."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench.client import Client, ServeBenchError, connect, server_kind
from serve_bench.errors import InvalidValue, UserError, first_line
from serve_bench.load import (
    PAYLOADS,
    Declared,
    PointSettings,
    RequestCost,
    check_batch,
    image_size_of,
    signature_for_payload,
)
from serve_bench.media import DecodeCounters, MediaError, VideoInfo, decode_video, encode_jpeg, probe_video
from serve_bench.pipeline._inprocess import RUNTIME_NAMES, InProcessModel, find_saved_model, tensorflow_installed
from serve_bench.pipeline._points import stream_point
from serve_bench.pipeline._stream import StreamRun, run_stream
from serve_bench.pipeline._verdict import batching_answer, limit_of
from serve_bench.runtimes import DEFAULT_RUNTIME, missing_runtime, record
from serve_bench.stats import InputSource, LoadInfo, Point, Target

__all__ = ["PipelineConfig", "PipelineOutcome", "check_stream_bounds", "run_pipeline", "video_features"]


@dataclass(frozen=True)
class PipelineConfig:
    video: Path
    target: str
    model: str
    batch_sizes: tuple[int, ...] = (1, 4, 16, 32)
    max_in_flight: tuple[int, ...] = (1, 2, 4)
    payloads: tuple[str, ...] = ("float",)
    max_delay_ms: float = 50.0
    max_frames: int | None = None
    timeout_s: float = PointSettings.timeout_s  # the one default, bench's and the specs'
    name: str = "pipeline"
    device: str = "cpu"
    models_dir: Path | None = Path("exported_models")  # for the in-process comparison
    inprocess: bool = True
    compare_frames: int = 64  # frames for the in-process comparison (InceptionV3 is ~10 fps on 2 cores)
    jpeg_quality: int = 90
    keep_features: bool = False  # features of the first stream, in frame order
    runtime: str = ""  # what runs the model at the server, as stated ("" not stated): recorded with each point

    @property
    def inprocess_runtime(self) -> str:
        """What runs the model in process for the comparison: the stated runtime, else TensorFlow."""
        return self.runtime or DEFAULT_RUNTIME


@dataclass
class PipelineOutcome:
    info: VideoInfo
    frames: int  # decodable frames used
    skipped: int  # damaged packets skipped
    image_size: tuple[int, int]  # (H, W) the model takes
    decoder_fps: float
    inprocess_fps: dict[int, float]
    runs: list[tuple[str, StreamRun]] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    limits: dict[int, str] = field(default_factory=dict)  # id(run) -> limit
    features: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)
    inprocess_runtime: str = DEFAULT_RUNTIME  # what ran the model in process

    @property
    def answer(self) -> str:
        return batching_answer(self.points)


def _image_size(client: Client) -> tuple[int, int]:
    """(H, W) the model takes; the frames are scaled to it, so a model that does not say is refused."""
    size = image_size_of(client.signature_info, fallback=(0, 0))
    if 0 in size:
        raise UserError(
            f"{client.url}: model {client.model!r} does not say its input size (signature "
            f"{client.signature!r} has no [-1, H, W, 3] input); cannot scale the frames"
        )
    return size


def _float_frames(
    video: Path, max_frames: int | None, size: tuple[int, int], counters: DecodeCounters
) -> Iterator[np.ndarray]:
    height, width = size
    for frame in decode_video(video, width, height, counters=counters, max_frames=max_frames):
        yield frame.astype(np.float32)  # the signature takes float32 pixels 0-255


def _as_string_item(data: bytes) -> np.ndarray:
    item = np.empty((), dtype=object)  # 0-d: predict_stream stacks items into a [n] string batch
    item[()] = data
    return item


async def video_features(
    client: Client,
    video: str | Path,
    *,
    batch_size: int = 16,
    max_in_flight: int = 4,
    max_delay_ms: float = 50.0,
    max_frames: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> StreamRun:
    """Features of every decodable frame of ``video``, in frame order (``run.features``), from an open client.

    Frames are decoded on a worker thread and scaled to the model's input by FFmpeg; at
    most ``max_in_flight`` batches are outstanding. The StreamRun also says how long it
    took, how long the decoder was held back and how long the server waited.
    """
    probe_video(video)  # one clear error for a missing or non-video file before anything starts
    counters = DecodeCounters()
    run = await run_stream(
        client,
        _float_frames(Path(video), max_frames, _image_size(client), counters),
        batch_size,
        max_in_flight,
        max_delay_ms=max_delay_ms,
        keep_features=True,
        on_progress=on_progress,
    )
    if counters.decoded == 0:
        raise MediaError(f"{video}: no decodable video frames")
    return run


async def _connect(config: PipelineConfig, signature: str) -> Client:
    try:
        return await connect(config.target, config.model, signature, timeout=config.timeout_s)
    except ServeBenchError as exc:
        raise UserError(str(exc)) from exc


# the pipeline's flag for each parameter a bound names
_PIPELINE_FLAGS = {"batch_size": "--batch-sizes", "concurrency": "--max-in-flight"}


def check_stream_bounds(config: PipelineConfig, client: Client) -> None:
    """Refuse a --batch-sizes x --max-in-flight whose float frames this process cannot hold in flight, or that
    the server declared it refuses (load.check_batch, the bounds of bench and sweep): UserError naming the flag.
    What a batch costs comes from requests of one frame and of two, encoded; the frames are the video's,
    not drawn (JPEG streams are smaller than their float frames)."""
    height, width = _image_size(client)
    name = next(iter(client.signature_info.inputs)) if client.signature_info else "images"
    # 255.0 per pixel: the widest a pixel's JSON gets (a black frame's "0.0" would under-count a REST body)
    one, two = (client.prepare({name: np.full((n, height, width, 3), 255, np.float32)}).nbytes for n in (1, 2))
    cost = RequestCost(one, two, height * width * 3 * 4, synthetic_float=False)
    declared = Declared(**(getattr(client.transport, "declared_limits", None) or {}))
    protocol = Target(config.name, config.target, config.device).protocol
    for batch in config.batch_sizes:
        for in_flight in config.max_in_flight:
            load = LoadInfo("stream", concurrency=in_flight)
            try:
                check_batch(protocol, config.model, batch, load, PointSettings(), cost, declared)
            except InvalidValue as exc:
                raise UserError(str(exc.named(_PIPELINE_FLAGS.get(exc.name, exc.name)))) from None


async def run_pipeline(
    config: PipelineConfig,
    on_point: Callable[[Point], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> PipelineOutcome:
    """Measure the video pipeline; each point goes to ``on_point`` as soon as it ends."""
    say = on_progress or (lambda text: None)
    for payload in config.payloads:
        if payload not in PAYLOADS:
            raise UserError(f"unknown payload {payload!r}; use {' or '.join(PAYLOADS)}")
    info = probe_video(config.video)
    float_client = await _connect(config, signature_for_payload("float", None))
    try:
        size = _image_size(float_client)
        check_stream_bounds(config, float_client)  # before a frame is decoded (docs/bounds.md)
        height, width = size
        # 1. The decoder alone: every frame, scaled by FFmpeg, nothing else running.
        counters = DecodeCounters()
        kept: list[np.ndarray] = []
        started = time.perf_counter()
        for frame in decode_video(config.video, width, height, counters=counters, max_frames=config.max_frames):
            if len(kept) < config.compare_frames:
                kept.append(frame)
        decoder_seconds = time.perf_counter() - started
        if counters.decoded == 0:
            why = f" ({counters.skipped} damaged packets skipped: {counters.errors[0]})" if counters.skipped else ""
            raise MediaError(f"{config.video}: no decodable video frames{why}")
        decoder_fps = counters.decoded / max(decoder_seconds, 1e-9)
        outcome = PipelineOutcome(info, counters.decoded, counters.skipped, size, decoder_fps, {})
        say(f"decoder alone: {counters.decoded} frames at {decoder_fps:.1f} fps (scaled to {width}x{height})")
        if counters.skipped:
            outcome.notes.append(
                f"{counters.skipped} damaged packets skipped while decoding (first: {counters.errors[0]})"
            )
        compare = np.stack(kept)
        inprocess = _inprocess(config, compare, outcome, say)
        kind, version = server_kind(float_client)
        for payload in config.payloads:
            # one target per payload, so `report` draws float and jpeg as two curves
            target = Target(
                f"{config.name}-{payload}",
                config.target,
                config.device,
                server=kind,
                server_version=version,
                runtime=config.runtime,
            )
            await _sweep_payload(config, payload, float_client, target, outcome, inprocess, compare, on_point, say)
    finally:
        await float_client.aclose()
    return outcome


def _inprocess(
    config: PipelineConfig, compare: np.ndarray, outcome: PipelineOutcome, say: Callable[[str], None]
) -> InProcessModel | None:
    runtime = config.inprocess_runtime
    what = f"in-process {RUNTIME_NAMES[runtime]}"
    if not config.inprocess:
        outcome.notes.append(f"{what}: not measured (--no-inprocess)")
        return None
    if not record(runtime).converted:  # the SavedModel, on TensorFlow: export's door says whether it is here
        absent = None if tensorflow_installed() else "TensorFlow is not installed here"
    else:
        absent = missing_runtime(runtime)  # ONNX Runtime and OpenVINO run their copy without TensorFlow
    if absent:
        outcome.notes.append(f"{what}: not measured ({absent})")
        return None
    path = find_saved_model(config.models_dir, config.model) if config.models_dir else None
    if path is None:
        outcome.notes.append(
            f"{what}: not measured (no SavedModel under {config.models_dir}/{config.model}; pass --models-dir)"
        )
        return None
    try:
        model = InProcessModel(path, runtime).load()
    except Exception as exc:
        outcome.notes.append(f"{what}: not measured (loading {path} failed: {first_line(exc)})")
        return None
    outcome.inprocess_runtime = runtime
    if model.in_effect:
        outcome.notes.append(f"{what} ran with " + ", ".join(f"{k} {v}" for k, v in model.in_effect.items()))
    for batch in config.batch_sizes:
        outcome.inprocess_fps[batch] = model.frames_per_s(compare, batch)
        say(f"{what}, batch {batch}: {outcome.inprocess_fps[batch]:.1f} fps on {len(compare)} frames")
    return model


async def _sweep_payload(
    config: PipelineConfig,
    payload: str,
    float_client: Client,
    target: Target,
    outcome: PipelineOutcome,
    inprocess: InProcessModel | None,
    compare: np.ndarray,
    on_point: Callable[[Point], None] | None,
    say: Callable[[str], None],
) -> None:
    height, width = outcome.image_size
    signature = signature_for_payload(payload, None)
    client = float_client if payload == "float" else await _connect(config, signature)
    notes: list[str] = []
    encoded: list[bytes] = []
    try:
        if payload == "jpeg":
            counters = DecodeCounters()
            started = time.perf_counter()
            encoded = [
                encode_jpeg(f, config.jpeg_quality)
                for f in decode_video(config.video, width, height, counters=counters, max_frames=config.max_frames)
            ]
            per_frame = (time.perf_counter() - started) / max(len(encoded), 1)
            mean_bytes = float(np.mean([len(e) for e in encoded]))
            notes.append(
                f"jpeg: frames decoded, scaled to {width}x{height} and encoded once before the timed "
                f"region (quality {config.jpeg_quality}, {mean_bytes / 1024:.1f} KiB and "
                f"{per_frame * 1000:.1f} ms each, decoding included); the stream replays them from memory"
            )
        else:
            mean_bytes = float(height * width * 3 * 4)
        source = InputSource(
            "video",
            str(config.video),
            outcome.frames,
            mean_bytes,
            outcome.info.codec,
            outcome.info.width,
            outcome.info.height,
            outcome.info.frames,
            outcome.skipped,
            tuple(n for n in outcome.notes if "damaged" in n),
        )
        for batch in config.batch_sizes:
            for in_flight in config.max_in_flight:
                first = (
                    [_as_string_item(e) for e in encoded[:batch]]
                    if payload == "jpeg"
                    else [f.astype(np.float32) for f in compare[:batch]]
                )
                info = client.signature_info
                name = next(iter(info.inputs)) if info else {"float": "images", "jpeg": "image_bytes"}[payload]
                try:  # warm-up: the server's first call at a new batch shape is slow; not counted
                    await client.predict({name: np.stack(first)})
                except ServeBenchError as exc:
                    raise UserError(f"the warm-up request (batch {batch}, {payload}) failed: {exc}") from exc
                keep = config.keep_features and outcome.features is None  # float first: exact pixels
                frames: Any = (
                    (_as_string_item(e) for e in encoded)
                    if payload == "jpeg"
                    else _float_frames(config.video, config.max_frames, outcome.image_size, DecodeCounters())
                )
                run = await run_stream(
                    client,
                    frames,
                    batch,
                    in_flight,
                    max_delay_ms=config.max_delay_ms,
                    keep_features=keep or (inprocess is not None and not outcome.runs),
                )
                _check_against_inprocess(run, inprocess, compare, outcome)
                if keep:
                    outcome.features = run.features
                    if payload == "jpeg":
                        outcome.notes.append(
                            "--features: features of the JPEG-encoded frames (lossy), as no float payload was measured"
                        )
                limit, why = limit_of(
                    run,
                    outcome.decoder_fps if payload == "float" else None,
                    outcome.inprocess_fps.get(batch),
                    RUNTIME_NAMES[config.inprocess_runtime],
                )
                outcome.runs.append((payload, run))
                outcome.limits[id(run)] = limit
                point = stream_point(
                    run,
                    target=target,
                    model=config.model,
                    signature=signature,
                    payload_kind=payload,
                    source=source,
                    decoder_fps=outcome.decoder_fps,
                    inprocess_fps=outcome.inprocess_fps.get(batch),
                    limit=limit,
                    why=why,
                    notes=[
                        *notes,
                        *(n for n in outcome.notes if n.startswith("in-process")),  # what ran there, or why not
                        f"one warm-up request of batch {batch} sent first, not counted",
                    ],
                )
                outcome.points.append(point)
                say(f"{payload} batch {batch} in-flight {in_flight}: {run.frames_per_s:.1f} fps; limit: {limit}")
                if on_point:
                    on_point(point)
    finally:
        if client is not float_client:
            await client.aclose()


def _check_against_inprocess(
    run: StreamRun, inprocess: InProcessModel | None, compare: np.ndarray, outcome: PipelineOutcome
) -> None:
    """Once: the served features of the first frames must equal the in-process runtime's."""
    if inprocess is None or run.features is None or any("served features" in n for n in outcome.notes):
        return
    count = min(len(compare), len(run.features))
    expected = inprocess.features(compare[:count], max(run.batch_size, 1))
    diff = float(np.max(np.abs(run.features[:count] - expected))) if count else 0.0
    scale = float(np.max(np.abs(expected))) if count else 0.0
    agree = np.allclose(run.features[:count], expected, rtol=1e-4, atol=1e-4 * max(scale, 1.0))
    outcome.notes.append(
        f"served features {'match' if agree else 'DIFFER FROM'} in-process {RUNTIME_NAMES[outcome.inprocess_runtime]} "
        "on the "
        f"first {count} frames (max |diff| {diff:.2g}, largest feature {scale:.3g})"
    )
