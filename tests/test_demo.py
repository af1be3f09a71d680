"""`make demo` (serve-bench demo) end to end, reduced to the tiny model and short points.

It runs the demo's own code path: export-or-reuse, the local server in a subprocess with
TF Serving's batching and metrics configs, the shipped local-cpu.toml sweep pointed at it,
and the report. Only the model, the batch sizes and the durations are made smaller.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from serve_bench.cli import main
from serve_bench.demo import SPEC
from serve_bench.stats import read_points
from serve_bench.sweep import load_spec, plan_points


def _quick_spec(path: Path) -> Path:
    text = SPEC.read_text()
    text = re.sub(r"(?m)^batch_sizes = .*$", "batch_sizes = [1, 4]", text)
    for key, value in {"warmup_s": "0.3", "min_duration_s": "0.8", "min_requests": "30", "max_duration_s": "4"}.items():
        text, count = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
        assert count == 1, f"local-cpu.toml has no single {key} line"
    path.write_text(text)
    return path


def test_demo_exports_serves_sweeps_and_reports(models_dir: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # `make demo | cat` in an 80-column terminal
    out = tmp_path / "models"
    shutil.copytree(models_dir, out)  # the demo writes models.config there
    spec = _quick_spec(tmp_path / "demo.toml")
    results = tmp_path / "results"
    assert (
        main(
            ["demo", "--models-dir", str(out), "--results-root", str(results), "--models", "tiny", "--spec", str(spec)]
        )
        == 0
    )
    output = capsys.readouterr().out
    assert "reusing tiny version 1" in output and "demo finished" in output

    (run_dir,) = results.glob("demo-tiny-*")
    points = read_points(run_dir)
    demo_spec = dataclasses.replace(load_spec(spec), model="tiny")
    expected = {p.key for p in plan_points(demo_spec)}  # the spec's targets and grid, for the demo's model
    assert {p.key for p in points} == expected
    assert {p.target.name for p in points} == {"local-grpc", "local-rest"}
    assert all(p.counts.ok > 0 and p.target.server == "local" for p in points)
    assert all(p.server is not None for p in points), "the demo's server metrics were not read"
    html = (run_dir / "report.html").read_text()
    assert "tiny" in html and str(run_dir / "report.html") in output.replace("\n", "")  # rich wraps long paths
    # each point's figures legible at 80 columns (issue 22): no cell cut to an ellipsis, no row past 80
    assert "…" not in output
    rows = [line for line in output.splitlines() if re.match(r"\s*local-(grpc|rest) b\d+ c\d+", line)]
    assert len(rows) >= len(expected) and max(len(line) for line in rows) <= 80
