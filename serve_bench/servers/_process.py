"""One way to start a server process, wait until its model is ready, and stop it.

A server that exits before it is ready, or is not ready in time, raises ``StartFailed``
with its log's last lines; stopping sends SIGTERM (servers drain in-flight requests on
it) and SIGKILL after a grace period.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from serve_bench.errors import UserError
from serve_bench.servers._ports import free_port

__all__ = ["LOG_TAIL_LINES", "ServerProcess", "StartFailed", "V2ServerProcess", "http_ok", "log_tail"]

LOG_TAIL_LINES = 20
_POLL_S = 0.1


class StartFailed(UserError):
    """The server did not come up: why, and the last lines of its log."""

    def __init__(self, why: str, log_tail: tuple[str, ...] = ()) -> None:
        detail = f" (last log line: {log_tail[-1].strip()})" if log_tail else ""
        super().__init__(why + detail)
        self.why = why
        self.log_tail = log_tail


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> tuple[str, ...]:
    """The log's last ``lines`` lines (0: all of them)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ()
    return tuple(text.rstrip("\n").splitlines()[-lines if lines else 0 :])


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when GET ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):  # a server mid-start, not HTTP
        return False


class ServerProcess:
    """A server started as its own process (its own session, so a stop reaches its children).

    Subclasses give the command, the environment and the readiness URLs; ``start`` runs it
    with its output in ``log_path`` and returns once every readiness URL answers 200.
    """

    name = "server"

    def __init__(self, work_dir: Path | None = None, startup_timeout_s: float = 120.0) -> None:
        self._own_dir = work_dir is None
        # absolute: the server runs in this folder, so a path under it given relative to ours would not be found
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix=f"serve-bench-{self.name}-")).absolute()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.work_dir / f"{self.name}.log"
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    # what a subclass provides
    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def ready_urls(self) -> list[str]:
        raise NotImplementedError

    def config_files(self) -> tuple[Path, ...]:
        """The files that hold the server's configuration as it reads them (none for a server given flags)."""
        return ()

    def failure_lines(self, log: tuple[str, ...]) -> tuple[str, ...]:
        """The log lines that say why a start failed, from the whole start-up log (its tail by default)."""
        return log[-LOG_TAIL_LINES:]

    # where it answers, once started, on 127.0.0.1: the ports each subclass takes, in the schemes of its protocol
    grpc_port: int
    http_port: int
    grpc_scheme, http_scheme = "grpc", "http"

    @property
    def http_base(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.grpc_scheme}://127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"{self.http_scheme}://127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def launch(self) -> subprocess.Popen[bytes]:
        """Start the process (its output appended to ``log_path``) without waiting for it to be ready."""
        if self.process is not None:
            raise RuntimeError(f"{self.name} already started")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.environment(),
                cwd=self.work_dir,
                start_new_session=True,
            )
        return self.process

    def start(self) -> ServerProcess:
        self.launch()
        return self.wait_ready()

    def wait_ready(self) -> ServerProcess:
        """Wait until a launched server answers (stopping it if it never does): several servers launched
        first and waited for after load their models at the same time."""
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        pending = list(self.ready_urls())
        while pending:
            code = self.process.poll()
            if code is not None:
                tail = self.failure_lines(log_tail(self.log_path, lines=0))
                raise StartFailed(f"{self.name} exited with status {code} before it was ready", tail)
            if http_ok(pending[0]):
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                tail = self.failure_lines(log_tail(self.log_path, lines=0))
                raise StartFailed(f"{self.name} not ready within {self.startup_timeout_s:g} s ({pending[0]})", tail)
            time.sleep(_POLL_S)  # polling the server's readiness endpoint, not waiting blind

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM the server's process group, SIGKILL it after ``grace_s``; its exit status."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        try:  # children (Triton's Python stubs, MLServer's workers) go with it
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self._own_dir:  # a directory the caller never named: nothing of it is wanted afterwards
            shutil.rmtree(self.work_dir, ignore_errors=True)
        return process.returncode

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class V2ServerProcess(ServerProcess):
    """A server of the Open Inference Protocol (Triton, MLServer) on three free loopback ports."""

    model: str
    grpc_scheme, http_scheme = "v2+grpc", "v2+http"

    def __init__(self, work_dir: Path | None, startup_timeout_s: float) -> None:
        super().__init__(work_dir, startup_timeout_s)
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def ready_urls(self) -> list[str]:
        # the server, then the model: both answer 200 only once it can serve (the protocol's health API); then
        # the metrics page, which listens on a port of its own and may open after the HTTP one does (Triton
        # starts its metrics service after its HTTP service, server src/main.cc StartEndpoints; a CI run with a
        # core busy read a refused connection there right after ready)
        return [
            f"{self.http_base}/v2/health/ready",
            f"{self.http_base}/v2/models/{self.model}/ready",
            self.metrics_url,
        ]
