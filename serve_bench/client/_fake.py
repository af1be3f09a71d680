"""An in-memory transport for unit tests of code built on the client (no sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from serve_bench.client._base import ModelStatus, PreparedRequest, SignatureInfo, TensorInfo

if TYPE_CHECKING:
    from serve_bench.client._client import Client

__all__ = ["FakeTransport", "fake_client"]

Handler = Callable[[dict[str, np.ndarray]], "dict[str, np.ndarray] | Awaitable[dict[str, np.ndarray]]"]


def fake_client(transport: FakeTransport, model: str = "fake") -> Client:
    """A Client over ``transport`` that already knows its signatures (no metadata call, no event loop)."""
    from serve_bench.client._client import Client

    client = Client(transport, model)
    client.signatures = transport.signatures
    return client


class FakeTransport:
    """Calls ``handler(inputs)`` for each request; counts calls and the peak in flight."""

    def __init__(
        self,
        handler: Handler,
        *,
        delay: float = 0.0,
        url: str = "fake://local",
        signatures: dict[str, SignatureInfo] | None = None,
    ) -> None:
        self.url = url
        self.handler = handler
        self.delay = delay
        self.signatures = signatures or {}
        self.calls = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.server_identity = ""
        self.output_dtypes: dict[str, int] = {}

    def encode(self, inputs: dict[str, np.ndarray], signature: str) -> Any:
        # a real byte count, so size bookkeeping behaves as with the real transports
        return _Payload(
            {k: np.array(v, copy=True) for k, v in inputs.items()}, sum(np.asarray(v).nbytes for v in inputs.values())
        )

    async def send(self, request: PreparedRequest, timeout: float | None) -> Any:
        self.calls += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            # a real transport always suspends; so does the fake, or callers' loops would starve
            await asyncio.sleep(self.delay)
            result = self.handler(request.payload.inputs)
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
            return result
        finally:
            self.in_flight -= 1

    def decode(self, raw: Any) -> dict[str, np.ndarray]:
        outputs: dict[str, np.ndarray] = raw  # the handler's answer, already arrays
        return outputs

    async def metadata(self, timeout: float | None) -> dict[str, SignatureInfo]:
        return self.signatures

    async def status(self, timeout: float | None) -> ModelStatus:
        return ModelStatus({1: "AVAILABLE"})

    async def aclose(self) -> None:
        return None


class _Payload:
    def __init__(self, inputs: dict[str, np.ndarray], nbytes: int) -> None:
        self.inputs = inputs
        self._nbytes = nbytes

    def __len__(self) -> int:
        return self._nbytes


def image_signature(height: int, width: int, features: int) -> dict[str, SignatureInfo]:
    """The signature every serve-bench export has, for fakes that mimic one."""
    return {
        "serving_default": SignatureInfo(
            "serving_default",
            {"images": TensorInfo(1, (-1, height, width, 3))},
            {"features": TensorInfo(1, (-1, features))},
        )
    }
