"""The seam every transport implements, and the values that cross it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = [
    "ModelStatus",
    "PreparedRequest",
    "SignatureInfo",
    "TensorInfo",
    "Transport",
    "probe_timeout",
]

# How long a client told UNIMPLEMENTED or 404 waits for the other protocol's server metadata before it says which
# scheme to use: on the way to an error, so short (a proxy that stalls there must not hold the error for 30 s)
_PROBE_TIMEOUT_S = 5.0


def probe_timeout(timeout: float | None) -> float:
    """The probe's wait: the caller's timeout where it is shorter, else _PROBE_TIMEOUT_S."""
    return _PROBE_TIMEOUT_S if timeout is None else min(timeout, _PROBE_TIMEOUT_S)


@dataclass(frozen=True)
class TensorInfo:
    dtype: int  # tensorflow.DataType number
    shape: tuple[int, ...] | None  # -1 for an unknown dimension; None for unknown rank


@dataclass(frozen=True)
class SignatureInfo:
    name: str
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]


@dataclass(frozen=True)
class ModelStatus:
    versions: dict[int, str]  # version -> state ("AVAILABLE", ...)


@dataclass(frozen=True)
class PreparedRequest:
    """A request encoded once, ahead of the timed region; send it as often as you like."""

    payload: Any  # bytes for both transports
    items: int  # images in the batch (the first dimension)
    nbytes: int  # size on the wire
    encode_seconds: float
    signature: str = "serving_default"
    extra: dict[str, Any] = field(default_factory=dict)


class Transport(Protocol):
    """One small async interface per seam: gRPC, REST and the in-memory fake implement it."""

    url: str
    # what the server said it is ("serve-bench-local/0.1.0 …" from the local server; "" when it did not say)
    server_identity: str
    # output alias -> DataType number, learnt from the signature when a client opens; a transport whose
    # wire format carries no dtype (REST JSON) decodes with it
    output_dtypes: dict[str, int]

    async def send(self, request: PreparedRequest, timeout: float | None) -> Any:
        """Send a prepared request; return the raw (undecoded) response."""

    def decode(self, raw: Any) -> dict[str, np.ndarray]:
        """Turn a raw response into output arrays (timed separately from ``send``)."""

    def encode(self, inputs: dict[str, np.ndarray], signature: str) -> Any:
        """Encode inputs into this transport's wire payload."""

    async def metadata(self, timeout: float | None) -> dict[str, SignatureInfo]: ...

    async def status(self, timeout: float | None) -> ModelStatus: ...

    async def aclose(self) -> None: ...
