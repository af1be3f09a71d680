"""The jax runtime (Keras 3 on JAX, XLA): the GPU host's runtime, checked here on the CPU (issue 31).

Its copy is the exported Keras model's weights; Keras on JAX runs the catalogue's own layer code on
them, so its features must equal TensorFlow's within the float32 tolerance export computes for the
model. Keras picks its backend once per process and this test process holds Keras on TensorFlow, so
every jax answer here comes from another process: a served local server, or export's checking child.
Random weights and random pixels throughout (nothing can be downloaded here).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serve_bench import export
from serve_bench.catalogue import get_spec
from serve_bench.cli import main
from serve_bench.client import InvalidArgument, connect
from serve_bench.errors import UserError
from serve_bench.runtimes import JAX, features_in_child
from serve_bench.server import config_from_args
from serve_bench.server._config import build_arg_parser, compile_sizes
from serve_bench.servers import LocalServerProcess
from tests.conftest import free_port, require_runtime, serve_tinys_standalone_copy

CATALOGUE_ENV = "SERVE_BENCH_CATALOGUE"  # `make test-catalogue`: the jax copy of every catalogue model


def _images(n: int, seed: int, size: int = 64) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 255, size=(n, size, size, 3)).astype(np.float32)


def _json_from_jax_child(code: str, copy: Path) -> Any:
    """What ``code`` printed last, as JSON: run with ``copy`` as argv[1] in a child with Keras on JAX on the CPU
    (this process holds Keras on TensorFlow)."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", code, str(copy)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def _tolerance(models: Path, model: str = "tiny") -> float:
    facts = export.read_metadata(models / model / "1") or {}
    return export.feature_tolerance(facts["summing_layers"], facts["max_summed_terms"])


def _tensorflow(tf, models: Path, images: np.ndarray, model: str = "tiny") -> np.ndarray:
    signature = tf.saved_model.load(str(models / model / "1")).signatures["serving_default"]
    features: np.ndarray = signature(images=tf.constant(images))["features"].numpy()
    return features


def test_the_jax_copy_answers_as_tensorflow(jax_models, tf):
    """Images the export's own check never saw: Keras on JAX, from the copy's weights, gives TensorFlow's
    features within the float32 tolerance (tiny: 120 * 2**-24 of their range), and the check export made is
    recorded beside the copy."""
    copy = export.converted_model_path(jax_models, "jax", "tiny", 1)
    recorded = json.loads(copy.read_text())
    tolerance = _tolerance(jax_models)
    assert recorded["model"] == "tiny" and recorded["weights_file"] == "model.weights.npz"
    assert recorded["tolerance"] == tolerance and 0 <= recorded["max_error"] <= tolerance
    images = _images(6, seed=41)
    expected = {"features": _tensorflow(tf, jax_models, images)}
    got = {"features": features_in_child(copy, images)}
    assert got["features"].shape == (6, 32) and got["features"].dtype == np.float32
    assert export.relative_difference(expected, got) <= tolerance


def test_bf16_moves_the_features_and_tf32_on_a_cpu_does_not(jax_models):
    """--precision bf16 computes in bfloat16 (8-bit mantissa): the features move by far more than float32's
    tolerance, and by less than a few bfloat16 roundings of their range. tf32 only lets tensor cores take TF32
    inputs: a CPU has none, so its features are float32's."""
    copy = export.converted_model_path(jax_models, "jax", "tiny", 1)
    images = _images(4, seed=42)
    fp32 = {"features": features_in_child(copy, images, "fp32")}
    bf16 = features_in_child(copy, images, "bf16")
    tf32 = features_in_child(copy, images, "tf32")
    moved = export.relative_difference(fp32, {"features": bf16})
    assert _tolerance(jax_models) < moved < 4 * 2.0**-8 * 4
    np.testing.assert_array_equal(tf32, fp32["features"])


def test_the_precision_witness_measures_what_the_convolutions_ran_at(jax_models):
    """The floor's record of the precision a runner's convolutions actually ran at (a GPU's "tf32" is an ask
    that XLA may or may not honour): a 3x3 and a 1x1 convolution against float64. float32 (fp32, and tf32 on a
    CPU, which has no tensor cores) is off by float32 rounding alone; bf16 by bfloat16's (8-bit mantissa, a
    relative step of 2**-8), far more. What this CPU cannot show: TF32 taken on a GPU (about 1e-3)."""
    copy = export.converted_model_path(jax_models, "jax", "tiny", 1)
    code = (
        "import json, sys\nfrom pathlib import Path\nfrom serve_bench.runtimes import JaxRunner\n"
        "runners = {p: JaxRunner(Path(sys.argv[1]), 'cpu', p) for p in ('fp32', 'tf32', 'bf16')}\n"
        "print(json.dumps({p: runner.precision_witness() for p, runner in runners.items()}))"
    )
    witness = {p: max(errors.values()) for p, errors in _json_from_jax_child(code, copy).items()}
    assert witness["fp32"] < 2.0**-20 and witness["tf32"] == witness["fp32"]
    assert 2.0**-12 < witness["bf16"] < 2.0**-6


def test_a_size_made_ready_has_run_once_before_its_first_request(jax_models):
    """On a GPU, compile() builds a size's program and runs it once (a size first met in a request is not run
    twice: its call is the first run), so the first request of that size executes a
    program that has run before: on the H100, MobileNetV2's first request after a compile-only warm-up took
    4.2 s against 4.7 ms after (benchmarks/results/h100-2026-11-26/visit-1/runs/mobilenet_v2: the point's
    duration is that request's latency less the 0.3 s warm-up plus its 12 other requests'). This CPU has no
    GPU: the run is asked for (first_run=True), and the CPU's default, no run (one inference more per size, for
    little), is pinned beside it. Counted at XLA's executable calls, in a child (this process holds Keras on
    TensorFlow)."""
    copy = export.converted_model_path(jax_models, "jax", "tiny", 1)
    code = (
        "import json, sys\nfrom pathlib import Path\nimport jax, numpy as np\n"
        "from serve_bench.runtimes import JaxRunner\n"
        "runs = []\noriginal = jax.stages.Compiled.__call__\n"
        "def counted(self, *args, **kwargs):\n    runs.append(int(args[1].shape[0]))\n"
        "    return original(self, *args, **kwargs)\n"
        "jax.stages.Compiled.__call__ = counted\n"
        "runner = JaxRunner(Path(sys.argv[1]), 'cpu', 'fp32', first_run=True)\nseen = {}\n"
        "seen['first'] = runner.compile(3) > 0\nseen['compiled'] = list(runs)\n"
        "seen['again'] = runner.compile(3)\nseen['after_again'] = list(runs)\n"
        "runner({'images': np.zeros((3, 64, 64, 3), np.float32)})\nseen['served'] = list(runs)\n"
        "seen['timed'] = [sorted(runner.compile_seconds), sorted(runner.first_run_seconds)]\n"
        "runs.clear()\nrunner({'images': np.zeros((5, 64, 64, 3), np.float32)})\nseen['inside'] = list(runs)\n"
        "seen['inside_timed'] = [sorted(runner.compile_seconds), sorted(runner.first_run_seconds)]\n"
        "runs.clear()\ncpu = JaxRunner(Path(sys.argv[1]), 'cpu', 'fp32')\ncpu.compile(2)\n"
        "seen['cpu_default'] = [list(runs), sorted(cpu.compile_seconds), sorted(cpu.first_run_seconds)]\n"
        "print(json.dumps(seen))"
    )
    seen = _json_from_jax_child(code, copy)
    assert seen["first"] and seen["compiled"] == [3]  # built and run once on its own
    assert seen["again"] == 0 and seen["after_again"] == [3]  # a ready size is left alone
    assert seen["served"] == [3, 3] and seen["timed"] == [[3], [3]]
    # a size compiled inside a request runs once, the request's own call: no first run before it
    assert seen["inside"] == [5] and seen["inside_timed"] == [[3, 5], [3]]
    assert seen["cpu_default"] == [[], [2], []]  # a CPU's default: compiled, not run


async def test_served_on_jax_over_grpc_and_rest_records_what_ran(jax_models, tf, tmp_path):
    """serve --runtime jax: both APIs answer the copy's features (TensorFlow's within tolerance), validate
    against the signature as before, and a point measured against it records the runtime and what it ran
    with (device, precision, weights), as the server reports them in its identity."""
    images = _images(3, seed=43)
    expected = _tensorflow(tf, jax_models, images)
    with LocalServerProcess(jax_models, "tiny", extra_flags=("--runtime=jax",)) as server:
        served = {}
        for url in (server.grpc_url, server.http_url):
            async with connect(url, "tiny") as client:
                served[url] = (await client.predict({"images": images}))["features"]
                assert (await client.metadata())["serving_default"].inputs["images"].shape == (-1, 64, 64, 3)
                with pytest.raises(InvalidArgument, match="images"):
                    await client.predict({"images": images[:, :32]})
        bench = ["bench", server.grpc_url, "--model", "tiny", "--batch-size", "2", "--warmup", "0.2"]
        bench += ["--duration", "0.5", "--min-requests", "5", "--no-until-stable", "--run-dir", str(tmp_path)]
        assert await asyncio.to_thread(main, bench) == 0  # the CLI runs its own event loop
        log = server.log_path.read_text()
    np.testing.assert_array_equal(served[server.grpc_url], served[server.http_url])
    assert export.relative_difference({"f": expected}, {"f": served[server.grpc_url]}) <= _tolerance(jax_models)
    point = json.loads((tmp_path / "points.jsonl").read_text().splitlines()[-1])
    assert point["target"]["runtime"] == "jax"
    (said,) = [note for note in point["notes"] if note.startswith("server runtime jax")]
    assert "device cpu:0" in said and "precision fp32" in said and "weights file model.weights.npz" in said
    assert "serving_default runs on runtime=keras" in log and "compiled batch sizes 1,4" in log
    assert re.search(r"compiled batch sizes 1,4 in [0-9.]+ s \(1: [0-9.]+ s, 4: [0-9.]+ s\)", log)  # a CPU: not run
    # built before the export's warm-up records (1 and 4) replay, so none of them compiled inside itself; the
    # 3 images asked above and bench's batches of 2 did
    assert re.findall(r"compiled batch size (\d+) inside a request", log) == ["3", "2"]


async def test_serving_bytes_is_refused_naming_the_runtime(jax_models, tmp_path, capsys):
    """serving_bytes decodes JPEGs with TensorFlow's ops; a jax server loads no TensorFlow, so it says so
    rather than a bare 'signature not found'; and `bench --payload jpeg` passes on what the server said (the first
    failure of each status, a note of the point) rather than a count of FAILED_PRECONDITION alone."""
    with LocalServerProcess(jax_models, "tiny", extra_flags=("--runtime=jax",)) as server:
        async with connect(server.grpc_url, "tiny", signature="serving_bytes") as client:
            with pytest.raises(InvalidArgument, match="runs on TensorFlow, which this server does not load"):
                await client.predict({"image_bytes": np.array([b"not a jpeg"], dtype=object)})
        bench = ["bench", server.grpc_url, "--model", "tiny", "--payload", "jpeg", "--warmup", "0.1"]
        bench += ["--duration", "0.3", "--min-requests", "1", "--no-until-stable", "--run-dir", str(tmp_path)]
        assert await asyncio.to_thread(main, bench) == 1
        err = capsys.readouterr().err
        assert "no request succeeded" in err and "; first error FAILED_PRECONDITION: " in err, err
        assert "runs on TensorFlow, which this server does not load" in err, err
        assert await asyncio.to_thread(main, [*bench, "--rate", "40"]) == 1  # the open loop records it alike
        assert "; first error FAILED_PRECONDITION: " in capsys.readouterr().err
    point = json.loads((tmp_path / "points.jsonl").read_text().splitlines()[-1])
    (said,) = [note for note in point["notes"] if note.startswith("first error ")]
    assert said.startswith("first error FAILED_PRECONDITION: ") and len(said) <= 250


async def test_a_host_without_tensorflow_exports_and_serves_a_random_copy(tmp_path, without_tensorflow):
    """The GPU host has JAX and no TensorFlow: `export --runtimes jax --weights random` writes the jax copy
    alone (no SavedModel), and `serve --runtime jax` serves it with the catalogue's signature; the weights are
    random and the server says so."""
    require_runtime("jax")
    models = tmp_path / "exported_models"
    cli = [sys.executable, "-m", "serve_bench"]
    done = subprocess.run(
        [*cli, "export", "tiny", "--weights", "random", "--runtimes", "jax", "--models-dir", str(models)],
        env=without_tensorflow,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (
        not (models / "tiny").exists()
        and json.loads((models / "jax/tiny/1/conversion.json").read_text())["weights"] == "random"
    )
    refused = subprocess.run(
        [*cli, "export", "tiny", "--weights", "random", "--models-dir", str(models)],
        env=without_tensorflow,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "serve-bench[tensorflow]" in refused.stderr
    both = [*cli, "export", "tiny", "--weights", "random", "--runtimes", "tensorflow,jax", "--models-dir", str(models)]
    asked = subprocess.run(both, env=without_tensorflow, capture_output=True, text=True, timeout=300)
    assert asked.returncode == 2 and "serve-bench[tensorflow]" in asked.stderr  # TensorFlow asked for by name
    log = await serve_tinys_standalone_copy(models, "jax")
    assert "weights=random (no weights file" in log and "tensorflow" not in log.lower().split("serving_default")[0]


def _config(*flags: str, models: Path):
    args = build_arg_parser().parse_args(["--model_name", "tiny", "--model_base_path", str(models / "tiny"), *flags])
    return config_from_args(args)


class _Servable:
    def __init__(self, path: Path) -> None:
        self.path = path


def test_what_a_compiling_runtime_builds_at_load(jax_models, tmp_path):
    """compile_sizes, by hand: the flag first; a batcher's allowed_batch_sizes (it pads to them); every size
    a batcher without them forms, up to 64; past 64, powers of two and its largest (with a notice); unbatched,
    the export's warm-up sizes (1, 4 here); and nothing for a runtime that does not compile per shape."""
    servable = _Servable(jax_models / "tiny" / "1")
    batching = tmp_path / "batching.txt"
    assert compile_sizes(_config("--runtime=jax", "--compile_batch_sizes=2,8", models=jax_models), servable) == (2, 8)
    batching.write_text("max_batch_size { value: 16 }\nallowed_batch_sizes: 4\nallowed_batch_sizes: 16\n")
    flags = ("--runtime=jax", "--enable_batching", f"--batching_parameters_file={batching}")
    assert compile_sizes(_config(*flags, models=jax_models), servable) == (4, 16)
    batching.write_text("max_batch_size { value: 6 }\n")
    assert compile_sizes(_config(*flags, models=jax_models), servable) == (1, 2, 3, 4, 5, 6)
    batching.write_text("max_batch_size { value: 100 }\n")
    config = _config(*flags, models=jax_models)
    assert compile_sizes(config, servable) == (1, 2, 4, 8, 16, 32, 64, 100)
    assert any("compile on first use" in notice for notice in config.notices)
    assert compile_sizes(_config("--runtime=jax", models=jax_models), servable) == (1, 4)
    assert compile_sizes(_config(models=jax_models), servable) == ()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--device", "gpu"], "device and precision are chosen for the jax runtime"),
        (["--runtime", "jax", "--precision", "fp16"], "fp32 | tf32 | bf16"),
        (["--runtime", "jax", "--device", "tpu"], "cpu | gpu"),
    ],
)
def test_device_and_precision_refusals_are_one_line(jax_models, capsys, flags, said):
    args = ["serve", "--model_name", "tiny", "--model_base_path", str(jax_models / "tiny"), *flags]
    assert main([*args, "--port", "1", "--rest_api_port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err


def test_a_gpu_this_host_lacks_is_one_line(jax_models):
    """--device gpu where JAX finds no GPU (this CPU): the server exits 2 with one line saying so and what
    to do, before binding anything."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "serve_bench",
            "serve",
            "--model_name",
            "tiny",
            "--runtime",
            "jax",
            "--device",
            "gpu",
            "--model_base_path",
            str(jax_models / "tiny"),
            f"--port={free_port()}",
            "--rest_api_port=0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert "JAX finds no gpu here" in last and "--device cpu" in last


def test_triton_and_mlserver_refuse_the_jax_runtime(jax_models, tmp_path):
    with pytest.raises(UserError, match="local server only"):
        export.write_triton_model(jax_models, "tiny", tmp_path / "triton", runtime="jax")


@pytest.mark.skipif(not os.environ.get(CATALOGUE_ENV), reason=f"{CATALOGUE_ENV}=1 (make test-catalogue): minutes each")
@pytest.mark.parametrize("model", ["mobilenet_v2", "resnet50", "inception_v3"])
def test_every_catalogue_models_jax_copy_answers_as_tensorflow(model, tf, tmp_path):
    """Each catalogue model's jax copy, checked by export against TensorFlow's features (and kept only within
    the model's float32 tolerance), then again on images that check never saw."""
    result = export.export_model(model, weights="random", out=tmp_path, warmup_batch_sizes=(1,), runtimes=("jax",))
    (conversion,) = result.conversions
    assert conversion.ok, conversion.reason
    spec = get_spec(model)
    images = _images(2, seed=45, size=spec.height)
    expected = {"features": _tensorflow(tf, tmp_path, images, model)}
    got = {"features": features_in_child(conversion.path, images)}  # type: ignore[arg-type]
    assert export.relative_difference(expected, got) <= _tolerance(tmp_path, model)
    assert JAX.name in str(conversion.path)


async def test_compiling_ahead_does_not_wait_on_warm_up_and_a_late_compile_is_said(jax_models):
    """--compile_batch_sizes builds its programs before the model is AVAILABLE with warm-up off too (compiling
    is not a warm-up request), and a size the server did not compile ahead compiles inside its request with
    a warning in the log naming the size and the seconds, so it cannot pass unnoticed into a measurement."""
    flags = ("--runtime=jax", "--enable_model_warmup=false", "--compile_batch_sizes=2")
    with LocalServerProcess(jax_models, "tiny", extra_flags=flags) as server:
        async with connect(server.grpc_url, "tiny") as client:
            await client.predict({"images": _images(3, seed=46)})
        log = server.log_path.read_text()
    assert "compiled batch sizes 2 in" in log
    assert "compiled batch size 3 inside a request" in log
    assert "replayed" not in log  # warm-up stayed off
