"""REST transport: one aiohttp session with a connection limit; orjson for numpy both ways."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import numpy as np
import orjson

from serve_bench import _protos
from serve_bench.client._base import ModelStatus, PreparedRequest, SignatureInfo, TensorInfo
from serve_bench.client._errors import ConnectError, NotFound, ServeBenchError
from serve_bench.client._http import http_call
from serve_bench.client._v2_rest import open_inference_server_at
from serve_bench.codec import array_to_json_value, gc_paused, json_value_to_array

__all__ = ["RestTransport", "encode_rest_body"]


def _tensor_info(value: dict[str, Any]) -> TensorInfo:
    dtype = _protos.enum_value("tensorflow.DataType", value.get("dtype", "DT_INVALID"))
    shape_json = value.get("tensor_shape", {})
    if shape_json.get("unknown_rank"):
        return TensorInfo(dtype, None)
    return TensorInfo(dtype, tuple(int(d.get("size", -1)) for d in shape_json.get("dim", [])))


def encode_rest_body(inputs: dict[str, np.ndarray], signature: str, row_format: bool = False) -> bytes:
    """A :predict body: columnar ("inputs", smaller) or row ("instances"); strings as {"b64": ...}."""
    body: dict[str, Any] = {"signature_name": signature}
    if row_format:
        if len(inputs) == 1:
            (array,) = inputs.values()
            body["instances"] = array_to_json_value(array, binary=True)
        else:
            count = len(next(iter(inputs.values())))
            body["instances"] = [
                {alias: array_to_json_value(a[i], binary=True) for alias, a in inputs.items()} for i in range(count)
            ]
    else:
        body["inputs"] = {alias: array_to_json_value(array, binary=True) for alias, array in inputs.items()}
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


LIMITS_HEADER = "X-Serve-Bench-Limits"  # the local server's (server/_rest.py), read by name only
_LIMIT_NAMES = ("max_body_bytes", "max_batch_size")


def declared_limits(header: str) -> dict[str, int]:
    """``max_body_bytes=N; max_batch_size=M`` -> {name: N}; what it cannot read is left out."""
    limits: dict[str, int] = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name in _LIMIT_NAMES and value.strip().isdigit():
            limits[name] = int(value)
    return limits


class RestTransport:
    def __init__(
        self, base_url: str, model: str, version: int | None, *, row_format: bool = False, connection_limit: int = 100
    ) -> None:
        self.url = base_url
        self.model = model
        self.version = version
        self.row_format = row_format
        path = f"/v1/models/{model}" + (f"/versions/{version}" if version is not None else "")
        self._model_url = base_url + path
        self._predict_url = self._model_url + ":predict"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connection_limit),
            json_serialize=lambda v: orjson.dumps(v).decode(),
        )
        self.output_dtypes: dict[str, int] = {}  # learnt from the signature when the client opens
        self.server_identity = ""
        # what the server declared it refuses (the local server: max_body_bytes, max_batch_size); {} for none
        self.declared_limits: dict[str, int] = {}

    def encode(self, inputs: dict[str, np.ndarray], signature: str) -> bytes:
        return encode_rest_body(inputs, signature, self.row_format)

    async def _request(self, method: str, url: str, data: bytes | None, timeout: float | None) -> bytes:
        headers = {"Content-Type": "application/json"} if data else None
        # metadata and status calls note who answered, even when it refused
        note = self._note_server if data is None else None
        _, body = await http_call(self._session, method, url, self.url, timeout, data, headers, note)
        return body

    def _note_server(self, headers: Mapping[str, str]) -> None:
        self.server_identity = headers.get("Server", "")
        self.declared_limits = declared_limits(headers.get(LIMITS_HEADER, ""))

    async def send(self, request: PreparedRequest, timeout: float | None) -> bytes:
        return await self._request("POST", self._predict_url, request.payload, timeout)

    def decode(self, raw: bytes) -> dict[str, np.ndarray]:
        with gc_paused():
            return self._decode(raw)

    def _decode(self, raw: bytes) -> dict[str, np.ndarray]:
        body = orjson.loads(raw)
        if "outputs" in body:
            outputs = body["outputs"]
            if not isinstance(outputs, dict) or (
                len(self.output_dtypes) == 1 and set(outputs) != set(self.output_dtypes)
            ):
                name = next(iter(self.output_dtypes), "output")
                outputs = {name: outputs}
            columns = outputs
        elif "predictions" in body:
            rows = body["predictions"]
            if rows and isinstance(rows[0], dict):
                columns = {k: [row[k] for row in rows] for k in rows[0]}
            else:
                columns = {next(iter(self.output_dtypes), "predictions"): rows}
        else:
            raise ServeBenchError(f"{self.url}: response holds neither 'outputs' nor 'predictions'", url=self.url)
        return {alias: json_value_to_array(value, self.output_dtypes.get(alias, 1)) for alias, value in columns.items()}

    async def metadata(self, timeout: float | None) -> dict[str, SignatureInfo]:
        try:
            raw = await self._request("GET", self._model_url + "/metadata", None, timeout)
        except NotFound as exc:
            # TF Serving answers 404 for a model it does not serve; so do Triton and MLServer for every /v1/ path
            if server := await open_inference_server_at(self._session, self.url, self.url, timeout):
                raise ConnectError(
                    f"{self.url}: the server there serves the Open Inference Protocol ({server}), not TF Serving's "
                    f"API (GET /v1/models/{self.model}/metadata: HTTP {exc.status}); for Triton's or MLServer's API "
                    f"use v2+{self.url}",
                    status=exc.status,
                    url=self.url,
                ) from exc
            raise
        body = orjson.loads(raw)
        defs = body.get("metadata", {}).get("signature_def", {}).get("signature_def", {})
        result = {}
        for key, value in defs.items():
            result[key] = SignatureInfo(
                key,
                {k: _tensor_info(v) for k, v in value.get("inputs", {}).items()},
                {k: _tensor_info(v) for k, v in value.get("outputs", {}).items()},
            )
        return result

    async def status(self, timeout: float | None) -> ModelStatus:
        body = orjson.loads(await self._request("GET", self._model_url, None, timeout))
        return ModelStatus({int(s["version"]): s["state"] for s in body.get("model_version_status", [])})

    async def aclose(self) -> None:
        await self._session.close()
