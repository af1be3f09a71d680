"""One HTTP/1.1 request as both REST transports make it (TF Serving's API and the Open Inference Protocol's):
refusals, timeouts and HTTP statuses mapped to the client's errors alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import aiohttp
import orjson

from serve_bench.client._errors import ConnectError, RequestTimeout, ServeBenchError, error_for_http

__all__ = ["http_call"]


def _error_text(body: bytes) -> str:
    """The server's words, on one line: ``{"error": ...}`` (TF Serving, Triton, MLServer), FastAPI's
    ``{"detail": ...}`` (MLServer refusing a body it cannot parse), else the body's first line."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        if isinstance(parsed.get("error"), str):
            return str(parsed["error"])
        detail = parsed.get("detail")
        if isinstance(detail, list):
            return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
        if detail is not None:
            return str(detail)
    lines = [line.strip() for line in body[:4000].decode(errors="replace").splitlines() if line.strip()]
    if not lines:
        return ""
    # a bare traceback (MLServer's 500s): its last line names the exception
    return (lines[-1] if lines[0].startswith("Traceback") else lines[0])[:200]


async def http_call(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    target: str,
    timeout: float | None,
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    on_headers: Callable[[Mapping[str, str]], None] | None = None,
) -> tuple[Mapping[str, str], bytes]:
    """One HTTP request: the response headers and body when it is 200, else the error it maps to.

    ``target`` is the URL errors name; ``on_headers`` sees every response's headers, errors included.
    Shared by the TF Serving and the v2 REST transports, so both map refusals, timeouts and HTTP
    statuses the same way.
    """
    try:
        async with session.request(
            method, url, data=data, timeout=aiohttp.ClientTimeout(total=timeout), headers=headers
        ) as resp:
            body = await resp.read()
            if on_headers is not None:
                on_headers(resp.headers)
            if resp.status != 200:
                raise error_for_http(resp.status, _error_text(body), target)
            return resp.headers, body
    except ServeBenchError:
        raise
    except aiohttp.ClientConnectorError as exc:
        raise ConnectError(f"cannot reach {target}: {exc.os_error or exc}", url=target) from exc
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise RequestTimeout(f"{target}: no answer within {timeout} s", url=target) from exc
    except aiohttp.ClientResponseError as exc:
        if str(exc.message).startswith("Bad status line"):  # HTTP/2's first frame (a gRPC port's SETTINGS) or worse
            raise ConnectError(
                f"cannot talk to {target}: the server there does not answer in HTTP/1.1 (a gRPC port? use grpc:// or "
                "v2+grpc:// for it)",
                url=target,
            ) from exc
        raise ConnectError(f"{target}: connection failed: {exc}", url=target) from exc
    except aiohttp.ClientError as exc:
        raise ConnectError(f"{target}: connection failed: {exc}", url=target) from exc
