"""Serving errors carry a TF Serving status code; each front end maps it once."""

from __future__ import annotations

# TF Serving's REST front end maps status codes to HTTP like this.
HTTP_STATUS = {
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
