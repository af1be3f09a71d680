"""The local server (``serve-bench serve``, TF Serving's batching as this project imitates it) as a process.

    with LocalServerProcess(models_dir, "tiny", batching_file=ROOT / "docker/batching/cpu.txt") as local:
        point = measure(local.grpc_url, "tiny", ...)

It runs from serve-bench's own interpreter on free ports, with TF Serving's flags, and is
ready when ``GET /v1/models/<m>`` answers 200 (the model is AVAILABLE).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from serve_bench import _server_facts
from serve_bench.errors import UserError
from serve_bench.servers._kind import Knob, Serve, ServerKind
from serve_bench.servers._ports import free_port
from serve_bench.servers._process import ServerProcess

__all__ = ["LOCAL", "LocalServerProcess"]


class LocalServerProcess(ServerProcess):
    name = _server_facts.LOCAL_IDENTITY

    def __init__(
        self,
        models_dir: str | os.PathLike[str],
        model: str,
        *,
        batching_file: str | os.PathLike[str] | None = None,
        model_config_file: str | os.PathLike[str] | None = None,
        extra_flags: tuple[str, ...] = (),
        work_dir: Path | None = None,
        startup_timeout_s: float = 300.0,
    ) -> None:
        super().__init__(work_dir, startup_timeout_s)
        self.models_dir = Path(models_dir).resolve()
        self.model = model
        self.batching_file = Path(batching_file).resolve() if batching_file else None
        # every model a models.config lists (the demo's); ``model`` is then the one waited on
        self.model_config_file = Path(model_config_file).resolve() if model_config_file else None
        self.extra_flags = extra_flags
        self.grpc_port, self.http_port = free_port(), free_port()
        self.rest_port = self.http_port  # TF Serving's name (--rest_api_port)
        self.monitoring = self.work_dir / "monitoring.config"
        self.monitoring.write_text(
            f'prometheus_config {{ enable: true path: "{_server_facts.TF_SERVING_METRICS_PATH}" }}\n'
        )

    @property
    def metrics_url(self) -> str:
        return self.http_base + _server_facts.TF_SERVING_METRICS_PATH

    def command(self) -> list[str]:
        batching = (
            ["--enable_batching", f"--batching_parameters_file={self.batching_file}"] if self.batching_file else []
        )
        models = (
            [f"--model_config_file={self.model_config_file}"]
            if self.model_config_file
            else [f"--model_name={self.model}", f"--model_base_path={self.models_dir / self.model}"]
        )
        return [
            sys.executable,
            "-m",
            "serve_bench",
            "serve",
            *models,
            f"--models_dir={self.models_dir}",
            f"--port={self.grpc_port}",
            f"--rest_api_port={self.rest_port}",
            f"--monitoring_config_file={self.monitoring}",
            *batching,
            *self.extra_flags,
        ]

    def ready_urls(self) -> list[str]:
        return [f"{self.http_base}/v1/models/{self.model}"]


def _configure(values: Mapping[str, Any]) -> None:
    """The local server's configuration is TF Serving's file, which it reads and checks when it starts; here:
    that the file named is there (a name the OS cannot even look up, ENAMETOOLONG, is not there either)."""
    named = values["batching_parameters_file"]
    try:
        there = not named or Path(named).is_file()
    except OSError:
        there = False
    if not there:
        raise UserError("batching_parameters_file: no such file")


def _start(serve: Serve) -> ServerProcess:
    return LocalServerProcess(
        serve.models_dir,
        serve.model,
        batching_file=serve.values.get("batching_parameters_file") or None,
        extra_flags=(f"--runtime={serve.runtime}",),
        work_dir=serve.work_dir,
        startup_timeout_s=serve.startup_timeout_s,
    )


LOCAL = ServerKind(
    _server_facts.LOCAL,
    "the local server",
    (
        Knob(
            "batching_parameters_file",
            str,
            "",
            "none: batching off, as tensorflow_model_server without --enable_batching (main.cc, enable_batching false)",
        ),
    ),
    _configure,
    _start,
    runtime_flag=True,
)
