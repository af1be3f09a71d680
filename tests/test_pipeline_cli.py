"""`serve-bench pipeline VIDEO`: a generated clip through the local server (tiny model), end to end,
plus the stream measurements on an in-memory transport and every bad input."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from serve_bench.cli import build_parser
from serve_bench.cli import main as serve_bench_main
from serve_bench.client import Client, FakeTransport, InvalidArgument, fake_client
from serve_bench.errors import UserError
from serve_bench.media import decode_video
from serve_bench.pipeline import LIMITS, batching_answer, limit_of, run_pipeline_command
from serve_bench.pipeline._points import stream_point
from serve_bench.pipeline._stream import busy_seconds, run_stream
from serve_bench.stats import OK, RequestRecord, Target, read_points
from tests._clips import corrupt_mjpeg_frame, write_clip, write_zero_frame_clip
from tests._servers import local_server
from tests.conftest import require_runtime

FRAMES = 30


def pipeline(argv: list[str]) -> int:
    """`serve-bench pipeline ARGV` through the CLI's parser and the function it dispatches to (a UserError is raised,
    not printed)."""
    parser, _ = build_parser()
    return run_pipeline_command(parser.parse_args(["pipeline", *argv]))


@pytest.fixture(scope="module")
def server(models_dir):
    with local_server(models_dir) as running:
        yield running


def test_pipeline_end_to_end(server, models_dir, reference, tmp_path, capsys):
    """`serve-bench pipeline` on a generated clip: all frames processed in order, features equal to
    in-process TensorFlow on the same frames, frames/s consistent with the points' request counts.
    Without --runtime the points say no runtime (as bench's do): the server may run any."""
    clip = write_clip(tmp_path / "clip.mp4", codec="libx264", frames=FRAMES, size=(97, 61))
    out, run = tmp_path / "features.npy", tmp_path / "run"
    code = serve_bench_main(
        [
            "pipeline",
            str(clip),
            "--url",
            server.grpc_url,
            "--model",
            "tiny",
            "--batch-sizes",
            "1,4",
            "--max-in-flight",
            "1,2",
            "--payload",
            "float,jpeg",
            "--max-delay-ms",
            "10000",
            "--models-dir",
            str(models_dir),
            "--run-dir",
            str(run),
            "--features",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0

    features = np.load(out)
    frames = np.stack(list(decode_video(clip, 64, 64))).astype(np.float32)
    assert features.shape == (FRAMES, 32)
    assert np.allclose(features, reference(frames), atol=1e-5)  # every frame, in frame order

    points = read_points(run)
    assert len(points) == 2 * 2 * 2
    seen = set()
    for point in points:
        figures = point.pipeline
        assert figures is not None and point.inputs is not None
        assert point.payload == figures.payload and point.load.mode == "stream"  # values the schema declares
        assert point.target.runtime == ""  # not stated: a label never guessed
        assert point.signature == {"float": "serving_default", "jpeg": "serving_bytes"}[point.payload]
        seen.add((figures.payload, point.batch_size, point.load.concurrency))
        # full batches (max delay 10 s), the last one partial
        requests = math.ceil(FRAMES / point.batch_size)
        assert (point.counts.requests, point.counts.ok, point.counts.items) == (requests, requests, FRAMES)
        assert figures.frames == FRAMES and figures.failed_frames == 0
        assert point.throughput.items_per_s * point.duration_s == pytest.approx(FRAMES, rel=1e-3)
        assert point.throughput.requests_per_s * point.duration_s == pytest.approx(requests, rel=1e-3)
        assert figures.frames_per_s == pytest.approx(point.throughput.items_per_s)
        assert figures.limit in LIMITS and figures.decoder_alone_fps and figures.inprocess_fps
        assert 0 <= figures.decoder_held_s <= figures.duration_s and 0 <= figures.server_idle_s <= figures.duration_s
        assert figures.frame_latency.count == FRAMES
        assert (
            point.inputs.kind,
            point.inputs.codec,
            point.inputs.width,
            point.inputs.height,
            point.inputs.frames,
            point.inputs.count,
        ) == ("video", "h264", 97, 61, FRAMES, FRAMES)
        per_frame = {"float": 64 * 64 * 3 * 4, "jpeg": point.inputs.mean_bytes}[figures.payload]
        assert figures.request_bytes >= FRAMES * per_frame  # tensors/bytes plus the request's framing
    assert seen == {(p, b, m) for p in ("float", "jpeg") for b in (1, 4) for m in (1, 2)}
    assert "batching 4 frames per request:" in printed and "is the limit" in printed
    assert "served features match in-process TensorFlow" in printed


def test_corrupt_frame_mid_file_is_skipped_and_counted(server, tmp_path):
    clip = write_clip(tmp_path / "clip.avi", codec="mjpeg", frames=12, size=(65, 47))
    corrupt_mjpeg_frame(clip, 5)
    out = tmp_path / "f.npy"
    code = pipeline(
        [
            str(clip),
            "--url",
            server.rest_url,
            "--model",
            "tiny",
            "--batch-sizes",
            "4",
            "--max-in-flight",
            "2",
            "--no-inprocess",
            "--run-dir",
            str(tmp_path / "run"),
            "--features",
            str(out),
        ]
    )
    assert code == 0
    (point,) = read_points(tmp_path / "run")
    assert point.inputs is not None and point.inputs.skipped == 1 and point.counts.items == 11
    assert np.load(out).shape == (11, 32)


def test_rest_and_variable_frame_rate(server, tmp_path):
    clip = write_clip(
        tmp_path / "vfr.mkv", codec="mjpeg", frames=8, size=(64, 48), pts=[0, 10, 300, 310, 320, 900, 1500, 1501]
    )
    code = pipeline(
        [
            str(clip),
            "--url",
            server.rest_url,
            "--model",
            "tiny",
            "--batch-sizes",
            "3",
            "--max-in-flight",
            "1",
            "--payload",
            "jpeg,float",
            "--max-delay-ms",
            "10000",
            "--no-inprocess",
            "--run-dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    points = read_points(tmp_path / "run")
    assert [p.target.name for p in points] == ["pipeline-float", "pipeline-jpeg"]  # float first, one target each
    for point in points:
        assert point.counts.items == 8 and point.counts.requests == 3 and point.target.protocol == "rest"


def test_compare_reads_two_pipeline_runs(server, tmp_path):
    from serve_bench.report import compare_runs

    clip = write_clip(tmp_path / "clip.mp4", frames=8, size=(64, 48))
    for run in ("a", "b"):
        assert (
            pipeline(
                [
                    str(clip),
                    "--url",
                    server.grpc_url,
                    "--model",
                    "tiny",
                    "--batch-sizes",
                    "2",
                    "--max-in-flight",
                    "1",
                    "--no-inprocess",
                    "--run-dir",
                    str(tmp_path / run),
                ]
            )
            == 0
        )
    result = compare_runs(tmp_path / "a", tmp_path / "b")
    assert len(result.rows) == 1 and not result.only_a and not result.only_b


def test_in_process_on_another_runtime_runs_its_exported_copy(models_dir, tf):
    """--runtime onnxruntime|openvino: the in-process side runs that runtime's copy (bit for bit what the
    runtime gives, and not TensorFlow's numbers), so a served runtime is compared with itself."""
    from serve_bench import export, runtimes
    from serve_bench.pipeline._inprocess import InProcessModel
    from tests.conftest import require_runtime

    frames = np.random.default_rng(3).uniform(0, 255, size=(6, 64, 64, 3)).astype(np.float32)
    on_tensorflow = InProcessModel(models_dir / "tiny" / "1").load().features(frames, 4)
    for runtime in ("onnxruntime", "openvino"):  # the jax runtime needs a process of its own (Keras on JAX)
        require_runtime(runtime)
        path = export.converted_model_path(models_dir, runtime, "tiny", 1)
        runner = runtimes.open_runner(runtime, path, runtimes.RuntimeSettings(runtime))
        expected = runner({"images": frames})["features"]
        got = InProcessModel(models_dir / "tiny" / "1", runtime).load().features(frames, 6)
        np.testing.assert_array_equal(got, expected)
        assert not np.array_equal(got, on_tensorflow), runtime


def test_a_pipeline_against_a_server_on_onnx_runtime_compares_with_onnx_runtime(models_dir, tmp_path, capsys):
    """The served runtime is recorded in every point, and the in-process comparison, its frames/s and the
    features check name and run the same runtime: the server's overhead for that runtime."""
    from serve_bench.servers import LocalServerProcess

    require_runtime("onnxruntime")
    clip = write_clip(tmp_path / "clip.mp4", frames=12, size=(64, 48))
    with LocalServerProcess(models_dir, "tiny", extra_flags=("--runtime=onnxruntime",)) as onnx_server:
        code = serve_bench_main(
            [
                "pipeline",
                str(clip),
                "--url",
                onnx_server.grpc_url,
                "--model",
                "tiny",
                "--batch-sizes",
                "1,4",
                "--max-in-flight",
                "1",
                "--runtime",
                "onnxruntime",
                "--models-dir",
                str(models_dir),
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "in-process ONNX Runtime: batch 1 " in printed and "served features match in-process ONNX Runtime" in printed
    points = read_points(tmp_path / "run")
    assert len(points) == 2 and {p.target.runtime for p in points} == {"onnxruntime"}
    assert all(
        any(n.startswith("in-process ONNX Runtime ran with runtime onnxruntime") for n in p.notes) for p in points
    )
    assert all(p.pipeline is not None and p.pipeline.inprocess_fps for p in points)


def test_in_process_onnx_runtime_and_openvino_need_no_tensorflow(models_dir, monkeypatch):
    """The in-process side on ONNX Runtime or OpenVINO runs their copy alone: it is measured where TensorFlow
    is not installed, and TensorFlow's absence is said only when TensorFlow is what would run."""
    from serve_bench.media import VideoInfo
    from serve_bench.pipeline import _run

    monkeypatch.setattr(_run, "tensorflow_installed", lambda: False)
    frames = np.random.default_rng(0).uniform(0, 255, (4, 64, 64, 3)).astype(np.float32)
    for runtime in ("onnxruntime", "openvino", ""):
        if runtime:
            require_runtime(runtime)
        config = _run.PipelineConfig(Path("clip.mp4"), "grpc://127.0.0.1:1", "tiny", (2,), models_dir=models_dir)
        config = dataclasses.replace(config, runtime=runtime)
        outcome = _run.PipelineOutcome(VideoInfo("clip.mp4", "h264", 64, 64, 4, 25.0, 0.16), 4, 0, (64, 64), 1.0, {})
        model = _run._inprocess(config, frames, outcome, lambda line: None)
        if runtime:
            assert model is not None and outcome.inprocess_runtime == runtime and 2 in outcome.inprocess_fps
            (said,) = outcome.notes  # what ran, in the runtime's own words, for the points' notes
            setting = "intra_op_threads" if runtime == "onnxruntime" else "INFERENCE_PRECISION_HINT f32"
            assert (
                said.startswith(f"in-process {_run.RUNTIME_NAMES[runtime]} ran with runtime {runtime} ")
                and setting in said
            )
        else:
            (note,) = outcome.notes
            assert model is None and note == "in-process TensorFlow: not measured (TensorFlow is not installed here)"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--batch-sizes", "0"], "--batch-sizes"),
        (["--batch-sizes", "a,b"], "--batch-sizes"),
        (["--max-in-flight", ""], "--max-in-flight"),
        (["--payload", "png"], "--payload"),
        (["--max-frames", "0"], "--max-frames"),
        (["--max-delay-ms", "nan"], "^--max-delay-ms must be a finite number >= 0, got nan$"),  # a batcher ValueError
        # each names its own flag (one line named all three, whichever was wrong)
        (["--max-delay-ms", "-5"], "^--max-delay-ms must be a finite number >= 0, got -5$"),
        (["--compare-frames", "0"], "^--compare-frames must be a whole number >= 1, got 0$"),
        (["--timeout", "0"], "^--timeout must be a number > 0, got 0$"),
        (["--timeout", "1e10"], "timeout_s must be at most 86400"),  # gRPC's deadline overflowed: every frame failed
        (["--url", "ftp://host"], "unknown scheme"),
        (["--runtime", "tensorrt"], "--runtime 'tensorrt': use one of tensorflow, onnxruntime, openvino, jax, or"),
        (["--runtime", "openvino", "--payload", "float,jpeg"], "serving_bytes\\) always runs on TensorFlow"),
    ],
)
def test_bad_flags(tmp_path, argv, message):
    clip = write_clip(tmp_path / "clip.mp4", frames=2, size=(64, 48))
    with pytest.raises(UserError, match=message):
        pipeline([str(clip), "--model", "tiny", *argv])


def test_features_naming_a_directory_is_refused_and_the_file_written_is_the_one_said(server, tmp_path, capsys):
    """np.save appends .npy: `--features DIR` wrote DIR.npy beside it and said DIR; `--features out` wrote
    out.npy and said out."""
    clip = write_clip(tmp_path / "clip.mp4", frames=4, size=(64, 48))
    argv = [str(clip), "--url", server.grpc_url, "--model", "tiny", "--no-inprocess", "--batch-sizes", "1"]
    with pytest.raises(UserError, match="is a directory"):
        pipeline([*argv, "--max-in-flight", "1", "--features", str(tmp_path), "--run-dir", str(tmp_path / "r0")])
    assert not (tmp_path / "r0").exists() and not tmp_path.with_name(tmp_path.name + ".npy").exists()
    with pytest.raises(UserError, match=r"clip\.mp4 is not a directory"):  # np.save failed after the whole run
        pipeline([*argv, "--features", str(clip / "x.npy"), "--run-dir", str(tmp_path / "r0")])
    assert not (tmp_path / "r0").exists()
    assert (
        pipeline(
            [*argv, "--max-in-flight", "1", "--features", str(tmp_path / "out"), "--run-dir", str(tmp_path / "r1")]
        )
        == 0
    )
    assert f"features: {tmp_path / 'out.npy'} [4, " in capsys.readouterr().out
    assert (tmp_path / "out.npy").is_file()


def test_bad_videos(server, tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("not frames\n" * 100)
    cases = [
        (tmp_path / "missing.mp4", "no such video"),
        (text, "not a video FFmpeg can read"),
        (write_zero_frame_clip(tmp_path / "empty.avi"), "no decodable video frames"),
    ]
    for index, (path, message) in enumerate(cases):
        run = tmp_path / f"run{index}"
        with pytest.raises(UserError, match=message):
            pipeline([str(path), "--url", server.grpc_url, "--model", "tiny", "--no-inprocess", "--run-dir", str(run)])
        if index < 2:  # found out before anything is written
            assert not run.exists()


def test_without_run_dir_the_run_goes_where_every_command_puts_a_new_run(server, tmp_path, monkeypatch):
    """results/pipeline-<time>, named by stats.choose_run_dir as sweep's, tune's and import-locust's are."""
    import serve_bench.stats._run_dir as run_dir

    monkeypatch.setattr(run_dir, "stamped_run_dir", lambda root, name: Path(root) / f"{name}-now")
    monkeypatch.chdir(tmp_path)
    clip = write_clip(tmp_path / "clip.mp4", frames=4, size=(64, 48))
    argv = ["--url", server.grpc_url, "--model", "tiny", "--no-inprocess", "--batch-sizes", "2", "--max-in-flight", "1"]
    assert pipeline([str(clip), *argv]) == 0
    assert len(read_points(tmp_path / "results" / "pipeline-now")) == 1


def test_unknown_model_is_a_user_error(server, tmp_path):
    clip = write_clip(tmp_path / "clip.mp4", frames=2, size=(64, 48))
    with pytest.raises(UserError, match="nope"):
        pipeline([str(clip), "--url", server.grpc_url, "--model", "nope", "--run-dir", str(tmp_path / "run")])


# --- the stream's measurements, on an in-memory transport ------------------------------


def _fake_client(
    delay: float, fail_batches: set[int] | None = None, answered: threading.Semaphore | None = None
) -> tuple[Client, FakeTransport]:
    """A client on the in-memory transport; ``answered`` is released once per request answered."""
    from serve_bench.client._fake import image_signature

    calls = {"n": 0}

    def handler(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        calls["n"] += 1
        if answered is not None:
            answered.release()
        if fail_batches and calls["n"] in fail_batches:
            raise InvalidArgument("bad batch", status="INVALID_ARGUMENT")
        images = inputs["images"]
        return {"features": images.reshape(len(images), -1)[:, :2].copy()}

    transport = FakeTransport(handler, delay=delay, signatures=image_signature(4, 4, 2))
    client = fake_client(transport)
    return client, transport


def _frames(count: int, pause: float = 0.0, after: threading.Semaphore | None = None):
    """``count`` frames, each taking ``pause`` seconds to decode (the decoder's own time, measured by the
    tests); with ``after``, a frame is decoded only once the one before it was answered (one release each)."""
    for index in range(count):
        if after is not None and index:
            assert after.acquire(timeout=30), f"frame {index - 1} was never answered"
        if pause:
            time.sleep(pause)
        yield np.full((4, 4, 3), index, np.float32)


def test_slow_server_holds_the_decoder_back():
    """Server 20 ms per batch, frames free: the source spends most of the stream blocked."""
    client, transport = _fake_client(delay=0.02)
    run = asyncio.run(run_stream(client, _frames(24), 2, 2, keep_features=True))
    assert run.frames == 24 and transport.peak_in_flight == 2
    assert run.features is not None and list(run.features[:, 0]) == list(range(24))  # in order
    # 12 batches, 2 at a time, 20 ms each: >= 120 ms of which the source waits nearly all
    assert run.held_seconds > 0.5 * run.duration
    assert run.server_idle_seconds < 0.3 * run.duration
    assert limit_of(run, decoder_fps=None, inprocess_fps=None)[0] == "server or network"
    assert limit_of(run, None, inprocess_fps=run.frames_per_s * 1.05)[0] == "server"
    assert limit_of(run, None, inprocess_fps=run.frames_per_s * 10)[0] == "network"


def test_slow_decoder_leaves_the_server_idle():
    """Frames every 10 ms, an instant server: the server waits for frames most of the time.

    Each frame is decoded after the previous one was answered (the fake server's signal), so the
    10 ms of decoding fall where no request is in flight however slowly this machine runs the loop."""
    answered = threading.Semaphore(0)
    client, _ = _fake_client(delay=0.0, answered=answered)
    run = asyncio.run(run_stream(client, _frames(20, pause=0.01, after=answered), 1, 2))
    assert run.frames == 20
    assert run.server_idle_seconds > 0.5 * run.duration
    assert run.held_seconds < 0.2 * run.duration
    limit, why = limit_of(run, decoder_fps=None, inprocess_fps=None)
    assert limit == "decoder" and "waited for frames" in why


def test_failed_batches_are_counted_and_left_as_nan():
    client, _ = _fake_client(delay=0.0, fail_batches={2})
    run = asyncio.run(run_stream(client, _frames(6), 2, 1, keep_features=True))
    assert run.failed_frames == 2 and run.frames == 4
    assert run.features is not None and np.isnan(run.features[2:4]).all() and not np.isnan(run.features[:2]).any()
    assert [r.status for r in run.records].count("INVALID_ARGUMENT") == 1


def test_busy_seconds_is_the_union_of_requests_in_flight():
    def record(sent: float, done: float) -> RequestRecord:
        return RequestRecord(sent, sent, done, OK, 1, 0, 0.0)

    records = [record(1.0, 3.0), record(2.0, 4.0), record(6.0, 7.0), record(6.5, 6.8)]
    assert busy_seconds(records, 0.0, 10.0) == pytest.approx(4.0)
    assert busy_seconds(records, 0.0, 6.5) == pytest.approx(3.5)


def test_batching_answer_names_the_gain_and_the_limit():
    client, _ = _fake_client(delay=0.0)
    slow = asyncio.run(run_stream(client, _frames(4, pause=0.01), 1, 1))
    fast = asyncio.run(run_stream(client, _frames(16), 16, 1))
    target = Target("pipeline-float", "grpc://localhost:8500")
    points = [
        stream_point(run, target=target, model="m", signature="serving_default", payload_kind="float", limit=limit)
        for run, limit in ((slow, "decoder"), (fast, "server"))
    ]
    text = batching_answer(points)
    ratio = fast.frames_per_s / slow.frames_per_s
    # 5 requests carry no interval (the analysis' bootstrap wants 25): the answer says so; the
    # interval itself is tested in test_pipeline_engine.py
    assert text == (
        f"batching 16 frames per request: {fast.frames_per_s:.1f} fps vs {slow.frames_per_s:.1f} fps unbatched "
        f"(×{ratio:.2f}; too few requests for an interval); the server is the limit"
    )


def test_importing_the_pipeline_imports_neither_tensorflow_nor_the_server():
    import subprocess
    import sys

    code = (
        "import sys, serve_bench.pipeline, serve_bench.load; "
        "print(sorted(m for m in sys.modules if m.startswith('tensorflow') or m.startswith('serve_bench.server')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_without_a_saved_model_here_the_in_process_comparison_is_skipped_and_said(server, tmp_path, capsys):
    clip = write_clip(tmp_path / "clip.mp4", frames=6, size=(64, 48))
    empty = tmp_path / "no-models"
    empty.mkdir()
    code = pipeline(
        [
            str(clip),
            "--url",
            server.grpc_url,
            "--model",
            "tiny",
            "--batch-sizes",
            "2",
            "--max-in-flight",
            "1",
            "--models-dir",
            str(empty),
            "--run-dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    assert "in-process TensorFlow: not measured (no SavedModel under" in capsys.readouterr().out
    (point,) = read_points(tmp_path / "run")
    assert point.pipeline is not None and point.pipeline.inprocess_fps is None
    assert point.pipeline.limit in ("decoder", "server or network")  # server and network cannot be told apart


def test_bad_input_through_the_cli_is_one_line_and_exit_2(tmp_path, capsys):
    assert serve_bench_main(["pipeline", str(tmp_path / "missing.mp4"), "--model", "tiny"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("serve-bench pipeline: error: no such video:") and err.count("\n") == 1
