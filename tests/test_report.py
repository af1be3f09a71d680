"""Report analysis on synthetic points with known answers; real runs produce reports; compare."""

from __future__ import annotations

import csv
import dataclasses
import html
import html.parser
import re

import numpy as np
import pytest

from serve_bench.cli import main
from serve_bench.errors import UserError
from serve_bench.report import analyze_run, build_report, compare_runs, decide, fit_latency_model
from serve_bench.report._tables import model_line
from serve_bench.stats import Estimate, LoadInfo, Point, ResultsWriter, Slo, format_ratio, read_points
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
    assert gpu.client_gain.ratio.value == pytest.approx(gpu_gain) and gpu.client_gain.top.batch_size == 64
    assert cpu.client_gain.ratio.value == pytest.approx(cpu_gain)
    # within p99 <= 100 ms: GPU p99 = 1.2 * (20 + 0.5 B) ms <= 100 -> B <= 126, so batch 64 qualifies;
    # the CPU's batch 1 (p99 85.2 ms) is the only CPU point inside the SLO
    assert gpu.slo_gain.ratio.value == pytest.approx(gpu_gain) and gpu.best_under_slo.batch_size == 64
    assert cpu.best_under_slo.batch_size == 1 and cpu.slo_gain.ratio.value == pytest.approx(1.0)
    gpu_best = 64 / ((GPU_A + GPU_B * 64) / 1e6)
    cpu_best = 1 / ((CPU_A + CPU_B) / 1e6)
    lines = analysis.verdict_lines
    assert f"gpu: batch 64 gives {format_ratio(gpu_gain)} the images/s of batch 1 (gpu b64 c1 vs gpu b1 c1)." in lines
    assert f"gpu: within p99 ≤ 100 ms the best is gpu b64 c1: {gpu_best:.1f} images/s." in lines
    assert f"cpu: within p99 ≤ 100 ms the best is cpu b1 c1: {cpu_best:.1f} images/s." in lines
    assert (
        f"GPU over CPU at their best within p99 ≤ 100 ms: {format_ratio(gpu_best / cpu_best)} "
        f"(gpu b64 c1: {gpu_best:.1f} images/s; cpu b1 c1: {cpu_best:.1f})."
    ) in lines
    assert all(len(line) < 160 for line in lines)  # short sentences, not one paragraph
    row = next(r for r in analysis.device_ratios if r.batch_size == 8)
    gpu8, cpu8 = 8 / (GPU_A + GPU_B * 8), 8 / (CPU_A + CPU_B * 8)
    assert row.items_ratio.value == pytest.approx(gpu8 / cpu8)
    assert row.p99_ratio.value == pytest.approx((GPU_A + GPU_B * 8) / (CPU_A + CPU_B * 8))
    assert gpu.model.a_us == pytest.approx(GPU_A) and not gpu.model_contradicted
    assert gpu.gflops[64] == pytest.approx(gpu.best_by_batch[64].items_per_s.value * 11.46)


def test_baseline_first_every_point_in_the_table_and_the_two_batchings_apart():
    points = [
        make_point("cpu", "cpu", 4, 30_000, concurrency=4),
        make_point("cpu", "cpu", 1, 20_000, concurrency=8),
        make_point("cpu", "cpu", 4, 25_000),
        make_point("cpu", "cpu", 1, 10_000),
        make_point("cpu", "cpu", 4, 30_000, stable=False, errors=3, concurrency=2),
    ]
    analysis = analyze_run(points)
    target = analysis.targets[0]
    assert target.baseline.label == "cpu b1 c1" and target.cells[0] is target.baseline
    assert len(target.cells) == 5  # every measured (batch, load), not one per batch size
    assert {b: c.label for b, c in target.client_curve.items()} == {1: "cpu b1 c1", 4: "cpu b4 c1"}
    assert {n: c.label for n, c in target.server_curve.items()} == {1: "cpu b1 c1", 8: "cpu b1 c8"}
    assert target.server_gain.ratio.value == pytest.approx((8 / 0.02) / (1 / 0.01))
    assert target.client_gain.ratio.value == pytest.approx((4 / 0.025) / (1 / 0.01))
    assert (
        "cpu: server batching of single images at 8 in flight gives 4.00× the images/s (cpu b1 c8 vs cpu b1 c1)."
        in analysis.verdict_lines
    )
    assert "No GPU target in this run." in analysis.verdict_lines
    assert any(w.startswith("unstable") for w in analysis.warnings)
    assert any("3 errors of 100 requests (UNAVAILABLE ×3)" in w for w in analysis.warnings)
    assert [c.label for c in target.cells] == ["cpu b1 c1", "cpu b1 c8", "cpu b4 c1", "cpu b4 c2", "cpu b4 c4"]
    assert target.cells[3].flags() == ("errors", "unstable")


def test_repeats_give_the_median_and_their_range():
    points = [make_point("gpu", "gpu", 8, latency, repeat=r) for r, latency in enumerate((10_000, 12_500, 11_000))]
    points += [make_point("gpu", "gpu", 1, 5_000, repeat=r) for r in range(2)]  # a baseline known to be 200/s
    target = analyze_run(points).targets[0]
    cell = target.best_by_batch[8]
    rates = sorted(8 / (latency / 1e6) for latency in (10_000, 12_500, 11_000))
    assert len(cell.points) == 3 and cell.items_per_s.value == pytest.approx(rates[1])
    assert (cell.items_per_s.low, cell.items_per_s.high) == pytest.approx((rates[0], rates[2]))
    assert cell.items_per_s.basis == "range of 3 repeats" and cell.point.repeat == 2
    gain = target.client_gain.ratio
    assert gain.low == pytest.approx(rates[0] / 200) and gain.high == pytest.approx(rates[2] / 200)
    # without a range for the baseline, the gain has none either (not a made-up one)
    single = analyze_run([*points[:3], make_point("gpu", "gpu", 1, 5_000)]).targets[0]
    assert single.client_gain.ratio.low is None


def test_a_repeat_that_measured_nothing_is_flagged_but_not_taken_into_the_figures():
    """Four repeats of gpu b8 c1: 800 and 640 images/s measured, one answered nothing (0 images/s) and
    one was cut off when the target went down (at 600). The figures are the two that measured (median 720, range
    640 to 800), the single point is one of them, and the flags still show what happened to the others.
    Taking all four, the median would be 620 and the single point the cut-off repeat (600 images/s)."""
    rates = (800.0, 0.0, 640.0, 600.0)
    points = [
        make_point("gpu", "gpu", 8, 10_000, repeat=0),
        make_point("gpu", "gpu", 8, 10_000, repeat=1, ok=0, errors=100),
        make_point("gpu", "gpu", 8, 12_500, repeat=2),
        make_point("gpu", "gpu", 8, 8 / rates[3] * 1e6, repeat=3, cut_off="target down"),
    ]
    cell = analyze_run(points).targets[0].cells[0]
    assert [p.items_per_s for p in cell.points] == pytest.approx(rates)
    assert cell.items_per_s == Estimate(
        pytest.approx(720.0), pytest.approx(640.0), pytest.approx(800.0), "range of 2 repeats"
    )
    assert cell.p50_us.value == pytest.approx(11_250.0) and cell.point.repeat == 2
    assert cell.usable and {"errors", "cut off"} <= set(cell.flags())
    # none measured: the figures are all of them (a row to remeasure still shows what was seen)
    failed = analyze_run([points[1], dataclasses.replace(points[3], repeat=4)]).targets[0].cells[0]
    assert not failed.usable and failed.items_per_s.basis == "range of 2 repeats"


def test_a_latency_model_below_the_measured_gain_is_said_not_to_hold():
    """A slow batch 1 (20 ms; the rest 10 ms + 0.5 ms/image, as the demo's gRPC target showed): the line
    a + b·B puts (a+b)/b at 25.9×, below the 30.5× measured at batch 64, so it is not stated as a bound."""
    points = [make_point("gpu", "gpu", b, 20_000 if b == 1 else 10_000 + 500 * b) for b in BATCHES]
    target = analyze_run(points).targets[0]
    measured = target.client_gain.ratio.value
    assert measured == pytest.approx((64 / 42_000) / (1 / 20_000))
    assert target.model.gain_bound < measured and target.model_contradicted
    low, high = target.model.bound.low, target.model.bound.high
    assert low is not None and high is not None
    assert low < target.model.gain_bound < high  # shown with its uncertainty
    line = model_line(target)
    assert "does not describe this server" in line and f"{format_ratio(measured)}" in line
    assert not any("bound" in v for v in analyze_run(points).verdict_lines)


def test_fit_gives_the_bound_a_range_that_holds_it():
    rng = np.random.default_rng(0)
    noisy = [(GPU_A + GPU_B * b) * rng.uniform(0.97, 1.03) for b in BATCHES]
    model = fit_latency_model(BATCHES, noisy)
    low, high = model.bound.low, model.bound.high
    assert low is not None and high is not None
    assert low < model.gain_bound < high
    assert low <= (GPU_A + GPU_B) / GPU_B <= high  # the true bound is inside
    assert fit_latency_model([1, 8], [GPU_A + GPU_B, GPU_A + 8 * GPU_B]).bound.low is None


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
    lines = output.analysis.verdict_lines
    assert len(lines) == 5
    for line in lines:  # every verdict line is in the page, and every point it names is a row of a table
        assert f"<li>{html.escape(line)}</li>" in text
        for label in re.findall(r"\b(?:gpu|cpu) b\d+ c\d+", line):
            assert f'id="{label}"' in text
    assert text.index('id="gpu b1 c1"') < text.index('id="gpu b2 c1"')  # the baseline first
    rows = list(csv.DictReader(output.csv.open()))
    assert len(rows) == 14
    by_key = {p.key: p for p in read_points(run_dir)}
    for row in rows:
        assert float(row["Inferences/Second"]) == pytest.approx(by_key[row["Key"]].items_per_s, abs=0.005)


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
until_stable = false  # the report is under test here, not stability: fixed-length points keep it quick
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
    from serve_bench.export import BatchingParams

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
    assert {r["Server"] for r in rows} == {"local"}
    assert any(float(r["Server Batch Size"] or 0) > 0 for r in rows)


def test_compare_two_runs(two_runs, capsys):
    result = compare_runs(two_runs / "a", two_runs / "b")
    assert len(result.rows) == 6  # 2 targets x (b1 c1, b4 c1, b1 c4)
    # each row against the two points.jsonl files read here and paired by point key (the same target
    # names in both runs), so a wrong pairing or a ratio upside down shows
    a_points = {p.key: p for p in read_points(two_runs / "a")}
    b_points = {p.key: p for p in read_points(two_runs / "b")}
    assert a_points.keys() == b_points.keys() and len(a_points) == 6
    by_key = {row["a"].key: row for row in result.rows}
    assert by_key.keys() == a_points.keys()
    for key, row in by_key.items():
        assert row["b"].key == key
        assert row["items_ratio"] == pytest.approx(b_points[key].items_per_s / a_points[key].items_per_s)
        assert row["p99_ratio"] == pytest.approx(b_points[key].latency.p99 / a_points[key].latency.p99)
    assert main(["compare", str(two_runs / "a"), str(two_runs / "b")]) == 0
    assert "B/A" in capsys.readouterr().out


def test_compare_refuses_differently_measured_runs(two_runs, capsys):
    with pytest.raises(UserError, match="min_duration_s"):
        compare_runs(two_runs / "a", two_runs / "c")
    assert compare_runs(two_runs / "a", two_runs / "c", allow_mismatch=True).rows
    assert main(["compare", str(two_runs / "a"), str(two_runs / "c")]) == 2
    assert "--allow-mismatch" in capsys.readouterr().err


def test_compare_with_a_run_that_holds_no_points_says_so(tmp_path, capsys):
    """A run folder whose first command failed (an empty points.jsonl): "holds no measured points", not "the runs
    were measured differently (models differ: ...)"."""
    full, empty = tmp_path / "full", tmp_path / "empty"
    with ResultsWriter(full) as writer:
        writer.append(make_point("cpu", "cpu", 1, 5_000.0))
    ResultsWriter(empty).close()
    for argv in ([str(full), str(empty)], [str(empty), str(full)]):
        assert main(["compare", *argv]) == 2
        err = capsys.readouterr().err
        assert f"{empty} holds no measured points yet" in err and "differently" not in err, err


def test_report_on_missing_run(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "results directory" in capsys.readouterr().err


def test_error_bars_are_the_cells_ranges_and_open_loop_points_are_rows():
    from serve_bench.report._plots import _bars

    repeats = [make_point("gpu", "gpu", 4, latency, repeat=r) for r, latency in enumerate((10_000, 8_000))]
    open_loop = dataclasses.replace(
        make_point("gpu", "gpu", 1, 4_000), load=LoadInfo("open", rate=50.0, arrival="poisson")
    )
    single = make_point("gpu", "gpu", 1, 5_000)
    target = analyze_run([*repeats, open_loop, single]).targets[0]
    assert [c.label for c in target.cells] == ["gpu b1 c1", "gpu b4 c1", "gpu b1 50/s"]
    cell = target.best_by_batch[4]
    below, above = _bars([cell, target.baseline], "items_per_s")
    # two repeats at 400 and 500 images/s: the median 450, the bar down to 400 and up to 500
    assert cell.items_per_s.value == pytest.approx(450) and (below[0], above[0]) == pytest.approx((50, 50))
    assert (below[1], above[1]) == (0.0, 0.0)  # a point without an interval draws no bar, not a made-up one


def test_a_gain_within_the_noise_is_not_called_a_gain():
    """Batch 4 measured twice at 190 and 260 images/s against a baseline of 200 and 210: the range of the ratio
    holds 1, so the verdict says the difference is within the noise."""
    points = [make_point("cpu", "cpu", 1, latency, repeat=r) for r, latency in enumerate((5_000, 1e6 / 210))]
    points += [make_point("cpu", "cpu", 4, 4e6 / rate, repeat=r) for r, rate in enumerate((190, 260))]
    (line,) = [v for v in analyze_run(points).verdict_lines if "batch 4" in v]
    assert line.startswith("cpu: batch 4 against batch 1: 1.10× [0.90×–1.30×] the images/s, within the noise")
    assert "gives" not in line


def test_no_latency_model_when_latency_does_not_grow_with_the_batch():
    assert fit_latency_model([1, 4], [5_000.0, 4_000.0]) is None
    points = [make_point("cpu", "cpu", 1, 5_000), make_point("cpu", "cpu", 4, 4_000)]
    target = analyze_run(points).targets[0]
    assert target.model is None and model_line(target) == ""


def test_a_damaged_tune_answer_is_a_one_line_error(tmp_path):
    from serve_bench.errors import UserError

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for point in synthetic_run():
            writer.append(point)
    (run_dir / "answer.json").write_text('{"mode": "throughput", "sco')  # a tune killed while writing it
    with pytest.raises(UserError, match=r"answer.json is not a tune answer .*--resume") as caught:
        build_report(run_dir, models_dir=tmp_path, plots=False)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("blocked", "plots"), [("summary.csv", False), ("report.html", False), ("plots", True)])
def test_a_report_that_cannot_be_written_is_a_one_line_error(tmp_path, capsys, blocked, plots):
    """A run folder whose report cannot be written there (a colleague's read-only results; here, as root, a folder
    where the report's file goes, or a file where its plots' folder goes): one line naming the file and what to do,
    not an OSError's traceback."""
    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for point in synthetic_run():
            writer.append(point)
    if plots:
        (run_dir / blocked).write_text("a file")
    else:
        (run_dir / blocked).mkdir()
    args = ["report", str(run_dir), "--models-dir", str(tmp_path)]
    assert main(args if plots else [*args, "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cannot write the report" in err and str(run_dir / blocked) in err, err
    assert "copy the run somewhere writable" in err


def test_tune_section_shows_failed_and_missing_configurations(tmp_path):
    """A configuration whose server did not start and one missing the SLO are rows that say so (the answer is
    written as tune wrote it before answer.json had a schema_version: read as version 1)."""
    import json

    from serve_bench.report._tune import read_tune_answer, tune_html

    answer = {
        "mode": "throughput",
        "percentile": "p99",
        "max_ms": 100.0,
        "best": None,
        "closest": {"config": "mbs8", "feasible": False, "items_per_s": 90.0, "latency_ms": 140.0},
        "scores": [
            {"config": "mbs8", "feasible": False, "items_per_s": 90.0, "latency_ms": 140.0, "load": "rate 80"},
            {"config": "mbs64", "feasible": False, "failed": "out of <memory>"},
        ],
        "knobs": [],
        "gains": [],
        "evaluated": ["mbs8", "mbs64"],
    }
    (tmp_path / "answer.json").write_text(json.dumps(answer))
    typed = read_tune_answer(tmp_path)
    assert typed is not None
    page = tune_html(typed, tmp_path, "")
    assert "No configuration meets p99 ≤ 100 ms; the closest is <b>mbs8</b>" in page
    assert "<td class=l>misses p99</td>" in page
    assert "did not start: out of &lt;memory&gt;" in page
    assert "in this order: mbs8, mbs64" in page


def test_a_tune_answer_is_versioned_and_one_of_an_unknown_version_is_refused_in_one_line(tmp_path):
    import json

    from serve_bench.errors import UserError
    from serve_bench.stats import Estimate, Score, TuneAnswer, read_tune_answer

    best = Score("mbs8", True, Estimate(500.0, 490.0, 510.0, "95% CI"), Estimate(24.0), "mbs8|k", "concurrency 8")
    written = TuneAnswer("throughput", "p99", 50.0, best, best, (best,), (), (), (), ("mbs8",), {}, ("best.txt",))
    path = tmp_path / "answer.json"
    written.write(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1 and data["best"]["items_ci"] == [490.0, 510.0]
    assert data["best_file"] == "best.txt"
    assert read_tune_answer(path) == written
    path.write_text(json.dumps({**data, "schema_version": 7}))
    with pytest.raises(UserError, match="schema_version 7; this serve-bench reads version 1") as caught:
        read_tune_answer(path)
    assert "\n" not in str(caught.value)


def test_a_run_that_sent_two_payloads_reports_each_apart(tmp_path):
    """A sweep's ``payloads = ["float", "jpeg"]`` measures two workloads on one target (pixels, and JPEG bytes the
    server decodes). Each is its own series of rows ("gpu jpeg"), so a gain is over its own payload's batch 1, the
    best names its payload, every verdict label is a row, GPU over CPU sets float beside float, and compare's rows
    say which payload each is. Before, the rows of both carried one label ("gpu b16 c1" twice) and a verdict line
    took its gain from the float rows and its best from the jpeg ones."""
    points = [
        make_point("gpu", "gpu", 1, 10_000),  # float: 100 img/s at 1, 1,600 at 16 (16x)
        make_point("gpu", "gpu", 16, 10_000),
        make_point("gpu", "gpu", 1, 5_000, payload="jpeg"),  # jpeg: 200 img/s at 1, 3,200 at 16 (16x)
        make_point("gpu", "gpu", 16, 5_000, payload="jpeg"),
        make_point("cpu", "cpu", 1, 4_000, payload="jpeg"),  # jpeg on the CPU first, far faster: not float's ratio
        make_point("cpu", "cpu", 16, 8_000, payload="jpeg"),
        make_point("cpu", "cpu", 1, 40_000),  # float on the CPU: 25 and 80 img/s
        make_point("cpu", "cpu", 16, 200_000),
    ]
    analysis = analyze_run(points)
    by_name = {t.name: t for t in analysis.targets}
    assert set(by_name) == {"gpu float", "gpu jpeg", "cpu float", "cpu jpeg"}
    for name, top in (("gpu float", 1600.0), ("gpu jpeg", 3200.0)):
        gain = by_name[name].client_gain
        assert gain is not None and gain.top.label == f"{name} b16 c1" and gain.base.label == f"{name} b1 c1"
        assert gain.top.items_per_s.value == pytest.approx(top) and gain.ratio.value == pytest.approx(16.0)
    (ratio_16,) = [r for r in analysis.device_ratios if r.batch_size == 16]
    assert (ratio_16.gpu.label, ratio_16.cpu.label) == ("gpu float b16 c1", "cpu float b16 c1")
    assert ratio_16.items_ratio.value == pytest.approx(1600 / 80)
    # and so do the verdict and the decision table: float beside float, though the GPU's best is a jpeg row and the
    # CPU's jpeg series comes first
    (line,) = [line for line in analysis.verdict_lines if line.startswith("GPU over CPU")]
    assert "gpu float b16 c1" in line and "cpu float b16 c1" in line, line
    rows = {row.device: row.cell.label for row in decide(analysis).rows if row.cell is not None}
    assert rows == {"gpu": "gpu float b16 c1", "cpu": "cpu float b16 c1"}
    # a target sent one payload keeps its name, as the pipeline's ("pipeline-jpeg") are named after theirs
    alone = analyze_run(
        [make_point("pipeline-float", "gpu", 1, 10_000), make_point("pipeline-jpeg", "gpu", 1, 5_000, payload="jpeg")]
    )
    assert [t.name for t in alone.targets] == ["pipeline-float", "pipeline-jpeg"]

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for point in points:
            writer.append(point)
        writer.write_run({"settings": {}})
    output = build_report(run_dir, models_dir=tmp_path)
    text = output.html.read_text()
    labels = [cell.label for t in analysis.targets for cell in t.cells]
    assert len(set(labels)) == len(points)  # one row, one label
    for line in output.analysis.verdict_lines:
        for label in re.findall(r"\b(?:gpu|cpu) (?:float|jpeg) b\d+ c\d+", line):
            assert f'id="{label}"' in text, line
    assert any("gpu jpeg b16 c1" in line for line in output.analysis.verdict_lines)

    (tmp_path / "again").mkdir()
    with ResultsWriter(tmp_path / "again") as writer:
        for point in points:
            writer.append(point)
        writer.write_run({"settings": {}})
    configs = [row["config"] for row in compare_runs(run_dir, tmp_path / "again").rows]
    assert len(configs) == len(points) and "grpc jpeg b16 concurrency 1" in configs
    assert len(set(configs)) == len(points) // 2  # gpu and cpu share a configuration, their payloads do not
