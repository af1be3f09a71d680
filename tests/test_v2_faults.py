"""Faults of real servers during a point: nothing is lost, the point says what happened."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import urllib.request

from serve_bench.export import TritonBatching
from serve_bench.load import PointSettings
from serve_bench.servers import TritonServer
from serve_bench.stats import LoadInfo
from serve_bench.sweep import measure_async


def _successes(stats_url: str) -> int:
    with urllib.request.urlopen(stats_url, timeout=10) as response:
        return int(json.loads(response.read())["model_stats"][0]["inference_stats"]["success"]["count"])


def test_triton_killed_mid_point_cuts_the_point_off_with_what_it_measured(models_dir, tmp_path):
    """kill -9 of tritonserver while 4 requests are in flight: the point ends at once, is marked cut off
    (the target stopped accepting connections), and keeps every answer received before."""
    server = TritonServer(
        models_dir, "tiny", TritonBatching(max_batch_size=32, max_queue_delay_us=0), work_dir=tmp_path
    )
    server.start()
    try:
        killed = threading.Event()

        def kill_when_busy() -> None:
            # Triton's own record says the load is running: then kill it (an event of the server, no sleep)
            while _successes(server.stats_url) < 50:
                pass
            assert server.process is not None
            os.killpg(server.process.pid, signal.SIGKILL)
            killed.set()

        watcher = threading.Thread(target=kill_when_busy, daemon=True)
        watcher.start()
        settings = PointSettings(warmup_s=0.0, min_duration_s=60.0, min_requests=10, until_stable=False, timeout_s=5)
        point = asyncio.run(
            measure_async(
                server.grpc_url,
                "tiny",
                load=LoadInfo("closed", concurrency=4),
                settings=settings,
                metrics_url=server.metrics_url,
            )
        )
        watcher.join(timeout=30)
        assert killed.is_set()
    finally:
        server.stop()
    assert "127.0.0.1" in point.cut_off, point.cut_off  # ended early, and says why (naming the target)
    assert "\n" not in point.cut_off
    assert point.counts.ok >= 40  # the answers before the kill are kept
    assert point.duration_s < 60.0
