"""A stream as a point in points.jsonl, its figures from the load engine's analysis.

A stream's records come from the load engine's recorder (see _stream.py) and are read
by ``load.analyze`` as any load run's are, over the stream's whole span (the decoder's
start to the last features): the counts, throughput, latency with its intervals, the
one stability rule and the codec figures are load's. The point says what every point
says: the payload kind (float or jpeg), and the load mode ``stream`` (at most
``max_in_flight`` batches in flight, each sent as the frame source fills it). The
video is its ``InputSource``; what only a stream has (frames end to end, frame
latency, decoder held back, server idle, the limit) rides along as ``StreamFigures``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from serve_bench.load import LoadRun, PointSettings, analyze
from serve_bench.pipeline._stream import StreamRun
from serve_bench.stats import (
    STREAM_MODE,
    Figures,
    InputSource,
    LoadInfo,
    Percentiles,
    Point,
    StreamFigures,
    Target,
    point_key,
)

__all__ = ["STREAM_SETTINGS", "stream_figures", "stream_point"]

# A stream is judged as a load point is: the same windows and tolerance, the same rule (load/_analysis.py).
STREAM_SETTINGS = PointSettings()


def stream_figures(run: StreamRun) -> Figures:
    """The load engine's figures of one stream: every request of it counts (its warm-up request
    was sent before the stream began). Encoding happens inside the stream, per batch: the codec's
    encode figure is the mean per request."""
    encode_us = run.encode_seconds / len(run.records) * 1e6 if run.records else 0.0
    return analyze(LoadRun(list(run.records), run.started, run.ended), STREAM_MODE, STREAM_SETTINGS, encode_us)


def stream_point(
    run: StreamRun,
    *,
    target: Target,
    model: str,
    signature: str,
    payload_kind: str,
    source: InputSource | None = None,
    decoder_fps: float | None = None,
    inprocess_fps: float | None = None,
    limit: str = "",
    why: str = "",
    notes: Sequence[str] = (),
    started_at: str | None = None,
) -> Point:
    """The Point of one stream (load mode "stream", ``max_in_flight`` as its concurrency)."""
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
    return Point.measured(
        stream_figures(run),
        target=target,
        model=model,
        signature=signature,
        payload=payload_kind,
        batch_size=run.batch_size,
        load=load,
        inputs=source,
        pipeline=figures,
        key=point_key(target.name, model, signature, payload_kind, run.batch_size, load, 0),
        started_at=started_at or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        notes=(*notes, f"{payload_kind} payload; limit: {limit} ({why})" if limit else f"{payload_kind} payload"),
    )
