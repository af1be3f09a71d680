"""TF Serving's REST API on aiohttp.

GET  /v1/models/{m}[/versions/{v}|/labels/{l}]            model status
GET  /v1/models/{m}[/versions/{v}|/labels/{l}]/metadata   signature defs
POST /v1/models/{m}[/versions/{v}|/labels/{l}]:predict    row ("instances") or columnar ("inputs")
GET  <monitoring path>                                    Prometheus text (when configured)
Errors answer {"error": "..."} with TF Serving's HTTP status for the code.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple
from urllib.parse import unquote

import numpy as np
import orjson
from aiohttp import web
from google.protobuf import json_format

from serve_bench.codec import array_to_json_value
from serve_bench.server._budget import COST_FACTOR, TRIM_AFTER_BYTES, MemoryBudget, trim_soon
from serve_bench.server._core import ServingCore, record_request
from serve_bench.server._errors import ServingError, invalid
from serve_bench.server._json_tensor import ParseBudgetExceeded, parse_predict_body
from serve_bench.server._metrics import Metrics
from serve_bench.server._runtime import DEFAULT_SIGNATURE, Signature

__all__ = ["PARSE_BUDGET", "make_app", "parse_model_info"]

# model_servers/http_rest_api_util.cc:31-34, matched against the raw (still %-encoded) path,
# case-insensitively; \d is ASCII only there (RE2), hence re.ASCII.
_PREDICT_PATH = re.compile(
    r"/v1/models/(?P<name>[^/:]+)(?:(?:/versions/(?P<version>\d+))|(?:/labels/(?P<label>[^/:]+)))?"
    r":(?P<verb>classify|regress|predict)",
    re.IGNORECASE | re.ASCII,
)
_STATUS_PATH = re.compile(
    r"/v1/models(?:/(?P<name>[^/:]+))?(?:(?:/versions/(?P<version>\d+))|(?:/labels/(?P<label>[^/:]+)))?"
    r"(?:/(?P<metadata>metadata))?",
    re.IGNORECASE | re.ASCII,
)
_JSON = "application/json"
_INT64_MAX = 2**63 - 1


def _json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY), status=status, content_type=_JSON
    )


def _error(status: int, message: str) -> web.Response:
    return web.Response(body=orjson.dumps({"error": message}), status=status, content_type=_JSON)


class _ModelInfo(NamedTuple):
    name: str
    version: int | None
    label: str | None
    verb: str  # "" for GETs (the request_latency API label)
    metadata: bool


def _raw_path(request: web.Request) -> str:
    return request.raw_path.split("?", 1)[0]


def _match(method: str, path: str) -> re.Match[str] | None:
    if method == "POST":
        return _PREDICT_PATH.fullmatch(path)
    if method == "GET":
        return _STATUS_PATH.fullmatch(path)
    return None


def parse_model_info(method: str, path: str) -> _ModelInfo | None:
    """ParseModelInfo (model_servers/http_rest_api_util.cc:90-131): None when the path does not
    match; ServingError for a version that does not fit an int64 or an undecodable name."""
    match = _match(method, path)
    if match is None:
        return None
    name = unquote(match["name"] or "", errors="strict") if "%" in (match["name"] or "") else match["name"] or ""
    version = None
    if match["version"] is not None:
        version = int(match["version"])
        if version > _INT64_MAX:  # absl::SimpleAtoi fails on overflow
            raise invalid(f"Failed to convert version: {match['version']} to numeric.")
    label = match["label"]
    if label is not None and "%" in label:
        label = unquote(label, errors="strict")
    verb = match.groupdict().get("verb") or ""
    return _ModelInfo(name, version, label, verb, bool(match.groupdict().get("metadata")))


def _model_name_and_verb(request: web.Request) -> tuple[str, str]:
    """The model and API labels TF Serving's metrics get for this request (http_server.cc:194-201)."""
    try:
        info = parse_model_info(request.method, _raw_path(request))
    except (ServingError, UnicodeDecodeError):
        return "", ""
    return (info.name, info.verb) if info else ("", "")


class _Handlers:
    def __init__(self, core: ServingCore, metrics_path: str | None) -> None:
        self.core = core
        self.metrics_path = metrics_path
        self.budget = core.budget  # shared with gRPC's decoded tensors

    async def route(self, request: web.Request) -> web.StreamResponse:
        """HttpRestApiHandler::ProcessRequest (model_servers/http_rest_api_handler.cc:65-109)."""
        path = _raw_path(request)
        malformed = f"Malformed request: {request.method} {path}"
        if request.method == "OPTIONS":  # CORS preflight, model_servers/http_server.cc:167-175
            if re.search(r"https?://", request.headers.get("Origin", "")):
                return web.Response(status=200, content_type=_JSON)
            request[_TF_STATUS] = "FAILED_PRECONDITION"
            return _error(400, "Origin header is missing in CORS preflight")
        try:
            try:
                info = parse_model_info(request.method, path)
            except UnicodeDecodeError:
                raise invalid(f"Failed to decode model name:{path}") from None
            if info is None:
                raise invalid(malformed)
            if request.method == "GET":
                if not info.name:
                    raise invalid("Missing model name in request.")
                if info.metadata:
                    return self.metadata(info.name, info.version, info.label)
                return self.status(info.name, info.version, info.label)
            if info.verb == "predict":
                try:
                    return await self.predict(request, info)
                finally:
                    if (request.content_length or 0) >= TRIM_AFTER_BYTES:  # a large body's pages go back to the OS
                        trim_soon(asyncio.get_running_loop())
            if info.verb in ("classify", "regress"):
                raise ServingError(
                    "UNIMPLEMENTED", f"{info.verb} is not implemented by the serve-bench local server (only predict)"
                )
            raise invalid(malformed)  # e.g. ":PREDICT": the path matches case-insensitively, the verb does not
        except ServingError as exc:
            code, status, message = exc.code, exc.http_status, exc.message
            exc.__traceback__ = exc.__context__ = None  # keep nothing of a refused request alive
            del exc
            request[_TF_STATUS] = code  # for _count_requests: the canonical code, not the HTTP one
            return _error(status, message)

    def status(self, name: str, version: int | None, label: str | None) -> web.Response:
        """GetModelStatus as JSON, as ToJsonString prints it (http_rest_api_util.cc:133-145)."""
        states = self.core.status(name, version, label)
        return _json_response(
            {
                "model_version_status": [
                    {"version": str(v), "state": state, "status": {"error_code": "OK", "error_message": ""}}
                    for v, state in states
                ]
            }
        )

    def metadata(self, name: str, version: int | None, label: str | None) -> web.Response:
        """GetModelMetadata as JSON (http_rest_api_util.cc:147-201): model_spec, then the SignatureDefMap
        under metadata.signature_def, proto field names kept, fields without presence printed."""
        servable, defs = self.core.signature_defs(name, version, label)
        signature_def = {
            key: json_format.MessageToDict(
                sig, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
            )
            for key, sig in defs.items()
        }
        return _json_response(
            {
                "model_spec": {"name": name, "signature_name": "", "version": str(servable.version)},
                "metadata": {"signature_def": {"signature_def": signature_def}},
            }
        )

    async def predict(self, request: web.Request, info: _ModelInfo) -> web.Response:
        """ProcessPredictRequest (http_rest_api_handler.cc:152-178)."""
        started = time.perf_counter()  # TF Serving's request latency includes reading and parsing the body
        limit = self.core.config.max_body_bytes
        declared = request.content_length
        if declared is not None and declared > limit:
            return _error(
                413, f"request body is larger than the limit of {limit} bytes (serve-bench serve --max_body_bytes)"
            )
        too_large = _error(
            413, f"request body is larger than the limit of {limit} bytes (serve-bench serve --max_body_bytes)"
        )
        raw: bytes | bytearray | None = None
        if declared is None:  # chunked: its size is known once read (aiohttp caps it at the limit)
            try:
                raw = await request.read()
            except web.HTTPRequestEntityTooLarge:
                return too_large
        reserved = COST_FACTOR * (declared if declared is not None else len(raw or b""))
        if not self.budget.try_take(reserved):
            return self._over_budget(reserved, declared if declared is not None else len(raw or b""))
        try:
            if raw is None and declared is not None:
                raw = await _read_body(request, declared)
            assert raw is not None
            loop = asyncio.get_running_loop()
            registry = self.core.registry

            def signature_of(name: str) -> Signature:
                servable = registry.get(info.name, info.version, info.label)
                key = name or DEFAULT_SIGNATURE
                if key not in servable.signatures:  # HttpRestApiHandler::GetInfoMap (http_rest_api_handler.cc:236)
                    raise invalid(f'Serving signature name: "{key}" not found in signature def')
                return servable.signatures[key]

            def reserve(extra: int) -> bool:  # bodies that stay Python objects (strings, small lists)
                if self.budget.try_take(extra):
                    lent.append(extra)
                    return True
                return False

            lent: list[int] = []
            try:  # the parse runs on a worker thread: the event loop stays free
                body = await loop.run_in_executor(None, parse_predict_body, raw, signature_of, reserve)
            except ParseBudgetExceeded as exc:
                return self._over_budget(reserved + exc.needed, declared)
            del raw
        finally:
            self.budget.give(reserved + sum(lent))
        _, outputs = await self.core.predict(
            info.name, info.version, info.label, body.signature_name, body.inputs, [], "REST", started=started
        )
        row_format = body.row_format
        del body  # its inputs are done with: only the outputs go on
        return _json_response(_outputs_json(outputs, row_format))

    def _over_budget(self, needed: int, declared: int | None) -> web.Response:
        """413 when the body could never be parsed within the budget, else 503 (retry later)."""
        if needed > self.budget.total:
            return _error(
                413,
                f"request body of {declared} bytes would need more than the "
                f"{self.budget.total} bytes this server allows for parsing",
            )
        return _error(503, "too many large request bodies are being parsed at once; retry shortly")

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.core.metrics.render(), content_type="text/plain")


async def _read_body(request: web.Request, declared: int) -> bytearray:
    """The body in one buffer of its declared size (aiohttp's read() joins chunks, then copies)."""
    buffer = bytearray(declared)
    view = memoryview(buffer)
    filled = 0
    while filled < declared:
        chunk = await request.content.readany()
        if not chunk:
            break
        size = min(len(chunk), declared - filled)
        view[filled : filled + size] = chunk[:size]
        filled += size
    del view
    if filled < declared:
        raise invalid(f"request body ended after {filled} of its {declared} bytes")
    return buffer


def _json_value(array: np.ndarray, binary: bool) -> Any:
    """One output as JSON. Non-finite floats are written NaN / Infinity / -Infinity, as
    WriteDecimal (util/json_tensor.cc:163-167) writes them (orjson would write null)."""
    if array.dtype.kind == "f" and array.size and not np.isfinite(array).all():
        return orjson.Fragment(json.dumps(array.tolist(), allow_nan=True, separators=(",", ":")))
    return array_to_json_value(array, binary)


def _outputs_json(outputs: dict[str, np.ndarray], row_format: bool) -> dict[str, Any]:
    """MakeJsonFromTensors (util/json_tensor.cc:1052): row requests answer "predictions" (one value per
    instance; objects only when there are several outputs), columnar ones "outputs" (the tensor
    itself when there is one output). "_bytes" string outputs are {"b64": ...} (IsNamedTensorBytes)."""
    binary = {alias: alias.endswith("_bytes") for alias in outputs}
    if row_format:
        if len(outputs) == 1:
            ((alias, array),) = outputs.items()
            return {"predictions": _json_value(array, binary[alias])}
        count = len(next(iter(outputs.values())))
        for alias, array in outputs.items():
            if array.ndim == 0:
                raise invalid(f"Tensor name: {alias} has no shape information ")
            if len(array) != count:
                raise invalid(f"Tensor name: {alias} has inconsistent batch size: {len(array)} expecting: {count}")
        return {
            "predictions": [
                {alias: _json_value(array[i], binary[alias]) for alias, array in sorted(outputs.items())}
                for i in range(count)
            ]
        }
    if len(outputs) == 1:
        ((alias, array),) = outputs.items()
        return {"outputs": _json_value(array, binary[alias])}
    return {"outputs": {alias: _json_value(a, binary[alias]) for alias, a in sorted(outputs.items())}}


_METRICS = web.AppKey("metrics", Metrics)
_IDENTITY = web.AppKey("identity", str)
_LIMITS = web.AppKey("limits", str)
# What the local server refuses, declared so a client can refuse a batch before building it (issue 34):
# "max_body_bytes=N" (--max_body_bytes), then "; max_batch_size=M" when batching is on. TF Serving sends none.
LIMITS_HEADER = "X-Serve-Bench-Limits"
PARSE_BUDGET = web.AppKey("parse_budget", MemoryBudget)  # tests read and shrink it
_TF_STATUS = web.RequestKey("tf_status", str)
# TF Serving's canonical code for an HTTP status (the inverse of http_server.cc:46 ToHTTPStatusCode).
_CODE_OF_HTTP = {
    200: "OK",
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "RESOURCE_EXHAUSTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@web.middleware
async def _count_requests(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """request_count for every /v1/ request (GETs too), request_latency for OK ones with the URL verb
    as API ("" for GETs), as model_servers/http_server.cc:152-201 records them."""
    if not request.path.lower().startswith("/v1/"):  # TF Serving matches "(?i)/v1/.*"
        return await handler(request)
    started = time.perf_counter()
    name, verb = _model_name_and_verb(request)
    status = "INTERNAL"
    try:
        response: web.StreamResponse = await handler(request)
        status = request.get(_TF_STATUS) or _CODE_OF_HTTP.get(response.status, "UNKNOWN")
        return response
    finally:
        record_request(request.app[_METRICS], name, verb, "REST", status, started)


async def _identify(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = request.app[_IDENTITY]
    response.headers[LIMITS_HEADER] = request.app[_LIMITS]


def make_app(core: ServingCore, metrics_path: str | None) -> web.Application:
    app = web.Application(client_max_size=core.config.max_body_bytes, middlewares=[_count_requests])
    app[_METRICS] = core.metrics
    app[_IDENTITY] = core.identity
    limits = [f"max_body_bytes={core.config.max_body_bytes}"]
    if core.config.batching is not None:
        limits.append(f"max_batch_size={core.config.batching.max_batch_size}")
    app[_LIMITS] = "; ".join(limits)
    app.on_response_prepare.append(_identify)
    handlers = _Handlers(core, metrics_path)
    app[PARSE_BUDGET] = handlers.budget
    if metrics_path:
        app.router.add_get(metrics_path, handlers.metrics)
    app.router.add_route("*", "/v1/{tail:.*}", handlers.route)  # http_rest_api_util.h:33 "(?i)/v1/.*"
    app.router.add_route("*", "/V1/{tail:.*}", handlers.route)
    app.router.add_route("*", "/{tail:.*}", _not_found)
    return app


# libevent's evhttp_send_error(req, HTTP_NOTFOUND, nullptr) page, which TF Serving's HTTP server sends
# for a path no handler takes (util/net_http/server/internal/evhttp_server.cc:175-177).
_NOT_FOUND_PAGE = "<HTML><HEAD>\n<TITLE>404 Not Found</TITLE>\n</HEAD><BODY>\n<H1>Not Found</H1>\n</BODY></HTML>\n"


async def _not_found(request: web.Request) -> web.Response:
    """A path outside (?i)/v1/.* and the metrics path: not TF Serving's REST API, so not JSON."""
    return web.Response(status=404, text=_NOT_FOUND_PAGE, content_type="text/html", headers={"Connection": "close"})
