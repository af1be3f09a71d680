"""The recorder: every request the load engine sends becomes one RequestRecord, made here and nowhere else.

The closed and open loops send through ``Recorder.send``; a caller that hands a
``Client`` to someone else's loop (the video pipeline gives one to predict_stream)
wraps it in a ``RecordingClient``, whose ``predict`` goes through the same recorder.
Either way the records are what ``analyze`` reads.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from serve_bench.client import Client, PreparedRequest, Response, ServeBenchError
from serve_bench.errors import first_line
from serve_bench.stats import OK, RequestRecord

__all__ = ["FIRST_ERROR", "Recorder", "RecordingClient", "first_errors", "what_failed"]

FIRST_ERROR = "first error"  # a point's note "first error <status>: <what the server or the transport said>"
_SAID_AT_MOST = 200  # characters of it kept (an HTML error page is one long line)


def _failed_status(note: str) -> str | None:
    """The status a first-error note names (``Recorder.error_notes`` writes them); None for any other note."""
    if not note.startswith(f"{FIRST_ERROR} "):
        return None
    return note[len(FIRST_ERROR) + 1 :].split(":", 1)[0]


def first_errors(notes: list[str]) -> list[str]:
    """``notes`` with one first-error note per status, the first given (a point from several processes had one from
    each child)."""
    seen: set[str] = set()
    kept = []
    for note in notes:
        status = _failed_status(note)
        if status is not None:
            if status in seen:
                continue
            seen.add(status)
        kept.append(note)
    return kept


def what_failed(notes: tuple[str, ...] | list[str], errors: dict[str, int]) -> str:
    """The first-error note of the status that failed most in the window (``errors``: the point's counts by
    status), the first given for it; "" where none was kept (a warm-up's failure of another status does not speak
    for the window's)."""
    said: dict[str, str] = {}
    for note in notes:
        status = _failed_status(note)
        if status is not None:
            said.setdefault(status, note)
    for status, _ in sorted(errors.items(), key=lambda item: -item[1]):
        if status in said:
            return said[status]
    return ""


class Recorder:
    """Sends prepared requests through ``client`` and appends one record per request to ``records``."""

    def __init__(self, client: Client, timeout: float | None = None) -> None:
        self.records: list[RequestRecord] = []
        self.first_errors: dict[str, str] = {}  # status -> the first such failure's first line
        self._predict = client.predict_prepared
        self._timeout = timeout

    def error_notes(self) -> list[str]:
        """One note per status that failed, with what its first failure said: the counts say how many, this why."""
        return [f"{FIRST_ERROR} {status}: {said}" for status, said in self.first_errors.items()]

    async def send(
        self, prepared: PreparedRequest, intended: float | None = None, timeout: float | None = None
    ) -> Response:
        """Send once; ``intended`` is when the request was due (None: its send, as in a closed loop).

        A failure is recorded with its status and error class, then raised.
        """
        sent = time.perf_counter()
        due = sent if intended is None else intended
        try:
            response = await self._predict(prepared, self._timeout if timeout is None else timeout)
        except ServeBenchError as exc:
            status = exc.status or type(exc).__name__
            if status not in self.first_errors:
                self.first_errors[status] = first_line(exc)[:_SAID_AT_MOST]
            self.records.append(
                RequestRecord(
                    due,
                    sent,
                    time.perf_counter(),
                    status,
                    prepared.items,
                    prepared.nbytes,
                    0.0,
                    type(exc),
                )
            )
            raise
        self.records.append(
            RequestRecord(due, sent, time.perf_counter(), OK, prepared.items, prepared.nbytes, response.decode_seconds)
        )
        return response


class RecordingClient(Client):
    """``inner`` seen through a recorder: each ``predict`` is encoded, then sent and recorded by ``recorder``.

    Shares the open transport and is never closed itself (the caller closes ``inner``).
    Encoding (inside the caller's stream, so its cost too) and response sizes are summed apart.
    """

    def __init__(self, inner: Client) -> None:
        super().__init__(inner.transport, inner.model, inner.signature, inner.version, inner.timeout)
        self.signatures = inner.signatures
        self.recorder = Recorder(inner, inner.timeout)
        self.encode_seconds = 0.0
        self.received_nbytes = 0

    @property
    def records(self) -> list[RequestRecord]:
        return self.recorder.records

    async def predict(self, inputs: dict[str, Any], timeout: float | None = None) -> dict[str, np.ndarray]:
        prepared = self.prepare(inputs)
        self.encode_seconds += prepared.encode_seconds
        response = await self.recorder.send(prepared, timeout=timeout)
        self.received_nbytes += response.received_nbytes
        return response.outputs
