"""serve_bench.servers starts the real servers nobody here wrote, and export writes their model files.

Nothing here is faked: the tests run the real ``tritonserver`` 2.51 binary and real MLServer 1.7.1
from the servers' environment (``make servers-env``).
"""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest

from serve_bench.errors import UserError
from serve_bench.export import MLServerBatching, TritonBatching, triton_config_text, write_triton_model
from serve_bench.servers import ENV_VARIABLE, StartFailed, TritonServer
from tests.conftest import _servers_env_or_skip


def _infer_json(base: str, images: np.ndarray) -> np.ndarray:
    body = {
        "inputs": [{"name": "images", "shape": list(images.shape), "datatype": "FP32", "data": images.ravel().tolist()}]
    }
    request = urllib.request.Request(
        f"{base}/v2/models/tiny/infer", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        output = json.loads(response.read())["outputs"][0]
    return np.asarray(output["data"], dtype=np.float32).reshape(output["shape"])


def _server_metadata(base: str) -> dict[str, object]:
    with urllib.request.urlopen(f"{base}/v2", timeout=10) as response:
        return dict(json.loads(response.read()))


def test_triton_serves_the_exported_model(triton, reference):
    """Real Triton answers GET /v2 with its own name and version (server src/http_server.cc,
    HandleServerMetadata) and serves what in-process TensorFlow computes."""
    meta = _server_metadata(triton.http_base)
    assert meta["name"] == "triton" and meta["version"] == "2.51.0"
    images = np.random.default_rng(0).uniform(0, 255, (3, 64, 64, 3)).astype(np.float32)
    np.testing.assert_allclose(_infer_json(triton.http_base, images), reference(images), rtol=1e-5, atol=1e-6)


def test_mlserver_serves_the_exported_model(mlserver, reference):
    """Real MLServer names itself in GET /v2 (mlserver/handlers/dataplane.py, metadata) and serves
    what in-process TensorFlow computes."""
    meta = _server_metadata(mlserver.http_base)
    assert meta["name"] == "mlserver" and meta["version"] == "1.7.1"
    images = np.random.default_rng(1).uniform(0, 255, (2, 64, 64, 3)).astype(np.float32)
    np.testing.assert_allclose(_infer_json(mlserver.http_base, images), reference(images), rtol=1e-5, atol=1e-6)


def test_a_config_triton_refuses_is_one_line_with_its_reason(models_dir, tmp_path):
    """KIND_GPU on a host without a GPU: Triton refuses the model at load (core
    src/model_config_utils.cc, instance group validation) and exits; StartFailed carries its reason."""
    _servers_env_or_skip()  # TritonServer needs the real tritonserver: skip without it, fail where CI is set
    server = TritonServer(models_dir, "tiny", TritonBatching(kind="KIND_GPU"), work_dir=tmp_path)
    with pytest.raises(StartFailed) as caught:
        server.start()
    message = str(caught.value)
    assert "\n" not in message
    assert "failed to load" in message or "UNAVAILABLE" in message, message
    assert server.process is None  # stopped, nothing left running


def test_without_the_servers_environment_the_error_says_how_to_build_it(models_dir, monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VARIABLE, str(tmp_path / "nowhere"))
    with pytest.raises(UserError, match="make servers-env"):
        TritonServer(models_dir, "tiny")


def test_triton_config_is_triton_s_text_format():
    """config.pbtxt fields as inference.ModelConfig names them (common protobuf/model_config.proto:
    max_batch_size, dynamic_batching.preferred_batch_size, max_queue_delay_microseconds, instance_group)."""
    text = triton_config_text(
        "m", (8, 8, 3), 4, TritonBatching(max_batch_size=16, max_queue_delay_us=500, preferred_batch_sizes=(4, 8))
    )
    assert "max_batch_size: 16" in text
    assert "dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 500 }" in text
    assert "dims: [ 8, 8, 3 ]" in text and "dims: [ 4 ]" in text
    assert "dynamic_batching" not in triton_config_text("m", (8, 8, 3), 4, TritonBatching(dynamic_batching=False))


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_batch_size": 0}, "max_batch_size"),
        ({"max_queue_delay_us": -1}, "max_queue_delay_microseconds"),
        ({"preferred_batch_sizes": (64,)}, "preferred_batch_size"),
        ({"instance_count": 0}, "instance_count"),
    ],
)
def test_triton_batching_values_triton_refuses_are_named(kwargs, named):
    with pytest.raises(UserError, match=named):
        TritonBatching(**kwargs)


def test_mlserver_batching_refuses_negative_values():
    with pytest.raises(UserError, match="max_batch_time"):
        MLServerBatching(max_batch_time_s=-1)


def test_export_writes_both_repositories(models_dir):
    """export_model leaves triton/<model> (config.pbtxt, <v>/model.py, <v>/model.savedmodel) and
    mlserver/<model> (model-settings.json naming the runtime, relative uri to the SavedModel)."""
    triton_dir = models_dir / "triton" / "tiny"
    assert (triton_dir / "config.pbtxt").read_text().startswith('name: "tiny"')
    assert (triton_dir / "1" / "model.py").exists()
    assert (triton_dir / "1" / "model.savedmodel" / "saved_model.pb").exists()
    settings = json.loads((models_dir / "mlserver" / "tiny" / "model-settings.json").read_text())
    assert settings["implementation"] == "serve_bench_runtime.TFSavedModelRuntime"
    assert (models_dir / "mlserver" / "tiny" / settings["parameters"]["uri"] / "saved_model.pb").exists()


def test_write_triton_model_refuses_a_model_not_exported(models_dir, tmp_path):
    with pytest.raises(UserError, match="serve-bench export nope"):
        write_triton_model(models_dir, "nope", tmp_path)


def test_a_server_leaves_no_directory_it_made_for_itself(models_dir):
    """A launcher given no work_dir makes a temporary one (repository, log) and removes it at stop."""
    from serve_bench.servers import LocalServerProcess

    with LocalServerProcess(models_dir, "tiny") as server:
        made = server.work_dir
        assert (made / "serve-bench-local.log").exists()
    assert not made.exists()
