"""The video pipeline's verdict (pipeline/_verdict.py), word for word: which part limits a stream
(limit_of) and the one-sentence answer to "how much does batching help?" (batching_answer).

The inputs are stand-ins holding only the attributes the verdict reads (a StreamRun's frames/s,
duration, idle and held seconds, request bytes; a Point's payload, batch size, items, items/s and its
interval), so each threshold is met exactly and every expected sentence is worked out by hand from the
rules in the module: decoder >= 85% of the decoder alone, idle >= 20% and above held, served >= 70% of
in-process.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from serve_bench.pipeline import batching_answer, limit_of
from serve_bench.stats import Interval


def _run(fps: float, *, idle: float = 0.0, held: float = 0.0, frames: int = 100, request_bytes: int = 0) -> Any:
    """A 10 s stream at ``fps`` frames/s with ``idle`` and ``held`` given as shares of the 10 s."""
    return SimpleNamespace(
        frames_per_s=fps,
        duration=10.0,
        server_idle_seconds=idle * 10.0,
        held_seconds=held * 10.0,
        frames=frames,
        request_bytes=request_bytes,
    )


def test_a_stream_at_85_percent_of_the_decoder_alone_is_decoder_limited():
    # 85.0 / 100.0 = 0.85 exactly: the threshold is inclusive; 84.9 is under it and falls through
    assert limit_of(_run(85.0), decoder_fps=100.0, inprocess_fps=None) == (
        "decoder",
        "85.0 fps is 85% of the decoder alone (100.0 fps)",
    )
    assert limit_of(_run(84.9), decoder_fps=100.0, inprocess_fps=None)[0] == "server or network"
    # a decoder speed of 0 (not measured) says nothing, and is not divided by
    assert limit_of(_run(85.0), decoder_fps=0.0, inprocess_fps=None)[0] == "server or network"


def test_a_server_idle_a_fifth_of_the_stream_and_more_than_the_decoder_was_held_is_decoder_limited():
    # idle 2 s of 10 = 20% (inclusive), held 1 s of 10 = 10%
    assert limit_of(_run(10.0, idle=0.2, held=0.1), None, None) == (
        "decoder",
        "the server waited for frames 20% of the time; the decoder was held back 10%",
    )
    # idle 19% is under the threshold; idle equal to held (30%, 30%) is not more than held
    assert limit_of(_run(10.0, idle=0.19, held=0.0), None, None)[0] == "server or network"
    assert limit_of(_run(10.0, idle=0.3, held=0.3), None, None)[0] == "server or network"
    # the decoder's own speed is asked first: 90 of 100 fps is decoder-limited whatever the idle time says
    assert limit_of(_run(90.0, idle=0.5), 100.0, None)[1].startswith("90.0 fps is 90% of the decoder alone")


def test_served_frames_at_70_percent_of_in_process_are_server_limited_below_network_limited():
    # 70 / 100 = 0.70 exactly: inclusive; the runtime named is the in-process one
    assert limit_of(_run(70.0), None, 100.0, runtime="ONNX Runtime") == (
        "server",
        "70.0 fps is 70% of in-process ONNX Runtime (100.0 fps) at this batch size: the model's compute",
    )
    # 35 / 100 = 35%; 100 frames sent 60,211,200 request bytes: 602,112 bytes (224 x 224 x 3 float32) a
    # frame = 588 KiB (602,112 / 1024 = 588.0)
    assert limit_of(_run(35.0, request_bytes=60_211_200), None, 100.0) == (
        "network",
        "35.0 fps is only 35% of in-process TensorFlow (100.0 fps): the time goes in moving and encoding "
        "588 KiB per frame and the serving stack",
    )
    # one frame (and none: no division by zero) carries all the request bytes: 2,048 bytes = 2 KiB
    for frames in (1, 0):
        why = limit_of(_run(0.1, frames=frames, request_bytes=2048), None, 100.0)[1]
        assert "encoding 2 KiB per frame" in why, frames
    # the idle rule comes before the in-process one
    assert limit_of(_run(70.0, idle=0.4, held=0.1), None, 100.0)[0] == "decoder"


def test_without_in_process_figures_the_limit_is_server_or_network():
    assert limit_of(_run(10.0, held=0.42), None, None, runtime="JAX") == (
        "server or network",
        "the decoder was held back 42% of the time (in-process JAX was not measured, so the model and the "
        "transfer are not told apart)",
    )
    assert limit_of(_run(10.0, held=0.42), None, 0.0)[0] == "server or network"  # 0 fps measured: not measured


def _point(
    batch: int,
    fps: float,
    *,
    payload: str = "float",
    limit: str = "server",
    items: int = 100,
    ci: tuple[float, float] | None = None,
    pipeline: bool = True,
) -> Any:
    """A pipeline point: frames/s is its items/s; ``pipeline`` False: a point without the pipeline's
    fields (its payload is then the point's own, its limit unknown)."""
    return SimpleNamespace(
        payload=payload if not pipeline else "ignored: the pipeline's payload is read",
        pipeline=SimpleNamespace(payload=payload, limit=limit) if pipeline else None,
        batch_size=batch,
        counts=SimpleNamespace(items=items),
        items_per_s=fps,
        throughput=SimpleNamespace(items_per_s_ci=Interval(*ci) if ci is not None else None),
    )


def test_the_batching_answer_compares_batch_16_with_unbatched_and_names_the_batched_points_limit():
    # x = 160 / 40 = 4.00; interval from the worst and best pairings: 150 / 44 = 3.41, 170 / 36 = 4.72
    points = [
        _point(1, 40.0, limit="decoder", ci=(36.0, 44.0)),
        _point(1, 30.0, limit="decoder"),  # a worse in-flight at batch 1: the best one is the base
        _point(16, 160.0, ci=(150.0, 170.0)),
        _point(16, 120.0, limit="network"),
        _point(8, 200.0),  # faster, but 16 is preferred when measured
    ]
    assert batching_answer(points) == (
        "batching 16 frames per request: 160.0 fps vs 40.0 fps unbatched (×4.00, 95% interval 3.41–4.72); "
        "the server is the limit"
    )
    # without 16 (or with another preference) the batch size whose best point is fastest: 8 at 200 fps, x 5.00
    assert batching_answer(points, prefer_batch=32) == (
        "batching 8 frames per request: 200.0 fps vs 40.0 fps unbatched (×5.00; too few requests for an "
        "interval); the server is the limit"
    )
    assert batching_answer(points, prefer_batch=8).startswith("batching 8 frames per request: 200.0 fps")
    # prefer_batch is only a preference among the others: the base batch (1) is never compared with itself
    assert batching_answer(points, prefer_batch=1).startswith("batching 8 frames per request")


def test_without_batch_1_the_smallest_batch_is_the_base_and_the_answer_says_at_which():
    # 90 / 60 = 1.50
    points = [_point(4, 90.0, limit="network"), _point(2, 60.0), _point(16, 90.0, items=0)]
    assert batching_answer(points) == (
        "batching 4 frames per request: 90.0 fps vs 60.0 fps at batch 2 (×1.50; too few requests for an "
        "interval); the network is the limit"
    )


def test_the_float_payload_is_compared_when_measured_else_the_first_points():
    jpeg = [_point(1, 10.0, payload="jpeg"), _point(16, 50.0, payload="jpeg")]
    floats = [_point(1, 20.0), _point(16, 100.0)]
    assert batching_answer(jpeg + floats).startswith("batching 16 frames per request: 100.0 fps vs 20.0 fps")
    assert batching_answer(jpeg).startswith("batching 16 frames per request: 50.0 fps vs 10.0 fps")
    # a point written without the pipeline's fields: its own payload, an unknown limit
    bare = [_point(1, 10.0, payload="jpeg", pipeline=False), _point(16, 50.0, payload="jpeg", pipeline=False)]
    assert batching_answer(bare).endswith("); the unknown is the limit")
    assert batching_answer(bare).startswith("batching 16 frames per request: 50.0 fps vs 10.0 fps")
    # an empty limit is unknown too
    assert batching_answer([_point(1, 10.0), _point(2, 20.0, limit="")]).endswith("the unknown is the limit")


def test_one_batch_size_or_no_frames_gives_no_comparison():
    assert batching_answer([_point(4, 50.0, limit="decoder"), _point(4, 40.0)]) == (
        "batch 4: 50.0 fps (no other batch size measured); the decoder is the limit"
    )
    assert batching_answer([]) == "no frames were processed; nothing to compare"
    # one point alone, of a payload other than float
    assert batching_answer([_point(1, 12.0, payload="jpeg")]) == (
        "batch 1: 12.0 fps (no other batch size measured); the server is the limit"
    )
    assert batching_answer([_point(1, 0.0, items=0)]) == "no frames were processed; nothing to compare"
    # the other batch's points carry no frames: only batch 1 counts
    assert batching_answer([_point(1, 10.0), _point(16, 0.0, items=0)]).startswith("batch 1: 10.0 fps (no other")


def test_the_ratio_is_infinite_over_a_zero_fps_base_and_has_no_interval_from_one_at_zero():
    # a base with frames but 0.0 items/s (a zero-length window): the gain is infinite, not a crash
    text = batching_answer([_point(1, 0.0), _point(16, 100.0)])
    assert "(×inf;" in text
    # the interval needs both points' and a base interval above 0: 100 / (0 .. 10) has no upper bound
    for base_ci in ((0.0, 10.0), (-1.0, 10.0)):
        text = batching_answer([_point(1, 5.0, ci=base_ci), _point(16, 100.0, ci=(90.0, 110.0))])
        assert "(×20.00; too few requests for an interval)" in text, base_ci
    text = batching_answer([_point(1, 5.0, ci=(4.0, 6.0)), _point(16, 100.0)])
    assert "too few requests for an interval" in text
    # a base interval reaching below 1 fps is still an interval: 90 / 1.5 = 60.00, 110 / 0.5 = 220.00
    text = batching_answer([_point(1, 1.0, ci=(0.5, 1.5)), _point(16, 100.0, ci=(90.0, 110.0))])
    assert "(×100.00, 95% interval 60.00–220.00)" in text
    # 90 / 6 = 15.00, 110 / 4 = 27.50
    text = batching_answer([_point(1, 5.0, ci=(4.0, 6.0)), _point(16, 100.0, ci=(90.0, 110.0))])
    assert "(×20.00, 95% interval 15.00–27.50)" in text
