"""A target URL, parsed once (stats/_target.py): its parts, its defaults, its one-line refusals, and the places
that read its fields (the client, a sweep spec, a point's protocol, the metrics page, Triton's statistics API,
the telemetry of a server on this host)."""

from __future__ import annotations

import re

import pytest

from serve_bench.client import connect
from serve_bench.errors import UserError
from serve_bench.metrics import triton_stats_url
from serve_bench.stats import InvalidTarget, Target, TargetUrl, parse_target
from serve_bench.sweep import parse_spec
from serve_bench.sweep._measure import open_telemetry


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port", "transport", "protocol"),
    [
        ("grpc://h:8510", "grpc", "h", 8510, "grpc", "grpc"),
        ("grpc://h", "grpc", "h", 8500, "grpc", "grpc"),  # TF Serving's default ports
        ("http://h", "http", "h", 8501, "http", "rest"),
        ("HTTPS://H.example:9", "https", "h.example", 9, "http", "rest"),
        ("https://h", "https", "h", 443, "http", "rest"),
        ("v2+grpc://h", "v2+grpc", "h", 8001, "grpc", "v2-grpc"),  # Triton's defaults
        ("v2+http://h", "v2+http", "h", 8000, "http", "v2-rest"),
        ("V2+HTTPS://h:9", "v2+https", "h", 9, "http", "v2-rest"),
        ("v2+http://h:8000/", "v2+http", "h", 8000, "http", "v2-rest"),  # a bare slash is the server still
        ("grpc://[::1]:8500", "grpc", "::1", 8500, "grpc", "grpc"),
    ],
)
def test_a_target_url_is_read_into_its_parts(
    url: str, scheme: str, host: str, port: int, transport: str, protocol: str
) -> None:
    address = parse_target(url)
    assert address == TargetUrl(url, scheme, host, port)
    assert (address.transport, address.protocol, address.v2) == (transport, protocol, scheme.startswith("v2+"))
    assert Target("t", url).protocol == protocol


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://h:21", "unknown scheme"),
        ("h:8500", "unknown scheme"),
        ("", "unknown scheme"),
        ("grpc://", "has no host"),
        ("http://:8501", "has no host; use e.g. http://localhost:8501"),
        ("grpc://h:port", "not a valid URL"),
        ("grpc://h:99999", "not a valid URL"),
        ("grpc://[::1", "not a valid URL"),
        ("v2+http://h:8000/v2/models/tiny/infer", "has a path; give the server only (v2+http://h:8000)"),
        ("v2+grpc://h:8001?x=1", "has a path"),
    ],
)
def test_a_url_serve_bench_cannot_use_is_one_line_naming_it(url: str, words: str) -> None:
    with pytest.raises(InvalidTarget, match=re.escape(words)) as info:
        parse_target(url)
    assert isinstance(info.value, UserError) and info.value.url == url
    assert "\n" not in str(info.value) and repr(url) in str(info.value)


def test_an_ipv6_host_is_bracketed_wherever_a_url_is_made_of_it() -> None:
    address = parse_target("http://[::1]:8501")
    assert address.authority == "[::1]:8501" and address.http_base == "http://[::1]:8501"
    assert address.metrics_url == "http://[::1]:8501/monitoring/prometheus/metrics"
    assert parse_target("v2+grpc://[fe80::1]:8001").statistics_url("m") == "http://[fe80::1]:8000/v2/models/m/stats"
    assert parse_target("grpc://[::1]:8500").loopback


@pytest.mark.parametrize(
    ("url", "metrics"),
    [
        ("grpc://h:8500", "http://h:8501/monitoring/prometheus/metrics"),  # TF Serving: REST = gRPC + 1
        ("grpc://h", "http://h:8501/monitoring/prometheus/metrics"),
        ("http://h", "http://h:8501/monitoring/prometheus/metrics"),  # the REST port's own page
        ("v2+grpc://h", "http://h:8002/metrics"),  # Triton's default ports
        ("v2+http://h", "http://h:8002/metrics"),
        ("v2+grpc://h:8081", "http://h:8082/metrics"),  # MLServer's
        ("v2+http://h:9000", ""),  # no default to assume
        ("https://h", ""),  # TF Serving has no TLS: a proxy answers there, with pages of its own
        ("https://h:8501", ""),
    ],
)
def test_the_default_metrics_page_follows_the_servers_ports(url: str, metrics: str) -> None:
    assert parse_target(url).metrics_url == metrics
    assert Target("t", url).scrape_url == metrics
    assert Target("t", url, metrics_url="http://m/x").scrape_url == "http://m/x"  # given: as given
    assert Target("t", url, metrics_url="").scrape_url == ""  # "": none


def test_the_statistics_api_is_tritons_http_port() -> None:
    assert parse_target("v2+http://h:9000").statistics_url("m") == "http://h:9000/v2/models/m/stats"
    assert parse_target("v2+https://h:9000").statistics_url("m") == "https://h:9000/v2/models/m/stats"
    assert parse_target("v2+grpc://h").statistics_url("m") == "http://h:8000/v2/models/m/stats"
    assert parse_target("v2+grpc://h:9001").statistics_url("m") == ""  # its HTTP port cannot be known
    assert parse_target("http://h:8501").statistics_url("m") == ""  # TF Serving has none
    assert triton_stats_url("v2+grpc://h", "m") == ("http://h:8000/v2/models/m/stats", "")
    url, why = triton_stats_url("", "m")
    assert url == "" and "not a v2 target" in why and "\n" not in why


def test_a_target_without_a_url_yet_has_no_protocol_and_one_with_a_bad_url_is_refused() -> None:
    assert Target("t", "").protocol == ""  # a launched server's, until it starts
    assert Target("locust", "", protocol="grpc").protocol == "grpc"
    with pytest.raises(InvalidTarget, match="unknown scheme"):
        Target("t", "localhost:8500")


# --- the places that read it ---------------------------------------------------------------------------


def test_the_client_refuses_what_the_parse_refuses_before_any_socket() -> None:
    with pytest.raises(InvalidTarget, match="has no host"):
        connect("v2+http://:8000", "tiny")


SPEC = """
name = "s"
model = "tiny"
batch_sizes = [1]
[load]
concurrency = [1]
[[targets]]
name = "t"
url = "{url}"
"""


@pytest.mark.parametrize("url", ["grpc://", "v2+http://h:8000/v2/models/tiny", "grpc://h:port"])
def test_a_sweep_spec_refuses_a_url_the_client_would_refuse_when_it_is_read(url: str) -> None:
    """Before the parse was one, the spec checked the scheme only: these ran until the first point's connect."""
    with pytest.raises(UserError) as info:
        parse_spec(SPEC.format(url=url), "s.toml")
    message = str(info.value)
    assert message.startswith("s.toml: targets[0].url: ") and url in message and "\n" not in message


def test_a_spec_target_reads_its_protocol_and_metrics_from_its_url() -> None:
    (target,) = parse_spec(SPEC.format(url="v2+grpc://h"), "s.toml").targets
    assert (target.protocol, target.scrape_url) == ("v2-grpc", "http://h:8002/metrics")


@pytest.mark.parametrize(
    ("url", "local"),
    [("grpc://localhost:8500", True), ("http://[::1]:8501", True), ("grpc://10.0.0.9:8500", False)],
)
def test_a_server_on_this_host_is_measured_with_this_hosts_counters(url: str, local: bool) -> None:
    session = open_telemetry(Target("t", url))
    assert (session is not None) == local
