"""Real Triton Inference Server (2.51, the ``tritonserver`` binary of the nvidia-pytriton wheel) on free ports.

    with TritonServer(models_dir, "tiny", TritonBatching(max_queue_delay_us=2000)) as triton:
        point = measure(triton.grpc_url, "tiny", ...)

It writes a model repository of its own (``export.write_triton_model``: the Python backend
running the exported SavedModel, or its ONNX or OpenVINO copy with ``runtime``), starts the
binary bound to 127.0.0.1 (Triton binds 0.0.0.0 unless told: server
``src/command_line_parser.cc`` ``--http-address``), and waits
for ``/v2/health/ready`` and the model's ``/v2/models/<m>/ready``. What running the wheel's
binary needs (verified with 2.51.0 here):

* the wheel's bundled libraries on ``LD_LIBRARY_PATH`` (``nvidia_pytriton.libs``);
* a backend directory whose ``python/`` holds the backend and the stub built for this
  Python (``python_backend_stubs/3.11/triton_python_backend_stub``);
* the model's environment given as ``EXECUTION_ENV_PATH`` (a venv with ``bin/activate``;
  python_backend ``src/stub_launcher.cc`` runs the stub in it): ``PYTHONPATH`` does not
  reach the stub, and the stub needs numpy<2.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from serve_bench import _server_facts
from serve_bench.export import TritonBatching
from serve_bench.servers._env import ServersEnv
from serve_bench.servers._kind import SIZES, Knob, ServerKind
from serve_bench.servers._repository import RepositoryServer

__all__ = ["TRITON", "TritonServer"]

_OWN = TritonBatching()  # Triton's own defaults (the type's), cited below
# Triton core r24.10 (tritonserver 2.51); line numbers move on newer branches, the rules hold
_KNOBS = (
    Knob(
        "dynamic_batching",
        bool,
        _OWN.dynamic_batching,
        "what auto-complete gives a batchable model, with max_batch_size 4 (docs/user_guide/model_configuration.md, "
        '"Default Max Batch Size"); off, the default scheduler runs each request alone (backend_model.cc:835-845)',
    ),
    Knob(
        "max_batch_size",
        int,
        _OWN.max_batch_size,
        "backend_model.cc:481, --backend-config default-max-batch-size; a request's batch above it is refused",
    ),
    Knob(
        "max_queue_delay_microseconds",
        int,
        _OWN.max_queue_delay_us,
        "dynamic_batching { } without a delay: dynamic_batch_scheduler.cc:619 sends what is queued at once",
    ),
    Knob(
        "preferred_batch_size",
        SIZES,
        _OWN.preferred_batch_sizes,
        "none: Triton prefers max_batch_size (NormalizeModelConfig, model_config_utils.cc:734-745)",
    ),
    Knob(
        "instance_count",
        int,
        _OWN.instance_count,
        "the Python backend's default count (SetDefaultInstanceCount, model_config_utils.cc:991-1008)",
    ),
    Knob("instance_kind", str, _OWN.kind, "KIND_CPU, what the launcher writes; KIND_GPU on a GPU host"),
)


def _configure(values: Mapping[str, Any]) -> TritonBatching:
    return TritonBatching(
        max_batch_size=values["max_batch_size"],
        dynamic_batching=values["dynamic_batching"],
        max_queue_delay_us=values["max_queue_delay_microseconds"],
        preferred_batch_sizes=tuple(values["preferred_batch_size"]),
        instance_count=values["instance_count"],
        kind=values["instance_kind"],
    )


def _backend_dir(env: ServersEnv) -> Path:
    """``<env>/serve-bench-backends``: the wheel's Python backend with this Python's stub beside it (made once)."""
    backends = env.root / "serve-bench-backends"
    python = backends / "python"
    stub = env.triton_root / "python_backend_stubs" / env.python_version / "triton_python_backend_stub"
    if not (python / "triton_python_backend_stub").exists():
        staging = backends / ".staging"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(env.triton_root / "backends" / "python", staging)
        shutil.copy2(stub, staging / "triton_python_backend_stub")
        shutil.rmtree(python, ignore_errors=True)
        os.rename(staging, python)
    return backends


class TritonServer(
    RepositoryServer, name="tritonserver", label="Triton", kind_name="triton", batching_type=TritonBatching
):
    batching: TritonBatching

    def repository_parameters(self, intra_op_threads: int) -> dict[str, str]:
        # config.pbtxt parameters: the Python backend's environment, and the model's threads
        parameters = {"EXECUTION_ENV_PATH": str(self.env.root)}
        if intra_op_threads:
            parameters["intra_op_threads"] = str(intra_op_threads)
        return parameters

    @property
    def stats_url(self) -> str:
        return f"{self.http_base}/v2/models/{self.model}/stats"

    def command(self) -> list[str]:
        return [
            str(self.env.tritonserver),
            f"--model-repository={self.repository}",
            f"--backend-directory={_backend_dir(self.env)}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            # no GPU here: skip the GPU metrics' NVML/DCGM polling
            "--allow-gpu-metrics=false",
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        libs = str(self.env.triton_libs)
        env["LD_LIBRARY_PATH"] = libs + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        return env

    def failure_lines(self, log: tuple[str, ...]) -> tuple[str, ...]:
        # the model's own reason is in "failed to load ...", logged before the tables that end the log
        errors = tuple(line for line in log if "failed to load" in line)
        return errors or tuple(line for line in log if "UNAVAILABLE:" in line) or log[-20:]

    def config_files(self) -> tuple[Path, ...]:
        """The files that hold the configuration, as the server reads them."""
        return (self.repository / self.model / "config.pbtxt",)


TRITON = ServerKind(
    _server_facts.TRITON,
    "Triton",
    _KNOBS,
    _configure,
    TritonServer.for_kind,
    max_batch_knob="max_batch_size",
    in_servers_env=True,
)
