"""What limits a stream, and the one-sentence answer to "how much does batching help?"."""

from __future__ import annotations

from collections.abc import Sequence

from serve_bench.pipeline._stream import StreamRun

__all__ = ["LIMITS", "batching_answer", "limit_of"]

LIMITS = ("decoder", "server", "network", "server or network")

# The stream reaches the decoder's own speed: nothing downstream can be the limit.
DECODER_SHARE = 0.85
# The server sat idle for more of the stream than the decoder was held back: frames came too slowly.
IDLE_SHARE = 0.20
# Served frames/s below this share of in-process TensorFlow's: the time goes in moving and encoding
# requests (and the serving stack), not in the model.
COMPUTE_SHARE = 0.70


def limit_of(run: StreamRun, decoder_fps: float | None, inprocess_fps: float | None) -> tuple[str, str]:
    """(limit, why) for one stream: decoder, server, network, or "server or network"."""
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
                f"{fps:.1f} fps is {share:.0%} of in-process TensorFlow ({inprocess_fps:.1f} fps) "
                f"at this batch size: the model's compute"
            )
        return "network", (
            f"{fps:.1f} fps is only {share:.0%} of in-process TensorFlow ({inprocess_fps:.1f} fps): "
            f"the time goes in moving and encoding {run.request_bytes / max(run.frames, 1) / 1024:.0f} "
            f"KiB per frame and the serving stack"
        )
    return "server or network", (
        f"the decoder was held back {held:.0%} of the time (in-process TensorFlow was not "
        f"measured, so the model and the transfer are not told apart)"
    )


def _best(runs: Sequence[tuple[str, StreamRun]], batch: int, payload: str) -> StreamRun | None:
    matching = [r for p, r in runs if p == payload and r.batch_size == batch and r.frames]
    return max(matching, key=lambda r: r.frames_per_s) if matching else None


def batching_answer(runs: Sequence[tuple[str, StreamRun]], limits: dict[int, str], *, prefer_batch: int = 16) -> str:
    """ "batching 16 frames per request: N fps vs M fps unbatched (×R); the X is the limit".

    ``runs`` are (payload, run); ``limits`` maps id(run) to its limit. The float payload is
    preferred (what a pipeline sends without extra work); each batch size at its best in-flight.
    """
    payloads = [p for p, _ in runs]
    payload = "float" if "float" in payloads else (payloads[0] if payloads else "float")
    batches = sorted({r.batch_size for p, r in runs if p == payload and r.frames})
    if not batches:
        return "no frames were processed; nothing to compare"
    base = _best(runs, 1, payload) if 1 in batches else _best(runs, batches[0], payload)
    assert base is not None
    others = [b for b in batches if b != base.batch_size]
    if not others:
        limit = limits.get(id(base), "unknown")
        return (
            f"batch {base.batch_size}: {base.frames_per_s:.1f} fps (no other batch size measured); "
            f"the {limit} is the limit"
        )
    batch = prefer_batch if prefer_batch in others else max(others, key=lambda b: _best(runs, b, payload).frames_per_s)  # type: ignore[union-attr]
    top = _best(runs, batch, payload)
    assert top is not None
    ratio = top.frames_per_s / base.frames_per_s if base.frames_per_s else float("inf")
    unbatched = "unbatched" if base.batch_size == 1 else f"at batch {base.batch_size}"
    return (
        f"batching {batch} frames per request: {top.frames_per_s:.1f} fps vs {base.frames_per_s:.1f} fps "
        f"{unbatched} (×{ratio:.2f}{_ratio_range(top, base)}); the {limits.get(id(top), 'unknown')} is the limit"
    )


def _ratio_range(top: StreamRun, base: StreamRun) -> str:
    """The ratio's spread: frames/s of each stream in its thirds (equal frame counts), worst and best pairing."""
    from serve_bench.pipeline._points import stream_stability

    top_rates = [w.items_per_s for w in stream_stability(top).windows]
    base_rates = [w.items_per_s for w in stream_stability(base).windows]
    if not top_rates or not base_rates or min(base_rates) <= 0:
        return ""
    return f", {min(top_rates) / max(base_rates):.2f}–{max(top_rates) / min(base_rates):.2f} across the streams' thirds"
