"""The scraper's helpers and the ServerView record."""

from __future__ import annotations

import json

import pytest

from serve_bench.metrics import breakdown, parse
from serve_bench.server._metrics import Metrics
from serve_bench.stats import ServerView, parse_target


def test_default_metrics_url_follows_tf_servings_ports():
    """REST (and the monitoring page) on the gRPC port + 1 as TF Serving's images run it; the default path
    is PrometheusExporter::kPrometheusPath (tensorflow_serving/util/prometheus_exporter.cc:156-157)."""
    assert parse_target("grpc://host:8500").metrics_url == "http://host:8501/monitoring/prometheus/metrics"
    assert parse_target("grpc://host:8510").metrics_url == "http://host:8511/monitoring/prometheus/metrics"
    assert parse_target("http://host:8501").metrics_url == "http://host:8501/monitoring/prometheus/metrics"
    assert parse_target("http://host").metrics_url == "http://host:8501/monitoring/prometheus/metrics"


def test_empty_page_is_a_valid_snapshot():
    snapshot = parse(Metrics().render(), "m")
    assert snapshot.families > 0 and snapshot.get("request_count", "", ("OK",)) == 0
    view = breakdown(snapshot, snapshot)
    assert view.available and view.requests == 0 and view.request_us_mean is None and view.describe() == ""


def test_server_view_round_trips_through_json():
    view = ServerView(
        entrypoint="GRPC",
        requests=4.0,
        errors=1.0,
        request_us_mean=10_000.0,
        runtime_us_mean=9_000.0,
        queue_us_mean=3_000.0,
        compute_us_mean=6_000.0,
        overhead_us_mean=1_000.0,
        batching=True,
        tf_calls=1.0,
        processed_batch_mean=8.0,
        padding_share=0.5,
        precision=0.02,
        notes=("request_latency: imprecise",),
    )
    again = ServerView.from_dict(json.loads(json.dumps(view.to_dict())))
    assert again == view
    assert again.flags() == ("server errors", "server metrics imprecise")
    assert again.describe() == "server 10.0 ms = queue 3.0 + compute 6.0 + overhead 1.0; server batch 8.0 (padding 50%)"


def test_server_view_reads_a_schema_1_server_object():
    """Old points held a free-form dict with 'available'; keys of the same meaning keep their names."""
    old = {
        "available": True,
        "requests": 4.0,
        "errors": 0.0,
        "request_us_mean": 10.0,
        "queue_us_mean": None,
        "compute_us_mean": 6.0,
        "overhead_us_mean": 4.0,
        "tf_calls": 4.0,
        "input_batch_mean": None,
        "processed_batch_mean": None,
        "padding_share": None,
    }
    view = ServerView.from_dict(old)
    assert view.requests == 4.0 and view.compute_us_mean == 6.0 and view.runtime_us_mean is None


def test_unavailable_view_says_why():
    view = ServerView.unavailable("metrics endpoint unreachable")
    assert not view.available and view.flags() == ("server metrics unavailable",)
    assert "unreachable" in view.describe()


@pytest.mark.parametrize("value", [0.0, 1.0, 123456.0, 4.56789e9])
def test_six_digit_sums_round_within_the_resolution(value):
    """The bound used for precision loss holds for %.6g as prometheus_exporter.cc:104-106 writes sums."""
    from serve_bench.metrics import sum_resolution

    written = float(f"{value + 0.123456789:.6g}")
    assert abs(written - (value + 0.123456789)) <= sum_resolution(value + 0.123456789) + 1e-12


async def test_a_metrics_url_that_does_not_speak_http_1_is_a_note_not_a_traceback(grpc_port):
    """``--metrics`` given the gRPC port (a real gRPC server: HTTP/2 only, its first bytes a SETTINGS frame) or a URL
    with a space: http.client raises its own errors (BadStatusLine, InvalidURL), not OSError, and the point went on
    to a traceback; each is the note every other unreadable endpoint gets."""
    import socketserver
    import threading

    from serve_bench.metrics._energy_sources import PrometheusSource, Reading
    from serve_bench.metrics._exposition import fetch_text
    from serve_bench.servers._process import http_ok
    from serve_bench.tune._restart import _rest_state

    at_grpc = f"http://127.0.0.1:{grpc_port}/metrics"
    for url in (at_grpc, "http://exa mple/metrics"):
        body, why = await fetch_text(url, timeout=5)
        assert body is None and why.startswith(f"metrics endpoint {url} unreachable ("), why
        assert why.isprintable() and why.isascii()
    # the other readers of a URL: --telemetry's page, a launched server's readiness, tune's restart status
    reading = Reading(time=0.0)
    PrometheusSource(at_grpc).read(reading)
    assert reading.problems == [f"telemetry unavailable: {at_grpc} (its answer is not HTTP/1.1: a gRPC port?)"]
    assert http_ok(at_grpc) is False and _rest_state(at_grpc) == ""

    # a server that closes without answering (restarting, overloaded): http.client's RemoteDisconnected is a
    # BadStatusLine too, and is said as the closed connection it is, not as a gRPC port
    class Close(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(65536)  # the request read, then no answer: RemoteDisconnected, not a reset
            self.request.close()

    with socketserver.TCPServer(("127.0.0.1", 0), Close) as closing:
        threading.Thread(target=closing.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{closing.server_address[1]}/metrics"
        body, why = await fetch_text(url, timeout=5)
        reading = Reading(time=0.0)
        PrometheusSource(url).read(reading)
        closing.shutdown()
    assert body is None and "closed connection" in why and "gRPC" not in why, why
    assert "not HTTP/1.1" not in reading.problems[0] and "closed connection" in reading.problems[0]
