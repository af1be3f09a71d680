"""Real servers on free ports for tests: the local server on a background event loop, or as its own
`serve-bench serve` process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from serve_bench.export import BatchingParams
from serve_bench.server import LocalServer, ModelEntry, ServerConfig
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


class ServerThread:
    """Runs a LocalServer on its own event loop in a thread (tests keep their own loop)."""

    def __init__(self, config: ServerConfig) -> None:
        self.server = LocalServer(config)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=120)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(grace=5), self.loop).result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.server.ports.grpc}"

    @property
    def grpc_url(self) -> str:
        return f"grpc://127.0.0.1:{self.server.ports.grpc}"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.server.ports.rest}"

    def batch_stats(self, model: str = "tiny", signature: str = "serving_default"):
        core = self.server.core
        return next(s.stats for (name, _, sig), s in core._schedulers.items() if name == model and sig == signature)


@contextmanager
def local_server(
    models_dir: Path,
    *,
    models: tuple[str, ...] = ("tiny",),
    batching: BatchingParams | None = None,
    metrics_path: str | None = "/monitoring/prometheus/metrics",
    max_body_bytes: int = 256 << 20,
    warmup: bool = True,
) -> Iterator[ServerThread]:
    config = ServerConfig(
        models=tuple(ModelEntry(name, models_dir / name) for name in models),
        port=_free(),
        rest_api_port=_free(),
        batching=batching,
        metrics_path=metrics_path,
        max_body_bytes=max_body_bytes,
        enable_model_warmup=warmup,
    )
    with ServerThread(config) as running:
        yield running


def _free() -> int:
    from tests.conftest import free_port

    return free_port()


class ServeProcess:
    """``serve-bench serve`` as its own process on free ports, started and ready to answer REST."""

    def __init__(self, models_dir: Path, *flags: str, model: str = "tiny", timeout: float = 120) -> None:
        self.model = model
        self.grpc_port, self.rest_port = free_port(), free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "serve_bench",
                "serve",
                "--model_name",
                model,
                "--model_base_path",
                str(models_dir / model),
                "--port",
                str(self.grpc_port),
                "--rest_api_port",
                str(self.rest_port),
                *flags,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.process.kill()
            raise

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.process.stdout.read() if self.process.stdout else ""
                raise AssertionError(f"server exited early: {output}")
            try:
                with urllib.request.urlopen(f"{self.rest_url}/v1/models/{self.model}", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("server did not become ready")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
