"""The serving core shared by the gRPC and REST front ends: resolve, validate, run, count."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from serve_bench import __version__
from serve_bench._server_facts import LOCAL_IDENTITY
from serve_bench.server._batching import BatchScheduler, BatchThreads
from serve_bench.server._budget import COST_FACTOR, MemoryBudget
from serve_bench.server._config import ServerConfig
from serve_bench.server._errors import ServingError
from serve_bench.server._metrics import Metrics
from serve_bench.server._runtime import DEFAULT_SIGNATURE, ModelRegistry, Servable, Signature

__all__ = ["ServingCore", "identity", "keep_request_buffers", "record_request"]

_STOP = None  # what a worker takes as the signal to end


def record_request(metrics: Metrics, model: str, api: str, entrypoint: str, status: str, started: float) -> None:
    """request_count for every request, request_latency for OK ones only: gRPC Predict as
    model_servers/prediction_service_impl.cc:52-59 (API "Predict", "GRPC"), REST as
    model_servers/http_server.cc:194-201 (API = the URL verb, "" for GETs, "REST")."""
    if status == "OK":
        metrics.observe("request_latency", int((time.perf_counter() - started) * 1e6), (model, api, entrypoint))
    metrics.inc("request_count", (model, status))


def identity(registry: ModelRegistry) -> str:
    """What the server calls itself in every metadata answer (gRPC x-serve-bench-server, REST Server):
    ``serve-bench-local/<version>``, then, for a runtime other than TensorFlow, what that runtime reports in
    effect, so a client records what ran: ``serve-bench-local/0.1.0 (runtime jax; device gpu:0 ...)``."""
    name = f"{LOCAL_IDENTITY}/{__version__}"
    for model in registry.models.values():
        for servable in model.servables.values():
            signature = servable.signatures.get(DEFAULT_SIGNATURE)
            runner = signature.runner if signature is not None else None
            if runner is not None:
                said = "; ".join(f"{k} {v}" for k, v in runner.in_effect.items() if k != "runtime")
                # header values are ASCII without line breaks
                text = f"runtime {servable.runtime.runtime}; {said}".encode("ascii", "replace").decode()
                return f"{name} ({' '.join(text.split())})"
    return name


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 << 20  # the largest glibc takes (HEAP_MAX_SIZE / 2 on 64-bit)
_TRIM_THRESHOLD = 128 << 20


def keep_request_buffers() -> bool:
    """Let the C heap keep the memory of one request for the next instead of handing it back to the OS.

    glibc serves blocks above M_MMAP_THRESHOLD by mmap and returns the top of its heap once more than
    M_TRIM_THRESHOLD is free there; both follow the largest block freed so far (the trim threshold twice it).
    A gRPC request holds its tensor three times at once (gRPC's message, protobuf's parse, the decoded
    bytes), more than twice one block, so every request's memory went back to the OS and came again as fresh
    pages, each one faulted in and zeroed: 3.6 ms per InceptionV3 image on a 2-core VM, against 1.2 ms when
    kept (benchmarks/server_overhead.py --stub). Blocks up to 32 MB now come from the heap, and up to 128 MB
    of it stays free for the next request; the budget's malloc_trim after large requests
    (serve_bench.server._budget) still returns what a burst of them took. False where the C library is not
    glibc (no mallopt): nothing changes there."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = getattr(ctypes.CDLL(name), "mallopt", None) if name else None
    except OSError:
        return False
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # its request went away while the run went on: the answer is dropped
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


class _Workers:
    """The unbatched runs' threads: a ThreadPoolExecutor's semantics (up to ``size`` threads, started as the
    runs need them; a run whose request was cancelled before it started is not run; ``close`` waits for every
    queued run) with the answer sent to the event loop by one call_soon_threadsafe. loop.run_in_executor chains
    a concurrent.futures.Future (a Condition, its callbacks) to an asyncio one: 40 µs more per request on a
    2-core VM (benchmarks/server_overhead.py)."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads that finished a run and wait for the next (a hint, as ThreadPoolExecutor's)
        self._lock = threading.Lock()
        self._closed = False

    def run(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """``function(*args)`` on a worker thread; its result (or exception) as a future of the running loop."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._closed:  # ThreadPoolExecutor.submit's words
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._jobs.put((loop, future, function, args))
            if self._idle:
                self._idle -= 1
                return future
            if len(self._threads) >= self._size:
                return future
            thread = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
            self._threads.append(thread)
        thread.start()
        return future

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            loop, future, function, args = job
            del job
            if not future.cancelled():
                result, error = None, None
                try:
                    result = function(*args)
                except BaseException as exc:  # handed to the awaiting request, as run_in_executor hands it
                    error = exc
                try:
                    loop.call_soon_threadsafe(_settle, future, result, error)
                except RuntimeError:  # the loop has closed: nobody waits for this answer
                    pass
                # hold nothing of the request (its tensors, its answer) while waiting for the next run
                del result, error
            del loop, future, function, args
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Let every queued run finish, then end the threads (ThreadPoolExecutor.shutdown(wait=True))."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(_STOP)
        for thread in threads:
            thread.join()


class ServingCore:
    def __init__(self, config: ServerConfig, registry: ModelRegistry, metrics: Metrics) -> None:
        self.config = config
        self.registry = registry
        self.metrics = metrics
        self._workers = _Workers(config.unbatched_threads, "predict")
        keep_request_buffers()
        self._schedulers: dict[tuple[str, int, str], BatchScheduler] = {}
        # one pool of batch threads for every queue, as tensorflow_model_server's SharedBatchScheduler
        self._batch_threads = BatchThreads(config.batching) if config.batching is not None else None
        self.in_flight = 0
        # What REST bodies being parsed and gRPC tensors being served may hold at once.
        self.budget = MemoryBudget(max(1 << 30, COST_FACTOR * config.max_body_bytes))
        self.identity = identity(registry)

    def scheduler(self, servable: Servable, signature: Signature) -> BatchScheduler | None:
        """One scheduler per model version and signature, as TF Serving's BatchingSession keeps."""
        if self.config.batching is None:
            return None
        key = (servable.name, servable.version, signature.name)
        scheduler = self._schedulers.get(key)
        if scheduler is None:
            scheduler = BatchScheduler(
                lambda inputs: self._timed_run(servable, signature, inputs),
                self.config.batching,
                self.metrics,
                self._batch_threads,
            )
            self._schedulers[key] = scheduler
        return scheduler

    def _timed_run(
        self, servable: Servable, signature: Signature, inputs: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        started = time.perf_counter()
        outputs = servable.run(signature, inputs)
        if self.config.batching is None:  # with batching, predict() times the batching session's Run instead
            self._record_runtime(servable.name, started)
        return outputs

    def _record_runtime(self, model: str, started: float) -> None:
        """runtime_latency around the session's Run, successful runs only, whole microseconds
        (servables/tensorflow/predict_util.cc:108-115); with batching that Run includes the queue."""
        self.metrics.observe("runtime_latency", int((time.perf_counter() - started) * 1e6), (model, "Predict", "TF1"))

    async def predict(
        self,
        model: str,
        version: int | None,
        label: str | None,
        signature_name: str,
        inputs: dict[str, np.ndarray],
        output_filter: list[str],
        entrypoint: str,
        started: float | None = None,
        timeout: float | None = None,
    ) -> tuple[Servable, dict[str, np.ndarray]]:
        started = started if started is not None else time.perf_counter()
        self.in_flight += 1
        status = "OK"
        try:
            servable = self.registry.get(model, version, label)
            signature = servable.signature(signature_name)
            outputs_wanted = signature.output_names(output_filter)
            size = signature.validate(inputs)
            scheduler = self.scheduler(servable, signature)
            if scheduler is not None:
                run_started = time.perf_counter()
                outputs = await scheduler.submit(inputs, size, timeout)  # the gRPC deadline, as RunOptions
                self._record_runtime(servable.name, run_started)
            else:
                outputs = await self._workers.run(self._timed_run, servable, signature, inputs)
            return servable, {alias: outputs[alias] for alias in outputs_wanted}
        except ServingError as exc:
            status = exc.code
            raise
        except asyncio.CancelledError:
            status = "CANCELLED"
            raise
        except Exception:
            status = "INTERNAL"  # never count a failure as OK
            raise
        finally:
            self.in_flight -= 1
            if entrypoint == "GRPC":  # REST requests are counted by the REST front end, GETs included
                record_request(self.metrics, model, "Predict", "GRPC", status, started)

    def status(self, model: str, version: int | None, label: str | None) -> list[tuple[int, str]]:
        """(version, state) pairs as GetModelStatus reports them
        (model_servers/get_model_status_impl.cc:83-110): one version when asked, else all;
        a version label is not looked at there, so it is not here."""
        versions = self.registry.models[model].servables if model in self.registry.models else {}
        if version is not None:
            if version not in versions:
                raise ServingError("NOT_FOUND", f"Could not find version {version} of model {model}")
            return [(version, "AVAILABLE")]
        if not versions:
            raise ServingError("NOT_FOUND", f"Could not find any versions of model {model}")
        return [(v, "AVAILABLE") for v in sorted(versions)]

    def signature_defs(self, model: str, version: int | None, label: str | None) -> tuple[Servable, dict[str, Any]]:
        servable = self.registry.get(model, version, label)
        return servable, servable.signature_defs

    async def drain(self) -> None:
        for scheduler in self._schedulers.values():
            await scheduler.drain()
        while self.in_flight:
            await asyncio.sleep(0.005)

    def close(self) -> None:
        for scheduler in self._schedulers.values():
            scheduler.close()
        self._workers.close()
