"""TF Serving's REST API on aiohttp.

GET  /v1/models/{m}[/versions/{v}|/labels/{l}]            model status
GET  /v1/models/{m}[/versions/{v}|/labels/{l}]/metadata   signature defs
POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict    row ("instances") or columnar ("inputs")
GET  <monitoring path>                                    Prometheus text (when configured)
Errors answer {"error": "..."} with TF Serving's HTTP status for the code.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import numpy as np
import orjson
from aiohttp import web
from google.protobuf import json_format

from serve_bench import __version__
from serve_bench.codec import CodecError, array_to_json_value, gc_paused, json_value_to_array
from serve_bench.server._core import ServingCore, record_request
from serve_bench.server._errors import ServingError, invalid
from serve_bench.server._metrics import Metrics

__all__ = ["make_app"]

_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?:(?P<metadata>/metadata)|:(?P<verb>[a-zA-Z]+))?$"
)
_JSON = "application/json"


def _json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY), status=status,
                        content_type=_JSON)


def _error(status: int, message: str) -> web.Response:
    return web.Response(body=orjson.dumps({"error": message}), status=status, content_type=_JSON)


def _rows_to_columns(instances: Any, signature_inputs: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(instances, list):
        raise invalid("'instances' must be a list")
    if not instances:
        raise invalid("'instances' is an empty list")
    names = list(signature_inputs)
    if all(isinstance(row, dict) and "b64" not in row for row in instances):
        keys = set(instances[0])
        for row in instances:
            if set(row) != keys:
                raise invalid("every instance must hold the same named inputs")
        return {key: [row[key] for row in instances] for key in keys}
    if len(names) != 1:
        raise invalid(f"the signature has {len(names)} inputs; give each instance as an object naming them")
    return {names[0]: instances}


def _parse_body(raw: bytes) -> Any:
    with gc_paused():
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise invalid(f"JSON Parse error: {exc}") from None


def _to_arrays(columns: dict[str, Any], signature: Any) -> dict[str, np.ndarray]:
    inputs: dict[str, np.ndarray] = {}
    with gc_paused():
        for alias, value in columns.items():
            spec = signature.inputs.get(alias)
            if spec is None:
                continue  # validate() reports extra and missing names together
            try:
                inputs[alias] = json_value_to_array(value, spec.dtype)
            except CodecError as exc:
                raise invalid(f"input '{alias}': {exc}") from None
    return inputs


class _Handlers:
    def __init__(self, core: ServingCore, metrics_path: str | None) -> None:
        self.core = core
        self.metrics_path = metrics_path

    async def route(self, request: web.Request) -> web.StreamResponse:
        match = _PATH.match(request.path)
        if not match:
            return _error(404, f"Malformed request: {request.method} {request.path}")
        name, verb = match["name"], match["verb"]
        try:
            version = None
            if match["version"] is not None:
                if not match["version"].isdigit():
                    raise invalid(f"Failed to convert version: {match['version']} to numeric.")
                version = int(match["version"])
            label = match["label"]
            if request.method == "GET" and verb is None:
                if match["metadata"]:
                    return self.metadata(name, version, label)
                return self.status(name, version, label)
            if request.method == "POST" and verb == "predict":
                return await self.predict(request, name, version, label)
            if request.method == "POST" and verb in ("classify", "regress"):
                return _error(501, f"{verb} is not implemented by the serve-bench local server (only predict)")
            return _error(404, f"Malformed request: {request.method} {request.path}")
        except ServingError as exc:
            request[_TF_STATUS] = exc.code  # for _count_requests: the canonical code, not the HTTP one
            return _error(exc.http_status, exc.message)

    def status(self, name: str, version: int | None, label: str | None) -> web.Response:
        states = self.core.status(name, version, label)
        return _json_response({"model_version_status": [
            {"version": str(v), "state": state, "status": {"error_code": "OK", "error_message": ""}}
            for v, state in states
        ]})

    def metadata(self, name: str, version: int | None, label: str | None) -> web.Response:
        servable, defs = self.core.signature_defs(name, version, label)
        signature_def = {key: json_format.MessageToDict(sig, preserving_proto_field_name=True)
                         for key, sig in defs.items()}
        return _json_response({
            "model_spec": {"name": name, "signature_name": "", "version": str(servable.version)},
            "metadata": {"signature_def": {"signature_def": signature_def}},
        })

    async def predict(self, request: web.Request, name: str, version: int | None, label: str | None) -> web.Response:
        started = time.perf_counter()  # TF Serving's request latency includes parsing the body
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"request body is larger than the limit of {self.core.config.max_body_bytes} bytes "
                               "(serve-bench serve --max_body_bytes)")
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(None, _parse_body, raw)  # the event loop stays free
        if not isinstance(body, dict):
            raise invalid("the request body must be a JSON object")
        signature_name = body.get("signature_name", "") or ""
        if not isinstance(signature_name, str):
            raise invalid("'signature_name' must be a string")
        has_rows, has_columns = "instances" in body, "inputs" in body
        if has_rows == has_columns:
            raise invalid("Missing 'inputs' or 'instances' key" if not has_rows
                          else "Not both 'inputs' and 'instances' may be given")
        servable = self.core.registry.get(name, version, label)
        signature = servable.signature(signature_name)
        if has_rows:
            columns = _rows_to_columns(body["instances"], signature.inputs)
        else:
            value = body["inputs"]
            names = list(signature.inputs)
            if isinstance(value, dict) and "b64" not in value:
                columns = value
            elif len(names) == 1:
                columns = {names[0]: value}
            else:
                raise invalid(f"the signature has {len(names)} inputs; give 'inputs' as an object naming them")
        inputs = await loop.run_in_executor(None, _to_arrays, columns, signature)
        if set(columns) - set(inputs):
            inputs.update({alias: np.empty(0) for alias in set(columns) - set(inputs)})
        output_filter = body.get("output_filter") or []
        _, outputs = await self.core.predict(name, version, label, signature_name, inputs,
                                             list(output_filter), "REST", started=started)
        binary = {alias: alias.endswith("_bytes") for alias in outputs}
        if has_rows:
            if len(outputs) == 1:
                (alias, array), = outputs.items()
                return _json_response({"predictions": array_to_json_value(array, binary[alias])})
            count = len(next(iter(outputs.values())))
            rows = [{alias: array_to_json_value(array[i], binary[alias]) for alias, array in outputs.items()}
                    for i in range(count)]
            return _json_response({"predictions": rows})
        if len(outputs) == 1:
            (alias, array), = outputs.items()
            return _json_response({"outputs": array_to_json_value(array, binary[alias])})
        return _json_response({"outputs": {alias: array_to_json_value(a, binary[alias]) for alias, a in outputs.items()}})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.core.metrics.render(), content_type="text/plain")


_METRICS = web.AppKey("metrics", Metrics)
_TF_STATUS = web.RequestKey("tf_status", str)
# TF Serving's canonical code for an HTTP status (the inverse of http_server.cc:46 ToHTTPStatusCode).
_CODE_OF_HTTP = {200: "OK", 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 409: "ABORTED", 413: "RESOURCE_EXHAUSTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED",
                 501: "UNIMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


@web.middleware
async def _count_requests(request: web.Request, handler: Any) -> web.StreamResponse:
    """request_count for every /v1/ request (GETs too), request_latency for OK ones with the URL verb
    as API ("" for GETs), as model_servers/http_server.cc:152-201 records them."""
    if not request.path.startswith("/v1/"):
        return await handler(request)
    started = time.perf_counter()
    match = _PATH.match(request.path)
    status = "INTERNAL"
    try:
        response: web.StreamResponse = await handler(request)
        status = request.get(_TF_STATUS) or _CODE_OF_HTTP.get(response.status, "UNKNOWN")
        return response
    finally:
        record_request(request.app[_METRICS], (match["name"] if match else "") or "",
                       (match["verb"] if match else "") or "", "REST", status, started)


async def _identify(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = f"serve-bench-local/{__version__}"


def make_app(core: ServingCore, metrics_path: str | None) -> web.Application:
    app = web.Application(client_max_size=core.config.max_body_bytes, middlewares=[_count_requests])
    app[_METRICS] = core.metrics
    app.on_response_prepare.append(_identify)
    handlers = _Handlers(core, metrics_path)
    if metrics_path:
        app.router.add_get(metrics_path, handlers.metrics)
    app.router.add_route("*", "/v1/models/{tail:.*}", handlers.route)
    return app
