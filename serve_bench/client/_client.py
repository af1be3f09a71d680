"""connect(): one async client over any transport, with inputs checked against the signature."""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from serve_bench._server_facts import LOCAL, LOCAL_IDENTITY, V2
from serve_bench.client._base import ModelStatus, PreparedRequest, SignatureInfo, Transport
from serve_bench.client._errors import ConnectError, InvalidArgument, NotFound, RequestTimeout, ServeBenchError
from serve_bench.codec import DT_STRING, DTYPE_TO_NUMPY, dtype_name
from serve_bench.stats import parse_target, server_kind_name

__all__ = ["Client", "Response", "connect", "server_kind", "server_runtime"]

DEFAULT_TIMEOUT = 30.0
METADATA_TIMEOUT_S = 5.0  # the least a metadata call waits, whatever the requests' timeout


@dataclass(frozen=True)
class Response:
    outputs: dict[str, np.ndarray]
    send_seconds: float  # from send until the raw response was received
    decode_seconds: float
    nbytes: int
    received_nbytes: int = 0  # the raw response's size (0 when the transport's raw answer is not bytes)


def server_runtime(client: Client) -> tuple[str, str]:
    """(runtime, what it runs with) as the local server says it in its identity, for a runtime other than
    TensorFlow: ("jax", "runtime jax; device gpu:0 NVIDIA H100 80GB HBM3; precision tf32 ..."); ("", "")
    when the server says nothing of it."""
    identity = client.transport.server_identity or ""
    if not identity.startswith(LOCAL_IDENTITY) or "(runtime " not in identity:
        return "", ""
    said = identity[identity.index("(runtime ") + 1 :].removesuffix(")")
    return said.split(";", 1)[0].removeprefix("runtime ").strip(), said


def server_kind(client: Client, declared: str = "") -> tuple[str, str]:
    """(kind, version) of the server behind ``client``: the local server names itself, and so do
    Triton and MLServer ("triton/2.51.0", "mlserver/1.7.1" from their server metadata); else as declared."""
    identity = client.transport.server_identity or ""
    if LOCAL_IDENTITY in identity:  # the local server's identity, as TF Serving's Server header would be
        _, _, version = identity.partition("/")
        return LOCAL, version.split()[0] if version else ""
    name, _, version = identity.partition("/")
    if name.strip().lower() in V2:  # they name themselves "<name>/<version>" in GET /v2
        return name.strip().lower(), version.strip()
    return (server_kind_name(declared) if declared else "unknown"), ""


class Client:
    """An async client for one model on one server.

    ``predict(inputs)`` encodes, sends and decodes. For load generation,
    ``prepare(inputs)`` encodes once and ``predict_prepared(prepared)`` sends it
    again and again, reporting send and decode times apart.
    """

    def __init__(
        self,
        transport: Transport,
        model: str,
        signature: str = "serving_default",
        version: int | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> None:
        self.transport = transport
        self.url = transport.url
        self.model = model
        self.signature = signature
        self.version = version
        self.timeout = timeout
        self.signatures: dict[str, SignatureInfo] = {}

    async def open(self, fetch_metadata: bool = True) -> Client:
        """Check the target answers (within the timeout) and learn the signature."""
        if fetch_metadata:
            try:
                await self._learn_signatures()
            except BaseException:
                await self.aclose()  # the caller gets no client to close: release the channel/session here
                raise
        return self

    async def _learn_signatures(self) -> None:
        # at least METADATA_TIMEOUT_S: a --timeout set short to count slow answers as failures is not meant for it
        deadline = None if self.timeout is None else max(self.timeout, METADATA_TIMEOUT_S)
        try:
            self.signatures = await self.transport.metadata(deadline)
        except (NotFound, ConnectError):
            raise
        except RequestTimeout as exc:
            if exc.status == "504":  # a proxy's Gateway Timeout answered: the target is there, behind it
                self.signatures = {}
                return
            # a server that answers nothing would answer no request either: a listener that is not this protocol's
            # server (bench http:// against a port that accepts and stays silent ran a whole point of timeouts)
            within = f" within {deadline:g} s" if deadline else ""
            raise ConnectError(
                f"{self.url}: no answer to the model's metadata{within} ({exc}); is the server there, and is it "
                "this protocol's port?",
                status=exc.status,
                url=self.url,
            ) from exc
        except ServeBenchError:
            # A server without GetModelMetadata: requests are sent unchecked.
            self.signatures = {}
        if self.signatures and self.signature not in self.signatures:
            if self.url.lower().startswith("v2+"):
                # v2 has no signatures; a second graph of one SavedModel is served as a model of its own
                example = f" (e.g. {self.model}_bytes)" if self.signature == "serving_bytes" else ""
                raise InvalidArgument(
                    f"{self.url}: an Open Inference Protocol model has one signature (serving_default), not "
                    f"{self.signature!r}: serve that graph as a model of its own{example} and connect to it",
                    url=self.url,
                )
            raise InvalidArgument(
                f"{self.url}: model {self.model!r} has no signature {self.signature!r}; "
                f"it has {', '.join(sorted(self.signatures))}",
                url=self.url,
            )
        info = self.signatures.get(self.signature)
        if info is not None:
            self.transport.output_dtypes = {k: v.dtype for k, v in info.outputs.items()}

    @property
    def signature_info(self) -> SignatureInfo | None:
        return self.signatures.get(self.signature)

    def check(self, inputs: dict[str, np.ndarray]) -> int:
        """Refuse wrong names, dtypes or shapes before sending; return the batch size."""
        if not inputs:
            raise InvalidArgument("no inputs given", url=self.url)
        info = self.signature_info
        if info is not None:
            if set(inputs) != set(info.inputs):
                raise InvalidArgument(
                    f"inputs {sorted(inputs)} do not match signature {self.signature!r} of {self.model!r}, "
                    f"which takes {sorted(info.inputs)}",
                    url=self.url,
                )
            for alias, array in inputs.items():
                spec = info.inputs[alias]
                if spec.dtype == DT_STRING:
                    ok = array.dtype == object or array.dtype.kind in ("S", "U")
                else:
                    ok = array.dtype == DTYPE_TO_NUMPY.get(spec.dtype)
                if not ok:
                    raise InvalidArgument(
                        f"input {alias!r} is {array.dtype}; the signature wants {dtype_name(spec.dtype)}", url=self.url
                    )
                if spec.shape is not None and (
                    len(spec.shape) != array.ndim or any(w not in (-1, g) for w, g in zip(spec.shape, array.shape))
                ):
                    want = ["?" if d == -1 else d for d in spec.shape]
                    raise InvalidArgument(
                        f"input {alias!r} has shape {list(array.shape)}; the signature wants {want}", url=self.url
                    )
        sizes = {np.shape(a)[0] if np.ndim(a) else 1 for a in inputs.values()}
        if len(sizes) != 1:
            raise InvalidArgument(f"inputs disagree on the batch size: {sorted(sizes)}", url=self.url)
        return sizes.pop()

    def prepare(self, inputs: dict[str, Any]) -> PreparedRequest:
        arrays = {k: np.asarray(v) for k, v in inputs.items()}
        items = self.check(arrays)
        started = time.perf_counter()
        payload = self.transport.encode(arrays, self.signature)
        return PreparedRequest(payload, items, len(payload), time.perf_counter() - started, self.signature)

    async def predict_prepared(self, prepared: PreparedRequest, timeout: float | None = None) -> Response:
        started = time.perf_counter()
        raw = await self.transport.send(prepared, timeout if timeout is not None else self.timeout)
        received = time.perf_counter()
        outputs = self.transport.decode(raw)
        size = len(raw) if isinstance(raw, (bytes, bytearray)) else 0
        return Response(outputs, received - started, time.perf_counter() - received, prepared.nbytes, size)

    async def predict(self, inputs: dict[str, Any], timeout: float | None = None) -> dict[str, np.ndarray]:
        return (await self.predict_prepared(self.prepare(inputs), timeout)).outputs

    async def metadata(self) -> dict[str, SignatureInfo]:
        self.signatures = await self.transport.metadata(self.timeout)
        return self.signatures

    async def status(self) -> ModelStatus:
        return await self.transport.status(self.timeout)

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Connecting:
    """``await connect(...)`` or ``async with connect(...) as client``."""

    def __init__(self, client: Client, fetch_metadata: bool) -> None:
        self._client = client
        self._fetch = fetch_metadata

    def __await__(self) -> Generator[Any, None, Client]:
        return self._client.open(self._fetch).__await__()

    async def __aenter__(self) -> Client:
        return await self._client.open(self._fetch)

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()


def connect(
    url: str,
    model: str,
    signature: str = "serving_default",
    version: int | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    *,
    row_format: bool = False,
    connection_limit: int = 100,
    fetch_metadata: bool = True,
    binary: bool | None = None,
) -> _Connecting:
    """A client for ``model`` at ``grpc://host:port`` or ``http(s)://host:port`` (TF Serving's API), or
    ``v2+grpc://host:port`` or ``v2+http(s)://host:port`` (the Open Inference Protocol: Triton, MLServer).

    Opening fetches the model's signatures (NotFound for an unknown model,
    ConnectError naming the URL when nothing answers within ``timeout``). A v2 model has one
    signature, ``serving_default``. ``row_format`` applies to TF Serving's REST API, ``binary`` to
    v2 REST: None sends tensors with the binary extension when the server lists it (Triton) and
    as JSON otherwise (MLServer, or when the metadata is not fetched); True or False forces one.
    """
    address = parse_target(url)
    transport: Transport
    if address.protocol == "grpc":
        from serve_bench.client._grpc import GrpcTransport

        transport = GrpcTransport(address.authority, model, version, url)
    elif address.protocol == "v2-grpc":
        from serve_bench.client._v2_grpc import V2GrpcTransport

        transport = V2GrpcTransport(address.authority, model, version, url)
    elif address.protocol == "v2-rest":
        from serve_bench.client._v2_rest import V2RestTransport

        transport = V2RestTransport(
            address.http_base, model, version, url, binary=binary, connection_limit=connection_limit
        )
    else:
        from serve_bench.client._rest import RestTransport

        transport = RestTransport(
            address.http_base, model, version, row_format=row_format, connection_limit=connection_limit
        )
    return _Connecting(Client(transport, model, signature, version, timeout), fetch_metadata)
