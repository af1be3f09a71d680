"""The analytical model: the graph walker's counts, the time formula, the fit, the published
calibration's leave-one-device-out errors, and `serve-bench predict`'s one-line errors.

Expected figures are worked out by hand from the layer shapes (tiny: 64×64×3 in, conv 3×3/2 to
8 channels, conv 3×3/2 to 16, average pool, dense 32) or from the formula in
serve_bench/predict/_model.py; nothing here compares the model with itself.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from serve_bench.cli import main
from serve_bench.predict import (
    BATCH_SIZES,
    Device,
    Efficiency,
    GraphCost,
    Observation,
    OpCost,
    build_cost,
    calibration,
    cost_graph,
    cost_saved_model,
    fit,
    get_device,
    predict,
    reference_cost,
    time_per_batch,
)

# A device with round figures, for formulas worked out by hand.
ROUND = Device("round", "round", 10.0, None, 80.0, 100.0, 16.0, 4, 16)


@pytest.fixture(scope="module")
def tiny_cost(models_dir: Path) -> GraphCost:
    return cost_saved_model(models_dir / "tiny" / "1")


def test_the_walker_counts_tinys_convolutions_weights_and_input_by_hand(tiny_cost):
    """conv 1: 31×31×8 outputs × 3×3×3 taps × 2 = 415,152 FLOPs; conv 2: 15×15×16 × 3×3×8 × 2 =
    518,400; dense: 16×32×2 = 1,024. Weights: 3·3·3·8+8 + 3·3·8·16+16 + 16·32+32 = 1,936, plus the
    scalar 255 the preprocessing divides by. One image in: 64·64·3 = 12,288 elements."""
    convs = [op.flops for op in tiny_cost.ops if op.type == "Conv2D"]
    assert convs == [415_152, 518_400]
    assert [op.flops for op in tiny_cost.ops if op.type == "MatMul"] == [1_024]
    assert tiny_cost.weight_elements == 1_936 + 1
    assert tiny_cost.input_elements == 12_288
    # conv 1 reads the image and writes 31·31·8: activations 12,288 + 7,688
    first = next(op for op in tiny_cost.ops if op.type == "Conv2D")
    assert first.activations == 12_288 + 7_688 and first.weights == 216
    assert tiny_cost.unknown == ()


def test_an_op_the_walker_does_not_know_is_costed_as_a_copy_and_named():
    """Cumsum is in none of the walker's lists: no FLOPs, its input and output counted as traffic, named."""
    from serve_bench._tf import import_tensorflow

    tf = import_tensorflow()
    with tf.Graph().as_default() as graph:
        images = tf.compat.v1.placeholder(tf.float32, [None, 10, 4])
        tf.math.cumsum(tf.nn.relu(images), axis=1)
    cost = cost_graph(graph)
    (odd,) = [op for op in cost.ops if not op.known]
    assert (odd.type, odd.flops, odd.activations) == ("Cumsum", 0.0, 80.0)
    assert cost.unknown == ("Cumsum ×1",)


def test_the_shipped_resnet50_v15_costs_are_what_the_walker_makes_of_the_model():
    """data/resnet50v15_ops.json is build_cost() (same ops in order, same figures; Keras numbers the
    layers' names per process, so names are left out): 8.22 GFLOPs and 25.56 M weights per 224×224
    image, as v1.5's ~4.1 G multiply-adds and ~25.6 M parameters."""
    shipped, built = reference_cost(), build_cost()

    def figures(cost: GraphCost) -> list[tuple[str, float, float, float]]:
        return [(op.type, op.flops, op.activations, op.weights) for op in cost.ops]

    assert figures(shipped) == figures(built) and shipped.input_elements == built.input_elements
    assert shipped.flops_per_image == pytest.approx(8.2176e9, rel=1e-4)
    assert shipped.weight_elements == pytest.approx(25.557e6, rel=1e-4)


def test_time_per_batch_follows_the_formula_on_both_sides_of_the_roofline():
    """One conv-like op (10 GFLOPs per image) and one element-wise op (1 G elements), on a device
    of 10 TFLOPS, 100 GB/s, PCIe 4 ×16, efficiencies ½ and ¼, 10 µs per op, 100 µs per call.
    Batch 2: op 1 takes max(20e9 / 5e12, (0 + 1000)·4 / 25e9) = 4 ms; op 2 max(2e9 / 5e12,
    (2e9·4) / 25e9) = 320 ms; transfer 2 × 1000 × 4 B / (1.969 GB/s × 16)."""
    cost = GraphCost((OpCost("conv", "Conv2D", 10e9, 0.0, 1000.0), OpCost("add", "AddV2", 1e9, 1e9, 0.0)), 1000)
    eff = Efficiency(0.5, 0.25, 10e-6, 100e-6)
    expected = 100e-6 + 2 * 1000 * 4 / (1.969e9 * 16) + 4e-3 + 0.32 + 2 * 10e-6
    assert time_per_batch(cost, ROUND, "fp32", 2, eff) == pytest.approx(expected, rel=1e-12)
    # mixed precision: 80 TFLOPS and 2-byte elements
    mixed = 100e-6 + 2 * 1000 * 4 / (1.969e9 * 16) + max(20e9 / 40e12, 2000 / 25e9) + 0.16 + 2 * 10e-6
    assert time_per_batch(cost, ROUND, "mixed", 2, eff) == pytest.approx(mixed, rel=1e-12)


def test_the_fit_finds_the_efficiencies_that_made_the_figures():
    """Figures made by the formula with known efficiencies on two devices are fitted back to them."""
    cost = reference_cost()
    truth = Efficiency(0.6, 0.7, 15e-6)
    devices = {"t4": get_device("t4"), "v100": get_device("v100")}
    figures = [
        Observation(d, "fp32", b, b / time_per_batch(cost, devices[d], "fp32", b, truth))
        for d in devices
        for b in BATCH_SIZES
    ]
    got = fit(cost, figures, devices)
    for name in ("compute", "memory", "per_op_s"):
        assert getattr(got, name) == pytest.approx(getattr(truth, name), rel=0.02), name


def test_leave_one_device_out_errors_are_the_ones_the_readme_gives():
    """benchmarks/README.md's figures (NVIDIA DeepLearningExamples ResNet-50 v1.5, TensorFlow 1):
    fp32/tf32 images/s median 23%, gain median 32%; mixed 27% and 8%. A change to the model, the
    tables or the fit that moves them must move the README with it."""
    _, fp32 = calibration("fp32")
    _, mixed = calibration("mixed")
    assert (round(fp32.median * 100), round(fp32.gain_median * 100)) == (23, 32)
    assert (round(mixed.median * 100), round(mixed.gain_median * 100)) == (27, 8)
    assert {d.device for d in fp32.devices} == {"t4", "v100", "v100-32gb", "a100"}


def test_a_prediction_says_where_throughput_stops_growing_and_what_it_costs(tiny_cost):
    """Saturation: the first batch within 5% of the largest images/s; cost per million images:
    price per hour over (images/s × 3600) × 1e6; the largest batch that fits in memory."""
    p = predict(tiny_cost, get_device("h100"), "fp32")
    top = max(p.images_per_s)
    first = next(b for b, v in zip(p.batch_sizes, p.images_per_s) if v >= 0.95 * top)
    assert p.saturating_batch == first
    assert p.gain == pytest.approx(top / p.images_per_s[0])
    assert p.usd_per_million_images == pytest.approx(12.29 / (top * 3600) * 1e6)
    widest = max(op.activations for op in tiny_cost.ops) * 4
    assert p.largest_batch_that_fits == math.floor((80e9 - tiny_cost.weight_elements * 4) / widest)
    assert predict(tiny_cost, get_device("t4"), "fp32").usd_per_million_images is None  # no public price shipped


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--device", "t5"], "unknown device 't5'; choose one of: t4,"),
        (["--device", "t4", "--precision", "tf32"], "NVIDIA T4 16GB has no TF32"),
        (["--precision", "fp8"], "unknown precision 'fp8'"),
    ],
)
def test_predict_refuses_bad_input_in_one_line(models_dir, capsys, argv, says):
    assert main(["predict", "tiny", "--models-dir", str(models_dir), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and says in err, err


def test_predict_without_the_exported_model_says_how_to_export_it(tmp_path, capsys):
    assert main(["predict", "tiny", "--models-dir", str(tmp_path)]) == 2
    assert "run `serve-bench export tiny` first" in capsys.readouterr().err


def test_predict_prints_and_writes_predictions_marked_as_such(models_dir, tmp_path, capsys):
    out = tmp_path / "p.json"
    argv = ["predict", "tiny", "--models-dir", str(models_dir), "--device", "a100", "--predictions", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "predicted (not measured)" in printed and "error, device left out" in printed
    assert max(len(line) for line in printed.splitlines() if not line.startswith("predictions: ")) <= 80
    import json

    (row,) = json.loads(out.read_text())["predictions"]
    assert row["predicted"] is True and row["device"] == "a100" and len(row["images_per_s"]) == len(BATCH_SIZES)
