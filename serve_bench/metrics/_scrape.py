"""Scrape TF Serving's Prometheus endpoint (the local server exports the same names).

Histograms are cumulative, so a point's server-side figures are the difference
between a scrape before and a scrape after it.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["MetricsSnapshot", "default_metrics_url", "scrape", "breakdown"]

PREFIX = ":tensorflow:serving:"
DEFAULT_PATH = "/monitoring/prometheus/metrics"
MetricsSnapshot = dict[str, float]

# (metric, whether it is labelled by model_name)
_HISTOGRAMS = {
    "request_latency": True,
    "runtime_latency": True,
    "batching_session:queuing_latency": False,
    "batching_session:input_batch_size": False,
    "batching_session:processed_batch_size": False,
    "batching_session:padding_size": False,
}


def default_metrics_url(target_url: str) -> str:
    """TF Serving's convention: REST (and metrics) on the gRPC port + 1 (8500/8501, 8510/8511)."""
    parts = urlsplit(target_url)
    port = parts.port or 8500
    if parts.scheme == "grpc":
        port += 1
    return f"http://{parts.hostname}:{port}{DEFAULT_PATH}"


def parse(text: str, model: str | None) -> MetricsSnapshot:
    """Sums and counts by metric; the key "_families" counts TF Serving families seen (even empty ones)."""
    snapshot: MetricsSnapshot = {"_families": 0.0}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(PREFIX):
            continue
        snapshot["_families"] += 1
        short = family.name[len(PREFIX):]
        for sample in family.samples:
            if model is not None and "model_name" in sample.labels and sample.labels["model_name"] != model:
                continue
            suffix = sample.name[len(family.name):]
            if short == "request_count" and suffix in ("", "_total"):
                key = "request_count" if sample.labels.get("status", "OK") == "OK" else "request_errors"
                snapshot[key] = snapshot.get(key, 0.0) + sample.value
            elif short in _HISTOGRAMS and suffix in ("_sum", "_count"):
                if short == "request_latency" and sample.labels.get("API", "predict") != "predict":
                    continue
                key = short + suffix
                snapshot[key] = snapshot.get(key, 0.0) + sample.value
    return snapshot


def _fetch(url: str, timeout: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode("utf-8", errors="replace")


async def scrape(url: str, model: str | None, timeout: float = 5.0) -> tuple[MetricsSnapshot | None, str]:
    """(snapshot, "") or (None, why it is unavailable)."""
    try:
        text = await asyncio.to_thread(_fetch, url, timeout)
    except urllib.error.HTTPError as exc:
        return None, f"metrics endpoint {url} answered HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return None, f"metrics endpoint {url} unreachable ({getattr(exc, 'reason', exc)})"
    try:
        snapshot = parse(text, model)
    except Exception as exc:  # a page that is not Prometheus text
        return None, f"metrics endpoint {url} did not parse as Prometheus text ({exc})"
    if not snapshot.get("_families"):
        return None, f"metrics endpoint {url} has no TF Serving metrics"
    return snapshot, ""


def _delta(before: MetricsSnapshot, after: MetricsSnapshot, key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


def _mean(before: MetricsSnapshot, after: MetricsSnapshot, name: str) -> float | None:
    count = _delta(before, after, name + "_count")
    return _delta(before, after, name + "_sum") / count if count > 0 else None


def breakdown(before: MetricsSnapshot, after: MetricsSnapshot) -> dict[str, Any]:
    """Server-side view of one point: where the time went and how big the batches were."""
    request = _mean(before, after, "request_latency")
    runtime = _mean(before, after, "runtime_latency")
    queuing = _mean(before, after, "batching_session:queuing_latency")
    processed = _mean(before, after, "batching_session:processed_batch_size")
    input_size = _mean(before, after, "batching_session:input_batch_size")
    processed_sum = _delta(before, after, "batching_session:processed_batch_size_sum")
    padding_sum = _delta(before, after, "batching_session:padding_size_sum")
    overhead = None
    if request is not None:
        overhead = max(0.0, request - (queuing or 0.0) - (runtime or 0.0))
    return {
        "available": True,
        "requests": _delta(before, after, "request_count"),
        "errors": _delta(before, after, "request_errors"),
        "request_us_mean": request,
        "queue_us_mean": queuing,
        "compute_us_mean": runtime,
        "overhead_us_mean": overhead,
        "tf_calls": _delta(before, after, "runtime_latency_count"),
        "input_batch_mean": input_size,
        "processed_batch_mean": processed,
        "padding_share": padding_sum / processed_sum if processed_sum > 0 else None,
    }
