"""One run, three batchers: the shipped spec loadtests/sweeps/three-batchers.toml starts the local server
(TF Serving's batching as imitated here), real Triton 2.51 and real MLServer 1.7.1, measures each, and the
report compares the three. Nothing is faked: three real servers, the `tiny` model with random weights."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from serve_bench.load import PointSettings
from serve_bench.report import build_report, decide
from serve_bench.sweep import load_spec, run_sweep

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def three_batchers_run(models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    spec = load_spec(ROOT / "loadtests" / "sweeps" / "three-batchers.toml")
    # the shipped spec with the test's tiny model and short points; everything else as users run it
    spec = dataclasses.replace(
        spec,
        model="tiny",
        models_dir=str(models_dir),
        settings=PointSettings(warmup_s=0.5, min_duration_s=1.5, min_requests=30, until_stable=False, timeout_s=30),
    )
    run_dir = tmp_path_factory.mktemp("three-batchers")
    outcome = asyncio.run(run_sweep(spec, run_dir, models_dir=models_dir))
    return run_dir, outcome


def test_each_server_is_measured_and_named(three_batchers_run):
    _run_dir, outcome = three_batchers_run
    points = outcome.measured
    assert len(points) == 6  # 3 servers x (c1, c8)
    kinds = {p.target.name: (p.target.server, p.target.server_version) for p in points}
    assert kinds["local"][0] == "local"
    assert kinds["triton"] == ("triton", "2.51.0")
    assert kinds["mlserver"] == ("mlserver", "1.7.1")
    for point in points:
        assert not point.counts.errors, point.key
        assert point.counts.ok >= 30, point.key
        assert point.server is not None and point.server.available, (point.key, point.notes)
        assert dict(point.server_config), point.key  # the knobs each server was started with


def test_the_report_compares_the_three_batchers(three_batchers_run):
    run_dir, _outcome = three_batchers_run
    report = build_report(run_dir, plots=False)
    decision = decide(report.analysis)
    assert sorted(r.device for r in decision.rows) == ["local (cpu)", "mlserver (cpu)", "triton (cpu)"]
    servers, gains, _ = decision.verdict
    assert servers.startswith("Servers: ")
    for name in ("local (cpu)", "mlserver (cpu)", "triton (cpu)"):
        assert name in servers and name in gains
    assert "[" in gains  # each gain carries its interval
    html = report.html.read_text()
    assert "triton (cpu)" in html and "mlserver (cpu)" in html


def test_triton_s_server_view_agrees_with_its_statistics(three_batchers_run):
    """At 8 in flight Triton's dynamic batcher runs batches larger than one image (core
    src/dynamic_batch_scheduler.cc); the point's server view reads it from Triton's own counters."""
    _, outcome = three_batchers_run
    c8 = next(p for p in outcome.measured if p.target.name == "triton" and p.load.concurrency == 8)
    assert c8.server is not None and c8.server.processed_batch_mean is not None
    assert c8.server.processed_batch_mean > 1.0
