"""A target: a server to measure, and its URL parsed once into a typed value (``parse_target``).

    grpc://host:8500          TF Serving's gRPC API                                protocol grpc
    http(s)://host:8501       TF Serving's REST API                                protocol rest
    v2+grpc://host:8001       the Open Inference Protocol (KServe v2: Triton,      protocol v2-grpc
    v2+http(s)://host:8000    MLServer, OVMS) over gRPC or HTTP                    protocol v2-rest

Everything that needs a part of a target URL reads the fields of ``parse_target``'s ``TargetUrl``: the
client connects to its host and port, a sweep spec refuses what it refuses, a point's protocol is its
protocol, and the metrics reader finds the server's default metrics page and Triton's statistics API
from it. A URL it refuses is ``InvalidTarget``: a UserError of one line, raised before any socket opens.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import urlsplit

from serve_bench._server_facts import TF_SERVING_METRICS_PATH
from serve_bench.errors import UserError

__all__ = ["InvalidTarget", "Target", "TargetUrl", "parse_target"]

# scheme -> default port: TF Serving's API, and the Open Inference Protocol's (Triton's HTTP 8000, gRPC 8001)
_DEFAULT_PORTS = {"grpc": 8500, "http": 8501, "https": 443, "v2+grpc": 8001, "v2+http": 8000, "v2+https": 8000}
_FORMS = "grpc://host:8500, http://host:8501, v2+grpc://host:8001 or v2+http://host:8000"
# a v2 server's port -> its metrics port, by the servers' defaults: Triton (HTTP 8000, gRPC 8001 -> 8002;
# server src/command_line_parser.cc), MLServer (HTTP 8080, gRPC 8081 -> 8082; mlserver/settings.py)
_V2_METRICS_PORT = {8000: 8002, 8001: 8002, 8080: 8082, 8081: 8082}
# Triton's default gRPC port pairs with its default HTTP port (server src/grpc/grpc_server.h:52,
# src/command_line_parser.h:194), where its statistics API answers
_TRITON_HTTP_PORT = {8001: 8000}


class InvalidTarget(UserError):
    """A target URL serve-bench cannot talk to as written (scheme, host, port or path): the user's to fix."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message, parameter="url")
        self.url = url


@dataclass(frozen=True)
class TargetUrl:
    """A target URL's parts: ``scheme`` lower-cased, ``host`` without IPv6 brackets, ``port`` as given or the
    scheme's default. ``url`` is the text it was parsed from."""

    url: str
    scheme: str  # grpc | http | https | v2+grpc | v2+http | v2+https
    host: str
    port: int

    @property
    def v2(self) -> bool:
        """The Open Inference Protocol (Triton, MLServer), not TF Serving's API."""
        return self.scheme.startswith("v2+")

    @property
    def transport(self) -> str:
        """``grpc`` or ``http`` (https included)."""
        return "grpc" if self.scheme in ("grpc", "v2+grpc") else "http"

    @property
    def protocol(self) -> str:
        """What a point records: ``grpc`` / ``rest`` (TF Serving's API), ``v2-grpc`` / ``v2-rest``."""
        return ("v2-" if self.v2 else "") + ("grpc" if self.transport == "grpc" else "rest")

    @property
    def authority(self) -> str:
        """``host:port``, an IPv6 host in brackets."""
        return self._host_at(self.port)

    @property
    def http_base(self) -> str:
        """``http(s)://host:port`` of an HTTP target ("" for gRPC): where its REST paths start."""
        return f"{self.scheme.removeprefix('v2+')}://{self.authority}" if self.transport == "http" else ""

    @property
    def metrics_url(self) -> str:
        """The metrics page its server writes by default ("" when there is no default to assume).

        TF Serving: on the REST port, the gRPC port + 1 (8500/8501, 8510/8511), at its monitoring path.
        Open Inference Protocol: on the servers' own default ports, Triton's 8000/8001 -> 8002 and
        MLServer's 8080/8081 -> 8082; on any other port the metrics port cannot be guessed.
        """
        if self.v2:
            port = _V2_METRICS_PORT.get(self.port)
            return f"http://{self._host_at(port)}/metrics" if port else ""
        if self.scheme == "https":  # TF Serving serves no TLS: a proxy is in front, its pages are its own
            return ""
        port = self.port + 1 if self.transport == "grpc" else self.port
        return f"http://{self._host_at(port)}{TF_SERVING_METRICS_PATH}"

    def statistics_url(self, model: str) -> str:
        """Triton's statistics API for ``model`` (``/v2/models/{m}/stats``) on its HTTP port: the target's own
        for ``v2+http(s)``, the default HTTP port beside the default gRPC port; "" where it cannot be known."""
        if self.v2 and self.transport == "http":
            return f"{self.http_base}/v2/models/{model}/stats"
        port = _TRITON_HTTP_PORT.get(self.port) if self.v2 else None
        return f"http://{self._host_at(port)}/v2/models/{model}/stats" if port else ""

    @property
    def loopback(self) -> bool:
        """A server on this host (its telemetry is this host's counters)."""
        return self.host in ("localhost", "127.0.0.1", "::1")

    def _host_at(self, port: int) -> str:
        return f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"


@functools.lru_cache(maxsize=256)
def parse_target(url: str) -> TargetUrl:
    """The parts of a target URL; InvalidTarget (one line naming what is wrong) for one serve-bench cannot use.

    ``grpc``, ``http`` and ``https`` speak TF Serving's API; ``v2+grpc``, ``v2+http`` and ``v2+https`` the Open
    Inference Protocol, whose URL names the server only (a path would be a pasted model URL, cut silently).
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port out of range or not a number, an unclosed [IPv6]
        raise InvalidTarget(f"target {url!r} is not a valid URL ({exc}); use {_FORMS}", url=url) from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidTarget(f"unknown scheme in target {url!r}; use {_FORMS}", url=url)
    if not parts.hostname:
        raise InvalidTarget(
            f"target {url!r} has no host; use e.g. {scheme}://localhost:{_DEFAULT_PORTS[scheme]}", url=url
        )
    if scheme.startswith("v2+") and (parts.path.strip("/") or parts.query or parts.fragment):
        raise InvalidTarget(
            f"target {url!r} has a path; give the server only ({scheme}://{parts.netloc}) and the model apart",
            url=url,
        )
    return TargetUrl(url, scheme, parts.hostname, _DEFAULT_PORTS[scheme] if port is None else port)


@dataclass(frozen=True)
class Target:
    """A server to measure: a URL with a name and a device label.

    In a spec ``server`` is the declared server kind (may be ""); in a point it is
    the kind measured (``local`` is detected from the server itself, by its identity ``serve-bench-local/<version>``).
    ``metrics_url`` None means the server's default for the URL (``TargetUrl.metrics_url``); "" means none.
    """

    name: str
    url: str
    device: str = "cpu"
    metrics_url: str | None = None
    server: str = ""
    pid: int | None = None  # a local server process whose CPU to sample
    server_version: str = ""
    protocol: str = ""  # grpc | rest | v2-grpc | v2-rest; "" derives it from the URL (when there is one)
    price_per_hour: float | None = None  # what running this target costs per hour (None: no price given)
    currency: str = ""  # the unit of price_per_hour (one per spec)
    telemetry: tuple[str, ...] = ()  # Prometheus pages (dcgm-exporter, node exporter) with its energy counters
    # the same server's v2 HTTP URL when ``url`` is its gRPC one: Triton's statistics API answers there
    http_url: str = ""
    # the software that runs the model: tensorflow | onnxruntime | openvino; "" not stated. A launched local
    # server runs it (serve --runtime); for any other target it is what the spec declares
    runtime: str = ""

    def __post_init__(self) -> None:
        if not self.protocol and self.url:
            object.__setattr__(self, "protocol", parse_target(self.url).protocol)

    @property
    def address(self) -> TargetUrl:
        """The URL's parts (InvalidTarget for a URL serve-bench cannot use)."""
        return parse_target(self.url)

    @property
    def scrape_url(self) -> str:
        """The metrics page to read: as given, or the server's default for the URL ("" none)."""
        return self.address.metrics_url if self.metrics_url is None else self.metrics_url

    @property
    def server_kind(self) -> str:
        return self.server or "unknown"
