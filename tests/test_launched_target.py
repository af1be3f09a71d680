"""The Target of a server serve-bench starts itself, built once for sweep and tune (sweep/_launch.py's
``launched_target``): the URL of the protocol the load uses, the metrics page, the pid, and for a v2
server its HTTP URL, where Triton's statistics API (the per-batch-size executions) answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

from serve_bench.servers import V2ServerProcess
from serve_bench.stats import read_points
from serve_bench.tune import parse_tune_spec, run_tune
from serve_bench.tune._spec import ServerSpec
from serve_bench.tune._started import TritonRestarter
from serve_bench.tune._v2config import TritonConfig
from tests.conftest import _servers_env_or_skip


class _Ready(V2ServerProcess):
    """A v2 server on free ports that is ready at once (no process): what a restarter does with the server
    it started, without starting one."""

    name = "ready"
    model = "tiny"

    def start(self) -> _Ready:
        return self

    def stop(self, grace_s: float = 30.0) -> int | None:
        return None


class _TritonHere(TritonRestarter):
    def __init__(self, spec: ServerSpec, work_dir: Path) -> None:
        super().__init__(spec, "tiny", work_dir)
        self.ready = _Ready(work_dir, 1.0)

    def prepare(self, config: object, config_file: Path) -> _Ready:
        return self.ready


def test_tunes_triton_over_grpc_keeps_its_http_url_for_the_statistics_api(tmp_path: Path) -> None:
    """A tune of Triton over gRPC measures ``v2+grpc://`` on a free port, where Triton's HTTP port cannot be
    guessed: the Target carries the server's HTTP URL, or the points lose Triton's per-batch-size executions."""
    restarter = _TritonHere(ServerSpec(kind="triton", protocol="grpc"), tmp_path)
    target = asyncio.run(restarter.start(TritonConfig(), tmp_path / "config.pbtxt", tmp_path / "log"))
    server = restarter.ready
    assert (target.url, target.protocol) == (server.grpc_url, "v2-grpc")
    assert target.http_url == server.http_url
    assert (target.metrics_url, target.server) == (server.metrics_url, "triton")


def test_a_tune_of_real_triton_over_grpc_reads_its_per_batch_size_executions(models_dir: Path, tmp_path: Path) -> None:
    """End to end on tritonserver 2.51: a point tune measured over ``v2+grpc://`` on a free port has the
    executions per batch size of Triton's statistics API (``/v2/models/tiny/stats``, on its HTTP port)."""
    _servers_env_or_skip()
    text = f"""
name = "tune-triton-grpc"
model = "tiny"
[server]
kind = "triton"
models_dir = "{models_dir}"
protocol = "grpc"
startup_timeout_s = 120
[space]
max_batch_size = [8]
[load]
concurrency = [4]
[durations]
warmup_s = 0.2
min_duration_s = 0.5
min_requests = 20
windows = 2
[slo]
percentile = "p99"
max_ms = 1000
[search]
baselines = []
"""
    asyncio.run(run_tune(parse_tune_spec(text), tmp_path / "run"))
    (point,) = read_points(tmp_path / "run")
    assert point.target.protocol == "v2-grpc" and point.server is not None, point.notes
    assert point.server.batch_executions, point.server.notes
    assert sum(n for _, n in point.server.batch_executions) == point.server.executions
