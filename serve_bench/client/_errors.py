"""The client's errors, translated once from gRPC status codes and HTTP statuses.

    ServeBenchError                  every error a client call raises
    ├── ConnectError                 the target could not be reached (refused, DNS, TLS)
    ├── RequestTimeout               no answer within the deadline
    ├── NotFound                     unknown model, version or label (gRPC NOT_FOUND, HTTP 404,
    │                                and Triton's "Request for unknown model" whatever its code)
    ├── InvalidArgument              the request is wrong: input name, dtype, shape, signature
    │                                (gRPC INVALID_ARGUMENT / FAILED_PRECONDITION, HTTP 400, 413)
    ├── Unavailable                  the server is overloaded or shutting down; retry later
    │                                (gRPC UNAVAILABLE / RESOURCE_EXHAUSTED, HTTP 503, 429, and
    │                                MLServer's "is not ready yet")
    └── ServerError                  anything else the server reports (INTERNAL, UNIMPLEMENTED, 5xx)

Each carries ``status`` (the gRPC code name or the HTTP status as text) and
``url``; the transport's own exception is chained as ``__cause__``.

A target URL that is malformed is not a network error: ``InvalidTarget`` is a
``UserError`` (one line, exit 2), raised by the one parse of a target URL
(``stats.parse_target``) before any socket is opened. Where a network error means
the user must change something (``serve-bench bench`` against a server that is
down), ``user_error`` is the one translation.
"""

from __future__ import annotations

from typing import Any

from serve_bench.errors import UserError

__all__ = [
    "ConnectError",
    "InvalidArgument",
    "NotFound",
    "RequestTimeout",
    "ServeBenchError",
    "ServerError",
    "Unavailable",
    "error_for_grpc",
    "error_for_http",
    "error_for_rpc",
    "serialize_request",
    "user_error",
]


class ServeBenchError(Exception):
    def __init__(self, message: str, *, status: str = "", url: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.url = url


class ConnectError(ServeBenchError):
    pass


class RequestTimeout(ServeBenchError):
    pass


class NotFound(ServeBenchError):
    pass


class InvalidArgument(ServeBenchError):
    pass


class Unavailable(ServeBenchError):
    pass


class ServerError(ServeBenchError):
    pass


def user_error(exc: ServeBenchError, what: str = "") -> UserError:
    """A client error as the user sees it when it ends the command: one line (``what`` first: which target
    or step); raise it ``from exc`` so the cause stays chained."""
    return UserError(f"{what}: {exc}" if what else str(exc))


_GRPC = {
    "NOT_FOUND": NotFound,
    "INVALID_ARGUMENT": InvalidArgument,
    "FAILED_PRECONDITION": InvalidArgument,
    "OUT_OF_RANGE": InvalidArgument,
    "UNAVAILABLE": Unavailable,
    "RESOURCE_EXHAUSTED": Unavailable,
    "DEADLINE_EXCEEDED": RequestTimeout,
}
_HTTP: dict[int, type[ServeBenchError]] = {
    404: NotFound,
    400: InvalidArgument,
    413: InvalidArgument,
    422: InvalidArgument,
    429: Unavailable,
    503: Unavailable,
    504: RequestTimeout,
}
_CONNECT_HINTS = (
    "failed to connect",
    "connection refused",
    "dns resolution failed",
    "errors resolving",  # grpcio 1.85's resolver: "errors resolving HOST:PORT: [... address lookup failed ...]"
    "name resolution",
    "no address",
    "connect failed",
    "socket closed",
    "connection reset",
    "ssl",
)

# gRPC's HTTP/2 transport, whose first read was an HTTP/1.x status line (grpc/grpc, chttp2_transport.cc,
# try_http_parsing): a REST port, or a proxy that answered in HTTP/1.x. grpcio 1.85 reports it as UNAVAILABLE.
_HTTP1_SERVER = "trying to connect an http1.x server"

# Where a server's code says less than its words, the words decide. Triton prefixes every failed model
# lookup with "Request for unknown model" (core model_repository_manager.cc:1286, HEAD 73aad7c), and with
# --model-namespacing an unknown name is INVALID_ARG (:1299), not NOT_FOUND. MLServer's ModelNotReady
# ("Model m is not ready yet.", mlserver/errors.py:29-34, HEAD a325e52) is HTTP 400 / INVALID_ARGUMENT,
# but means: retry later. TF Serving says neither.
_UNKNOWN_MODEL = "request for unknown model"
_NOT_READY = "is not ready yet"


def _by_words(lowered: str) -> type[ServeBenchError] | None:
    if _UNKNOWN_MODEL in lowered:
        return NotFound
    if _NOT_READY in lowered:
        return Unavailable
    return None


def error_for_grpc(code_name: str, details: str, url: str) -> ServeBenchError:
    """Map a gRPC status (``grpc.StatusCode.X.name``) to serve-bench's tree."""
    lowered = details.lower()
    if code_name == "UNAVAILABLE" and _HTTP1_SERVER in lowered:
        return ConnectError(
            f"cannot talk to {url}: the server there answers in HTTP/1.x, not gRPC (an HTTP port? use http:// or "
            "v2+http:// for it; or an HTTP proxy in the way)",
            status=code_name,
            url=url,
        )
    if code_name == "UNAVAILABLE" and any(hint in lowered for hint in _CONNECT_HINTS):
        return ConnectError(f"cannot reach {url}: {details}", status=code_name, url=url)
    cls = _by_words(lowered) or _GRPC.get(code_name, ServerError)
    return cls(f"{url}: {code_name}: {details}", status=code_name, url=url)


def error_for_rpc(exc: Any, url: str, timeout: float | None) -> ServeBenchError:
    """Map a failed gRPC call (``grpc.aio.AioRpcError``, TF Serving's API or the Open Inference
    Protocol alike) to serve-bench's tree; a deadline that passed names the timeout given."""
    code_name = exc.code().name
    if code_name == "DEADLINE_EXCEEDED":
        return RequestTimeout(f"{url}: no answer within {timeout} s", status=code_name, url=url)
    return error_for_grpc(code_name, exc.details() or "", url)


def error_for_http(status: int, message: str, url: str) -> ServeBenchError:
    """Map an HTTP status and the server's ``{"error": ...}`` text to serve-bench's tree."""
    cls = _by_words(message.lower()) or _HTTP.get(status, ServerError)
    return cls(f"{url}: HTTP {status}: {message}", status=str(status), url=url)


def serialize_request(request: Any) -> bytes:
    """A protobuf request as bytes; InvalidArgument when it is past protobuf's 2 GB message limit
    (protobuf's own EncodeError says only "Failed to serialize proto")."""
    from google.protobuf.message import EncodeError

    try:
        return bytes(request.SerializeToString())
    except EncodeError as exc:
        raise InvalidArgument(
            "the request is past protobuf's 2 GB message limit (2**31 - 1 bytes): send fewer items per request"
        ) from exc
