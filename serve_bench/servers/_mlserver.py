"""Real MLServer (1.7.1, from its PyPI package) on free ports, serving an exported SavedModel.

    with MLServerServer(models_dir, "tiny", MLServerBatching(max_batch_size=8, max_batch_time_s=0.002)) as ml:
        point = measure(ml.grpc_url, "tiny", ...)

``mlserver start <folder>`` reads ``settings.json`` (server-wide: host, ports) and each
model's ``model-settings.json`` from the folder (``mlserver/cli/serve.py``
``load_settings``); the model runs serve-bench's adapter (``export/adapters/mlserver_runtime.py``)
with the runner of its ``runtime`` (``runtimes/_runners.py``), in the servers' environment.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from serve_bench import _server_facts
from serve_bench.export import MLServerBatching
from serve_bench.servers._kind import Knob, ServerKind
from serve_bench.servers._repository import RepositoryServer

__all__ = ["MLSERVER", "MLServerServer"]

_OWN = MLServerBatching()  # MLServer's own defaults (the type's), cited below (tag 1.7.1)
_KNOBS = (
    Knob(
        "max_batch_size",
        int,
        _OWN.max_batch_size,
        "ModelSettings' default (settings.py:457-462); batching only above 1 with a time (batching/hooks.py:82-86)",
    ),
    Knob("max_batch_time", float, _OWN.max_batch_time_s, "seconds; ModelSettings' default (settings.py:457-462)"),
    Knob(
        "parallel_workers",
        int,
        _OWN.parallel_workers,
        "the server's setting (settings.py:37, read at settings.py:170; the model's is deprecated, "
        "parallel/registry.py:196-215); 0 runs inference in the main process",
    ),
)


def _configure(values: Mapping[str, Any]) -> MLServerBatching:
    return MLServerBatching(
        max_batch_size=values["max_batch_size"],
        max_batch_time_s=float(values["max_batch_time"]),
        parallel_workers=values["parallel_workers"],
    )


class MLServerServer(
    RepositoryServer, name="mlserver", label="MLServer", kind_name="mlserver", batching_type=MLServerBatching
):
    batching: MLServerBatching

    def write_repository(self, models_dir: Path, intra_op_threads: int) -> None:
        """The model's repository, then the server's settings.json (host, ports, the worker pool)."""
        super().write_repository(models_dir, intra_op_threads)
        settings: dict[str, object] = {
            "host": "127.0.0.1",
            "http_port": self.http_port,
            "grpc_port": self.grpc_port,
            "metrics_port": self.metrics_port,
            "load_models_at_startup": True,
        }
        if self.batching.parallel_workers is not None:
            # server-wide: MLServer 1.7.1 ignores a model's own parallel_workers unless it is <= 0
            # (mlserver/parallel/registry.py, the model-level field is deprecated)
            settings["parallel_workers"] = self.batching.parallel_workers
        (self.repository / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")

    def command(self) -> list[str]:
        return [str(self.env.mlserver), "start", str(self.repository)]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # the servers' venv first on PATH: MLServer's workers are started from its interpreter
        env["PATH"] = str(self.env.root / "bin") + os.pathsep + env.get("PATH", "")
        env.pop("PYTHONPATH", None)
        env["VIRTUAL_ENV"] = str(self.env.root)
        return env

    def failure_lines(self, log: tuple[str, ...]) -> tuple[str, ...]:
        errors = tuple(line for line in log if "Error" in line or "error" in line)
        return errors[-20:] or log[-20:]

    def config_files(self) -> tuple[Path, ...]:
        """The files that hold the configuration, as the server reads them: the model's, then the server's."""
        return (self.repository / self.model / "model-settings.json", self.repository / "settings.json")


MLSERVER = ServerKind(
    _server_facts.MLSERVER,
    "MLServer",
    _KNOBS,
    _configure,
    MLServerServer.for_kind,
    max_batch_knob="",
    in_servers_env=True,
    together=("max_batch_size", "max_batch_time"),
    # hooks.py:82-86 (1.7.1): either one at its default 0 leaves the model unbatched
    together_reason="MLServer batches only when max_batch_size > 1 and max_batch_time > 0",
)
