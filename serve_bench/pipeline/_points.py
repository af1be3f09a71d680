"""A stream as a point in points.jsonl: payload "video", load mode "stream" (at most N batches in flight)."""

from __future__ import annotations

import datetime as _dt
from collections import Counter

import numpy as np

from serve_bench.pipeline._stream import StreamRun
from serve_bench.stats import (
    OK,
    ClientView,
    Codec,
    Counts,
    InputSource,
    Latency,
    LoadInfo,
    Percentiles,
    Point,
    Stability,
    StreamFigures,
    Target,
    Throughput,
    Window,
    encode,
    histogram_of,
    point_key,
)

__all__ = ["STREAM_MODE", "VIDEO_PAYLOAD", "stream_point", "stream_stability"]

STREAM_MODE = "stream"
VIDEO_PAYLOAD = "video"
WINDOWS = 3
TOLERANCE = 0.10


def stream_stability(run: StreamRun, windows: int = WINDOWS) -> Stability:
    """Frames/s and mean frame latency in ``windows`` consecutive slices of the stream holding equal
    frame counts: how steady the stream was from start to end."""
    done, ready = run.done_at, run.ready_at
    if len(done) < windows:
        return Stability(stable=False, tolerance=TOLERANCE, enough_requests=False)
    result = []
    lower = run.started
    for index in np.array_split(np.arange(len(done)), windows):
        upper = float(done[index[-1]])
        result.append(
            Window(
                len(index),
                float(len(index) / max(upper - lower, 1e-9)),
                float(np.mean(done[index] - ready[index]) * 1e6),
            )
        )
        lower = upper

    def spread(values: list[float]) -> float:
        mean = float(np.mean(values))
        return float((max(values) - min(values)) / mean) if mean > 0 else 0.0

    items, latency = spread([w.items_per_s for w in result]), spread([w.mean_latency_us for w in result])
    return Stability(
        stable=max(items, latency) <= TOLERANCE,
        tolerance=TOLERANCE,
        windows=tuple(result),
        items_spread=items,
        latency_spread=latency,
        enough_requests=len(run.records) >= windows,
    )


def stream_point(
    run: StreamRun,
    *,
    target: Target,
    model: str,
    signature: str,
    payload_kind: str,
    source: InputSource,
    decoder_fps: float | None,
    inprocess_fps: float | None,
    limit: str,
    why: str,
    notes: list[str],
    started_at: str | None = None,
) -> Point:
    """The Point for one stream (payload "video", load mode "stream" with max_in_flight as concurrency);
    the pipeline's own figures ride along as ``StreamFigures`` and the video as ``InputSource``."""
    ok = [r for r in run.records if r.status == OK]
    histogram = histogram_of((r.done - r.sent) * 1e6 for r in ok)
    errors = Counter(r.status for r in run.records if r.status != OK)
    load = LoadInfo(STREAM_MODE, concurrency=run.max_in_flight)
    figures = StreamFigures(
        frames=run.frames,
        failed_frames=run.failed_frames,
        frames_per_s=run.frames_per_s,
        max_in_flight=run.max_in_flight,
        frame_latency=Percentiles.of_values((run.done_at - run.ready_at) * 1e6),
        decoder_held_s=round(run.held_seconds, 4),
        server_idle_s=round(run.server_idle_seconds, 4),
        request_bytes=run.request_bytes,
        response_bytes=run.response_bytes,
        encode_s=round(run.encode_seconds, 4),
        decoder_alone_fps=decoder_fps,
        inprocess_fps=inprocess_fps,
        limit=limit,
        limit_why=why,
        payload=payload_kind,
        duration_s=round(run.duration, 6),
    )
    decode_mean = float(np.mean([r.decode_seconds for r in ok]) * 1e6) if ok else 0.0
    requests = max(len(run.records), 1)
    return Point(
        target=target,
        model=model,
        signature=signature,
        payload=VIDEO_PAYLOAD,
        batch_size=run.batch_size,
        load=load,
        duration_s=round(run.duration, 6),
        counts=Counts.of(len(run.records), len(ok), run.frames, errors),
        throughput=Throughput(requests_per_s=len(ok) / run.duration, items_per_s=run.frames_per_s),
        latency=Latency(due=Percentiles.of(histogram), histogram=encode(histogram)),
        stability=stream_stability(run),
        client=ClientView(),
        # encoding is inside the stream here (the pipeline pays it per batch): the mean per request
        codec=Codec(
            encode_once_us=round(run.encode_seconds / requests * 1e6, 1),
            decode_mean_us=round(decode_mean, 1),
            request_bytes=round(run.request_bytes / requests),
        ),
        inputs=source,
        pipeline=figures,
        key=point_key(target.name, model, signature, VIDEO_PAYLOAD, run.batch_size, load, 0),
        started_at=started_at or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        notes=(*notes, f"{payload_kind} payload; limit: {limit} ({why})"),
    )
