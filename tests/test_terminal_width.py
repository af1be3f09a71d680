"""The terminal summary at 80 columns (issue 22, item 6): every point's figures whole, no cell cut to "…".

A pipe or a log is 80 columns unless COLUMNS says otherwise; the summary keeps the columns that fit
whole, most important first, and says which it left out (summary.csv and report.html keep all).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from serve_bench.report import analyze_run, compare_runs, print_comparison, print_summary
from serve_bench.report._tables import CELL_COLUMNS
from serve_bench.stats import Interval, Point, ResultsWriter, Slo
from tests._exporters import recorded_energy
from tests._points import make_point

ROOT = Path(__file__).resolve().parent.parent
# (target, device, price per hour, fixed ms per request, ms per image, watts)
TARGETS = [
    ("tfserving-gpu-grpc", "gpu", 1.20, 18.0, 0.6, 210.0),
    ("tfserving-cpu-rest", "cpu", 0.40, 4.0, 95.0, 140.0),
]
BATCHES = [1, 2, 4, 8, 16, 32, 64]


def _realistic(name: str, device: str, price: float, a_ms: float, b_ms: float, watts: float, batch: int, **kw) -> Point:
    """A point as a sweep writes it: intervals on images/s, p50 and p99, a price, recorded energy."""
    point = make_point(name, device, batch, (a_ms + b_ms * batch) * 1000, **kw)
    items, p50, p99 = point.items_per_s, point.latency.p50, point.latency.p99
    return replace(
        point,
        target=replace(point.target, price_per_hour=price, currency="USD"),
        throughput=replace(point.throughput, items_per_s_ci=Interval(items * 0.96, items * 1.04)),
        latency=replace(point.latency, p50_ci=Interval(p50 * 0.97, p50 * 1.03), p99_ci=Interval(p99 * 0.9, p99 * 1.12)),
        energy=recorded_energy(watts if device == "gpu" else None, 90.0 if device == "gpu" else watts),
    )


def realistic_run() -> list[Point]:
    points = [_realistic(*target, batch) for target in TARGETS for batch in BATCHES]
    points.append(_realistic(*TARGETS[1], 1, concurrency=8))  # the server's own batching
    points.append(_realistic(*TARGETS[1], 4, concurrency=2, stable=False, errors=3))  # flagged
    return points


def _render(width: int, points: list[Point] | None = None) -> str:
    buffer = io.StringIO()
    analysis = analyze_run(points or realistic_run(), Slo("p99", 200.0), flops_per_image=5.7e9)
    print_summary(analysis, Console(file=buffer, width=width))
    return buffer.getvalue()


def _point_lines(text: str) -> dict[str, str]:
    """The line of each point in the per-target tables (table or line form), by its label."""
    labels = [f"{name} b{b} c1" for name, *_ in TARGETS for b in BATCHES]
    found = {}
    for line in text.splitlines():
        for label in labels:
            if line.startswith(label + "  ") or line.startswith(f"  {label}: "):  # a table's row, or a line
                found[label] = line
    return found


@pytest.mark.parametrize("width", [80, 100, 120])
def test_summary_fits_the_width_and_cuts_no_cell(width: int) -> None:
    text = _render(width)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    lines = _point_lines(text)
    assert len(lines) == len(TARGETS) * len(BATCHES), "a point is missing from the summary"
    for line in lines.values():  # each point's images/s with its interval and its p99, whole
        assert line.count("[") >= 2 and "–" in line, line


def test_at_80_columns_the_most_telling_figures_stay_and_the_rest_is_named() -> None:
    text = _render(80)
    assert "images/s" in text and "p99" in text and "p50" in text
    assert "(not shown at 80 columns:" in text and "summary.csv and report.html" in text
    gpu_b8 = _point_lines(text)["tfserving-gpu-grpc b8 c1"]
    analysis = analyze_run(realistic_run(), Slo("p99", 200.0))
    cell = next(c for t in analysis.targets for c in t.cells if c.label == "tfserving-gpu-grpc b8 c1")
    assert cell.items_per_s.text(digits=1) in gpu_b8 and cell.p99_us.text(scale=1e-3) in gpu_b8


def test_a_wide_terminal_shows_every_column() -> None:
    text = _render(300)
    assert "not shown" not in text
    for header in CELL_COLUMNS:
        for word in header.split():
            assert word in text


@pytest.mark.parametrize("width", [40, 60])
def test_too_narrow_for_a_table_prints_each_point_as_a_line(width: int) -> None:
    text = _render(width)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
    joined = " ".join(line.strip() for line in text.splitlines())
    assert "(the other columns are in summary.csv and report.html)" in joined
    for name, *_ in TARGETS:
        for batch in BATCHES:  # the point's images/s and p99, each with its interval
            assert re.search(
                rf"{name} b{batch} c1: .*?images/s \[95% CI\] [\d.]+ \[[\d.]+–[\d.]+\];.*?p99 ms [\d.]+ \[", joined
            ), (name, batch)


def test_report_through_a_pipe_at_columns_80(tmp_path: Path) -> None:
    """`serve-bench report RUN | cat` with COLUMNS=80: what `make demo | cat` prints after each sweep."""
    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for point in realistic_run():
            writer.append(point)
        writer.write_run({"slo": {"percentile": "p99", "max_ms": 200}, "settings": {}})
    result = subprocess.run(
        [sys.executable, "-m", "serve_bench", "report", str(run_dir), "--no-plots"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert result.returncode == 0, result.stderr
    summary = result.stdout.split("\nreport: ", 1)[0]  # the paths printed after it are as long as they are
    assert "…" not in summary
    assert max(len(line) for line in summary.splitlines()) <= 80
    assert len(_point_lines(summary)) == len(TARGETS) * len(BATCHES)


def test_compare_fits_80_columns(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for run_dir, factor in ((a, 1.0), (b, 0.8)):
        with ResultsWriter(run_dir) as writer:
            for name, device, price, a_ms, b_ms, watts in TARGETS:
                for batch in BATCHES:
                    writer.append(_realistic(name, device, price, a_ms * factor, b_ms * factor, watts, batch))
    buffer = io.StringIO()
    print_comparison(compare_runs(a, b), f"B = {b} vs A = {a}", Console(file=buffer, width=80))
    text = buffer.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    assert "B/A" in text and "1.25×" in text
