"""`make test` on a fresh machine: what it lacks is skipped with one line, and fails where CI is set.

A fresh clone may have neither the servers' environment (.venv-servers, real Triton and MLServer) nor
Prometheus' node exporter. Every test that needs one goes through conftest's ``require``: a skip that
says how to install it, or, with CI set, a failure. A module-level ``pytest.skip`` (without
``allow_module_level``) or a bare assert would make collection or the test ERROR instead. This runs the
affected modules in a child pytest with both hidden.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from serve_bench.servers import ENV_VARIABLE

ROOT = Path(__file__).resolve().parent.parent
NODE_EXPORTER_TEST = "tests/test_docker.py::test_node_exporter_runs_with_the_compose_flags"
LIVE_MODULE = "tests/test_v2_server_views_live.py"  # collected only (its tests start real servers)


def _run_without_them(tmp_path: Path, *, ci: bool) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env[ENV_VARIABLE] = str(tmp_path / "no-servers-env")
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's scripts, not /usr/bin's node exporter
    if ci:
        env["CI"] = "true"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "node_exporter_runs"]
    done = subprocess.run(
        [*args, LIVE_MODULE, NODE_EXPORTER_TEST], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    summary = done.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    counts["rc"] = done.returncode
    return counts


def test_without_the_servers_env_and_node_exporter_they_skip(tmp_path: Path) -> None:
    """One skip, and no error: the live module is collected cleanly (its two tests deselected)."""
    counts = _run_without_them(tmp_path, ci=False)
    assert counts == {"skipped": 1, "deselected": 2, "rc": 0}, counts


def test_with_ci_set_they_fail(tmp_path: Path) -> None:
    """A failure, not a skip, and still no collection error."""
    counts = _run_without_them(tmp_path, ci=True)
    assert counts == {"failed": 1, "deselected": 2, "rc": 1}, counts
