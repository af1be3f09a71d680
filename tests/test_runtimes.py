"""The same model on TensorFlow, ONNX Runtime and OpenVINO (issue 20): converted, checked equal, served.

Random weights and random pixels throughout (no weights can be downloaded here): equality of
features does not depend on what the weights mean.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from serve_bench import export, runtimes
from serve_bench.cli import main
from serve_bench.client import connect
from serve_bench.runtimes import RECORDS
from serve_bench.servers import LocalServerProcess
from tests.conftest import require_runtime

# the converted runtimes that run in this process beside TensorFlow (the jax runtime needs Keras on JAX, a
# process of its own: tests/test_runtime_jax.py)
CONVERTED = tuple(r for r in runtimes.CONVERTED_RUNTIMES if RECORDS[r].runner is not None)


def _images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 255, size=(n, 64, 64, 3)).astype(np.float32)


def _facts(models_dir):
    return export.read_metadata(models_dir / "tiny" / "1")


def test_tinys_arithmetic_counted_by_hand(models_dir):
    """tiny: conv 3x3x3 (27 terms), conv 3x3x8 (72), global average over 15x15 (225: 64 -> 31 -> 15
    with two valid stride-2 3x3 convolutions), dense over 16 inputs: 4 summing layers, at most 225
    terms; so float32 allows 4 * sqrt(4 * 225) * 2**-24 = 120 * 2**-24 of the features' range."""
    facts = _facts(models_dir)
    assert (facts["summing_layers"], facts["max_summed_terms"]) == (4, 225)
    assert export.feature_tolerance(4, 225) == pytest.approx(120 * 2.0**-24)


def test_inception_v3s_tolerance_separates_float32_from_halved_precision(inception_dir):
    """InceptionV3's tolerance sits between what float32 runtimes differ by (3e-7 measured for ONNX
    Runtime and OpenVINO f32) and what halved precision costs (5e-4 with float16 weights, 4e-3 with
    bfloat16 inference, measured on this machine's AVX512-BF16 CPU): it must catch both."""
    facts = export.read_metadata(inception_dir / "inception_v3" / "1")
    # 94 convolutions, 9 average pools and the global one; a 3x3 convolution over 448 channels
    assert (facts["summing_layers"], facts["max_summed_terms"]) == (104, 4032)
    tolerance = export.feature_tolerance(facts["summing_layers"], facts["max_summed_terms"])
    assert 1e-6 < tolerance < 5e-4


@pytest.mark.parametrize("runtime", CONVERTED)
def test_every_runtime_answers_as_tensorflow(models_dir, tf, runtime):
    """The converted copy, run in this process, gives TensorFlow's features for images the export's own
    check never saw, within the float32 tolerance; the check's figures are recorded beside it."""
    require_runtime(runtime)
    path = export.converted_model_path(models_dir, runtime, "tiny", 1)
    recorded = json.loads((path.parent / "conversion.json").read_text())
    facts = _facts(models_dir)
    tolerance = export.feature_tolerance(facts["summing_layers"], facts["max_summed_terms"])
    assert recorded["tolerance"] == tolerance and 0 <= recorded["max_error"] <= tolerance

    images = _images(8, seed=31)
    signature = tf.saved_model.load(str(models_dir / "tiny" / "1")).signatures["serving_default"]
    expected = {"features": signature(images=tf.constant(images))["features"].numpy()}
    runner = runtimes.open_runner(runtime, path, runtimes.RuntimeSettings(runtime))
    got = runner({"images": images})
    assert got["features"].shape == (8, 32) and got["features"].dtype == np.float32
    assert export.relative_difference(expected, got) <= tolerance


def test_a_lossy_conversion_is_refused_and_removed(tmp_path, monkeypatch, capsys):
    """Saved with OpenVINO's default float16 weights, tiny's features move by about 2**-11 of their
    range, far outside float32's tolerance: export names the difference and keeps no copy."""
    require_runtime("openvino")
    import openvino

    save = openvino.save_model
    monkeypatch.setattr(openvino, "save_model", lambda model, path, compress_to_fp16=True: save(model, path))
    code = main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--runtimes", "openvino"])
    out = capsys.readouterr().out
    assert code == 0  # the SavedModel is fine; the other runtimes would go on
    line = next(line for line in out.splitlines() if line.strip().startswith("openvino:"))
    assert "not converted" in line and "differ from TensorFlow's" in line and "float32 allows" in line
    assert not (tmp_path / "openvino" / "tiny" / "1").exists()
    assert (tmp_path / "tiny" / "1" / "saved_model.pb").exists()


def test_a_converter_that_fails_is_reported_and_the_others_go_on(tmp_path, monkeypatch, capsys):
    require_runtime("onnxruntime")
    require_runtime("openvino")
    import tf2onnx

    def refuse(*args, **kwargs):
        raise ValueError("Unsupported ops: Counter({'DecodeImage': 1})\nmore detail")

    monkeypatch.setattr(tf2onnx.convert, "from_function", refuse)
    models = tmp_path / "m"
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(models)]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime: not converted (tf2onnx" in out and "Unsupported ops: Counter({'DecodeImage': 1})" in out
    assert "more detail" not in out
    assert export.converted_model_path(models, "openvino", "tiny", 1).is_file()
    assert not export.converted_model_path(models, "onnxruntime", "tiny", 1).parent.exists()


@pytest.mark.parametrize("runtime", CONVERTED)
def test_a_runtime_not_installed_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys, runtime):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == runtime else find_spec(name, *a))
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--runtimes", runtime]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and runtime in err and "serve-bench[runtimes]" in err
    assert not (tmp_path / "tiny").exists()  # refused before anything was written


def test_unknown_runtime_is_one_line(tmp_path, capsys):
    assert main(["export", "tiny", "--models-dir", str(tmp_path), "--runtimes", "tensorrt"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tensorrt" in err and "onnxruntime" in err


def test_serving_a_runtime_the_version_was_not_converted_for_says_how(tmp_path, capsys):
    assert (
        main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--runtimes", "tensorflow"]) == 0
    )
    capsys.readouterr()
    args = ["serve", "--model_name", "tiny", "--model_base_path", str(tmp_path / "tiny"), "--runtime", "onnxruntime"]
    assert main([*args, "--port", "1", "--rest_api_port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "model.onnx does not exist" in err and "--runtimes onnxruntime" in err


@pytest.mark.parametrize("runtime", CONVERTED)
async def test_served_on_each_runtime_over_grpc_and_rest(models_dir, runtime):
    """``serve --runtime R`` answers with R's own numbers (bit for bit what R gives in this process, and
    not TensorFlow's), over gRPC and REST, through the same API, metadata and validation."""
    require_runtime(runtime)
    images = _images(3, seed=5)
    path = export.converted_model_path(models_dir, runtime, "tiny", 1)
    in_process = runtimes.open_runner(runtime, path, runtimes.RuntimeSettings(runtime))({"images": images})["features"]
    with LocalServerProcess(models_dir, "tiny", extra_flags=(f"--runtime={runtime}",)) as server:
        served = {}
        for url in (server.grpc_url, server.http_url):
            async with connect(url, "tiny") as client:
                served[url] = (await client.predict({"images": images}))["features"]
                signatures = await client.metadata()
                assert signatures["serving_default"].inputs["images"].shape == (-1, 64, 64, 3)
                with pytest.raises(Exception, match="images"):  # validated against the signature, as before
                    await client.predict({"images": images[:, :32]})
    tf_server = LocalServerProcess(models_dir, "tiny")
    with tf_server:
        async with connect(tf_server.grpc_url, "tiny") as client:
            on_tensorflow = (await client.predict({"images": images}))["features"]
    np.testing.assert_array_equal(served[server.grpc_url], in_process)
    np.testing.assert_array_equal(served[server.http_url], in_process)
    assert not np.array_equal(in_process, on_tensorflow), f"{runtime} gave TensorFlow's exact bits"
    scale = float(np.max(np.abs(on_tensorflow)))
    assert math.isfinite(scale) and np.max(np.abs(in_process - on_tensorflow)) / scale < 1e-5


def _on(runtime: str, target: str, batch: int, latency_ms: float):
    import dataclasses

    from tests._points import make_point

    point = make_point(target, "cpu", batch, latency_ms * 1000)
    return dataclasses.replace(point, target=dataclasses.replace(point.target, runtime=runtime))


@pytest.mark.parametrize(
    ("onnx_b8_ms", "lever"),
    [
        # TensorFlow: batch 1 at 100 ms (10 images/s), batch 8 at 500 ms (16): batching gives 1.6x.
        # ONNX Runtime's best 8 / 0.4 s = 20 images/s: 1.25x over TensorFlow's best, less than batching
        (400, "batching (1.60× on tensorflow) moved throughput more than the runtime (onnxruntime, 1.25×)."),
        # 8 / 0.25 s = 32 images/s: 2x over TensorFlow's 16, more than batching's 1.6x
        (250, "the runtime (onnxruntime, 2.00×) moved throughput more than batching (1.60× on tensorflow)."),
    ],
)
def test_the_verdict_compares_runtimes_and_names_the_larger_lever(onnx_b8_ms, lever):
    from serve_bench.report import analyze_run

    points = [
        _on("tensorflow", "tf", 1, 100),
        _on("tensorflow", "tf", 8, 500),
        _on("onnxruntime", "onnx", 1, 50),
        _on("onnxruntime", "onnx", 8, onnx_b8_ms),
    ]
    verdict = analyze_run(points).verdict
    assert (
        "Runtimes on cpu at their best, over tensorflow (tf b8 c1: 16.0 images/s, p99 600.0 ms): onnxruntime" in verdict
    )
    assert f"Which lever on cpu: {lever}" in verdict


def test_one_runtime_makes_no_runtime_verdict():
    from serve_bench.report import analyze_run

    verdict = analyze_run([_on("tensorflow", "a", 1, 100), _on("tensorflow", "b", 8, 500)]).verdict
    assert "Runtimes on" not in verdict and "Which lever" not in verdict


async def test_a_sweep_across_runtimes_records_them_and_its_report_compares_them(models_dir, tmp_path):
    """Three launched local servers that differ only by runtime: every point records the runtime it ran
    on (target and server_config), and the report's verdict compares them."""
    for runtime in CONVERTED:
        require_runtime(runtime)
    from serve_bench.report import build_report
    from serve_bench.stats import read_points
    from serve_bench.sweep import parse_spec, run_sweep

    runtimes = ("tensorflow", *CONVERTED)
    targets = "".join(f'[[targets]]\nname = "{r}"\nlaunch = "local"\nruntime = "{r}"\n' for r in runtimes)
    spec = parse_spec(
        f"""
model = "tiny"
models_dir = "{models_dir}"
batch_sizes = [1, 4]
[load]
concurrency = [1]
[durations]
warmup_s = 0.2
min_duration_s = 0.5
until_stable = false
{targets}""",
        "runtimes.toml",
    )
    await run_sweep(spec, tmp_path / "run")
    points = read_points(tmp_path / "run")
    assert len(points) == 6
    for point in points:
        assert point.target.runtime == point.target.name
        assert ("runtime", point.target.name) in point.server_config
    logs = {log.parent.name: log.read_text() for log in tmp_path.rglob("serve-bench-local.log")}
    assert set(logs) == set(runtimes)  # each launched server says what ran serving_default
    for runtime in CONVERTED:
        assert f"serving_default runs on runtime={runtime}" in logs[runtime]
    assert "serving_default runs on" not in logs["tensorflow"]
    verdict = build_report(tmp_path / "run", models_dir=models_dir, plots=False).analysis.verdict
    assert "Runtimes on cpu at their best, over tensorflow" in verdict
    assert "onnxruntime" in verdict and "openvino" in verdict and "Which lever on cpu:" in verdict


def test_a_version_4_point_reads_with_no_runtime_stated():
    from serve_bench.stats import SCHEMA_VERSION
    from serve_bench.stats._schema import point_from_data, point_to_data

    point = _on("openvino", "ov", 1, 10)
    data = point_to_data(point)
    assert data["schema_version"] == SCHEMA_VERSION == 5 and data["target"]["runtime"] == "openvino"
    old = {**data, "schema_version": 4, "target": {k: v for k, v in data["target"].items() if k != "runtime"}}
    migrated = point_from_data(old)
    assert migrated.target.runtime == "" and migrated.schema_version == SCHEMA_VERSION
    assert point_from_data(data) == point


def test_a_converted_model_that_does_not_run_is_reported_and_the_others_go_on(tmp_path, monkeypatch, capsys):
    """Converted, but the runtime cannot run it (here: ONNX Runtime refuses to load): reported with its
    reason, no copy kept, OpenVINO's conversion still made."""
    require_runtime("onnxruntime")
    require_runtime("openvino")
    import onnxruntime

    def refuse(*args, **kwargs):
        raise RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH : Load model failed\ndetail")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime: not converted (tf2onnx" in out and "does not run in onnxruntime" in out
    assert "INVALID_GRAPH : Load model failed" in out and "detail" not in out
    assert not export.converted_model_path(tmp_path, "onnxruntime", "tiny", 1).parent.exists()
    assert export.converted_model_path(tmp_path, "openvino", "tiny", 1).is_file()


def test_re_exporting_a_version_never_leaves_the_old_copies_beside_it(tmp_path, capsys):
    """--force replaces version 1: its ONNX and OpenVINO copies are gone before the new SavedModel is in
    place, so a copy converted from the old weights can never be served beside the new ones."""
    require_runtime("onnxruntime")
    models = str(tmp_path)
    assert main(["export", "tiny", "--weights", "random", "--models-dir", models, "--runtimes", "onnxruntime"]) == 0
    assert export.converted_model_path(tmp_path, "onnxruntime", "tiny", 1).is_file()
    args = ["export", "tiny", "--weights", "random", "--models-dir", models, "--version", "1", "--force"]
    assert main([*args, "--runtimes", "tensorflow"]) == 0
    assert not export.converted_model_path(tmp_path, "onnxruntime", "tiny", 1).parent.exists()


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ('launch = "local"\nruntime = ""', ["runtime must be one of"]),
        ('launch = "local"\nruntime = "tensorrt"', ["runtime must be one of", "tensorrt"]),
        ('launch = "triton"\nruntime = ""', ["runtime must be one of"]),  # launched: it runs what is named
        ('url = "grpc://x:1"\nruntime = "openvino"\n[[targets]]\nname = "u"\nurl = "grpc://y:1"', ["jpeg"]),
    ],
)
def test_bad_runtime_keys_are_one_line_errors(target, words):
    from serve_bench.errors import UserError
    from serve_bench.sweep import parse_spec

    with pytest.raises(UserError) as caught:
        parse_spec(
            f'model = "tiny"\nbatch_sizes = [1]\npayloads = ["float", "jpeg"]\n[[targets]]\nname = "t"\n{target}\n',
            "s.toml",
        )
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_a_slower_runtime_is_never_called_the_lever():
    from serve_bench.report import analyze_run

    points = [
        _on("tensorflow", "tf", 1, 100),
        _on("tensorflow", "tf", 8, 500),
        _on("openvino", "ov", 1, 125),
        _on("openvino", "ov", 8, 625),  # 12.8 images/s at best: 0.8x TensorFlow's 16
    ]
    verdict = analyze_run(points).verdict
    assert "openvino 0.80×" in verdict
    assert "Which lever on cpu: no runtime was faster than tensorflow beyond the noise." in verdict


def _threads() -> int:
    return int(
        next(
            line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("Threads:")
        ).split()[1]
    )


@pytest.mark.parametrize("asked", [0, 3])
def test_onnx_runtimes_thread_count_is_what_its_pool_really_holds(models_dir, asked):
    """ORT does not report its intra-op pool; serve-bench states it, and this counts the threads the
    session started. A pool of N makes N-1 threads, the caller being one (onnxruntime/core/common/threadpool.cc,
    ThreadPool::ThreadPool: "threads_to_create = degree_of_parallelism - 1"); with 0 asked, N is the
    physical cores (onnxruntime/core/platform/posix/env.cc, GetNumPhysicalCpuCores)."""
    require_runtime("onnxruntime")
    path = export.converted_model_path(models_dir, "onnxruntime", "tiny", 1)
    import onnxruntime  # noqa: F401  (its import starts nothing; counted before the session)

    before = _threads()
    runner = runtimes.open_runner("onnxruntime", path, runtimes.RuntimeSettings("onnxruntime", intra_op_threads=asked))
    started = _threads() - before
    stated = int(runner.in_effect["intra_op_threads"].split()[0])
    assert started == stated - 1, (runner.in_effect, started)  # the count stated is the pool ORT made
    if asked:
        assert stated == asked
