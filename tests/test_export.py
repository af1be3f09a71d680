"""Export: real SavedModels loaded back with TensorFlow, and every bad input."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from serve_bench import export
from serve_bench.catalogue import CATALOGUE, get_spec
from serve_bench.cli import main
from serve_bench.errors import UserError


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image.astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("model_fixture, name", [("models_dir", "tiny"), ("inception_dir", "inception_v3")])
def test_exported_model_loads_and_signatures_agree(request, tf, model_fixture, name):
    out: Path = request.getfixturevalue(model_fixture)
    spec = get_spec(name)
    version_dir = out / name / "1"
    assert (version_dir / "saved_model.pb").exists() and (version_dir / "variables").is_dir()

    loaded = tf.saved_model.load(str(version_dir))
    assert set(loaded.signatures) == {"serving_default", "serving_bytes"}

    default = loaded.signatures["serving_default"]
    (_, kwargs) = default.structured_input_signature
    assert list(kwargs) == ["images"]
    assert kwargs["images"].dtype == tf.float32
    assert kwargs["images"].shape.as_list() == [None, spec.height, spec.width, 3]
    assert default.structured_outputs["features"].dtype == tf.float32
    assert default.structured_outputs["features"].shape.as_list() == [None, spec.feature_size]

    by_bytes = loaded.signatures["serving_bytes"]
    (_, kwargs) = by_bytes.structured_input_signature
    assert list(kwargs) == ["image_bytes"]
    assert kwargs["image_bytes"].dtype == tf.string and kwargs["image_bytes"].shape.as_list() == [None]

    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, size=(2, spec.height, spec.width, 3)).astype(np.float32)
    from_pixels = default(images=tf.constant(images))["features"].numpy()
    from_png = by_bytes(image_bytes=tf.constant([_png(im) for im in images]))["features"].numpy()
    assert from_pixels.shape == (2, spec.feature_size)
    np.testing.assert_allclose(from_png, from_pixels, rtol=1e-4, atol=1e-4)
    assert np.isfinite(from_pixels).all()


def test_warmup_records_parse_as_prediction_log(models_dir):
    from tensorflow_serving.apis import prediction_log_pb2

    from serve_bench._tf import import_tensorflow

    tf = import_tensorflow()
    path = models_dir / "tiny" / "1" / "assets.extra" / export.WARMUP_FILE
    records = [prediction_log_pb2.PredictionLog.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]
    assert [r.predict_log.request.inputs["images"].tensor_shape.dim[0].size for r in records] == [1, 4]
    for record in records:
        request = record.predict_log.request
        assert request.model_spec.name == "tiny"
        assert request.model_spec.signature_name == "serving_default"
        tensor = request.inputs["images"]
        assert tensor.dtype == 1  # DT_FLOAT
        shape = [d.size for d in tensor.tensor_shape.dim]
        assert shape[1:] == [64, 64, 3]
        assert len(tensor.tensor_content) == 4 * int(np.prod(shape))
    # our own reader (used by the local server) agrees
    assert len(export.read_warmup_records(path)) == 2


def test_metadata_file_holds_counted_facts(models_dir, inception_dir):
    tiny = export.read_metadata(models_dir / "tiny" / "1")
    assert tiny["model"] == "tiny" and tiny["weights"] == "random"
    assert tiny["input_shape"] == [64, 64, 3] and tiny["feature_size"] == 32
    assert tiny["parameters"] == 1936 and tiny["flops_per_image"] > 0
    inception = export.read_metadata(inception_dir / "inception_v3" / "1")
    assert inception["parameters"] == 21_802_784
    # InceptionV3 is ~5.7 G multiply-adds per 299x299 image = ~11.5 GFLOPs
    assert 11.0e9 < inception["flops_per_image"] < 12.0e9


def test_models_config_parses_as_model_server_config(models_dir):
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    text = (models_dir / "models.config").read_text()
    config = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
    entries = {c.name: c for c in config.model_config_list.config}
    assert set(entries) == {"tiny"}
    assert entries["tiny"].base_path == "/models/tiny"
    assert entries["tiny"].model_platform == "tensorflow"


def test_next_free_version_and_force(tmp_path, capsys):
    assert (
        main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--warmup-batch-sizes", "1"]) == 0
    )
    assert (
        main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--warmup-batch-sizes", "1"]) == 0
    )
    assert export.list_versions(tmp_path / "tiny") == [1, 2]
    out = capsys.readouterr().out
    assert "version 2" in out and "random" in out

    before = (tmp_path / "tiny" / "1" / "saved_model.pb").stat().st_mtime_ns
    assert (
        main(
            [
                "export",
                "tiny",
                "--weights",
                "random",
                "--models-dir",
                str(tmp_path),
                "--version",
                "1",
                "--force",
                "--warmup-batch-sizes",
                "1",
            ]
        )
        == 0
    )
    assert (tmp_path / "tiny" / "1" / "saved_model.pb").stat().st_mtime_ns != before
    assert not (tmp_path / ".staging").exists()


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_unknown_model_lists_valid_names(tmp_path, capsys):
    assert main(["export", "resnet9000", "--models-dir", str(tmp_path)]) == 2
    err = _one_line_error(capsys)
    assert "resnet9000" in err and "inception_v3" in err and "tiny" in err


def test_unwritable_output_directory(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(blocker / "models")]) == 2
    err = _one_line_error(capsys)
    assert "cannot write" in err and "--models-dir" in err


def test_existing_version_without_force(tmp_path, capsys):
    assert (
        main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--warmup-batch-sizes", "1"]) == 0
    )
    capsys.readouterr()
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--version", "1"]) == 2
    err = _one_line_error(capsys)
    assert "already exists" in err and "--force" in err


def test_corrupt_weights_file_leaves_nothing_behind(tmp_path, capsys):
    weights = tmp_path / "broken.weights.h5"
    weights.write_bytes(b"this is not HDF5")
    out = tmp_path / "models"
    assert main(["export", "tiny", "--weights", str(weights), "--models-dir", str(out)]) == 2
    err = _one_line_error(capsys)
    assert "broken.weights.h5" in err
    assert not out.exists()  # --models-dir was new: not even an empty folder is left (it was, until 2026-11-29)


def test_an_output_directory_that_cannot_be_made_is_refused_before_the_build(tmp_path, capsys):
    """Under a file: one line, before TensorFlow builds anything (the check probes the nearest folder that
    is there, and makes none)."""
    (tmp_path / "a-file").write_text("")
    assert main(["export", "tiny", "--models-dir", str(tmp_path / "a-file" / "models")]) == 2
    assert "cannot write to output directory" in _one_line_error(capsys)


def test_missing_weights_file(tmp_path, capsys):
    assert main(["export", "tiny", "--weights", str(tmp_path / "nope.h5"), "--models-dir", str(tmp_path)]) == 2
    assert "no such file" in _one_line_error(capsys)


def test_weights_file_round_trip(tmp_path, tf):
    spec = get_spec("tiny")
    model = spec.build(tf.keras, None)
    path = tmp_path / "tiny.weights.h5"
    model.save_weights(str(path))
    result = export.export_model("tiny", weights=str(path), out=tmp_path / "m", warmup_batch_sizes=(1,))
    assert result.facts.weights.startswith("file:")


@pytest.mark.parametrize("sizes", ["0", "-1", "1,x", "2.5", ""])
def test_bad_warmup_batch_size(tmp_path, capsys, sizes):
    assert (
        main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--warmup-batch-sizes", sizes])
        == 2
    )
    assert "--warmup-batch-sizes" in _one_line_error(capsys)
    assert not (tmp_path / "tiny").exists()


def test_a_warm_up_batch_too_large_for_one_record_is_refused_before_anything_is_built(tmp_path, capsys):
    """A warm-up record is one serialized PredictionLog, and TF Serving parses each with
    ``prediction_log.ParseFromArray(record.data(), record.size())``, an ``int`` size
    (tensorflow_serving/servables/tensorflow/saved_model_warmup_util.cc:118): 2 GiB at most, protobuf's limit on
    one message too. tiny's images are 64x64x3 float32, 49,152 bytes: at most 43,690 in a record. 1e8 used to
    build a 4.5 TiB array and end in numpy's MemoryError traceback; 43,691 would have written a record no
    server can read. Refused before anything is built."""
    from serve_bench.export._export import check_warmup_batch_sizes

    check_warmup_batch_sizes(get_spec("tiny"), (1, 43690))  # the largest that fits passes
    with pytest.raises(UserError, match="warmup_batch_sizes must be at most 43690 for tiny"):
        check_warmup_batch_sizes(get_spec("tiny"), (43691,))
    for size in ("100000000", "43691"):  # the fast failure first, if the check went: 43,691 would build 2 GB
        argv = ["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path / "m")]
        assert main([*argv, "--warmup-batch-sizes", f"1,{size}"]) == 2
        said = _one_line_error(capsys)
        assert "--warmup-batch-sizes must be at most 43690 for tiny" in said and "2 GiB" in said
        assert not (tmp_path / "m").exists()


def test_imagenet_download_failure_suggests_random(tmp_path, capsys, monkeypatch):
    # No network in CI: make the failure immediate and deterministic rather than
    # depending on how this machine's resolver fails.
    spec = get_spec("mobilenet_v2")

    def offline_build(keras, weights):
        if weights == "imagenet":
            raise OSError("URL fetch failure on https://storage.googleapis.com/...: [Errno -3] name resolution")
        return spec.build(keras, weights)

    monkeypatch.setitem(CATALOGUE, "mobilenet_v2", spec.__class__(**{**spec.__dict__, "build": offline_build}))
    assert main(["export", "mobilenet_v2", "--weights", "imagenet", "--models-dir", str(tmp_path)]) == 2
    err = _one_line_error(capsys)
    assert "ImageNet" in err and "random weights" in err and "(--weights)" in err
    assert not (tmp_path / "mobilenet_v2").exists()


def test_tiny_has_no_imagenet_weights(tmp_path, capsys):
    assert main(["export", "tiny", "--weights", "imagenet", "--models-dir", str(tmp_path)]) == 2
    err = _one_line_error(capsys)
    assert "no ImageNet weights; use random weights" in err and "(--weights)" in err


def test_list_counts_from_the_graph(capsys):
    assert main(["export", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("inception_v3", "resnet50", "mobilenet_v2", "tiny"):
        assert name in out
    assert "21,802,784" in out and "299x299x3" in out and "2048" in out  # InceptionV3
    assert "11.4" in out  # GFLOPs per image, counted by the profiler
    # one row per model: InceptionV3's figures sit on its own row, not merely somewhere in the output
    row = next(line for line in out.splitlines() if "inception_v3" in line)
    assert "21,802,784" in row and "2048" in row


def test_an_export_that_fails_after_the_build_leaves_no_folder_it_made(tmp_path, capsys, monkeypatch):
    """A disk that fills while the SavedModel is written: one line naming the folder, and the --models-dir the export
    made (two levels here) is taken away again, as when it is refused before the build; a folder that was there
    stays."""
    import errno

    from serve_bench.export import _warmup

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_warmup, "write_warmup_records", full)
    there = tmp_path / "there"  # empty, and not the export's
    there.mkdir()
    out = there / "new" / "models"
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(out), "--warmup-batch-sizes", "1"]) == 2
    err = _one_line_error(capsys)
    assert "No space left on device" in err and str(out) in err and "--models-dir" in err
    assert list(tmp_path.rglob("*")) == [there]
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(there), "--warmup-batch-sizes", "1"]) == 2
    assert list(tmp_path.rglob("*")) == [there]
