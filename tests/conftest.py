"""Shared fixtures: models exported once per session into a temporary directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from serve_bench.servers import free_port as free_port  # the one helper, imported by tests from here


def require(component: str, how: str) -> NoReturn:
    """A real component this machine lacks: skip with one line naming it and how to install it, or,
    where CI is set, fail, so that CI never passes without running every real component."""
    message = f"{component} is not installed here: {how}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set: every real component must run)", pytrace=False)
    pytest.skip(message)


def require_runtime(runtime: str) -> None:
    from serve_bench.runtimes import record

    if record(runtime).missing(converting=True):
        require(runtime, f"{record(runtime).extra} (make test installs it)")


def _servers_env_or_skip() -> None:
    from serve_bench.errors import UserError
    from serve_bench.servers import servers_env

    try:
        servers_env()
    except UserError:
        require("the servers' environment (real Triton, MLServer)", "make servers-env (make test builds it)")


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """exported_models/ with `tiny` (version 1), exported with random weights, and its ONNX and OpenVINO
    copies where those runtimes are installed (tests of them call ``require_runtime`` first)."""
    from serve_bench.export import export_model

    out = tmp_path_factory.mktemp("exported_models")
    export_model("tiny", weights="random", out=out, warmup_batch_sizes=(1, 4))
    return out


@pytest.fixture(scope="session")
def jax_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tiny` (version 1, random weights) with its copy for the jax runtime (Keras on JAX), checked against
    TensorFlow by export; in a directory of its own, so the other tests' models directory stays as it was."""
    from serve_bench.export import export_model

    require_runtime("jax")
    out = tmp_path_factory.mktemp("jax_models")
    export_model("tiny", weights="random", out=out, warmup_batch_sizes=(1, 4), runtimes=("tensorflow", "jax"))
    return out


@pytest.fixture(scope="session")
def inception_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models directory holding InceptionV3 (random weights), for the few end-to-end tests."""
    from serve_bench.export import export_model

    out = tmp_path_factory.mktemp("inception_models")
    export_model("inception_v3", weights="random", out=out, warmup_batch_sizes=(1, 2), runtimes=("tensorflow",))
    return out


@pytest.fixture(scope="session")
def tf():
    from serve_bench._tf import import_tensorflow

    return import_tensorflow()


@pytest.fixture(scope="session")
def reference(tf, models_dir):
    """In-process TensorFlow on the exported `tiny`: what every served answer must equal."""
    loaded = tf.saved_model.load(str(models_dir / "tiny" / "1"))
    return lambda images: loaded.signatures["serving_default"](images=tf.constant(images))["features"].numpy()


@pytest.fixture(scope="module")
def triton(models_dir: Path):
    """Real Triton 2.51 serving `tiny` (Python backend, dynamic batching with a 2 ms queue delay)."""
    from serve_bench.export import TritonBatching
    from serve_bench.servers import TritonServer

    _servers_env_or_skip()
    with TritonServer(models_dir, "tiny", TritonBatching(max_batch_size=32, max_queue_delay_us=2000)) as server:
        yield server


@pytest.fixture(scope="module")
def mlserver(models_dir: Path):
    """Real MLServer 1.7.1 serving `tiny` (adaptive batching: up to 32 images, 2 ms)."""
    from serve_bench.export import MLServerBatching
    from serve_bench.servers import MLServerServer

    _servers_env_or_skip()
    with MLServerServer(models_dir, "tiny", MLServerBatching(max_batch_size=32, max_batch_time_s=0.002)) as server:
        yield server


# `import tensorflow` raises ModuleNotFoundError and importlib.util.find_spec answers None: as where it is absent
_NO_TENSORFLOW = 'import sys\nsys.modules["tensorflow"] = None\nsys.modules["tensorflow_serving"] = None\n'


@pytest.fixture()
def without_tensorflow(tmp_path, monkeypatch) -> dict[str, str]:
    """Child processes in which `import tensorflow` fails, as on the GPU host (a sitecustomize on PYTHONPATH)."""
    hook = tmp_path / "hide-tensorflow"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_NO_TENSORFLOW)
    path = os.pathsep.join([str(hook), str(Path(__file__).resolve().parents[1])])
    monkeypatch.setenv("PYTHONPATH", path)
    return {**os.environ, "PYTHONPATH": path}


async def serve_tinys_standalone_copy(models: Path, runtime: str) -> str:
    """Serve tiny's copy for ``runtime`` from ``models``, which holds no SavedModel (a host without TensorFlow): the
    catalogue's signature is answered and two images get finite, varied features; the server's log, to check further."""
    import numpy as np

    from serve_bench.client import connect
    from serve_bench.servers import LocalServerProcess

    images = np.random.default_rng(44).uniform(0, 255, size=(2, 64, 64, 3)).astype(np.float32)
    with LocalServerProcess(models, "tiny", extra_flags=(f"--runtime={runtime}",)) as server:
        async with connect(server.grpc_url, "tiny") as client:
            signature = (await client.metadata())["serving_default"]
            features = (await client.predict({"images": images}))["features"]
        log = server.log_path.read_text()
    assert signature.inputs["images"].shape == (-1, 64, 64, 3) and signature.outputs["features"].shape == (-1, 32)
    assert features.shape == (2, 32) and np.isfinite(features).all() and features.std() > 0
    return log


@pytest.fixture()
def grpc_port() -> Iterator[int]:
    """The port of a real gRPC server with no service: a client that speaks HTTP/1.1 to it reads HTTP/2's SETTINGS
    frame where a status line should be (what a user meets giving a REST URL the gRPC port)."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(None)
