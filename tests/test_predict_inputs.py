"""What a prediction is made from and scored by, worked out by hand: a device's peak at each precision
and its bytes per element (serve_bench/predict/_devices.py), the frozen fit's rounding and hashes
(_freeze.py), the out-of-sample score of one table (_outofsample.py: errors, median, worst, gain,
best batch, the served images' rate), and the leave-one-out errors (_published.py) on figures the
formula made, so a fit recovers them exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from serve_bench.errors import UserError
from serve_bench.predict import Device, Efficiency, GraphCost, Observation, OpCost, time_per_batch
from serve_bench.predict._devices import bytes_per_element, get_device, peak_flops, precision_class
from serve_bench.predict._freeze import ModelVersion, content_hash, rounded, text_digest
from serve_bench.predict._graph import fuse_pointwise
from serve_bench.predict._outofsample import OUT_OF_SAMPLE_TABLES, Scored
from serve_bench.predict._published import (
    _calibration_set,
    check_tables,
    leave_one_device_out,
    leave_one_model_out,
)
from serve_bench.predict._reference import reference_costs

ROUND = Device("round", "Round", 10.0, 20.0, 80.0, 100.0, 16.0, 4, 16)


def test_a_devices_peak_is_its_fp32_tf32_or_fp16_figure_in_flops() -> None:
    """10, 20 and 80 TFLOPS: fp32 and tf32 read 4-byte elements, mixed 2-byte ones and the FP16 peak."""
    assert peak_flops(ROUND, "fp32") == 10e12 and peak_flops(ROUND, "tf32") == 20e12
    assert peak_flops(ROUND, "mixed") == 80e12
    assert [bytes_per_element(p) for p in ("fp32", "tf32", "mixed")] == [4, 4, 2]
    assert [precision_class(p) for p in ("fp32", "tf32", "mixed")] == ["fp32", "fp32", "mixed"]
    assert get_device("A100") == get_device("a100")  # GPU names are taken in any case
    with pytest.raises(UserError, match=r"^unknown precision 'fp8'; choose one of: fp32, tf32, mixed$"):
        precision_class("fp8")
    with pytest.raises(UserError, match=r"^unknown precision 'bf16'; choose one of: fp32, tf32, mixed$"):
        peak_flops(ROUND, "bf16")
    with pytest.raises(UserError, match=r"^unknown GPU 'T5'; choose one of: t4, l4, "):
        get_device("T5")
    volta = Device("v", "Old GPU", 15.7, None, 125.0, 900.0, 16.0, 3, 16)
    assert peak_flops(volta, "fp32") == 15.7e12
    with pytest.raises(UserError) as refused:
        peak_flops(volta, "tf32")
    assert str(refused.value) == "Old GPU has no TF32 (it came with Ampere); use --precision fp32 or mixed"


def test_the_frozen_hash_rounds_to_4_significant_digits_and_reads_the_json_canonically() -> None:
    """123456.789 to 4 significant digits is 123500.0, 0.000123456 is 0.0001235; tuples become lists, keys
    strings; an int or a string is left alone. The hash is sha256 of sorted, spaceless ASCII JSON."""
    assert rounded(123456.789) == 123500.0 and rounded(0.000123456) == 0.0001235
    assert rounded({1: (1.23456, [2.34567]), "n": 7, "s": "x"}) == {"1": [1.235, [2.346]], "n": 7, "s": "x"}
    text = '{"a":[1.235,"\\u00e9"],"b":2}'  # b after a; é escaped to ASCII; no spaces
    assert content_hash({"b": 2, "a": (1.23456, "é")}) == hashlib.sha256(text.encode()).hexdigest()
    # a shipped file's digest: its text as UTF-8 with line endings made \n
    assert text_digest("é\r\nx\n") == hashlib.sha256("é\nx\n".encode()).hexdigest()
    version = ModelVersion("2026-11-26", "0123456789abcdef" * 4)
    assert version.describe() == "fit 2026-11-26, sha256 0123456789ab"
    assert version.to_json() == {"version": "2026-11-26", "sha256": "0123456789abcdef" * 4}


def test_an_out_of_sample_table_is_scored_by_its_errors_gain_and_best_batch() -> None:
    """Published 100, 150, 300, 280 images/s at batches 1-8 against predicted 120, 150, 240, 350: errors
    +20%, 0, -20%, +25%; the median |error| is the mean of 20% and 20%, the worst 25%; gains 300/100 = 3
    (best at 4) and 350/120 = 2.917 (best at 8): gain error 2.917/3 - 1 = -2.78%."""
    s = Scored(OUT_OF_SAMPLE_TABLES["mxnet"], "resnet50v1.5", "t4", "fp32", (1, 2, 4, 8),
               (100.0, 150.0, 300.0, 280.0), (120.0, 150.0, 240.0, 350.0), (0.01, 0.01, 0.01, 0.01))  # fmt: skip
    assert s.errors == pytest.approx((0.2, 0.0, -0.2, 0.25), abs=1e-12)
    assert s.median == pytest.approx(0.2, abs=1e-12) and s.worst == pytest.approx(0.25, abs=1e-12)
    assert s.gain_error == pytest.approx((350 / 120) / 3 - 1, rel=1e-12)
    assert s.best_batch == (4, 8)
    assert s.served_transfer_gbs() is None  # MXNet's images never crossed PCIe in the timed step


def test_a_served_tables_images_arrived_at_their_bytes_over_the_time_the_computation_leaves() -> None:
    """Triton, batch 128 at 1280 images/s: 100 ms a batch; with 60 ms of predicted computation 40 ms are
    left for 128 × 150,528 float32 elements (ResNet-50's 224×224×3 input) = 77.07 MB: 1.9268 GB/s. With the
    computation at 100 ms or more, nothing is left: no rate."""
    assert reference_costs()["resnet50v1.5"].input_elements == 224 * 224 * 3
    triton = OUT_OF_SAMPLE_TABLES["triton-tf-trt"]

    def served(computed: float) -> Scored:
        return Scored(triton, "resnet50v1.5", "t4", "mixed", (1, 128), (200.0, 1280.0), (1.0, 1.0), (0.001, computed))

    assert served(0.06).served_transfer_gbs() == pytest.approx(128 * 150528 * 4 / 0.04 / 1e9, rel=1e-9)
    assert served(0.1).served_transfer_gbs() is None and served(0.2).served_transfer_gbs() is None


# Two devices of round figures and one small graph: figures made by the formula with known efficiencies.
_COST = GraphCost((OpCost("conv", "Conv2D", 2e9, 1e6, 1e6), OpCost("relu", "Relu", 1e6, 2e6, 0.0)), 1000)
_TRUTH = Efficiency(0.5, 0.5, 10e-6)
_DEVICES = {
    "a": Device("a", "A", 10.0, None, 40.0, 200.0, 16.0, 3, 16),
    "b": Device("b", "B", 20.0, None, 80.0, 400.0, 16.0, 4, 16),
    "c": Device("c", "C", 15.0, None, 60.0, 300.0, 16.0, 4, 16),
}


def _figures(models: dict[str, GraphCost], scale: dict[str, float]) -> list[Observation]:
    return [
        Observation(d, "fp32", b, scale.get(d, 1.0) * b / time_per_batch(models[m], _DEVICES[d], "fp32", b, _TRUTH), m)
        for m in models
        for d in _DEVICES
        for b in (1, 4, 16)
    ]


def test_a_device_left_out_is_predicted_from_the_others_and_its_published_errors_are_signed() -> None:
    """Figures the formula made on devices a and c, and device b published 25% slower than the formula: left
    out, b is predicted (from a and c, which the formula fits exactly) 1/0.75 - 1 = +33.3% at every batch,
    so its gain error is 0; each of a and c, left out, is predicted from a fit that b's slowness pulls."""
    loo = leave_one_device_out({"m": _COST}, _figures({"m": _COST}, {"b": 0.75}), _DEVICES)
    assert (loo.precision_class, loo.left_out) == ("fp32", "device")
    held = {h.device: h for h in loo.held}
    assert sorted(held) == ["a", "b", "c"] and {h.model for h in loo.held} == {"m"}
    b = held["b"]
    assert b.errors == pytest.approx((1 / 0.75 - 1,) * 3, rel=1e-3)
    assert b.median == pytest.approx(1 / 3, rel=1e-3) and b.worst == pytest.approx(1 / 3, rel=1e-3)
    assert b.gain_error == pytest.approx(0.0, abs=1e-3)
    every = sorted(abs(e) for h in loo.held for e in h.errors)  # 9 figures: the median is the 5th
    assert loo.median == pytest.approx(every[4], rel=1e-12) and loo.worst == pytest.approx(every[-1], rel=1e-12)
    gains = sorted(abs(h.gain_error) for h in loo.held)
    assert loo.gain_median == pytest.approx(gains[1], rel=1e-12) and loo.gain_worst == gains[-1]
    assert loo.worst == pytest.approx(1 / 3, rel=1e-3)


def test_a_model_left_out_is_predicted_from_the_others_fit() -> None:
    """Model m as the formula makes it, model n published 20% slower on every device: left out, n is predicted
    from m's fit (exact) 1/0.8 - 1 = +25% at every figure; m, left out, from the slower n's fit: too slow. Left
    out by device instead, every fit would see both models and n would come out nearer."""
    models = {"m": _COST, "n": GraphCost((*_COST.ops, OpCost("fc", "MatMul", 4e9, 1e3, 4e6)), 1000)}
    figures = [o if o.model == "m" else dataclasses.replace(o, images_per_s=0.8 * o.images_per_s)
               for o in _figures(models, {})]  # fmt: skip
    loo = leave_one_model_out(models, figures, _DEVICES)
    assert loo.left_out == "model" and sorted({h.model for h in loo.held}) == ["m", "n"] and len(loo.held) == 6
    for h in loo.held:
        if h.model == "n":
            assert h.errors == pytest.approx((0.25,) * 3, rel=2e-3), h
        else:
            assert max(h.errors) < -0.1, h


def test_the_left_out_fit_copies_as_the_tables_benchmark_did() -> None:
    """A graph whose 2 M-element input takes 8 MB / (0.985 GB/s × 16) = 0.51 ms an image over PCIe 3, about its
    computation's 0.48 ms on device a (2 GFLOPs at 5 TFLOPS, plus its memory traffic): figures made with the
    copy hidden behind the computation (copy_overlaps, as Paddle-TRT's DALI ran ahead) are recovered exactly
    by fits told so, and missed (by 30% or so) where either the fit or the prediction adds the copy instead."""
    wide = GraphCost(_COST.ops, 2_000_000)
    made = [
        Observation(d, "fp32", b, b / time_per_batch(wide, _DEVICES[d], "fp32", b, _TRUTH, copy_overlaps=True), "m")
        for d in _DEVICES
        for b in (1, 4, 16)
    ]
    for loo in (leave_one_device_out({"m": wide}, made, _DEVICES, True),
                leave_one_model_out({"m": wide, "n": wide}, made + [dataclasses.replace(o, model="n") for o in made],
                                    _DEVICES, True)):  # fmt: skip
        assert loo.worst == pytest.approx(0.0, abs=1e-3), loo.left_out
    assert leave_one_device_out({"m": wide}, made, _DEVICES).worst > 0.1


def test_a_calibration_fits_its_own_tables_rows_of_one_precision_class_on_the_graph_as_it_ran_it() -> None:
    """Paddle-TRT's FP16 rows: 3 devices (A100 80GB, A30, A10) × 9 batch sizes = 27, on the fused graph; the
    TensorFlow 1 tables' 4-byte rows (fp32 and tf32) on the graph as walked."""
    costs, rows = _calibration_set("mixed", "tensorrt")
    assert len(rows) == 27 and {o.precision for o in rows} == {"mixed"}
    assert {o.device for o in rows} == {"a100-80gb", "a30", "a10"}
    assert costs["resnet50v1.5"] == fuse_pointwise(reference_costs()["resnet50v1.5"])
    costs, rows = _calibration_set("fp32", "tensorflow")
    assert {o.precision for o in rows} == {"fp32", "tf32"} and costs == reference_costs()


def test_a_calibration_nobody_shipped_is_named_with_the_ones_there_are() -> None:
    check_tables("tensorrt")
    with pytest.raises(UserError) as refused:
        check_tables("onnx")
    assert str(refused.value) == "no published GPU tables 'onnx' to predict with; choose one of: tensorflow, tensorrt"
