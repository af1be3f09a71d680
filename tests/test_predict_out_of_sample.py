"""The frozen fit scored on tables no fit has used, and the error each device is shown with (issue 32, items 2, 3).

The rows are NVIDIA DeepLearningExamples@729963dd47e7's: MxNet/Classification/RN50v1.5/README.md lines
702-711 (A100 80GB), 726-735 (V100 16GB), 748-757 (T4), mixed precision published and TF32/FP32 =
mixed / the throughput speed-up column; TensorFlow/Classification/ConvNets/triton/README.md lines
381-388 (A40), 413-420 (A100 80GB), 445-452 (V100 32GB), 478-485 (T4), TF-TRT FP16 served by Triton.
Figures below are worked out from those rows and from the formula, not read back from the code.
"""

from __future__ import annotations

import io
import math
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from benchmarks import predict_out_of_sample
from serve_bench.cli import main
from serve_bench.predict import (
    calibration,
    get_device,
    predict,
    reference_costs,
    run_by,
    shipped_inputs,
    shipped_tables,
    time_per_batch,
)
from serve_bench.predict._expected import Interval, expected_error, nearest_architecture
from serve_bench.predict._model import PCIE_GBS_PER_LANE
from serve_bench.predict._outofsample import OUT_OF_SAMPLE_FILE, OUT_OF_SAMPLE_TABLES, out_of_sample_rows, score

README = Path(__file__).resolve().parent.parent / "benchmarks" / "README.md"
LINES = {  # (table, device): the README lines of its rows, batch 1 up
    ("mxnet", "a100-80gb"): range(702, 712),
    ("mxnet", "v100"): range(726, 736),
    ("mxnet", "t4"): range(748, 758),
    ("triton-tf-trt", "a40"): range(381, 389),
    ("triton-tf-trt", "a100-80gb"): range(413, 421),
    ("triton-tf-trt", "v100-32gb"): range(445, 453),
    ("triton-tf-trt", "t4"): range(478, 486),
}


def test_the_rows_are_the_tables_the_issue_names_each_with_its_file_and_line() -> None:
    rows = out_of_sample_rows()
    assert len(rows) == 3 * 10 * 2 + 4 * 8
    for (table, device), lines in LINES.items():
        mine = [r for r in rows if (r.table, r.device) == (table, device)]
        precisions = {"mxnet": {"mixed", "fp32" if device != "a100-80gb" else "tf32"}}.get(table, {"mixed"})
        assert {r.precision for r in mine} == precisions, (table, device)
        for precision in precisions:
            figures = sorted((r for r in mine if r.precision == precision), key=lambda r: r.batch_size)
            expected = [1, 2, 4, 8, 16, 32, 64, 128] + ([192, 256] if table == "mxnet" else [])
            assert [r.batch_size for r in figures] == expected
            cited = [int(re.search(r"README\.md line (\d+) ", r.source).group(1)) for r in figures]  # type: ignore[union-attr]
            assert cited == list(lines), (table, device, precision)
            assert all(r.source.startswith("NVIDIA/DeepLearningExamples@729963dd47e7:") for r in figures)
    by = {(r.table, r.device, r.precision, r.batch_size): r.images_per_s for r in rows}
    # read off the READMEs by hand: MXNet A100 line 702, V100 line 735, T4 line 755; Triton A100 line 413
    assert by["mxnet", "a100-80gb", "mixed", 1] == 1431.99 and by["mxnet", "v100", "mixed", 256] == 3057
    assert by["mxnet", "t4", "mixed", 128] == 1555 and by["triton-tf-trt", "a100-80gb", "mixed", 1] == 387.9
    assert by["triton-tf-trt", "t4", "mixed", 128] == 537.6 and by["triton-tf-trt", "a40", "mixed", 16] == 1000


def test_a_derived_tf32_or_fp32_row_is_the_mixed_figure_over_the_speedup_it_cites() -> None:
    """A100 batch 1: 1431.99 / 1.9 = 753.68 images/s (TF32); V100 batch 256: 3057 / 2.38 = 1284.45 (FP32)."""
    rows = out_of_sample_rows()
    mixed = {(r.device, r.batch_size): r.images_per_s for r in rows if r.table == "mxnet" and r.precision == "mixed"}
    derived = [r for r in rows if r.table == "mxnet" and r.precision != "mixed"]
    assert len(derived) == 30
    for r in derived:
        m = re.search(r"= mixed precision ([\d.]+) img/s / throughput speed-up ([\d.]+);", r.source)
        assert m is not None, r.source
        assert float(m.group(1)) == mixed[r.device, r.batch_size]
        assert r.images_per_s == round(float(m.group(1)) / float(m.group(2)), 2)
    by = {(r.device, r.batch_size): r.images_per_s for r in derived}
    assert by["a100-80gb", 1] == 753.68 and by["v100", 256] == 1284.45


def test_no_fit_and_no_hash_uses_the_out_of_sample_rows() -> None:
    assert OUT_OF_SAMPLE_FILE not in shipped_tables()
    assert OUT_OF_SAMPLE_FILE not in repr(shipped_inputs())


def test_each_table_is_scored_as_serve_bench_predict_predicts_it() -> None:
    """The images/s scored are predict()'s, with the calibration standing for the table (tensorflow for MXNet,
    tensorrt for Triton's TF-TRT), for every (table, device, precision)."""
    cost = reference_costs()["resnet50v1.5"]
    scored = score()
    assert {(s.table.name, s.table.tables) for s in scored} == {("mxnet", "tensorflow"), ("triton-tf-trt", "tensorrt")}
    assert len(scored) == 3 * 2 + 4
    for s in scored:
        p = predict(cost, get_device(s.device), s.precision, s.batch_sizes, tables=s.table.tables)
        assert s.predicted == pytest.approx(p.images_per_s, rel=1e-12), (s.table.name, s.device)


def test_the_errors_are_predicted_over_published_and_the_gain_at_each_best_batch() -> None:
    """MXNet A100 TF32: published gain 3678.89 / 753.68 = 4.881x (best at 256); Triton T4: 556.8 / 211.7 = 2.630x
    (best at 64). Errors are predicted / published - 1, the gain error the ratio of the two gains less 1."""
    by = {(s.table.name, s.device, s.precision): s for s in score()}
    a100 = by["mxnet", "a100-80gb", "tf32"]
    assert max(a100.published) / a100.published[0] == pytest.approx(3678.89 / 753.68)
    assert a100.best_batch[0] == 256
    assert a100.errors[0] == pytest.approx(a100.predicted[0] / 753.68 - 1)
    gain = (max(a100.predicted) / a100.predicted[0]) / (3678.89 / 753.68) - 1
    assert a100.gain_error == pytest.approx(gain)
    t4 = by["triton-tf-trt", "t4", "mixed"]
    assert t4.best_batch[0] == 64 and max(t4.published) / t4.published[0] == pytest.approx(556.8 / 211.7)
    magnitudes = sorted(abs(e) for e in t4.errors)  # 8 batch sizes: the median is the mean of the middle two
    assert t4.median == pytest.approx((magnitudes[3] + magnitudes[4]) / 2)


def test_a_served_tables_images_arrived_at_what_its_time_leaves_after_the_computation() -> None:
    """Triton A100 batch 128: 128 / 1331.2 images/s = 96.15 ms a batch; the prediction's computation alone
    (no PCIe lanes: no copy) is what remains of its served time once the copy, 128 x 150528 x 4 bytes at
    PCIe 4 x16, is taken off; the images' rate is their bytes over the rest of the 96.15 ms."""
    s = next(s for s in score() if (s.table.name, s.device) == ("triton-tf-trt", "a100-80gb"))
    device = get_device("a100-80gb")
    cost = run_by(reference_costs()["resnet50v1.5"], "tensorrt")
    served = time_per_batch(cost, device, "mixed", 128, calibration("mixed", "tensorrt").efficiency)
    copy = 128 * 150528 * 4 / (PCIE_GBS_PER_LANE[4] * 16 * 1e9)
    assert s.computed_s[-1] == pytest.approx(served - copy, rel=1e-9)
    assert s.served_transfer_gbs() == pytest.approx(128 * 150528 * 4 / (128 / 1331.2 - s.computed_s[-1]) / 1e9)
    assert 0.8 < s.served_transfer_gbs() < 0.95  # type: ignore[operator]
    mxnet = next(s for s in score() if s.table.name == "mxnet")
    assert not mxnet.table.served and mxnet.served_transfer_gbs() is None


def test_the_benchmark_prints_the_table_benchmarks_readme_holds() -> None:
    """benchmarks/predict_out_of_sample.py's summary lines, each one in benchmarks/README.md."""
    out = io.StringIO()
    with redirect_stdout(out):
        predict_out_of_sample.main()
    printed = out.getvalue()
    expected = [
        "| mxnet (tensorflow) | a100-80gb | mixed | 1-256 | 46.9% | 81.3% | +203.9% (17.5x vs 5.8x) |",
        "| mxnet (tensorflow) | a100-80gb | tf32 | 1-256 | 44.7% | 72.0% | +134.9% (11.5x vs 4.9x) |",
        "| mxnet (tensorflow) | v100 | mixed | 1-256 | 32.3% | 38.8% | -26.2% (8.7x vs 11.8x) |",
        "| mxnet (tensorflow) | v100 | fp32 | 1-256 | 27.3% | 37.1% | -21.4% (4.5x vs 5.7x) |",
        "| mxnet (tensorflow) | t4 | mixed | 1-256 | 45.6% | 55.5% | -65.2% (4.2x vs 11.9x) |",
        "| mxnet (tensorflow) | t4 | fp32 | 1-256 | 14.5% | 22.3% | -31.3% (2.5x vs 3.7x) |",
        "| triton-tf-trt (tensorrt) | a40 | mixed | 1-128 | 333.1% | 518.1% | +70.1% (5.2x vs 3.0x) |",
        "| triton-tf-trt (tensorrt) | a100-80gb | mixed | 1-128 | 465.1% | 831.9% | +144.2% (9.3x vs 3.8x) |",
        "| triton-tf-trt (tensorrt) | v100-32gb | mixed | 1-128 | 379.0% | 715.1% | +37.4% (5.1x vs 3.7x) |",
        "| triton-tf-trt (tensorrt) | t4 | mixed | 1-128 | 304.7% | 381.8% | +25.6% (3.3x vs 2.6x) |",
    ]
    readme = README.read_text()
    for line in expected:
        assert line in printed, line
        assert line in readme, line
    summary = [line for line in printed.splitlines() if line.startswith(("| mxnet", "| triton"))]
    assert summary == expected  # nothing else scored, nothing left out
    assert "images/s |error| median 36.2%, worst 81.3%; |gain error| median 48.2%" in printed  # mxnet, pooled
    assert "images/s |error| median 356.9%, worst 831.9%; |gain error| median 53.7%" in printed  # triton
    rates = re.findall(r"its images arrived at (\d\.\d\d) GB/s", printed)
    assert rates == ["0.63", "0.87", "0.47", "0.40"]  # A40, A100, V100, T4
    assert "0.40-0.87 GB/s" in readme


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks ((n - 1) q), as numpy's default does."""
    v = sorted(values)
    h = (len(v) - 1) * q
    low = math.floor(h)
    return v[low] + (h - low) * (v[min(low + 1, len(v) - 1)] - v[low])


def test_the_nearest_architecture_is_by_compute_capability_and_the_newer_of_two_equally_near() -> None:
    assert nearest_architecture("Hopper", ["Turing", "Volta", "Ampere"]) == "Ampere"  # 9.0: 8.0 before 7.5
    assert nearest_architecture("Ada Lovelace", ["Ampere", "Turing"]) == "Ampere"
    assert nearest_architecture("Turing", ["Ampere"]) == "Ampere"
    assert nearest_architecture("Turing", ["Volta", "Ampere"]) == "Ampere"  # 7.0 and 8.0 both 0.5 away
    assert nearest_architecture("Volta", ["Volta", "Ampere"]) == "Volta"
    assert nearest_architecture("Volta", ["Turing", "Ampere"]) == "Turing"


def test_the_expected_error_is_the_10th_to_90th_percentile_of_the_nearest_architectures_held_out_errors() -> None:
    """An H100 on tensorflow at tf32: Ampere is the nearest architecture the tables measured (the A100 40GB);
    its signed errors with the A100 left out of the fit, and with each model left out, 27 + 27 figures; the
    gain's, one per (model, left-out fit): 6. Signed, so a skew stays: not a ± of their median."""
    fitted = calibration("fp32")
    held = [h for run in (fitted.device_out, fitted.model_out) if run for h in run.held if h.device == "a100"]
    assert len(held) == 6 and all(len(h.errors) == 9 for h in held)
    for h in held:  # the signed errors are the ones the pooled medians were taken of
        assert h.median == pytest.approx(sorted(abs(e) for e in h.errors)[4])
    errors = [e for h in held for e in h.errors]
    e = expected_error(get_device("h100"), "tf32", "tensorflow")
    assert (e.architecture, e.nearest, e.covered, e.held_out) == ("Hopper", "Ampere", False, ("a100",))
    assert e.images_per_s.low == pytest.approx(_percentile(errors, 0.1))
    assert e.images_per_s.high == pytest.approx(_percentile(errors, 0.9))
    assert e.gain.low == pytest.approx(_percentile([h.gain_error for h in held], 0.1))
    assert e.gain.high == pytest.approx(_percentile([h.gain_error for h in held], 0.9))
    assert (e.images_per_s.count, e.gain.count) == (54, 6)
    assert e.images_per_s.low < 0 < e.images_per_s.high and e.images_per_s.high != -e.images_per_s.low
    # a V100 is its own architecture's: both V100 families' errors (16 and 32 GB), no warning
    v100 = expected_error(get_device("v100-pcie"), "fp32", "tensorflow")
    assert (v100.nearest, v100.covered, v100.held_out) == ("Volta", True, ("v100", "v100-32gb"))
    assert Interval.of([0.5]).describe() == "+50%" and Interval.of([-0.2, 0.1]).describe() == "-17% to +7%"


@pytest.mark.parametrize(
    ("device", "precision", "tables", "covered"),
    [
        ("h100", "tf32", "tensorflow", False),
        ("h200", "mixed", "tensorrt", False),
        ("l4", "mixed", "tensorflow", False),
        ("l4", "tf32", "tensorrt", False),
        ("t4", "mixed", "tensorrt", False),
        ("v100", "mixed", "tensorrt", False),  # Volta: no tensorrt table either
        ("t4", "fp32", "tensorflow", True),
        ("a40", "mixed", "tensorrt", True),
        ("a10", "tf32", "tensorflow", True),
    ],
)
def test_a_device_whose_architecture_no_table_covers_is_told_to_expect_more(
    device: str, precision: str, tables: str, covered: bool
) -> None:
    e = expected_error(get_device(device), precision, tables)
    assert e.covered is covered
    warned = any(line.startswith("no table of this architecture") for line in e.lines())
    assert warned is not covered
    assert ("no model left out (the tensorrt tables have one model): expect more" in e.lines()) is (
        tables == "tensorrt"
    )


def test_the_copy_term_is_refuted_by_the_served_tables_and_unvalidated_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triton's images arrived at 0.40-0.87 GB/s; the A100's PCIe 4 x16 copy is 16 x 1.969 = 31.5 GB/s: 36x to
    79x faster. Without a served table the line says the term is unvalidated."""
    e = expected_error(get_device("a100"), "tf32", "tensorrt")
    assert e.copy.refuted and e.copy.pcie_gbs == pytest.approx(31.504)
    assert e.copy.devices == ("a40", "a100-80gb", "v100-32gb", "t4")
    text = " ".join(e.lines())
    assert "the copy, at PCIe's 31.5 GB/s: refuted by served tables (triton-tf-trt:" in text
    assert "whose images arrived at 0.40-0.87 GB/s (36-79x slower" in text
    import serve_bench.predict._expected as expected

    unserved = [s for s in score() if not s.table.served]
    monkeypatch.setattr(expected, "score", lambda: tuple(unserved))
    e = expected_error(get_device("a100"), "tf32", "tensorrt")
    assert e.copy.served_gbs is None and not e.copy.refuted
    assert "is unvalidated until a served table validates it" in " ".join(e.lines())


def test_the_out_of_sample_line_takes_the_devices_own_architecture_then_the_nearest() -> None:
    """T4 on tensorrt: no calibration table of Turing, but Triton's T4 rows are Turing: those. H100 on
    tensorflow: no MXNet row of Hopper: the nearest calibrated architecture's (the A100 80GB's)."""
    t4 = expected_error(get_device("t4"), "mixed", "tensorrt").out_of_sample
    assert t4 is not None and (t4.tables, t4.devices) == (("triton-tf-trt",), ("t4",))
    t4_rows = next(s for s in score() if (s.table.name, s.device) == ("triton-tf-trt", "t4"))
    assert t4.images_per_s.low == pytest.approx(_percentile(list(t4_rows.errors), 0.1))
    h100 = expected_error(get_device("h100"), "tf32", "tensorflow").out_of_sample
    assert h100 is not None and (h100.tables, h100.devices) == (("mxnet",), ("a100-80gb",))
    assert expected_error(get_device("a10"), "tf32", "tensorrt").out_of_sample is None  # Triton's rows are FP16


@pytest.mark.parametrize(
    ("device", "precision", "tables", "says"),
    [
        ("h100", "tf32", "tensorflow", "no table of this architecture (Hopper): expect more"),
        ("h200", "mixed", "tensorflow", "no table of this architecture (Hopper): expect more"),
        ("l4", "mixed", "tensorflow", "no table of this architecture (Ada Lovelace): expect more"),
        ("t4", "mixed", "tensorrt", "no table of this architecture (Turing): expect more"),
    ],
)
def test_predict_prints_the_devices_interval_the_warning_and_the_bounds(
    models_dir: Path, capsys: pytest.CaptureFixture[str], device: str, precision: str, tables: str, says: str
) -> None:
    argv = ["predict", "tiny", "--models-dir", str(models_dir), "--gpu", device, "--precision", precision]
    assert main([*argv, "--tables", tables]) == 0
    printed = capsys.readouterr().out
    e = expected_error(get_device(device), precision, tables)
    interval = f"  images/s {e.images_per_s.describe()}, batching gain {e.gain.describe()}"
    assert f"\n  {interval}\n" in printed, printed
    assert f"held-out errors of Ampere, the nearest calibrated architecture: {' '.join(e.held_out)}," in " ".join(
        printed.split()
    )
    assert f"\n  {says}\n" in printed
    assert re.search(r"largest batch that fits in \d+ GB: at most \d+\n +\(an upper bound: ", printed)
    assert "refuted by served tables" in printed and "0.40-0.87 GB/s" in " ".join(printed.split())
    assert "error, device left out: images/s median" not in printed  # no pooled median read as ±
    assert max(len(line) for line in printed.splitlines()) <= 80


def test_the_report_shows_the_devices_interval_warning_and_bound(tmp_path: Path) -> None:
    import json

    from serve_bench.report import PREDICTIONS_FILE, build_report
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        writer.append(make_point("local-cpu", "cpu", 1, 80_000))
        writer.write_run({"settings": {}})
    cost = reference_costs()["resnet50v1.5"]
    rows = [predict(cost, get_device("h100"), "tf32").to_json(), predict(cost, get_device("a100"), "tf32").to_json()]
    (run_dir / PREDICTIONS_FILE).write_text(json.dumps({"model": "resnet50", "predictions": rows, "cpu": None}))
    page = build_report(run_dir, models_dir=tmp_path, plots=False).html.read_text()
    section = page[page.index("<h2>Predicted (not measured)</h2>") :]
    h100, a100 = section.split("<h3>")[1:3]
    e = expected_error(get_device("h100"), "tf32", "tensorflow")
    assert f"images/s {e.images_per_s.describe()}, batching gain {e.gain.describe()}." in h100
    assert "No table of this architecture (Hopper): expect more." in h100 and "No table" not in a100
    assert "On tables no fit saw (mxnet: a100-80gb)" in h100
    assert "refuted by served tables (triton-tf-trt)" in h100
    assert "at most " in a100 and "(an upper bound:" in a100
    assert "median" not in h100


def test_every_device_has_an_architecture_predict_can_place() -> None:
    from serve_bench.predict import device_table
    from serve_bench.predict._devices import GENERATIONS

    for device in device_table().values():
        assert device.architecture in GENERATIONS and device.sources.get("architecture"), device.id
    a40 = get_device("a40")
    assert (a40.fp32_tflops, a40.tf32_tflops, a40.fp16_tflops, a40.mem_bw_gbs, a40.mem_gb) == (
        37.4,
        74.8,
        149.7,
        696,
        48,
    )
    assert (a40.pcie_gen, a40.pcie_lanes, a40.architecture) == (4, 16, "Ampere")


def test_the_tables_name_the_calibration_that_stands_for_them() -> None:
    assert {n: (t.tables, t.served) for n, t in OUT_OF_SAMPLE_TABLES.items()} == {
        "mxnet": ("tensorflow", False),
        "triton-tf-trt": ("tensorrt", True),
    }
