"""What limits a stream, and the one-sentence answer to "how much does batching help?"."""

from __future__ import annotations

from collections.abc import Sequence

from serve_bench.pipeline._stream import StreamRun
from serve_bench.stats import Point

__all__ = ["LIMITS", "batching_answer", "limit_of"]

LIMITS = ("decoder", "server", "network", "server or network")

# The stream reaches the decoder's own speed: nothing downstream can be the limit.
DECODER_SHARE = 0.85
# The server sat idle for more of the stream than the decoder was held back: frames came too slowly.
IDLE_SHARE = 0.20
# Served frames/s below this share of in-process TensorFlow's: the time goes in moving and encoding
# requests (and the serving stack), not in the model.
COMPUTE_SHARE = 0.70


def limit_of(
    run: StreamRun, decoder_fps: float | None, inprocess_fps: float | None, runtime: str = "TensorFlow"
) -> tuple[str, str]:
    """(limit, why) for one stream: decoder, server, network, or "server or network"; ``runtime`` names what
    ran the model in process (the same runtime as the server's)."""
    fps = run.frames_per_s
    idle = run.server_idle_seconds / run.duration
    held = run.held_seconds / run.duration
    if decoder_fps and fps >= DECODER_SHARE * decoder_fps:
        return "decoder", f"{fps:.1f} fps is {fps / decoder_fps:.0%} of the decoder alone ({decoder_fps:.1f} fps)"
    if idle >= IDLE_SHARE and idle > held:
        return "decoder", (f"the server waited for frames {idle:.0%} of the time; the decoder was held back {held:.0%}")
    if inprocess_fps:
        share = fps / inprocess_fps
        if share >= COMPUTE_SHARE:
            return "server", (
                f"{fps:.1f} fps is {share:.0%} of in-process {runtime} ({inprocess_fps:.1f} fps) "
                f"at this batch size: the model's compute"
            )
        return "network", (
            f"{fps:.1f} fps is only {share:.0%} of in-process {runtime} ({inprocess_fps:.1f} fps): "
            f"the time goes in moving and encoding {run.request_bytes / max(run.frames, 1) / 1024:.0f} "
            f"KiB per frame and the serving stack"
        )
    return "server or network", (
        f"the decoder was held back {held:.0%} of the time (in-process {runtime} was not "
        f"measured, so the model and the transfer are not told apart)"
    )


def _best(points: Sequence[Point], batch: int, payload: str) -> Point | None:
    matching = [p for p in points if _payload(p) == payload and p.batch_size == batch and p.counts.items]
    return max(matching, key=lambda p: p.items_per_s) if matching else None


def _payload(point: Point) -> str:
    return point.pipeline.payload if point.pipeline is not None else point.payload


def batching_answer(points: Sequence[Point], *, prefer_batch: int = 16) -> str:
    """ "batching 16 frames per request: N fps vs M fps unbatched (×R, 95% interval L–H); the X is the limit".

    ``points`` are the pipeline's points: frames/s is their items/s (load's analysis), the limit
    their ``pipeline.limit``. The float payload is preferred (what a pipeline sends without extra
    work); each batch size at its best in-flight.
    """
    payloads = [_payload(p) for p in points]
    payload = "float" if "float" in payloads else (payloads[0] if payloads else "float")
    batches = sorted({p.batch_size for p in points if _payload(p) == payload and p.counts.items})
    if not batches:
        return "no frames were processed; nothing to compare"
    base = _best(points, 1, payload) if 1 in batches else _best(points, batches[0], payload)
    assert base is not None
    others = [b for b in batches if b != base.batch_size]
    if not others:
        return (
            f"batch {base.batch_size}: {base.items_per_s:.1f} fps (no other batch size measured); "
            f"the {_limit(base)} is the limit"
        )
    batch = prefer_batch if prefer_batch in others else max(others, key=lambda b: _best(points, b, payload).items_per_s)  # type: ignore[union-attr]
    top = _best(points, batch, payload)
    assert top is not None
    ratio = top.items_per_s / base.items_per_s if base.items_per_s else float("inf")
    unbatched = "unbatched" if base.batch_size == 1 else f"at batch {base.batch_size}"
    return (
        f"batching {batch} frames per request: {top.items_per_s:.1f} fps vs {base.items_per_s:.1f} fps "
        f"{unbatched} (×{ratio:.2f}{_ratio_range(top, base)}); the {_limit(top)} is the limit"
    )


def _limit(point: Point) -> str:
    return (point.pipeline.limit if point.pipeline is not None else "") or "unknown"


def _ratio_range(top: Point, base: Point) -> str:
    """The ratio's spread from each point's 95% interval of items/s (the analysis' bootstrap), worst and
    best pairing; without an interval on either (too few requests) the answer says so."""
    high_ci, low_ci = top.throughput.items_per_s_ci, base.throughput.items_per_s_ci
    if high_ci is None or low_ci is None or low_ci.low <= 0:
        return "; too few requests for an interval"
    return f", 95% interval {high_ci.low / low_ci.high:.2f}–{high_ci.high / low_ci.low:.2f}"
