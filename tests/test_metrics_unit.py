"""The scraper's arithmetic on Prometheus text in TF Serving's shape."""

from __future__ import annotations

import pytest

from serve_bench.metrics import breakdown, default_metrics_url, parse
from serve_bench.server._metrics import Metrics


def test_default_metrics_url_follows_tf_servings_ports():
    assert default_metrics_url("grpc://host:8500") == "http://host:8501/monitoring/prometheus/metrics"
    assert default_metrics_url("grpc://host:8510") == "http://host:8511/monitoring/prometheus/metrics"
    assert default_metrics_url("http://host:8501") == "http://host:8501/monitoring/prometheus/metrics"


def test_empty_page_is_a_valid_snapshot():
    snapshot = parse(Metrics().render(), "m")
    assert snapshot["_families"] > 0 and snapshot.get("request_count", 0) == 0


def test_breakdown_from_two_scrapes():
    metrics = Metrics()
    before = parse(metrics.render(), "m")
    for _ in range(4):  # four requests of one image batched into one call of 4, padded to 8
        metrics.inc("request_count", ("m", "OK"))
        metrics.observe("request_latency", 10_000, ("m", "predict", "GRPC"))
        metrics.observe("batching_session:queuing_latency", 3_000, ("pool",))
        metrics.observe("batching_session:input_batch_size", 1)
    metrics.observe("runtime_latency", 6_000, ("m", "predict", "TF2"))
    metrics.observe("batching_session:processed_batch_size", 8)
    metrics.observe("batching_session:padding_size", 4, ("8",))
    metrics.inc("request_count", ("other", "OK"))  # another model: not counted
    after = parse(metrics.render(), "m")
    result = breakdown(before, after)
    assert result["requests"] == 4
    assert result["request_us_mean"] == pytest.approx(10_000)
    assert result["queue_us_mean"] == pytest.approx(3_000)
    assert result["compute_us_mean"] == pytest.approx(6_000)
    assert result["overhead_us_mean"] == pytest.approx(1_000)
    assert result["processed_batch_mean"] == pytest.approx(8)
    assert result["input_batch_mean"] == pytest.approx(1)
    assert result["padding_share"] == pytest.approx(0.5)
    assert result["tf_calls"] == 1
