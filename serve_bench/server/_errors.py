"""Serving errors carry a TF Serving status code; each front end maps it once."""

from __future__ import annotations

# TF Serving's REST front end maps status codes to HTTP like this
# (model_servers/http_server.cc:46-87 ToHTTPStatusCode).
HTTP_STATUS = {
    "CANCELLED": 499,
    "PERMISSION_DENIED": 403,
    "ABORTED": 409,
    "DATA_LOSS": 500,
    "UNAUTHENTICATED": 401,
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
    "UNIMPLEMENTED": 501,
    "DEADLINE_EXCEEDED": 504,
    "INTERNAL": 500,
    "UNKNOWN": 500,
}


# absl/grpc canonical code numbers (what tf.errors.OpError.error_code holds) -> names.
CODE_NAMES = {
    0: "OK",
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}


class ServingError(Exception):
    """A request failed with a TF Serving status code (a ``grpc.StatusCode`` name)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)


def not_found(message: str) -> ServingError:
    return ServingError("NOT_FOUND", message)


def invalid(message: str) -> ServingError:
    return ServingError("INVALID_ARGUMENT", message)
