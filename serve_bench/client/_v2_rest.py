"""Open Inference Protocol REST transport (Triton, MLServer): ``/v2/models/{m}[/versions/{v}]/...``.

Tensors travel with Triton's binary tensor extension by default, as perf_analyzer and
tritonclient send them: a JSON header, then the raw tensors (``_v2_codec.encode_rest_request``).
Whether the server understands it is read from its metadata (``GET /v2`` lists
``binary_tensor_data``): MLServer 1.7.1 does not (its ``/infer`` parses the whole body as one
JSON ``InferenceRequest``, mlserver/rest/endpoints.py, and its server metadata lists no
extensions), so against it the transport falls back to JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import numpy as np
import orjson

from serve_bench.client._base import ModelStatus, PreparedRequest, SignatureInfo, probe_timeout
from serve_bench.client._errors import (
    ConnectError,
    InvalidArgument,
    RequestTimeout,
    ServeBenchError,
)
from serve_bench.client._http import http_call
from serve_bench.client._v2_codec import (
    BINARY_EXTENSION,
    HEADER_LENGTH,
    RestBody,
    decode_rest_response,
    encode_rest_request,
    listed_versions,
    signatures,
)
from serve_bench.codec import CodecError

__all__ = ["V2RestTransport", "open_inference_server_at"]


async def open_inference_server_at(
    session: aiohttp.ClientSession, base_url: str, target: str, timeout: float | None
) -> str | None:
    """What the server at ``base_url`` answers to the Open Inference Protocol's GET /v2 ("triton/2.51.0"), or None
    where it answers no server metadata of the protocol (a name and a list of extensions): how TF Serving's REST
    client, told 404, names the scheme to use. The list of extensions is what keeps out a server of both APIs whose
    GET /v2 names it without one (OpenVINO Model Server's ServerMetadataImpl), where a 404 means a model it lacks."""
    limit = probe_timeout(timeout)
    try:
        _, raw = await http_call(session, "GET", f"{base_url}/v2", target, limit)
        body = orjson.loads(raw)
    except (ServeBenchError, orjson.JSONDecodeError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("extensions"), list):
        return None
    name, version = body.get("name"), body.get("version", "")
    return f"{name}/{version}" if isinstance(name, str) and name else None


def _triples(tensors: Any) -> list[tuple[str, str, list[int]]]:
    return [(t["name"], t["datatype"], t["shape"]) for t in tensors or ()]


class V2RestTransport:
    """``v2+http(s)://host:port``.

    ``binary`` None (the default) sends binary tensors when the server lists the extension and JSON
    otherwise; True always binary (a server without the extension refuses it: MLServer 1.7.1 answers
    HTTP 500, FastAPI failing to echo the non-UTF-8 body in its own 422); False always JSON. Until
    the client opens (and with ``fetch_metadata=False``) None means JSON, which every v2 server reads.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        version: int | None,
        url: str,
        *,
        binary: bool | None = None,
        connection_limit: int = 100,
    ) -> None:
        self.url = url  # the target as given (v2+http://...), for errors; requests go to base_url
        self._base = base_url
        self.model = model
        self.version = version
        self.binary_asked = binary
        self.binary = binary is True  # None: decided by the server's metadata when the client opens
        self._model_url = f"{base_url}/v2/models/{model}" + (f"/versions/{version}" if version is not None else "")
        self._infer_url = self._model_url + "/infer"
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connection_limit))
        self.server_identity = ""  # "triton/2.51.0", "mlserver/1.7.1": from GET /v2 when the client opens
        self.extensions: tuple[str, ...] = ()
        self.output_dtypes: dict[str, int] = {}  # unused: v2 responses carry their datatype

    def encode(self, inputs: dict[str, np.ndarray], signature: str) -> RestBody:
        # v2 has no signatures: the client refused any but serving_default when it opened
        try:
            return encode_rest_request(inputs, self.binary)
        except CodecError as exc:
            raise InvalidArgument(f"{self.url}: {exc}", url=self.url) from exc

    async def _get(self, url: str, timeout: float | None) -> bytes:
        _, body = await http_call(self._session, "GET", url, self.url, timeout)
        return body

    async def send(self, request: PreparedRequest, timeout: float | None) -> tuple[bytes, str | None]:
        payload: RestBody = request.payload
        headers: Mapping[str, str]
        if payload.json_length is None:
            headers = {"Content-Type": "application/json"}
        else:
            headers = {"Content-Type": "application/octet-stream", HEADER_LENGTH: str(payload.json_length)}
        response_headers, body = await http_call(
            self._session, "POST", self._infer_url, self.url, timeout, payload.body, headers
        )
        return body, response_headers.get(HEADER_LENGTH)  # the JSON part's length when binary parts follow

    def decode(self, raw: tuple[bytes, str | None]) -> dict[str, np.ndarray]:
        body, json_length = raw
        try:
            return decode_rest_response(body, None if json_length is None else int(json_length))
        except (ValueError, KeyError, TypeError) as exc:  # CodecError and orjson's errors are ValueErrors
            raise ServeBenchError(f"{self.url}: malformed infer response: {exc!r}", url=self.url) from exc

    async def live(self, timeout: float | None) -> bool:
        """GET /v2/health/live: the server process answers (not that the model is loaded)."""
        try:
            await self._get(f"{self._base}/v2/health/live", timeout)
        except (ConnectError, RequestTimeout):
            raise
        except ServeBenchError:
            return False
        return True

    async def _server_metadata(self, timeout: float | None) -> str:
        """Reads GET /v2; returns the HTTP status it failed with ("" where it answered)."""
        failed = ""
        try:
            body = orjson.loads(await self._get(f"{self._base}/v2", timeout))
        except (ConnectError, RequestTimeout):
            raise
        except ServeBenchError as exc:
            body, failed = {}, exc.status or "error"  # a server without GET /v2: unnamed, no extensions known
        except orjson.JSONDecodeError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        name, version = body.get("name", ""), body.get("version", "")
        self.server_identity = f"{name}/{version}" if name else ""
        self.extensions = tuple(body.get("extensions") or ())
        if self.binary_asked is None:
            self.binary = BINARY_EXTENSION in self.extensions
        return failed

    async def _model_metadata(self, timeout: float | None) -> dict[str, Any]:
        raw = await self._get(self._model_url, timeout)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ServeBenchError(f"{self.url}: model metadata is not JSON: {exc}", url=self.url) from exc
        if not isinstance(body, dict):
            raise ServeBenchError(f"{self.url}: model metadata is not a JSON object", url=self.url)
        return body

    async def metadata(self, timeout: float | None) -> dict[str, SignatureInfo]:
        server_failed = await self._server_metadata(timeout)
        try:
            body = await self._model_metadata(timeout)
        except ServeBenchError as exc:
            # Every server of the protocol answers GET /v2 (kserve/open-inference-protocol, "must implement the
            # health, metadata, and inference APIs"); 404 for it and for the model's metadata is a server without
            # the API, e.g. TF Serving's REST port, which answers 404 for every path outside /v1/
            if server_failed == exc.status == "404":
                raise ConnectError(
                    f"{self.url}: the server there does not implement the Open Inference Protocol (GET /v2 and the "
                    f"model's metadata: HTTP 404); for TF Serving's API use {self._base}",
                    status=exc.status,
                    url=self.url,
                ) from exc
            raise
        try:
            return signatures(_triples(body.get("inputs")), _triples(body.get("outputs")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ServeBenchError(f"{self.url}: malformed model metadata: {exc!r}", url=self.url) from exc

    async def status(self, timeout: float | None) -> ModelStatus:
        """GET .../ready per version the metadata lists: 200 is ready, anything else not
        (Triton answers 400 "Model version not ready", http_server.cc:1651 at HEAD e1db8a6).
        The metadata call comes first, so an unknown model is NotFound."""
        body = await self._model_metadata(timeout)
        states = {}
        for number, name in listed_versions(body.get("versions") or [], self.version).items():
            url = f"{self._base}/v2/models/{self.model}" + (f"/versions/{name}" if name else "") + "/ready"
            try:
                await self._get(url, timeout)
                states[number] = "AVAILABLE"
            except (ConnectError, RequestTimeout):
                raise
            except ServeBenchError:
                states[number] = "UNAVAILABLE"
        return ModelStatus(states)

    async def aclose(self) -> None:
        await self._session.close()
