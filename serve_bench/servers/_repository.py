"""A v2 server that serves one exported model from a model repository of its own (Triton, MLServer)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from serve_bench.export import write_model_repository
from serve_bench.servers._env import require_runtime_package, servers_env
from serve_bench.servers._kind import Serve
from serve_bench.servers._process import ServerProcess, V2ServerProcess

__all__ = ["RepositoryServer"]


class RepositoryServer(V2ServerProcess):
    """Checks the servers' environment (before any directory is made: a missing one leaves nothing), then writes
    ``<work_dir>/repository`` for ``model`` with ``batching`` (the kind's configuration) and ``runtime``."""

    label = ""  # as the servers' environment check names the server
    kind_name = ""  # its kind, and the format export writes its repository in
    batching_type: type[Any]  # the kind's configuration (export.TritonBatching, export.MLServerBatching)
    batching: Any

    def __init_subclass__(
        cls, name: str = "", label: str = "", kind_name: str = "", batching_type: type[Any] = object
    ) -> None:
        super().__init_subclass__()
        cls.name, cls.label, cls.kind_name, cls.batching_type = name, label, kind_name, batching_type

    def __init__(
        self,
        models_dir: str | os.PathLike[str],
        model: str,
        batching: Any = None,
        *,
        intra_op_threads: int = 0,
        runtime: str = "tensorflow",
        work_dir: Path | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.env = servers_env(self.label)
        require_runtime_package(self.env, runtime)
        super().__init__(work_dir, startup_timeout_s)
        self.model = model
        self.batching = batching if batching is not None else self.batching_type()  # the server's own defaults
        self.runtime = runtime
        self.repository = self.work_dir / "repository"
        self.write_repository(Path(models_dir), intra_op_threads)

    @classmethod
    def for_kind(cls, serve: Serve) -> ServerProcess:
        """The kind's process (``ServerKind.start``): this server with the kind's configuration."""
        return cls(
            serve.models_dir,
            serve.model,
            serve.config,
            runtime=serve.runtime,
            work_dir=serve.work_dir,
            startup_timeout_s=serve.startup_timeout_s,
        )

    def write_repository(self, models_dir: Path, intra_op_threads: int) -> None:
        """The model's repository in the server's format, pointing at the export where it is."""
        write_model_repository(
            self.kind_name,
            models_dir,
            self.model,
            self.repository,
            self.batching,
            parameters=self.repository_parameters(intra_op_threads),
            in_place=True,
            runtime=self.runtime,
        )

    def repository_parameters(self, intra_op_threads: int) -> dict[str, str]:
        """What the model's own settings carry besides the configuration (its threads)."""
        return {"intra_op_threads": str(intra_op_threads)} if intra_op_threads else {}

    def knobs(self) -> dict[str, str]:
        knobs: dict[str, str] = self.batching.knobs()
        return knobs
