"""Restart real Triton and MLServer per configuration (``serve_bench.servers`` starts them; _restarter.py
has the ``Restarter`` interface, _restart.py TF Serving's ways).

Each configuration gets a fresh process whose model repository lives in ``configs/<id>/server/``. The
configuration's file -- config.pbtxt, or model-settings.json and MLServer's settings.json -- is written
by the launcher's own writer (``export.write_triton_model`` / ``write_mlserver_model``) and hard-linked
into ``configs/<id>/``: the file kept there is the very file the server loaded.

Triton's model-repository API (``--model-control-mode=explicit``, then
``POST /v2/repository/models/<m>/load`` with the configuration as a JSON override) was measured as an
alternative to a restart (tiny model, 2 shared cores, 4 repeats each, one configuration, closed loop 8,
4 s): the reload took 8.0 s (7.3-8.9) against 8.4 s to start plus 3.3 s to stop; the loaded
configuration (``GET /v2/models/<m>/config``) was identical; throughput agreed within the run's noise
(1659 +/- 277 vs 1761 +/- 258 images/s, sd between repeats). The reload restarts the Python backend's
stubs, which is most of a start, so it would save ~3.5 s per configuration while the server would no
longer load the file tune writes (it takes JSON): restart stays the only way.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from serve_bench.stats import Target
from serve_bench.sweep import launched_target
from serve_bench.tune._config import ServerConfig
from serve_bench.tune._restarter import StartFailed
from serve_bench.tune._spec import ServerSpec
from serve_bench.tune._v2config import MLServerConfig, TritonConfig

if TYPE_CHECKING:  # serve_bench.servers is imported when a Triton or MLServer tune starts one
    from serve_bench import servers

__all__ = ["STARTED_HERE", "MLServerRestarter", "TritonRestarter"]


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _adopt(written: Path, kept: Path) -> None:
    """Make ``kept`` the very file the launcher wrote at ``written`` (a hard link: one file, two names)."""
    kept.unlink(missing_ok=True)
    try:
        os.link(written, kept)
    except OSError:  # a filesystem without hard links: the same bytes
        shutil.copy2(written, kept)


class _StartedHere:
    """A server of ``serve_bench.servers`` per configuration, its work directory in ``configs/<id>/server``."""

    server_kind = ""
    config_type: type[TritonConfig | MLServerConfig]

    def __init__(self, spec: ServerSpec, model: str, work_dir: Path) -> None:
        self.spec = spec
        self.model = model
        self.server: servers.ServerProcess | None = None

    def prepare(self, config: ServerConfig, config_file: Path) -> servers.ServerProcess:
        """The server for ``config`` (its kind's process, servers/), its files written and made the files kept in
        ``configs/<id>/``: the first is ``config_file``, the others keep their names beside it; not started."""
        if not isinstance(config, self.config_type):
            raise TypeError(f"{type(config).__name__} is not a {self.server_kind} configuration")
        from serve_bench.servers import kind

        server = kind(self.server_kind).process(
            config.values(),
            Path(self.spec.models_dir),
            self.model,
            config.runtime,
            config_file.parent / "server",
            self.spec.startup_timeout_s,
        )
        first, *others = server.config_files()
        _adopt(first, config_file)
        for written in others:
            _adopt(written, config_file.parent / written.name)
        return server

    async def start(self, config: ServerConfig, batching_file: Path, log_path: Path) -> Target:
        from serve_bench.servers import StartFailed as ServerStartFailed

        server = self.prepare(config, batching_file)
        server.log_path = log_path
        self.server = server
        # ServerProcess.start blocks (it polls readiness): run it beside the event loop
        starting = asyncio.ensure_future(asyncio.to_thread(server.start))
        try:
            await asyncio.shield(starting)
        except ServerStartFailed as exc:  # it has stopped the process already
            self.server = None
            reason = self.reason(log_path)
            why = f"{exc.why}: {reason}" if reason else exc.why
            tail = exc.log_tail if not reason or reason in "\n".join(exc.log_tail) else (*exc.log_tail, reason)
            raise StartFailed(why, tail) from None
        except BaseException:  # Ctrl-C while it starts: never leave it running
            await asyncio.shield(self._abandon(server, starting))
            raise
        # Triton's and MLServer's Python models run what the configuration's runtime names (export/adapters/,
        # with the runner of runtimes/_runners.py)
        named = Target(self.server_kind, "", self.spec.device, runtime=config.runtime)
        return launched_target(named, server, self.server_kind, self.spec.protocol)

    def reason(self, log_path: Path) -> str:
        """The server's own words for why it did not start: the last line of its whole log that gives them
        ("" when none does)."""
        found = ""
        for line in _read_lines(log_path):
            found = self.says_why(line) or found
        return found

    def says_why(self, line: str) -> str:
        """The reason ``line`` of the log gives, in the server's words ("" none)."""
        return ""

    async def _abandon(self, server: servers.ServerProcess, starting: asyncio.Future[servers.ServerProcess]) -> None:
        """Stop a server whose start was interrupted: the starting thread cannot be, so stop the process (its
        readiness poll then ends), wait for the thread, and stop again in case it had not launched it yet."""
        self.server = None
        await asyncio.to_thread(server.stop)
        try:
            await starting
        except BaseException:
            pass  # the interruption is what the caller reports
        await asyncio.to_thread(server.stop)

    async def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await asyncio.shield(asyncio.to_thread(server.stop))

    async def close(self) -> None:
        await self.stop()


class TritonRestarter(_StartedHere):
    """Real tritonserver per configuration, loading ``configs/<id>/config.pbtxt`` (Python backend, CPU or GPU)."""

    server_kind = "triton"
    config_type = TritonConfig

    def says_why(self, line: str) -> str:
        # model_lifecycle.cc logs the version's load error early, before the tables that end the log:
        # E... model_lifecycle.cc:642] "failed to load 'tiny' version 1: Invalid argument: ..."
        at = line.find(f"failed to load '{self.model}' version ")
        return line[at:].rstrip().removesuffix('"') if at >= 0 else ""


class MLServerRestarter(_StartedHere):
    """Real MLServer per configuration, loading ``configs/<id>/model-settings.json`` and ``settings.json``."""

    server_kind = "mlserver"
    config_type = MLServerConfig

    def says_why(self, line: str) -> str:
        # a Python traceback's last line: "ValueError: ...", "pydantic_core...ValidationError: ..."
        head = line.split(":", 1)[0]
        return line.strip() if head.endswith(("Error", "Exception")) and " " not in head.strip() else ""


# the kinds tune starts itself once per configuration (servers/ starts them), by their one name
STARTED_HERE: dict[str, type[_StartedHere]] = {r.server_kind: r for r in (TritonRestarter, MLServerRestarter)}
