"""Restart the measured server with a configuration and wait until its model is AVAILABLE.

Five ways, one interface (``Restarter``, _restarter.py):
- ``LocalRestarter``: the local server as a subprocess (``python -m serve_bench serve``) on free ports;
- ``ComposeRestarter``: ``docker compose ... up -d --force-recreate --no-deps SERVICE`` with an override
  file that mounts the configuration's batching_parameters.txt and sets the server's flags;
- ``CommandRestarter``: a user's command template (Kubernetes, systemd, ...);
- ``TritonRestarter``, ``MLServerRestarter`` (_started.py): real tritonserver and MLServer, started by
  ``serve_bench.servers`` once per configuration.
The server package is never imported here: the local server runs in its own process.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from serve_bench.client import ServeBenchError, connect
from serve_bench.errors import UserError
from serve_bench.export import list_versions
from serve_bench.servers import LocalServerProcess, log_tail
from serve_bench.stats import Target
from serve_bench.sweep import launched_target
from serve_bench.tune._config import ServerConfig, TuneConfig
from serve_bench.tune._restarter import Restarter, StartFailed
from serve_bench.tune._spec import ServerSpec
from serve_bench.tune._started import STARTED_HERE

__all__ = [
    "CommandRestarter",
    "ComposeRestarter",
    "LocalRestarter",
    "make_restarter",
    "wait_available",
]


def _rest_state(status_url: str) -> str:
    """The model's state from TF Serving's REST status (GetModelStatus as JSON); "" when not answering."""
    try:
        with urllib.request.urlopen(status_url, timeout=2) as response:
            body = json.loads(response.read())
    except (OSError, ValueError, http.client.HTTPException):
        return ""
    states = [v.get("state", "") for v in body.get("model_version_status", []) if isinstance(v, dict)]
    return "AVAILABLE" if "AVAILABLE" in states else (states[0] if states else "")


async def _grpc_state(url: str, model: str) -> str:
    try:
        async with connect(url, model, timeout=2.0) as client:
            status = await client.status()
    except ServeBenchError:
        return ""
    return "AVAILABLE" if "AVAILABLE" in status.versions.values() else ",".join(status.versions.values())


async def wait_available(
    url: str, status_url: str, model: str, timeout_s: float, alive: subprocess.Popen[bytes] | None = None
) -> float:
    """Poll the model's status until AVAILABLE; return the seconds waited or raise StartFailed."""
    started = time.monotonic()
    state = ""
    while time.monotonic() - started < timeout_s:
        if alive is not None and alive.poll() is not None:
            raise StartFailed(f"the server exited with status {alive.returncode} before the model was AVAILABLE")
        state = await asyncio.to_thread(_rest_state, status_url) if status_url else await _grpc_state(url, model)
        if state == "AVAILABLE":
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    last = f" (last state {state})" if state else " (it never answered)"
    raise StartFailed(f"model {model!r} did not become AVAILABLE within {timeout_s:g} s{last}")


class LocalRestarter:
    """The local server (servers.LocalServerProcess) on free ports, one process per configuration, its
    log and monitoring config in the configuration's directory."""

    def __init__(self, spec: ServerSpec, model: str, work_dir: Path) -> None:
        self.spec = spec
        self.model = model
        self.models_dir = Path(spec.models_dir)
        self.server: LocalServerProcess | None = None

    def server_for(self, config: ServerConfig, batching_file: Path) -> LocalServerProcess:
        """The server process for ``config``, not started, its files beside ``batching_file``."""
        return LocalServerProcess(
            self.models_dir,
            self.model,
            extra_flags=tuple(_tf_serving(config).server_flags(str(batching_file.absolute()))),  # runs in its folder
            work_dir=batching_file.parent,
            startup_timeout_s=self.spec.startup_timeout_s,
        )

    async def start(self, config: ServerConfig, batching_file: Path, log_path: Path) -> Target:
        server = self.server_for(config, batching_file)
        server.log_path = log_path
        log_path.write_text("$ " + shlex.join(server.command()[1:]) + "\n")
        self.server = server
        process = server.launch()
        named = Target("local", "", self.spec.device, runtime=config.runtime)
        target = launched_target(named, server, "local", self.spec.protocol)
        try:
            await wait_available(
                target.url,
                f"{server.http_base}/v1/models/{self.model}",
                self.model,
                self.spec.startup_timeout_s,
                process,
            )
        except StartFailed as exc:
            await self.stop()
            raise StartFailed(exc.why, log_tail(log_path)) from None
        except BaseException:  # Ctrl-C while the server starts: never leave it running
            await asyncio.shield(self.stop())
            raise
        return target

    async def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            await asyncio.to_thread(server.stop)

    async def close(self) -> None:
        await self.stop()


async def _run_logged(command: list[str], log_path: Path, timeout_s: float, what: str) -> None:
    """Run a restart command, its output appended to the configuration's log; raise StartFailed when it fails."""
    with open(log_path, "ab") as log:
        log.write(("$ " + shlex.join(command) + "\n").encode())
        log.flush()
        try:
            result = await asyncio.to_thread(
                subprocess.run,
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout_s,
            )
        except FileNotFoundError as exc:
            log.write(f"{exc}\n".encode())
            raise StartFailed(f"{what} could not run: {command[0]} not found") from None
        except subprocess.TimeoutExpired:
            raise StartFailed(f"{what} did not finish within {timeout_s:g} s", log_tail(log_path)) from None
    if result.returncode != 0:
        raise StartFailed(f"{what} failed with exit status {result.returncode}", log_tail(log_path))


class ComposeRestarter:
    """Recreate one Compose service with the configuration's batching file mounted and its flags set."""

    def __init__(self, spec: ServerSpec, model: str, work_dir: Path) -> None:
        self.spec = spec
        self.model = model
        self.work_dir = work_dir

    def _base(self, *files: str) -> list[str]:
        command = ["docker", "compose"]
        for path in files:
            command += ["-f", path]
        return command + (["--profile", self.spec.profile] if self.spec.profile else [])

    def override(self, config: TuneConfig, batching_file: Path) -> dict[str, object]:
        """The Compose override (JSON is YAML): mount the file where the service reads it, set the flags."""
        flags = [
            f
            for f in self.spec.flags
            if not f.startswith(
                ("--enable_batching", "--batching_parameters_file", "--tensorflow_intra_op", "--tensorflow_inter_op")
            )
        ]
        return {
            "services": {
                self.spec.service: {
                    "volumes": [f"{batching_file.resolve()}:{self.spec.container_batching_file}:ro"],
                    "command": [*flags, *config.server_flags(self.spec.container_batching_file)],
                }
            }
        }

    def restart_command(self, config: TuneConfig, batching_file: Path) -> list[str]:
        """Writes the override beside the batching file and returns the exact command that restarts the service."""
        override = batching_file.parent / "compose.override.json"
        override.write_text(json.dumps(self.override(config, batching_file), indent=2) + "\n")
        return [
            *self._base(self.spec.compose_file, str(override)),
            "up",
            "-d",
            "--force-recreate",
            "--no-deps",
            self.spec.service,
        ]

    def restore_command(self) -> list[str]:
        return [*self._base(self.spec.compose_file), "up", "-d", "--force-recreate", "--no-deps", self.spec.service]

    async def start(self, config: ServerConfig, batching_file: Path, log_path: Path) -> Target:
        await _restart_tf_serving(self, config, batching_file, log_path, "docker compose")
        await _wait_logged(self.spec, self.model, log_path)
        return _remote_target(self.spec)

    async def stop(self) -> None:
        return None  # the next configuration's --force-recreate replaces the container

    async def close(self) -> None:
        log = self.work_dir / "restore.log"
        try:
            await _run_logged(self.restore_command(), log, self.spec.startup_timeout_s, "docker compose (restore)")
        except StartFailed:
            pass  # nothing to restore when the tune never reached Docker; the log says what happened


class CommandRestarter:
    """A user's restart (and optional stop) command template, run through the shell."""

    def __init__(self, spec: ServerSpec, model: str, work_dir: Path) -> None:
        self.spec = spec
        self.model = model
        self._stop: tuple[str, Path] | None = None

    def restart_command(self, config: TuneConfig, batching_file: Path) -> list[str]:
        path = str(batching_file.resolve())
        text = self.spec.restart.format(
            batching_file=shlex.quote(path), config=config.id, flags=shlex.join(config.server_flags(path))
        )
        return ["/bin/sh", "-c", text]

    async def start(self, config: ServerConfig, batching_file: Path, log_path: Path) -> Target:
        await _restart_tf_serving(self, config, batching_file, log_path, "the restart command")
        if self.spec.stop:
            self._stop = (
                self.spec.stop.format(
                    batching_file=shlex.quote(str(batching_file.resolve())), config=config.id, flags=""
                ),
                log_path,
            )
        await _wait_logged(self.spec, self.model, log_path)
        return _remote_target(self.spec)

    async def stop(self) -> None:
        todo, self._stop = self._stop, None
        if todo is not None:
            try:
                await _run_logged(["/bin/sh", "-c", todo[0]], todo[1], self.spec.startup_timeout_s, "the stop command")
            except StartFailed:
                pass  # the stop's failure is in the log; the next restart decides whether the server comes up

    async def close(self) -> None:
        await self.stop()


async def _wait_logged(spec: ServerSpec, model: str, log_path: Path) -> None:
    try:
        await wait_available(spec.url, spec.status_url, model, spec.startup_timeout_s)
    except StartFailed as exc:
        with open(log_path, "a") as log:
            log.write(f"serve-bench tune: {exc.why}\n")
        raise StartFailed(exc.why, log_tail(log_path)) from None


def _remote_target(spec: ServerSpec) -> Target:
    return Target(spec.service or "server", spec.url, spec.device, spec.metrics_url, "")


def _tf_serving(config: ServerConfig) -> TuneConfig:
    if not isinstance(config, TuneConfig):
        raise TypeError(f"{type(config).__name__} is not a TF Serving configuration")
    return config


async def _restart_tf_serving(
    restarter: ComposeRestarter | CommandRestarter, config: ServerConfig, batching_file: Path, log_path: Path, what: str
) -> None:
    """Run ``restarter``'s command for ``config`` (its output in ``log_path``), waiting as long as the spec says."""
    command = restarter.restart_command(_tf_serving(config), batching_file)
    await _run_logged(command, log_path, restarter.spec.startup_timeout_s, what)


def make_restarter(spec: ServerSpec, model: str, work_dir: Path) -> Restarter:
    if spec.kind == "local" or spec.kind in STARTED_HERE:  # started here, from models_dir: the model is there
        models = Path(spec.models_dir)
        if not list_versions(models / model):
            raise UserError(
                f"[server] models_dir {spec.models_dir!r} holds no exported version of {model}; export it there "
                f"(serve-bench export {model} --models-dir {shlex.quote(spec.models_dir)}) or name the folder it is in"
            )
    kinds: dict[str, Callable[[ServerSpec, str, Path], Restarter]] = {
        "local": LocalRestarter,
        "compose": ComposeRestarter,
        "command": CommandRestarter,
        **STARTED_HERE,
    }
    return kinds[spec.kind](spec, model, work_dir)
