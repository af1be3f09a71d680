"""ONNX Runtime where TensorFlow cannot run (issue 31: the GPU host's CPU measured by a runtime that is fast there).

The host has ONNX Runtime and onnx but no TensorFlow, and InceptionV3's weights are over what a device call carries:
here, its tf2onnx graph is written as a *skeleton* (large weights left out, each replaced by its mean and spread),
and there the onnxruntime record's ``write_random`` draws them again. These tests hold the skeleton to the graph it
came from, the drawn weights to the scale of the ones left out, and the copy to serving and to the floor with no
TensorFlow in the process.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from serve_bench import export
from serve_bench.errors import UserError
from serve_bench.runtimes import ONNXRUNTIME, RuntimeSettings, open_runner
from serve_bench.runtimes import _onnxruntime as ort_record
from serve_bench.runtimes._floor import measure_floor
from tests.conftest import require_runtime, serve_tinys_standalone_copy

# tiny's tf2onnx graph: two convolution kernels (216 and 1,152 weights) and a dense one (512), an axes constant and
# a scalar: from 200 on, the three kernels are left out and the other two travel
SMALL = 200


def _images(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 255, (count, 64, 64, 3)).astype(np.float32)


@pytest.fixture()
def skeletons(models_dir, tmp_path, monkeypatch) -> Path:
    """tiny's skeleton in a folder of its own, named by SERVE_BENCH_ONNX_SKELETONS, as on the GPU host."""
    require_runtime("onnxruntime")
    monkeypatch.setattr(ort_record, "STRIP_FROM_ELEMENTS", SMALL)
    folder = tmp_path / "skeletons"
    left_out = ort_record.strip_weights(
        export.converted_model_path(models_dir, "onnxruntime", "tiny", 1), folder / "tiny.onnx"
    )
    assert left_out >= 3
    monkeypatch.setenv(ort_record.SKELETONS_ENV, str(folder))
    return folder


def test_a_skeleton_keeps_the_graph_and_draws_weights_of_the_same_scale(models_dir, skeletons, tmp_path):
    """The copy drawn from a skeleton is the converted graph (the same nodes, every initializer's name, type and
    shape, the small ones byte for byte); each weight left out is drawn again uniform with the mean and spread of
    the one it stands for (not its values), so the features come out at the random export's scale."""
    import onnx
    from onnx import numpy_helper

    original_path = export.converted_model_path(models_dir, "onnxruntime", "tiny", 1)
    original = onnx.load(str(original_path))
    skeleton = onnx.load(str(skeletons / "tiny.onnx"))
    drawn_path = ort_record.write_random_copy(tmp_path / "models", "tiny", 1)
    drawn = onnx.load(str(drawn_path))
    assert drawn_path == ONNXRUNTIME.copy_files(tmp_path / "models", "tiny", 1)[0]
    assert [n.SerializeToString() for n in drawn.graph.node] == [n.SerializeToString() for n in original.graph.node]
    left_out = {t.name for t in skeleton.graph.initializer if not t.raw_data and not t.float_data}
    # the skeleton carries none of their bytes (a description of each, some tens of bytes, instead)
    weights_bytes = 4 * sum(int(np.prod(t.dims)) for t in skeleton.graph.initializer if t.name in left_out)
    assert (skeletons / "tiny.onnx").stat().st_size < original_path.stat().st_size - 0.9 * weights_bytes
    assert left_out and not any(prop.key.startswith("serve-bench") for prop in drawn.metadata_props)
    for before, after in zip(original.graph.initializer, drawn.graph.initializer, strict=True):
        assert (before.name, before.data_type, list(before.dims)) == (after.name, after.data_type, list(after.dims))
        was, now = numpy_helper.to_array(before).astype(np.float64), numpy_helper.to_array(after).astype(np.float64)
        if before.name not in left_out:
            assert before.SerializeToString() == after.SerializeToString()
            continue
        assert not np.array_equal(was, now)  # drawn, not carried
        spread = was.std()
        # a uniform draw of n values: its mean within 5 standard errors, its spread within 15%
        assert abs(now.mean() - was.mean()) < 5 * spread / np.sqrt(was.size) + 1e-12
        assert now.std() == pytest.approx(spread, rel=0.15)
        half = spread * np.sqrt(3)  # a uniform's support: mean ± sqrt(3) spread
        assert now.min() >= was.mean() - half - 1e-7 and now.max() <= was.mean() + half + 1e-7
    images = _images(4, seed=3)
    settings = RuntimeSettings("onnxruntime")
    at_random = open_runner("onnxruntime", original_path, settings)({"images": images})["features"]
    redrawn = open_runner("onnxruntime", drawn_path, settings)({"images": images})["features"]
    assert redrawn.shape == at_random.shape and np.isfinite(redrawn).all() and redrawn.std() > 0
    scale = np.sqrt(np.mean(redrawn**2)) / np.sqrt(np.mean(at_random**2))
    assert 1 / 3 < scale < 3, scale
    record = json.loads((drawn_path.parent / "conversion.json").read_text())
    assert record["weights"].startswith("random") and record["runtime"] == "onnxruntime"


def test_what_is_no_skeleton_is_refused_in_one_line(models_dir, skeletons, tmp_path, monkeypatch):
    """A model.onnx, a file that is not ONNX, and no folder of skeletons: each one line saying what to do."""
    model = export.converted_model_path(models_dir, "onnxruntime", "tiny", 1)
    with pytest.raises(UserError, match="not a skeleton of one") as whole:
        ort_record.fill_weights(model, tmp_path / "out.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff" * 64)
    with pytest.raises(UserError, match="is not an ONNX skeleton") as broken:
        ort_record.fill_weights(garbage, tmp_path / "out.onnx")
    monkeypatch.delenv(ort_record.SKELETONS_ENV)
    with pytest.raises(UserError, match="SERVE_BENCH_ONNX_SKELETONS is not set") as unset:
        ort_record.write_random_copy(tmp_path / "models", "tiny", 1)
    monkeypatch.setenv(ort_record.SKELETONS_ENV, str(tmp_path))
    with pytest.raises(UserError, match=r"tiny\.onnx does not exist.*make gpu-wheels") as absent:
        ort_record.write_random_copy(tmp_path / "models", "tiny", 1)
    for refused in (whole, broken, unset, absent):
        assert len(str(refused.value).splitlines()) == 1
    assert not (tmp_path / "out.onnx").exists() and not (tmp_path / "models").exists()


def test_converting_needs_tf2onnx_and_running_does_not(monkeypatch):
    """The GPU host has onnx and ONNX Runtime, not tf2onnx (nor TensorFlow): the record runs there; export, which
    converts, names what is missing."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tf2onnx" else find_spec(name, *a)
    )
    assert ONNXRUNTIME.missing() is None
    line = ONNXRUNTIME.missing(converting=True)
    assert line is not None and "tf2onnx" in line and "serve-bench[runtimes]" in line


async def test_a_host_without_tensorflow_exports_and_serves_an_onnx_copy(skeletons, tmp_path, without_tensorflow):
    """As on the GPU host: with no TensorFlow, `export --runtimes onnxruntime --weights random` draws the copy from
    the skeleton (no SavedModel beside it), and `serve --runtime onnxruntime` serves it with the catalogue's
    signature, the runner's values in its log."""
    models = tmp_path / "exported_models"
    env = {**without_tensorflow, ort_record.SKELETONS_ENV: str(skeletons)}
    args = ["export", "tiny", "--weights", "random", "--runtimes", "onnxruntime", "--models-dir", str(models)]
    bare = {k: v for k, v in env.items() if k != ort_record.SKELETONS_ENV}  # no skeletons named: convert, as ever
    refused = subprocess.run([sys.executable, "-m", "serve_bench", *args], env=bare, capture_output=True, text=True)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "needs TensorFlow" in refused.stderr and "serve-bench[tensorflow]" in refused.stderr
    done = subprocess.run(
        [sys.executable, "-m", "serve_bench", *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert not (models / "tiny").exists() and (models / "onnx/tiny/1/model.onnx").is_file()
    assert "drawn" in done.stdout and "skeleton tiny.onnx" in done.stdout  # says how the copy was made
    log = await serve_tinys_standalone_copy(models, "onnxruntime")
    assert "runtime=onnxruntime" in log and "tensorflow" not in log.lower().split("serving_default")[0]


def test_the_floor_measures_onnx_runtime_with_its_precision_witnessed(models_dir):
    """The floor runs a catalogue model's ONNX Runtime copy as it runs jax's: each size's first run timed apart,
    its images/s with an interval, and ORT's convolutions measured against float64 (float32: about 1e-7 here)."""
    require_runtime("onnxruntime")
    copy = export.converted_model_path(models_dir, "onnxruntime", "tiny", 1)
    out = io.StringIO()
    lines = measure_floor(copy, "cpu", "fp32", (1, 4), min_seconds=0.2, runtime="onnxruntime", out=out)
    header = json.loads(out.getvalue().splitlines()[0])
    assert header["runtime"] == "onnxruntime" and header["model"] == "tiny"
    assert header["in_effect"]["runtime"].startswith("onnxruntime ")
    witness = header["precision_witness"]
    assert set(witness) == {"conv3x3_max_relative_error", "conv1x1_max_relative_error"}
    assert all(0 < error < 1e-5 for error in witness.values()), witness
    assert [line["batch_size"] for line in lines] == [1, 4]
    for line in lines:
        low, high = line["images_per_s_ci"]
        assert line["first_run_s"] > 0 and low <= line["images_per_s"] <= high
    with pytest.raises(UserError, match=r"the floor measures .*, not openvino") as other:
        measure_floor(copy, "cpu", "fp32", (1,), runtime="openvino", out=io.StringIO())
    assert {"jax", "onnxruntime"} <= set(str(other.value).split(" not ")[0].replace(",", " ").split())
    with pytest.raises(UserError, match="precision"):
        measure_floor(copy, "cpu", "tf32", (1,), runtime="onnxruntime", out=io.StringIO())


def test_export_without_tf2onnx_names_it(tmp_path, monkeypatch, capsys):
    """Converting for ONNX Runtime needs tf2onnx (running does not): asked for by name, export refuses in one line
    naming it; by default, it exports the rest and says why there is no ONNX copy."""
    import importlib.util

    from serve_bench.cli import main

    require_runtime("onnxruntime")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tf2onnx" else find_spec(name, *a)
    )
    asked = ["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path / "asked")]
    assert main([*asked, "--runtimes", "tensorflow,onnxruntime"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tf2onnx" in err and "serve-bench[runtimes]" in err
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path / "default")]) == 0
    said = capsys.readouterr()
    assert "not converted for onnxruntime needs tf2onnx" in said.out + said.err
    assert not (tmp_path / "default" / "onnx").exists() and (tmp_path / "default" / "tiny" / "1").is_dir()
