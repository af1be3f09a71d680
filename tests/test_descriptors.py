"""TF Serving's descriptors ship in the package (serve_bench/_tfs_descriptors.binpb): the shipped file
is what the pinned tensorflow and tensorflow-serving-api wheels hold, file by file and byte for byte,
and the messages are built from it with neither wheel to be found."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from serve_bench import _protos

ROOT = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, str]:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["tensorflow"]
    pins = (re.fullmatch(r"([\w-]+)==([\w.]+)", requirement) for requirement in extra)
    return {pin[1]: pin[2] for pin in pins if pin}


@pytest.fixture(scope="module")
def wheels() -> list[tuple[str, bytes]]:
    assert set(_pins()) == {"tensorflow", "tensorflow-serving-api"}
    installed = {name: importlib.metadata.version(name) for name in _pins()}
    assert installed == _pins(), "the descriptors are compared with the pinned wheels: make test installs them"
    return _protos.wheel_files()


def test_the_shipped_descriptors_are_the_pinned_wheels_file_by_file(wheels):
    shipped = _protos.shipped_bytes()
    assert _protos.stale_files(shipped, wheels) == [], "the shipped descriptors are stale: make descriptors"
    assert _protos.decode_set(shipped) == wheels  # the same files, bytes and order
    assert len(wheels) == 55 and wheels[-1][0] == "tensorflow/core/protobuf/saved_model.proto"


def test_the_generator_writes_the_shipped_file_again(wheels, tmp_path):
    """`make descriptors` on the same wheels changes nothing: the whole file, byte for byte."""
    written = _protos.write_descriptors(tmp_path / _protos.SHIPPED)
    assert written.read_bytes() == _protos.shipped_bytes() == _protos.shipped_path().read_bytes()


def test_the_shipped_file_is_a_file_descriptor_set():
    """Any protobuf tool reads it (protoc --decode, descriptor_pb2): the bytes are a FileDescriptorSet."""
    shipped = _protos.shipped_bytes()
    files = descriptor_pb2.FileDescriptorSet.FromString(shipped).file
    assert [f.name for f in files] == [name for name, _ in _protos.decode_set(shipped)]
    assert [f.SerializeToString() for f in files] == [data for _, data in _protos.decode_set(shipped)]


def test_a_stale_file_is_named(wheels):
    """The comparison goes red on a stale copy: a changed byte, a file missing, one too many, another order."""
    shipped = _protos.shipped_bytes()
    changed = shipped.replace(b"PredictRequest", b"PredictRequesT", 1)  # same length: the set still parses
    assert changed != shipped
    assert _protos.stale_files(changed, wheels) == [
        "tensorflow_serving/apis/predict.proto: differs from the wheels' (1805 bytes shipped, 1805 in the wheels)"
    ]
    missing = _protos.encode_set(wheels[:-1])
    assert _protos.stale_files(missing, wheels) == [
        "tensorflow/core/protobuf/saved_model.proto: in the wheels, not shipped"
    ]
    extra = _protos.encode_set(
        [*wheels, ("x/y.proto", descriptor_pb2.FileDescriptorProto(name="x/y.proto").SerializeToString())]
    )
    assert _protos.stale_files(extra, wheels) == ["x/y.proto: shipped, not in the wheels"]
    reordered = _protos.encode_set([wheels[1], wheels[0], *wheels[2:]])
    assert _protos.stale_files(reordered, wheels) == [
        "the files are shipped in another order than the wheels' dependencies give"
    ]


def test_check_exits_1_on_a_stale_file(wheels, monkeypatch, capsys):
    assert _protos.main(["--check"]) == 0
    monkeypatch.setattr(_protos, "shipped_bytes", lambda: _protos.encode_set(wheels[:-1]))
    assert _protos.main(["--check"]) == 1
    assert "make descriptors" in capsys.readouterr().err


def test_a_truncated_file_is_refused_with_what_is_wrong():
    shipped = _protos.shipped_bytes()
    with pytest.raises(_protos.ProtoSourceError, match="runs past its end"):
        _protos.decode_set(shipped[:-1])
    with pytest.raises(_protos.ProtoSourceError, match="not a file's tag"):
        _protos.decode_set(b"\x12" + shipped)


def test_the_pool_needs_neither_wheel(monkeypatch):
    """With tensorflow and tensorflow_serving nowhere to be found, every message serve-bench uses is built."""
    find_spec = importlib.util.find_spec

    def without_the_wheels(name, *args):
        return None if name.split(".")[0] in ("tensorflow", "tensorflow_serving") else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_the_wheels)
    with pytest.raises(_protos.ProtoSourceError, match=r"serve-bench\[tensorflow\]"):
        _protos.wheel_files()  # the generator does need them
    pool = _protos.pool.__wrapped__()  # a fresh pool, not the cached one
    for name in (
        "tensorflow.serving.PredictRequest",
        "tensorflow.serving.PredictResponse",
        "tensorflow.serving.GetModelMetadataResponse",
        "tensorflow.serving.GetModelStatusResponse",
        "tensorflow.serving.SignatureDefMap",
        "tensorflow.serving.PredictionLog",
        "tensorflow.serving.ModelServerConfig",
        "tensorflow.serving.BatchingParameters",
        "tensorflow.serving.MonitoringConfig",
        "tensorflow.SavedModel",
    ):
        assert pool.FindMessageTypeByName(name).full_name == name
    request = pool.FindMessageTypeByName("tensorflow.serving.PredictRequest")
    assert request.fields_by_name["inputs"].message_type.fields_by_name["value"].message_type.full_name == (
        "tensorflow.TensorProto"
    )
