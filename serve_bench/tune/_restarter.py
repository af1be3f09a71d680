"""What every way of restarting the measured server offers (``Restarter``), and how it says it failed
(``StartFailed``): the local server, Compose and a user's command (_restart.py), real Triton and MLServer
(_started.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from serve_bench.stats import Target
from serve_bench.tune._config import ServerConfig

__all__ = ["Restarter", "StartFailed"]


class StartFailed(Exception):
    """The server did not come up with a configuration: why, and the last lines of its log."""

    def __init__(self, why: str, log_tail: tuple[str, ...] = ()) -> None:
        super().__init__(why)
        self.why = why
        self.log_tail = log_tail


class Restarter(Protocol):
    async def start(self, config: ServerConfig, batching_file: Path, log_path: Path) -> Target:
        """Bring the server up with ``config``; return the target to measure once AVAILABLE (or raise StartFailed).

        ``batching_file`` is the configuration's file in ``configs/<id>/``: TF Serving's, written by the
        tune before the call; Triton's config.pbtxt and MLServer's model-settings.json, written by ``start``.
        """
        ...

    async def stop(self) -> None:
        """Stop what ``start`` started (a no-op where the next start replaces it)."""
        ...

    async def close(self) -> None:
        """After the last configuration: leave the server as it was configured before the tune."""
        ...
