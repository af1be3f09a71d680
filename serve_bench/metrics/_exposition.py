"""Prometheus text exposition, read line by line: what every server's page reader shares.

Tolerant on purpose: a page carries every metric of its process (TensorFlow's, Python's,
uvicorn's), and one line we cannot read elsewhere must not lose the point's figures.
"""

from __future__ import annotations

import asyncio
import http.client
import re
import urllib.error
import urllib.request
from collections.abc import Iterator

__all__ = ["UnreadablePage", "fetch_text", "labels_of", "read_page", "samples"]

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def labels_of(text: str) -> dict[str, str] | None:
    """The labels of one sample (the text between its braces); None when they cannot be read."""
    labels: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            return None
        labels[match.group(1)] = _unescape(match.group(2))
        pos = match.end()
    return labels


def samples(text: str, prefixes: tuple[str, ...] = ("",)) -> Iterator[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every readable sample whose name starts with one of ``prefixes`` (every one by
    default); label values unescaped as Prometheus' own text parser does."""
    for line in text.splitlines():
        if not line.startswith(prefixes):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, label_text, raw = match.groups()
        labels = labels_of(label_text or "")
        if labels is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        yield name, labels, value


class UnreadablePage(Exception):
    """Why a page could not be read: ``HTTP 503`` (``status`` 503), or why no answer came (``status`` None)."""

    def __init__(self, why: str, status: int | None = None) -> None:
        super().__init__(why)
        self.status = status


def read_page(url: str, timeout: float) -> str:
    """The text at ``url`` (a Prometheus page, Triton's statistics), or UnreadablePage on one line, in ASCII."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return str(response.read().decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as exc:
        raise UnreadablePage(f"HTTP {exc.code}", exc.code) from None
    except ConnectionError as exc:  # RemoteDisconnected too (a BadStatusLine as well): closed without an answer
        raise UnreadablePage(ascii(str(exc))[1:-1][:120]) from None
    except http.client.BadStatusLine:  # its first bytes, a gRPC port's HTTP/2 SETTINGS frame, are no status line
        raise UnreadablePage("its answer is not HTTP/1.1: a gRPC port?") from None
    except http.client.HTTPException as exc:  # InvalidURL, IncompleteRead...: http.client's own, not OSError
        raise UnreadablePage(ascii(str(exc))[1:-1][:120]) from None
    except (OSError, ValueError) as exc:
        raise UnreadablePage(ascii(str(getattr(exc, "reason", exc)))[1:-1][:120]) from None


async def fetch_text(url: str, timeout: float, what: str = "metrics endpoint") -> tuple[str | None, str]:
    """(body, "") or (None, why ``what`` at ``url`` could not be read)."""
    try:
        return await asyncio.to_thread(read_page, url, timeout), ""
    except UnreadablePage as exc:
        if exc.status is not None:
            return None, f"{what} {url} answered {exc}"
        return None, f"{what} {url} unreachable ({exc})"
