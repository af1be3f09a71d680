"""One door to every server's metrics: read a page as its server writes it, wait for it to catch
up with the client, and explain the point, whichever server it is.

    before, why = await read_server(metrics_url, "tiny", kind="triton", target_url=url)
    ...                                   # the point's load
    after, why, note = await read_settled(metrics_url, "tiny", before, answered_ok, "GRPC", target_url=url)
    view = server_breakdown(before, after, "GRPC")

Which reader: the server kind when it is known (declared in the spec, or named by the server
itself), else the page's own content (``nv_inference_*`` is Triton's, ``model_infer_request_*``
and MLServer's worker metrics MLServer's, ``:tensorflow:serving:*`` TF Serving's and the local
server's).
"""

from __future__ import annotations

import asyncio
import time

from serve_bench._server_facts import MLSERVER, TF_SERVING_PAGE, TFSERVING, TRITON
from serve_bench.metrics import _mlserver, _scrape, _triton
from serve_bench.metrics._exposition import fetch_text
from serve_bench.metrics._mlserver import MLServerSnapshot
from serve_bench.metrics._scrape import MetricsSnapshot
from serve_bench.metrics._triton import TritonSnapshot
from serve_bench.stats import InvalidTarget, ServerView, parse_target, server_kind_name

__all__ = ["ServerSnapshot", "page_kind", "read_server", "read_settled", "server_breakdown", "triton_stats_url"]

ServerSnapshot = MetricsSnapshot | TritonSnapshot | MLServerSnapshot

SETTLE_S = 2.0  # longest wait for the "after" page to count the client's last answers
_POLL_S = 0.02


def page_kind(text: str) -> str:
    """The server that wrote a metrics page, from its metric names ("" when none is recognised)."""
    if "nv_inference_" in text:
        return TRITON
    if _mlserver.parse_mlserver(text, None).families:
        return MLSERVER
    if "# TYPE " + _scrape.PREFIX in text:
        return TFSERVING
    return ""


def _reader_kind(declared: str) -> str:
    kind = server_kind_name(declared).strip().lower()  # an old spelling (tensorflow-serving, ...) is its kind
    return TFSERVING if kind in TF_SERVING_PAGE else kind if kind in (TRITON, MLSERVER) else ""


def triton_stats_url(target_url: str, model: str) -> tuple[str, str]:
    """(Triton's statistics API URL for ``model``, "") or ("", why it cannot be located): the target's own
    ``TargetUrl.statistics_url``. A ``v2+grpc://`` target off Triton's default gRPC port names no HTTP port,
    and the per-batch-size executions are left out with a note."""
    try:
        address = parse_target(target_url)
    except InvalidTarget:
        return "", f"{target_url!r} is not a v2 target, so Triton's statistics API cannot be located"
    if address.statistics_url(model):
        return address.statistics_url(model), ""
    if address.protocol == "v2-grpc":
        return "", (
            f"Triton's statistics API is on its HTTP port, which a v2+grpc target on port {address.port} does not "
            "name (Triton's defaults pair gRPC 8001 with HTTP 8000); measure over v2+http:// to get them"
        )
    return "", f"{target_url} is not a v2 target, so Triton's statistics API cannot be located"


async def read_server(
    metrics_url: str, model: str, *, kind: str = "", target_url: str = "", timeout: float = 5.0
) -> tuple[ServerSnapshot | None, str]:
    """(snapshot, "") or (None, why there is none): the page read as ``kind``'s (a declared or
    announced server kind) or, when the kind is not one read here, as the page's content says.
    For Triton the statistics API (located from ``target_url``) is read just after the page."""
    text, why = await fetch_text(metrics_url, timeout)
    if text is None:
        return None, why
    reader = _reader_kind(kind) or page_kind(text)
    if reader == TRITON:
        stats_url, problem = triton_stats_url(target_url, model)
        snapshot, why = await _triton.read_triton(text, metrics_url, model, stats_url, timeout)
        if snapshot is not None and problem:
            snapshot = TritonSnapshot(snapshot.counters, snapshot.failures, snapshot.families, None, problem)
        return snapshot, why
    if reader == MLSERVER:
        page = _mlserver.parse_mlserver(text, model)
        if not page.families:
            return None, f"metrics endpoint {metrics_url} has no MLServer metrics (model_infer_request_*)"
        return page, ""
    if reader == TFSERVING:
        return _scrape.from_text(text, metrics_url, model)
    return None, (
        f"metrics endpoint {metrics_url} has no metrics of a server read here "
        "(TF Serving's :tensorflow:serving:*, Triton's nv_inference_*, MLServer's model_infer_request_*)"
    )


def _kind_of(snapshot: ServerSnapshot) -> str:
    if isinstance(snapshot, TritonSnapshot):
        return TRITON
    if isinstance(snapshot, MLServerSnapshot):
        return MLSERVER
    return TFSERVING


def _settled(before: ServerSnapshot, after: ServerSnapshot, answered_ok: int, entrypoint: str) -> bool:
    if isinstance(before, TritonSnapshot) and isinstance(after, TritonSnapshot):
        return _triton.settled(before, after, answered_ok)
    if isinstance(before, MLServerSnapshot) and isinstance(after, MLServerSnapshot):
        return _mlserver.settled(before, after, answered_ok, entrypoint)
    if isinstance(before, MetricsSnapshot) and isinstance(after, MetricsSnapshot):
        view = _scrape.breakdown(before, after, entrypoint)
        return not view.available or view.requests - view.errors >= answered_ok
    return True  # different servers: nothing to wait for, server_breakdown says so


async def read_settled(
    metrics_url: str,
    model: str,
    before: ServerSnapshot,
    answered_ok: int,
    entrypoint: str = "",
    *,
    target_url: str = "",
    timeout: float = 5.0,
    settle_s: float = SETTLE_S,
) -> tuple[ServerSnapshot | None, str, str]:
    """The "after" reading, re-read until it counts the ``answered_ok`` requests the client got an
    OK answer for (servers count some requests only after answering them): (snapshot, why none,
    a note when ``settle_s`` passed first)."""
    deadline = time.monotonic() + settle_s
    kind = _kind_of(before)
    while True:
        after, why = await read_server(metrics_url, model, kind=kind, target_url=target_url, timeout=timeout)
        if after is None or _settled(before, after, answered_ok, entrypoint):
            return after, why, ""
        if time.monotonic() >= deadline:
            late = f"the server's counters had not caught up with the client's {answered_ok} OK answers {settle_s:g} s "
            return after, "", late + "after the load: its last requests may be missing from the server figures"
        await asyncio.sleep(_POLL_S)


def server_breakdown(before: ServerSnapshot, after: ServerSnapshot, entrypoint: str = "") -> ServerView:
    """The point's ServerView from two readings of the same server."""
    if isinstance(before, TritonSnapshot) and isinstance(after, TritonSnapshot):
        return _triton.triton_breakdown(before, after, entrypoint)
    if isinstance(before, MLServerSnapshot) and isinstance(after, MLServerSnapshot):
        return _mlserver.mlserver_breakdown(before, after, entrypoint)
    if isinstance(before, MetricsSnapshot) and isinstance(after, MetricsSnapshot):
        return _scrape.breakdown(before, after, entrypoint)
    return ServerView.unavailable(
        f"the metrics page changed server during the point ({_kind_of(before)} before, {_kind_of(after)} after)"
    )
