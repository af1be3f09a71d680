"""A blocking wrapper for scripts: the async client on a private event loop thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np

from serve_bench.client._base import ModelStatus, SignatureInfo
from serve_bench.client._client import DEFAULT_TIMEOUT, Client, connect

__all__ = ["SyncClient", "connect_sync"]

T = TypeVar("T")


class SyncClient:
    def __init__(
        self,
        url: str,
        model: str,
        signature: str = "serving_default",
        version: int | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        **options: Any,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="serve-bench-client", daemon=True)
        self._thread.start()
        try:
            self._client: Client = self._run(self._open(url, model, signature, version, timeout, options))
        except BaseException:
            self._stop_loop()
            raise

    async def _open(self, *args: Any) -> Client:
        url, model, signature, version, timeout, options = args
        return await connect(url, model, signature, version, timeout, **options)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def client(self) -> Client:
        return self._client

    def predict(self, inputs: dict[str, Any], timeout: float | None = None) -> dict[str, np.ndarray]:
        return self._run(self._client.predict(inputs, timeout))

    def metadata(self) -> dict[str, SignatureInfo]:
        return self._run(self._client.metadata())

    def status(self) -> ModelStatus:
        return self._run(self._client.status())

    def close(self) -> None:
        if self._loop.is_running():
            self._run(self._client.aclose())
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect_sync(
    url: str,
    model: str,
    signature: str = "serving_default",
    version: int | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    **options: Any,
) -> SyncClient:
    """Blocking ``connect``: ``with connect_sync("grpc://localhost:8500", "inception_v3") as c: c.predict(...)``."""
    return SyncClient(url, model, signature, version, timeout, **options)
