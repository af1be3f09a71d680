"""Starting Prometheus' node exporter (Debian package prometheus-node-exporter) for tests."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from tests.conftest import free_port

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


@contextmanager
def node_exporter(flags: Sequence[str]) -> Iterator[str]:
    """Runs the node exporter with ``flags`` plus a free 127.0.0.1 listen address; yields its
    metrics URL, stops it on exit."""
    if NODE_EXPORTER is None:
        raise AssertionError(
            "prometheus-node-exporter is not installed: apt-get install prometheus-node-exporter (.ci/run installs it)"
        )
    port = free_port()
    args = [NODE_EXPORTER, *flags, f"--web.listen-address=127.0.0.1:{port}"]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).read()
                break
            except OSError:
                if process.poll() is not None:
                    why = process.stderr.read().decode() if process.stderr else ""
                    raise AssertionError(f"{args} exited: {why}") from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"node exporter did not answer on {url}") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
