"""The figures a prediction hands the user's GPU decision, worked out by hand from their definitions
(serve_bench/predict/_predict.py's docstrings, docs/predict.md): where throughput stops growing, the
batching gain, the cost per million images, the largest batch that fits, and the record
``--predictions`` writes. Every Prediction here is written by hand, so nothing is fitted.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from serve_bench.errors import UserError
from serve_bench.predict import Device, Efficiency, GraphCost, OpCost, predict
from serve_bench.predict._freeze import FORM, ModelVersion
from serve_bench.predict._predict import Prediction, _largest_batch
from serve_bench.predict._published import HeldOut, LeaveOneOut

# Round figures: 10 TFLOPS FP32, 20 TF32, 80 FP16, 100 GB/s, 16 GB, PCIe 4 x16, $2 an hour.
PRICED = Device("round", "Round 16GB", 10.0, 20.0, 80.0, 100.0, 16.0, 4, 16, 70.0, 2.0, "Ampere")
DEVICE_OUT = LeaveOneOut(
    "fp32", "device", (HeldOut("m", "round", 0.1, 0.2, -0.05, (0.1, -0.2)),), 0.25, 0.5, 0.125, 0.75
)
MODEL_OUT = LeaveOneOut("fp32", "model", (), 0.0625, 0.375, 0.03125, 0.5)
FIT = ModelVersion("2026-01-01", "ab" * 32)


def _prediction(images_per_s: tuple[float, ...], device: Device = PRICED, **changes: object) -> Prediction:
    batches = tuple(2**i for i in range(len(images_per_s)))
    made = Prediction(
        device,
        "fp32",
        "tensorflow",
        batches,
        tuple(b / v for b, v in zip(batches, images_per_s)),
        images_per_s,
        12,
        DEVICE_OUT,
        MODEL_OUT,
        ("a100", "t4"),
        ("Cumsum ×1",),
        Efficiency(0.5, 0.25, 1e-5, 0.0),
        FIT,
    )
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def test_throughput_stops_growing_at_the_first_batch_within_5_percent_of_the_largest() -> None:
    """Batches 1-8 at 100, 190, 380 and 400 images/s: the largest is 400, 95% of it is 380, reached at batch 4
    (exactly: the bound is inclusive); the gain is 400 / 100 = 4. With 379 at batch 4, batch 8 is the first."""
    p = _prediction((100.0, 190.0, 380.0, 400.0))
    assert p.saturating_batch == 4 and p.gain == 4.0
    assert _prediction((100.0, 190.0, 379.0, 400.0)).saturating_batch == 8
    # the largest need not be the last: 50, 200, 150: batch 2 (200 > 0.95 × 200), gain 200 / 50 = 4
    falls = _prediction((50.0, 200.0, 150.0))
    assert (falls.saturating_batch, falls.gain) == (2, 4.0)


def test_a_million_images_cost_the_hours_they_take_at_the_best_throughput_times_the_price() -> None:
    """$2 an hour at a best 400 images/s (1.44 M images an hour): 1e6 / 1.44e6 × $2 = $1.3889 per million;
    at 100 images/s (flat), $5.5556. No price shipped: no cost."""
    assert _prediction((100.0, 190.0, 380.0, 400.0)).usd_per_million_images == pytest.approx(2 / 1.44, rel=1e-12)
    assert _prediction((100.0, 100.0)).usd_per_million_images == pytest.approx(2e6 / 360_000, rel=1e-12)
    unpriced = dataclasses.replace(PRICED, price_per_hour_usd=None)
    assert _prediction((100.0, 400.0), unpriced).usd_per_million_images is None


def _cost(weights: float, *activations: float) -> GraphCost:
    return GraphCost(
        tuple(OpCost(f"op{i}", "Conv2D", 1.0, a, weights / len(activations)) for i, a in enumerate(activations)), 10
    )


def test_the_largest_batch_that_fits_is_memory_less_the_weights_over_the_widest_ops_tensors() -> None:
    """16 GB: 1e9 weight elements at 4 bytes leave 12e9 bytes; the widest op, 1e9 elements an image at 4 bytes,
    fits 3 times (a narrower op does not count). In mixed precision (2 bytes): 14e9 / 2e9 = 7. 0.9e9 elements
    an image: 12e9 / 3.6e9 = 3.33, so 3. Weights past the memory: none fits; no op at all: 0, not a guess."""
    assert _largest_batch(_cost(1e9, 0.5e9, 1e9), PRICED, "fp32") == 3
    assert _largest_batch(_cost(1e9, 1e9), PRICED, "tf32") == 3
    assert _largest_batch(_cost(1e9, 1e9, 0.25e9), PRICED, "mixed") == 7
    assert _largest_batch(_cost(1e9, 0.9e9), PRICED, "fp32") == 3
    assert _largest_batch(_cost(5e9, 1e6), PRICED, "fp32") == 0  # 20e9 bytes of weights in 16e9
    assert _largest_batch(GraphCost((), 10), PRICED, "fp32") == 0
    assert _largest_batch(_cost(0.0, 1.0), PRICED, "mixed") == 8_000_000_000  # 16e9 / 2, every byte free
    # a floor, not a rounded quotient: 16e9 / 28 elements at 4 bytes are 2.2857e9 bytes, and 7 of them come to
    # 16.000000000000002e9 bytes, past the 16e9 there are (16e9 / that, in floating point, rounds to 7.0)
    assert Fraction(16e9 / 28 * 4) * 7 > 16e9 and _largest_batch(_cost(0.0, 16e9 / 28), PRICED, "fp32") == 6


def test_the_predictions_record_holds_every_figure_rounded_as_documented() -> None:
    """Latency in ms to 3 places, images/s to 1, the gain to 2; the errors' four figures; the fit's version, hash,
    form and parameters; the device's figures. 1, 2, 4 images at 100, 190, 380.56 images/s: 10, 10.526..., 10.510...
    ms; gain 3.8056 -> 3.81; 380.56 is within 5% of itself first at batch 4."""
    p = _prediction((100.0, 190.0, 380.56))
    record = p.to_json()
    assert record == {
        "device": "round",
        "name": "Round 16GB",
        "precision": "fp32",
        "runtime": "tensorflow",
        "batch_sizes": [1, 2, 4],
        "latency_ms": [10.0, 10.526, 10.511],
        "images_per_s": [100.0, 190.0, 380.6],
        "gain": 3.81,
        "saturating_batch": 4,
        "largest_batch_that_fits": 12,
        "largest_batch_that_fits_is": "an upper bound: the weights and the widest op's tensors only",
        "usd_per_million_images": pytest.approx(2e6 / (380.56 * 3600), rel=1e-12),
        "error": {"median": 0.25, "worst": 0.5, "gain_median": 0.125, "gain_worst": 0.75},
        "model_error": {"median": 0.0625, "worst": 0.375, "gain_median": 0.03125, "gain_worst": 0.5},
        "calibrated_on": ["a100", "t4"],
        "unknown_ops": ["Cumsum ×1"],
        "fit": {
            "version": "2026-01-01",
            "sha256": "ab" * 32,
            "form": FORM,
            "fitted": {"compute": 0.5, "memory": 0.25, "per_op_s": 1e-5, "per_call_s": 0.0},
        },
        "device_figures": {
            "fp32_tflops": 10.0,
            "tf32_tflops": 20.0,
            "fp16_tflops": 80.0,
            "mem_bw_gbs": 100.0,
            "mem_gb": 16.0,
            "pcie_gen": 4,
            "pcie_lanes": 16,
        },
        "predicted": True,
    }
    # no model left out (one model in the tables) and no expected error: neither key is written
    alone = _prediction((100.0, 190.0, 380.56), model_error=None).to_json()
    assert "model_error" not in alone and "expected_error" not in alone and alone["error"] == record["error"]


def test_predict_refuses_a_precision_its_tables_never_measured_naming_the_ones_they_did() -> None:
    """The Paddle-TRT tables hold TF32 and FP16 rows only (data/published_paddle_trt_resnet50.csv)."""
    cost = _cost(1e3, 1e3)
    with pytest.raises(UserError) as refused:
        predict(cost, PRICED, "fp32", tables="tensorrt")
    assert str(refused.value) == "the tensorrt tables have no fp32 rows to calibrate on; use --precision mixed or tf32"


def test_a_prediction_names_the_devices_its_tables_measured_and_the_batch_sizes_asked() -> None:
    """The Paddle-TRT tables ran on the A100 80GB, the A30 and the A10: the calibrated-on list, sorted; the
    TensorFlow 1 tables on the T4, the V100 16/32 GB and the A100 40 GB. Each batch's images/s is batch over
    its latency."""
    cost = _cost(1e3, 1e3)
    trt = predict(cost, PRICED, "tf32", (1, 3, 5), tables="tensorrt")
    assert trt.calibrated_on == ("a10", "a100-80gb", "a30") and trt.batch_sizes == (1, 3, 5)
    assert trt.tables == "tensorrt" and trt.precision == "tf32" and trt.model_error is None
    assert trt.images_per_s == pytest.approx([b / t for b, t in zip((1, 3, 5), trt.latency_s)], rel=1e-12)
    tf = predict(cost, PRICED, "mixed")
    assert tf.calibrated_on == ("a100", "t4", "v100", "v100-32gb") and tf.tables == "tensorflow"
    assert tf.batch_sizes == (1, 2, 4, 8, 16, 32, 64, 128, 256) and tf.model_error is not None
