"""Report analysis on synthetic points with known answers; real runs produce reports; compare."""

from __future__ import annotations

import csv
import html.parser
from pathlib import Path

import pytest

from serve_bench.cli import main
from serve_bench.errors import UserError
from serve_bench.report import Slo, analyze_run, build_report, compare_runs, fit_latency_model, format_ratio
from serve_bench.stats import Point, ResultsWriter
from serve_bench.sweep import parse_spec, run_sweep
from tests._points import make_point
from tests._servers import local_server


GPU_A, GPU_B = 20_000.0, 500.0  # µs: a large fixed cost per call, cheap per image
CPU_A, CPU_B = 1_000.0, 70_000.0  # µs: almost all cost is per image
BATCHES = [1, 2, 4, 8, 16, 32, 64]


def synthetic_run() -> list[Point]:
    points = [make_point("gpu", "gpu", b, GPU_A + GPU_B * b) for b in BATCHES]
    points += [make_point("cpu", "cpu", b, CPU_A + CPU_B * b) for b in BATCHES]
    return points


def test_linear_model_recovers_a_and_b():
    model = fit_latency_model(BATCHES, [GPU_A + GPU_B * b for b in BATCHES])
    assert model.a_us == pytest.approx(GPU_A) and model.b_us == pytest.approx(GPU_B)
    assert model.r_squared == pytest.approx(1.0)
    assert model.gain_bound == pytest.approx((GPU_A + GPU_B) / GPU_B)
    assert model.items_per_s(128) == pytest.approx(128 / ((GPU_A + GPU_B * 128) / 1e6))
    assert fit_latency_model([4], [100.0]) is None


def test_gain_verdict_and_ratios_are_computed_from_the_data():
    analysis = analyze_run(synthetic_run(), Slo("p99", 100.0), flops_per_image=11.46e9)
    gpu = next(t for t in analysis.targets if t.device == "gpu")
    cpu = next(t for t in analysis.targets if t.device == "cpu")
    gpu_gain = (64 / (GPU_A + GPU_B * 64)) / (1 / (GPU_A + GPU_B))
    cpu_gain = (64 / (CPU_A + CPU_B * 64)) / (1 / (CPU_A + CPU_B))
    assert gpu.client_gain == pytest.approx(gpu_gain) and gpu.client_gain_batch == 64
    assert cpu.client_gain == pytest.approx(cpu_gain)
    # within p99 <= 100 ms: GPU p99 = 1.2 * (20 + 0.5 B) ms <= 100 -> B <= 126, so batch 64 qualifies;
    # the CPU's batch 1 (p99 85.2 ms) is the only CPU point inside the SLO
    assert gpu.slo_gain == pytest.approx(gpu_gain) and gpu.slo_gain_batch == 64
    assert cpu.best_under_slo.batch_size == 1 and cpu.slo_gain == pytest.approx(1.0)
    assert f"GPU throughput {format_ratio(gpu_gain)} from batch 1 to 64 within p99 ≤ 100 ms" in analysis.verdict
    assert "on the CPU 1.00×" in analysis.verdict
    gpu_best = 64 / ((GPU_A + GPU_B * 64) / 1e6)
    cpu_best = 1 / ((CPU_A + CPU_B) / 1e6)
    assert f"{gpu_best:.1f} images/s (batch 64)" in analysis.verdict and f"CPU {cpu_best:.1f} (batch 1)" in analysis.verdict
    assert f": {format_ratio(gpu_best / cpu_best)}." in analysis.verdict
    row = next(r for r in analysis.device_ratios if r["batch_size"] == 8)
    gpu8, cpu8 = 8 / (GPU_A + GPU_B * 8), 8 / (CPU_A + CPU_B * 8)
    assert row["items_ratio"] == pytest.approx(gpu8 / cpu8)
    assert row["p99_ratio"] == pytest.approx((GPU_A + GPU_B * 8) / (CPU_A + CPU_B * 8))
    assert gpu.model.a_us == pytest.approx(GPU_A)
    assert gpu.gflops[64] == pytest.approx(gpu.best_by_batch[64].items_per_s * 11.46)


def test_server_side_batching_gain_and_warnings():
    points = [make_point("cpu", "cpu", 1, 10_000), make_point("cpu", "cpu", 1, 20_000, concurrency=8),
              make_point("cpu", "cpu", 4, 30_000, stable=False, errors=3)]
    analysis = analyze_run(points)
    target = analysis.targets[0]
    assert target.server_gain == pytest.approx((8 / 0.02) / (1 / 0.01))
    assert target.server_gain_concurrency == 8
    assert "server-side batching" in analysis.verdict and "no GPU target" in analysis.verdict
    assert any(w.startswith("unstable") for w in analysis.warnings)
    assert any("3 errors of 100 requests (UNAVAILABLE ×3)" in w for w in analysis.warnings)


class _Images(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])


def test_html_and_csv_from_a_synthetic_run(tmp_path):
    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for point in synthetic_run():
            writer.append(point)
        writer.write_run({"slo": {"percentile": "p99", "max_ms": 100}, "settings": {}})
    output = build_report(run_dir, models_dir=tmp_path)
    parser = _Images()
    parser.feed(output.html.read_text())
    assert len(parser.images) == 3  # throughput, latency, curve (no server breakdown in synthetic data)
    assert all(src.startswith("data:image/png;base64,") for src in parser.images)
    assert set(output.plots) == {"throughput", "latency", "curve"}
    for path in output.plots.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = output.html.read_text()
    assert output.analysis.verdict.split(";")[0].replace("≤", "&le;") in text or "Verdict" in text
    rows = list(csv.DictReader(output.csv.open()))
    assert len(rows) == 14
    assert {"Concurrency", "Inferences/Second", "p99 latency", "Batch Size"} <= set(rows[0])


def _quick_spec(grpc_url: str, rest_url: str, model: str = "tiny", duration: float = 0.5) -> str:
    return f"""
name = "quick"
model = "{model}"
batch_sizes = [1, 4]
[load]
concurrency = [1]
server_batching_concurrency = [4]
[durations]
warmup_s = 0.2
min_duration_s = {duration}
min_requests = 5
[slo]
percentile = "p99"
max_ms = 1000
[[targets]]
name = "local-grpc"
url = "{grpc_url}"
[[targets]]
name = "local-rest"
url = "{rest_url}"
"""


@pytest.fixture(scope="module")
def two_runs(models_dir, tmp_path_factory):
    from serve_bench.server import BatchingParams

    root = tmp_path_factory.mktemp("runs")
    with local_server(models_dir, batching=BatchingParams(max_batch_size=8, num_batch_threads=1)) as server:
        import asyncio

        spec = parse_spec(_quick_spec(server.grpc_url, server.rest_url))
        asyncio.run(run_sweep(spec, root / "a"))
        asyncio.run(run_sweep(spec, root / "b"))
        other = parse_spec(_quick_spec(server.grpc_url, server.rest_url, duration=0.7))
        asyncio.run(run_sweep(other, root / "c"))
    return root


def test_short_real_run_produces_a_report(two_runs, models_dir, capsys):
    assert main(["report", str(two_runs / "a"), "--models-dir", str(models_dir)]) == 0
    out = capsys.readouterr().out
    assert "Verdict" in out and "report.html" in out
    run = two_runs / "a"
    assert (run / "report.html").exists() and (run / "summary.csv").exists()
    assert (run / "plots" / "server_breakdown.png").exists()  # the local server exports metrics
    rows = list(csv.DictReader((run / "summary.csv").open()))
    assert {r["Server"] for r in rows} == {"serve-bench-local"}
    assert any(float(r["Server Batch Size"] or 0) > 0 for r in rows)


def test_compare_two_runs(two_runs, capsys):
    result = compare_runs(two_runs / "a", two_runs / "b")
    assert len(result.rows) == 6  # 2 targets x (b1 c1, b4 c1, b1 c4)
    assert all(row["items_ratio"] > 0 for row in result.rows)
    assert main(["compare", str(two_runs / "a"), str(two_runs / "b")]) == 0
    assert "B/A" in capsys.readouterr().out


def test_compare_refuses_differently_measured_runs(two_runs, capsys):
    with pytest.raises(UserError, match="min_duration_s"):
        compare_runs(two_runs / "a", two_runs / "c")
    assert compare_runs(two_runs / "a", two_runs / "c", allow_mismatch=True).rows
    assert main(["compare", str(two_runs / "a"), str(two_runs / "c")]) == 2
    assert "--allow-mismatch" in capsys.readouterr().err


def test_report_on_missing_run(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "results directory" in capsys.readouterr().err
