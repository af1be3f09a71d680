"""A v2 server (Triton, MLServer) counts as started only once its metrics page answers too.

Triton starts its metrics service after its HTTP service (server src/main.cc, StartEndpoints: HTTP at line
280, metrics at 316, main of 2026-11, e1db8a603), so `/v2/health/ready` can answer while the metrics port
still refuses connections: a CI run with one core busy read a refused connection on Triton's metrics right after
start() returned. The
stand-in here is a process that answers both ready URLs at once and opens its metrics port a second after the
model's ready URL first answered: the logic of waiting, not Triton (tests/test_v2_server_views_live.py reads
real Triton's and MLServer's pages).
"""

from __future__ import annotations

import sys
from pathlib import Path

from serve_bench.servers._process import V2ServerProcess, http_ok

_LATE_METRICS = r"""
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

http_port, metrics_port = int(sys.argv[1]), int(sys.argv[2])
opened = threading.Event()

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"# metrics\n" if self.server.server_port == metrics_port else b"{}")
        if self.path.endswith("/models/tiny/ready") and not opened.is_set():
            opened.set()
            metrics = lambda: ThreadingHTTPServer(("127.0.0.1", metrics_port), Handler).serve_forever()
            threading.Timer(1.0, metrics).start()

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", http_port), Handler).serve_forever()
"""


class _LateMetrics(V2ServerProcess):
    name = "late-metrics"
    model = "tiny"

    def command(self) -> list[str]:
        return [sys.executable, "-c", _LATE_METRICS, str(self.http_port), str(self.metrics_port)]


def test_start_returns_once_the_metrics_page_answers(tmp_path: Path) -> None:
    server = _LateMetrics(tmp_path, startup_timeout_s=30)
    with server:
        assert http_ok(f"{server.http_base}/v2/health/ready")
        assert http_ok(server.metrics_url), "start() returned before the metrics page answered"
