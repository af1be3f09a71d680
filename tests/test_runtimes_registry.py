"""One record per runtime (issue 33, item 2): the registry is the one place a runtime's facts live, and the
runner of each runtime is written once, in the one file Triton's and MLServer's model repositories carry."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from serve_bench import export, runtimes
from serve_bench.errors import InvalidValue, UserError
from serve_bench.runtimes import RECORDS, RUNNERS_FILE, RUNTIMES, RuntimeSettings, check_runtime, record

PACKAGE = Path(runtimes.__file__).resolve().parent.parent


def test_every_runtime_has_one_record_and_the_source_comes_first():
    assert RUNTIMES == tuple(RECORDS) == ("tensorflow", "onnxruntime", "openvino", "jax")
    assert [r.name for r in RECORDS.values() if not r.converted] == ["tensorflow"]
    assert runtimes.CONVERTED_RUNTIMES == ("onnxruntime", "openvino", "jax")


@pytest.mark.parametrize("name", ["tensorrt", "", "TensorFlow"])
def test_an_unknown_runtime_is_one_check_with_one_line(name):
    with pytest.raises(InvalidValue) as caught:
        record(name)
    assert "\n" not in str(caught.value) and "tensorflow, onnxruntime, openvino, jax" in str(caught.value)
    with pytest.raises(UserError, match=r"^t\.toml: \[space\]: runtime must be one of tensorflow"):
        check_runtime(name, "t.toml: [space]")


def test_the_layout_of_a_copy_is_its_records():
    models = Path("/m")
    assert (
        export.converted_model_path(models, "onnxruntime", "tiny", 3) == models / "onnx" / "tiny" / "3" / "model.onnx"
    )
    assert record("openvino").copy_files(models, "tiny", 1) == [
        models / "openvino" / "tiny" / "1" / "model.xml",
        models / "openvino" / "tiny" / "1" / "model.bin",
    ]
    with pytest.raises(UserError, match="runs the SavedModel itself"):
        record("tensorflow").copy_files(models, "tiny", 1)


def test_device_and_precision_are_what_the_record_accepts():
    RuntimeSettings("jax", device="gpu", precision="bf16")
    with pytest.raises(UserError, match="device and precision are chosen for the jax runtime"):
        RuntimeSettings("onnxruntime", device="gpu")
    with pytest.raises(InvalidValue, match=r"fp32 \| tf32 \| bf16"):
        RuntimeSettings("jax", precision="fp16")


def test_the_runners_file_imports_nothing_of_serve_bench_and_no_runtime_at_import():
    """Triton's and MLServer's environments have numpy and the runtimes' packages, never serve-bench: the one
    runners file must import there, from a folder of its own, with serve_bench and every runtime absent."""
    tree = ast.parse(RUNNERS_FILE.read_text())
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert top <= {"__future__", "importlib", "os", "queue", "typing", "numpy"}, top
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in ("serve_bench", "tensorflow", "onnxruntime", "openvino"))
    code = f"import sys; {blocked}; sys.path.insert(0, sys.argv[1]); import _runners; print(_runners.__all__)"
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, str(RUNNERS_FILE.parent)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "OnnxRunner" in done.stdout


def test_each_runtimes_runner_is_written_once():
    """The calls that open a model in each runtime appear in the runners' one file and nowhere else in
    serve_bench (the adapters and the local server used to hold copies of their own)."""
    opening = {"InferenceSession(": "onnxruntime", "compile_model(": "openvino"}
    found: dict[str, list[str]] = {call: [] for call in opening}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        for call in opening:
            if call in text:
                found[call].append(str(path.relative_to(PACKAGE)))
    assert found == {call: ["runtimes/_runners.py"] for call in opening}


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_a_repository_carries_the_runners_file_and_names_the_records_runner(models_dir, tmp_path, runtime):
    from tests.conftest import require_runtime

    require_runtime(runtime)
    kept = record(runtime)
    version = export.write_triton_model(models_dir, "tiny", tmp_path / "triton", runtime=runtime) / "1"
    assert (version / "serve_bench_runners.py").read_bytes() == RUNNERS_FILE.read_bytes()
    config = (version.parent / "config.pbtxt").read_text()
    assert f'key: "runner" value: {{ string_value: "{kept.runner.__name__}" }}' in config
    assert f'key: "model_file" value: {{ string_value: "{kept.model_file}" }}' in config
    folder = export.write_mlserver_model(models_dir, "tiny", tmp_path / "mlserver", runtime=runtime)
    assert (folder / "serve_bench_runners.py").read_bytes() == RUNNERS_FILE.read_bytes()
    assert json.loads((folder / "model-settings.json").read_text())["parameters"]["extra"]["runner"] == (
        kept.runner.__name__
    )
