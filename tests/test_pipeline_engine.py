"""The video pipeline measures through the one engine: load's recorder writes its records, load's
analysis turns them into its figures, and its points hold values the results schema declares.

Each test feeds the pipeline's path (``stream_point``) and the load engine's (``analyze`` of a
``LoadRun``) the same records and compares what comes out, figure by figure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import numpy as np
import pytest

from serve_bench.client import FakeTransport, Unavailable, fake_client
from serve_bench.client._fake import image_signature
from serve_bench.load import LoadRun, PointSettings, analyze
from serve_bench.pipeline import batching_answer
from serve_bench.pipeline._points import stream_point
from serve_bench.pipeline._stream import StreamRun, run_stream
from serve_bench.stats import (
    LOAD_MODES,
    OK,
    PAYLOAD_KINDS,
    SCHEMA_VERSION,
    Figures,
    InputSource,
    RequestRecord,
    ResultsFileError,
    ResultsWriter,
    Target,
    read_points,
)
from serve_bench.stats._schema import point_from_data, point_to_data

START = 100.0
ENCODE_S = 0.0004  # per request


def _stream(
    batch: int, requests: int, span_s: float, *, slow_from: int | None = None, failed: frozenset[int] = frozenset()
) -> StreamRun:
    """A stream of ``requests`` batches sent evenly over ``span_s``; from request ``slow_from`` on, each
    takes three times as long; the requests numbered in ``failed`` answer UNAVAILABLE."""
    records = []
    step = span_s / requests
    for i in range(requests):
        sent = START + 0.005 + i * step
        latency = (0.020 + 0.001 * (i % 7)) * (3 if slow_from is not None and i >= slow_from else 1)
        ok = i not in failed
        records.append(
            RequestRecord(
                sent,
                sent,
                sent + latency,
                OK if ok else "UNAVAILABLE",
                batch,
                batch * 1200 + 40,
                0.0001 if ok else 0.0,
                None if ok else Unavailable,
            )
        )
    ended = max(r.done for r in records) + 0.002
    done_at = np.repeat([r.done for r in records], batch)
    ready_at = done_at - 0.03
    return StreamRun(
        batch,
        2,
        START,
        ended,
        ready_at,
        done_at,
        records,
        held_seconds=0.1,
        request_bytes=sum(r.nbytes for r in records),
        response_bytes=requests * 500,
        encode_seconds=ENCODE_S * requests,
        failed_frames=batch * len(failed),
    )


def _point(run: StreamRun, payload: str = "float", limit: str = "server"):
    return stream_point(
        run,
        target=Target(f"pipeline-{payload}", "grpc://localhost:8500"),
        model="inception_v3",
        signature={"float": "serving_default", "jpeg": "serving_bytes"}[payload],
        payload_kind=payload,
        source=InputSource("video", "clip.mp4", len(run.done_at), 1200.0, "h264", 640, 480, len(run.done_at)),
        decoder_fps=500.0,
        inprocess_fps=None,
        limit=limit,
        why="a test",
    )


def _load_figures(run: StreamRun) -> Figures:
    """What the load engine makes of the same records: a closed loop over the stream's span."""
    encode_us = run.encode_seconds / len(run.records) * 1e6
    return analyze(LoadRun(list(run.records), run.started, run.ended), "closed", PointSettings(), encode_us)


def _assert_same_figures(run: StreamRun) -> None:
    point = _point(run)
    figures = _load_figures(run)
    for field in dataclasses.fields(Figures):
        if field.name != "notes":
            assert getattr(point, field.name) == getattr(figures, field.name), field.name
    assert point.notes[: len(figures.notes)] == figures.notes  # the analysis' notes first, the pipeline's after
    # the pipeline's own end-to-end figure agrees with load's throughput
    assert point.pipeline is not None and point.pipeline.frames_per_s == pytest.approx(point.throughput.items_per_s)


def test_the_pipeline_and_load_make_the_same_figures_of_the_same_records():
    run = _stream(batch=4, requests=120, span_s=3.0, failed=frozenset({10, 50, 90}))  # one in each third
    _assert_same_figures(run)
    point = _point(run)
    assert (point.counts.requests, point.counts.ok, point.counts.items) == (120, 117, 117 * 4)
    assert point.counts.errors_by_status() == {"UNAVAILABLE": 3}
    # enough requests and time for load's bootstrap intervals and its stability windows
    assert point.throughput.items_per_s_ci is not None and point.latency.p99_ci is not None
    assert len(point.stability.windows) == PointSettings().windows and point.stability.enough_requests
    assert point.stability.stable
    assert point.codec.encode_once_us == pytest.approx(ENCODE_S * 1e6)


def test_an_unsteady_stream_is_judged_by_the_one_stability_rule():
    run = _stream(batch=8, requests=90, span_s=2.5, slow_from=60)  # the last third three times slower
    _assert_same_figures(run)
    stability = _point(run).stability
    assert not stability.stable and stability.latency_spread > stability.tolerance


def test_a_recorded_stream_reads_the_same_through_both_paths():
    """Records made by the load engine's recorder inside run_stream (an in-memory server), read both ways."""
    transport = FakeTransport(
        lambda inputs: {"features": inputs["images"].reshape(len(inputs["images"]), -1)[:, :2].copy()},
        delay=0.001,
        signatures=image_signature(4, 4, 2),
    )
    client = fake_client(transport)
    frames = (np.full((4, 4, 3), i, np.float32) for i in range(40))
    run = asyncio.run(run_stream(client, frames, 4, 2))
    assert len(run.records) == 10 and all(r.status == OK and r.items == 4 for r in run.records)
    _assert_same_figures(run)
    assert _point(run).counts.items == 40


def test_the_batching_answer_carries_the_interval_of_loads_analysis():
    base = _point(_stream(batch=1, requests=100, span_s=2.0), limit="decoder")
    top = _point(_stream(batch=16, requests=100, span_s=2.0), limit="server")
    text = batching_answer([base, top])
    assert base.throughput.items_per_s_ci is not None and top.throughput.items_per_s_ci is not None
    ratio = top.items_per_s / base.items_per_s
    low = top.throughput.items_per_s_ci.low / base.throughput.items_per_s_ci.high
    high = top.throughput.items_per_s_ci.high / base.throughput.items_per_s_ci.low
    assert text == (
        f"batching 16 frames per request: {top.items_per_s:.1f} fps vs {base.items_per_s:.1f} fps unbatched "
        f"(×{ratio:.2f}, 95% interval {low:.2f}–{high:.2f}); the server is the limit"
    )
    assert low <= ratio <= high


def test_a_pipeline_results_file_validates_against_the_schema(tmp_path):
    points = [_point(_stream(batch=4, requests=60, span_s=1.5), payload) for payload in ("float", "jpeg")]
    with ResultsWriter(tmp_path) as writer:
        for point in points:
            writer.append(point)
    lines = [json.loads(line) for line in (tmp_path / "points.jsonl").read_text().splitlines()]
    assert [line["schema_version"] for line in lines] == [SCHEMA_VERSION] * 2
    assert [(line["payload"], line["load"]["mode"]) for line in lines] == [("float", "stream"), ("jpeg", "stream")]
    assert read_points(tmp_path) == points
    for point in points:
        assert point.payload in PAYLOAD_KINDS and point.load.mode in LOAD_MODES
        assert point.inputs is not None and point.inputs.kind == "video"  # where the frames came from


def test_a_version_3_pipeline_point_is_migrated():
    """Versions 2 and 3 wrote a pipeline point's payload as "video"; it reads as the payload it sent."""
    point = _point(_stream(batch=4, requests=60, span_s=1.5), "jpeg")
    old = point_to_data(point)
    old.update(schema_version=3, payload="video", key=point.key.replace("|jpeg|", "|video|"))
    migrated = point_from_data(old)
    assert migrated == point and migrated.schema_version == SCHEMA_VERSION
    assert migrated.key.split("|")[3] == "jpeg"


@pytest.mark.parametrize(
    ("change", "message"),
    [({"payload": "video"}, "payload: expected one of float, jpeg, found 'video'"), ({"mode": "burst"}, "load.mode")],
)
def test_a_current_point_with_an_undeclared_value_is_refused(tmp_path, change, message):
    data = point_to_data(_point(_stream(batch=4, requests=30, span_s=1.0)))
    if "mode" in change:
        data["load"]["mode"] = change["mode"]
    else:
        data.update(change)
    (tmp_path / "points.jsonl").write_text(json.dumps(data) + "\n")
    with pytest.raises(ResultsFileError, match=message):
        read_points(tmp_path)
