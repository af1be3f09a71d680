"""The local server's lifecycle: load models, bind gRPC and REST, drain on shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from dataclasses import dataclass

from aiohttp import web
from grpc import aio

from serve_bench._server_facts import LOCAL_IDENTITY
from serve_bench._tf import import_tensorflow, tensorflow_installed
from serve_bench.errors import UserError, first_line
from serve_bench.runtimes import record
from serve_bench.server._config import ServerConfig, compile_sizes
from serve_bench.server._core import ServingCore
from serve_bench.server._errors import ServingError
from serve_bench.server._grpc import SERVER_OPTIONS, GrpcService, add_services
from serve_bench.server._metrics import Metrics
from serve_bench.server._rest import make_app
from serve_bench.server._runtime import Model, ModelRegistry, Servable

__all__ = ["LocalServer"]

log = logging.getLogger("serve_bench.server")


class _NotHttp1(logging.Filter):
    """One warning line, not an error with a traceback, for a client that speaks HTTP/2 on the REST port: a gRPC
    client sent there opens with HTTP/2's preface ("PRI * HTTP/2.0"), which aiohttp refuses with BadHttpMessage
    ("Pause on PRI/Upgrade") and logs through ``aiohttp.server`` as an error with its traceback. Other
    BadHttpMessages (a header too long, a body cut short, a bad status line) are left as aiohttp says them.
    aiohttp itself logs the commoner non-HTTP traffic (BadHttpMethod on a connection's first request) at debug
    level as noise (web_protocol.py, handle_error). The client is told in its own words (``cannot talk to ...:
    answers in HTTP/1.x``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from aiohttp.http_exceptions import BadHttpMessage

        exc = record.exc_info[1] if record.exc_info else None
        # HTTP/2's preface only: a header too long, a body cut short (BadHttpMessage too) stay errors as aiohttp says
        if isinstance(exc, BadHttpMessage) and str(exc.message).startswith("Pause on PRI/Upgrade"):
            record.msg = "REST port: a client sent what is not HTTP/1.x (%s); a gRPC client wants the gRPC port"
            record.args = ("HTTP/2's preface, PRI * HTTP/2.0",)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_NOT_HTTP1 = _NotHttp1()


@dataclass(frozen=True)
class BoundPorts:
    grpc: int
    rest: int  # 0 when REST is disabled


class LocalServer:
    """A TF-Serving-compatible server in this process.

    ``await server.start()`` loads every model (replaying warm-up records) and
    binds the ports (0 picks a free port; see ``server.ports``);
    ``await server.stop()`` stops accepting, finishes in-flight requests and
    releases everything.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self.core: ServingCore | None = None
        self.ports: BoundPorts | None = None
        self._grpc: aio.Server | None = None
        self._grpc_service: GrpcService | None = None
        self._runner: web.AppRunner | None = None

    def load(self) -> ModelRegistry:
        # a standalone runtime runs without TensorFlow where there is none (a GPU host), jax in every case
        kept = record(self.config.runtime.runtime)
        alone = not kept.beside_tensorflow or (kept.standalone and not tensorflow_installed())
        tf = None if alone else import_tensorflow()
        if tf is not None and self.config.intra_op_threads:
            tf.config.threading.set_intra_op_parallelism_threads(self.config.intra_op_threads)
        if tf is not None and self.config.inter_op_threads:
            tf.config.threading.set_inter_op_parallelism_threads(self.config.inter_op_threads)
        models = {}
        for entry in self.config.models:
            try:
                model = Model(entry, tf, self.config.runtime)
            except ServingError as exc:
                raise UserError(f"cannot load model {entry.name!r}: {exc.message}") from exc
            # compiling first, with warm-up off too (it is not a warm-up request): a record replayed before would
            # compile its size inside itself
            for servable in model.servables.values():
                self._compile(servable)
            if self.config.enable_model_warmup:
                for servable in model.servables.values():
                    try:
                        count = servable.warm_up()
                    except ServingError as exc:
                        raise UserError(f"model {entry.name!r}: a warm-up request failed: {exc.message}") from exc
                    if count:
                        log.info("replayed %d warm-up requests for %s version %d", count, entry.name, servable.version)
            models[entry.name] = model
        return ModelRegistry(models)

    def _compile(self, servable: Servable) -> None:
        """A runtime that compiles per batch shape builds (and runs once), before the model is AVAILABLE, every
        size this server will run: --compile_batch_sizes, else the batcher's allowed_batch_sizes, else the sizes it
        can form (up to 64), else the sizes of the export's warm-up records."""
        sizes = compile_sizes(self.config, servable)
        if not sizes:
            return
        try:
            seconds = servable.compile(sizes)
        except ServingError as exc:
            raise UserError(f"model {servable.name!r}: compiling for batch sizes failed: {exc.message}") from exc
        except Exception as exc:  # the runtime's own kinds (an XLA error, out of device memory)
            raise UserError(f"model {servable.name!r}: compiling for batch sizes failed: {first_line(exc)}") from exc
        if seconds:
            ran = any(first is not None for _, first in seconds.values())
            log.info(
                "%s version %d: compiled batch sizes %s in %.1f s%s (%s)",
                servable.name,
                servable.version,
                ",".join(str(size) for size in seconds),
                sum(built + (first or 0.0) for built, first in seconds.values()),
                ", each run once" if ran else "",
                ", ".join(_ready(size, built, first) for size, (built, first) in seconds.items()),
            )

    async def start(self) -> BoundPorts:
        loop = asyncio.get_running_loop()
        registry = await loop.run_in_executor(None, self.load)
        self.core = ServingCore(self.config, registry, self.metrics)
        self._grpc = aio.server(options=SERVER_OPTIONS)
        self._grpc_service = add_services(self._grpc, self.core)
        try:
            grpc_port = self._grpc.add_insecure_port(f"{self.config.host}:{self.config.port}")
        except RuntimeError:  # grpcio >= 1.60 raises "Failed to bind" where it used to return 0
            grpc_port = 0
        if grpc_port == 0:
            raise UserError(
                f"cannot bind gRPC to {self.config.host}:{self.config.port} (in use, or not an address of this "
                "host?); choose --port or --host"
            )
        await self._grpc.start()
        rest_port = 0
        if self.config.rest_api_port:
            logging.getLogger("aiohttp.server").addFilter(_NOT_HTTP1)  # once: a logger holds a filter once
            self._runner = web.AppRunner(
                make_app(self.core, self.config.metrics_path),
                access_log=None,
                handle_signals=False,
                shutdown_timeout=60,
            )
            await self._runner.setup()
            site = web.TCPSite(
                self._runner, self.config.host, self.config.rest_api_port if self.config.rest_api_port > 0 else 0
            )
            try:
                await site.start()
            except OSError as exc:
                await self._grpc.stop(None)
                raise UserError(
                    f"cannot bind REST to {self.config.host}:{self.config.rest_api_port} "
                    f"({exc.strerror}); choose --rest_api_port"
                ) from exc
            rest_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.ports = BoundPorts(grpc_port, rest_port)
        return self.ports

    async def stop(self, grace: float = 30.0) -> None:
        """Stop accepting, let in-flight requests finish (up to ``grace`` seconds), release."""
        if self._grpc is not None:
            if self._grpc_service is not None:  # first let every call gRPC core holds reach a handler
                await self._grpc_service.quiesce(grace)
            await self._grpc.stop(grace)
        if self._runner is not None:
            await self._runner.cleanup()
        if self.core is not None:
            await asyncio.wait_for(self.core.drain(), timeout=grace)
            self.core.close()

    async def serve_forever(self) -> None:
        """Run until SIGINT or SIGTERM, then drain and return (the CLI exits 0)."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        ports = await self.start()
        names = ", ".join(self.core.registry.models) if self.core else ""
        rest = f"http://{self.config.host}:{ports.rest}" if ports.rest else "disabled"
        print(
            f"serve-bench local server ({LOCAL_IDENTITY}) serving {names}: grpc://{self.config.host}:{ports.grpc}, "
            f"REST {rest}"
            + (f", metrics {self.config.metrics_path}" if self.config.metrics_path else "")
            + (f", batching {self.config.batching}" if self.config.batching else ""),
            flush=True,
        )
        for notice in self.config.notices:
            print(notice, file=sys.stderr, flush=True)
        if self.config.ignored_flags:
            print(
                "accepted but not acted on by the local server: "
                + ", ".join(f"--{f}" for f in self.config.ignored_flags),
                file=sys.stderr,
                flush=True,
            )
        await stop.wait()
        print("shutting down: finishing in-flight requests", flush=True)
        await self.stop()


def _ready(size: int, built: float, first: float | None) -> str:
    return f"{size}: {built:.2f} s" + ("" if first is None else f" + first run {first * 1e3:.1f} ms")
