"""The analytical model: the graph walker's counts, the time formula, the fit, the published
calibration's leave-one-device-out errors, and `serve-bench predict`'s one-line errors.

Expected figures are worked out by hand from the layer shapes (tiny: 64×64×3 in, conv 3×3/2 to
8 channels, conv 3×3/2 to 16, average pool, dense 32) or from the formula in
serve_bench/predict/_model.py; nothing here compares the model with itself.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from serve_bench.cli import main
from serve_bench.predict import (
    BATCH_SIZES,
    FIT_VERSION,
    Device,
    Efficiency,
    GraphCost,
    LeaveOneOut,
    Observation,
    OpCost,
    build_cost,
    calibration,
    cost_graph,
    cost_saved_model,
    fit,
    fitted,
    fuse_pointwise,
    get_device,
    predict,
    reference_costs,
    run_by,
    shipped_version,
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


@pytest.mark.parametrize(
    ("model", "gflops", "weights_m"),
    [("resnet50v1.5", 8.2176, 25.557), ("resnext101-32x4d", 16.013, 44.178), ("se-resnext101-32x4d", 16.040, 48.955)],
)
def test_the_shipped_costs_are_what_the_walker_makes_of_the_published_models(model, gflops, weights_m):
    """data/tf1_convnets_costs.json is build_cost(model) (same ops in order, same figures; Keras numbers
    the layers' names per process, so names are left out). ResNet-50 v1.5: ~4.1 G multiply-adds and
    25.6 M parameters; ResNeXt-101 32x4d: ~8.0 G and 44.2 M (its 3×3 convolutions grouped by 32);
    SE-ResNeXt-101 32x4d adds 4.8 M weights of squeeze-and-excitation and little arithmetic."""
    shipped, built = reference_costs()[model], build_cost(model)

    def figures(cost: GraphCost) -> list[tuple[object, ...]]:
        index = {op.name: i for i, op in enumerate(cost.ops)}  # what each op reads, by position
        return [
            (op.type, op.flops, op.activations, op.weights, tuple((index.get(w, -1), e) for w, e in op.reads))
            for op in cost.ops
        ]

    assert figures(shipped) == figures(built) and shipped.input_elements == built.input_elements
    assert not built.unknown  # every op costed: a grouped convolution is one Conv2D, not an opaque call
    assert shipped.flops_per_image == pytest.approx(gflops * 1e9, rel=1e-4)
    assert shipped.weight_elements == pytest.approx(weights_m * 1e6, rel=1e-4)


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


def test_a_copy_that_overlaps_the_computation_costs_only_what_it_exceeds():
    """copy_overlaps (the Paddle-TRT tables' DALI pipeline copies the next batch while this one
    computes): per call + max(transfer, ops) instead of their sum. The formula test's graph: its
    ops (324 ms) hide the copy; a 1 G-element input before one tiny op: the copy, 2 × 1e9 × 4 B /
    (1.969 GB/s × 16) = 254 ms, is the batch's time."""
    eff = Efficiency(0.5, 0.25, 10e-6, 100e-6)
    cost = GraphCost((OpCost("conv", "Conv2D", 10e9, 0.0, 1000.0), OpCost("add", "AddV2", 1e9, 1e9, 0.0)), 1000)
    ops = 4e-3 + 0.32 + 2 * 10e-6
    assert time_per_batch(cost, ROUND, "fp32", 2, eff, copy_overlaps=True) == pytest.approx(100e-6 + ops, rel=1e-12)
    wide = GraphCost((OpCost("relu", "Relu", 1.0, 2.0, 0.0),), 10**9)
    copy = 2 * 1e9 * 4 / (1.969e9 * 16)
    assert time_per_batch(wide, ROUND, "fp32", 2, eff, copy_overlaps=True) == pytest.approx(100e-6 + copy, rel=1e-12)
    serial = time_per_batch(wide, ROUND, "fp32", 2, eff)
    assert serial == pytest.approx(100e-6 + copy + 2 * 2 * 4 / 25e9 + 10e-6, rel=1e-12)  # the Relu is memory-bound


def test_the_fit_finds_the_efficiencies_that_made_the_figures():
    """Figures made by the formula with known efficiencies on two devices are fitted back to them."""
    cost = reference_costs()["resnet50v1.5"]
    truth = Efficiency(0.6, 0.7, 15e-6)
    devices = {"t4": get_device("t4"), "v100": get_device("v100")}
    figures = [
        Observation(d, "fp32", b, b / time_per_batch(cost, devices[d], "fp32", b, truth))
        for d in devices
        for b in BATCH_SIZES
    ]
    got = fit({"resnet50v1.5": cost}, figures, devices)
    for name in ("compute", "memory", "per_op_s"):
        assert getattr(got, name) == pytest.approx(getattr(truth, name), rel=0.02), name


def test_leave_one_out_errors_are_the_ones_the_readme_gives():
    """benchmarks/README.md's figures (NVIDIA DeepLearningExamples' TensorFlow 1 ConvNets: ResNet-50
    v1.5, ResNeXt-101 32x4d, SE-ResNeXt-101 32x4d). Device left out: fp32/tf32 images/s median 25%,
    gain 27%; mixed 27% and 38%. Model left out: fp32 21% and 26%; mixed 19% and 24%. A change to
    the model, the tables or the fit that moves them must move the README with it."""
    fp32, mixed = calibration("fp32"), calibration("mixed")

    def figures(loo: LeaveOneOut) -> tuple[int, int]:
        return round(loo.median * 100), round(loo.gain_median * 100)

    assert (figures(fp32.device_out), figures(mixed.device_out)) == ((25, 27), (27, 38))
    assert (figures(fp32.model_out), figures(mixed.model_out)) == ((21, 26), (19, 24))
    assert {h.device for h in fp32.device_out.held} == {"t4", "v100", "v100-32gb", "a100"}
    assert {h.model for h in mixed.model_out.held} == set(reference_costs())


def test_tensorrts_leave_one_out_errors_are_the_ones_the_readme_gives():
    """benchmarks/README.md's figures for the tensorrt runtime (NVIDIA DeepLearningExamples'
    PaddlePaddle ResNet-50 v1.5 through Paddle-TRT on A100 80 GB, A30 and A10; the graph costed
    with its point-wise ops fused, the copy of a batch overlapping the last one's computation as
    DALI runs ahead). Device left out: TF32 images/s median 7%, gain 2%; FP16 4% and 12%. One
    model in these tables: no model-left-out figure."""
    tf32, fp16 = calibration("fp32", "tensorrt"), calibration("mixed", "tensorrt")

    def figures(loo: LeaveOneOut) -> tuple[int, int]:
        return round(loo.median * 100), round(loo.gain_median * 100)

    assert (figures(tf32.device_out), figures(fp16.device_out)) == ((7, 2), (4, 12))
    assert {h.device for h in fp16.device_out.held} == {"a100-80gb", "a30", "a10"}
    assert tf32.model_out is None and fp16.model_out is None


def test_tensorrts_graph_folds_each_pointwise_op_into_the_kernel_that_wrote_its_input():
    """By hand, ops of 10 elements out unless said. A batch norm (Mul, AddV2) and a Relu after conv1
    add their FLOPs and weights to it and no traffic (each reads only what the kernel wrote); a
    residual AddV2 (reads conv2's 10 and conv1's relu's 10) adds one read of 10 to conv2, the later
    of its two writers. A squeeze-and-excitation multiply of conv2's output by a 2-element gate
    computed from it stays a kernel: the gate does not exist before conv2 runs. The Relu after it
    joins it. A scaling of the graph's input has no kernel before it and stays one."""
    r = (("image", 12.0),)
    ops = (
        OpCost("scale", "Mul", 12, 24, 1, reads=r),
        OpCost("conv1", "Conv2D", 100, 22, 5, reads=(("scale", 12.0),)),
        OpCost("bn_mul", "Mul", 10, 20, 2, reads=(("conv1", 10.0),)),
        OpCost("bn_add", "AddV2", 10, 20, 2, reads=(("bn_mul", 10.0),)),
        OpCost("relu1", "Relu", 10, 20, 0, reads=(("bn_add", 10.0),)),
        OpCost("conv2", "Conv2D", 50, 20, 3, reads=(("relu1", 10.0),)),
        OpCost("residual", "AddV2", 10, 30, 0, reads=(("relu1", 10.0), ("conv2", 10.0))),
        OpCost("squeeze", "Mean", 10, 12, 0, reads=(("residual", 10.0),)),
        OpCost("gate", "MatMul", 8, 4, 4, reads=(("squeeze", 2.0),)),
        OpCost("sigmoid", "Sigmoid", 2, 4, 0, reads=(("gate", 2.0),)),
        OpCost("excite", "Mul", 10, 22, 0, reads=(("residual", 10.0), ("sigmoid", 2.0))),
        OpCost("relu2", "Relu", 10, 20, 0, reads=(("excite", 10.0),)),
    )
    fused = fuse_pointwise(GraphCost(ops, 12))
    assert [(o.name, o.flops, o.activations, o.weights) for o in fused.ops] == [
        ("scale", 12, 24, 1),
        ("conv1", 130, 22, 9),
        ("conv2", 60, 30, 3),
        ("squeeze", 10, 12, 0),
        ("gate", 10, 4, 4),
        ("excite", 20, 22, 0),
    ]
    assert fused.input_elements == 12
    # costs saved without their reads: each point-wise op joins the op listed before it, adding what
    # it reads besides one operand of its output's size (a batch norm: nothing besides)
    bare_ops = (*ops[:2], OpCost("bn", "FusedBatchNormV3", 20, 20, 2), *ops[4:7])
    bare = fuse_pointwise(GraphCost(tuple(dataclasses.replace(o, reads=()) for o in bare_ops), 12))
    assert [(o.name, o.flops, o.activations) for o in bare.ops] == [
        ("scale", 12, 24),
        ("conv1", 130, 22),
        ("conv2", 60, 30),
    ]
    assert GraphCost.from_json(GraphCost(ops, 12).to_json()) == GraphCost(ops, 12)  # reads survive a save


def test_a_tensor_used_only_inside_a_fused_kernel_never_reaches_memory_and_one_used_outside_is_written_once():
    """By hand, 10 elements per tensor. Swish after a convolution (x · sigmoid(x)): both the sigmoid
    and the multiply join the convolution's kernel, which reads its 10 in and writes 10 out; x is
    not read twice. A pre-activation block (ResNet v2): the kernel that makes x also computes
    relu(x), and both leave it (x for a later sum, relu(x) for the next convolution): 10 in, 20
    out. A Cast of the integer input reads no float tensor: a kernel of its own."""
    swish = (
        OpCost("conv", "Conv2D", 100, 20, 5, reads=(("image", 10.0),)),
        OpCost("sig", "Sigmoid", 10, 20, 0, reads=(("conv", 10.0),)),
        OpCost("mul", "Mul", 10, 30, 0, reads=(("conv", 10.0), ("sig", 10.0))),
    )
    assert [(o.name, o.flops, o.activations) for o in fuse_pointwise(GraphCost(swish, 10)).ops] == [("conv", 120, 20)]
    block = (
        OpCost("cast", "Cast", 10, 10, 0),
        OpCost("conv0", "Conv2D", 100, 20, 5, reads=(("cast", 10.0),)),
        OpCost("relu", "Relu", 10, 20, 0, reads=(("conv0", 10.0),)),
        OpCost("conv1", "Conv2D", 100, 20, 5, reads=(("relu", 10.0),)),
        OpCost("sum", "AddV2", 10, 30, 0, reads=(("conv0", 10.0), ("conv1", 10.0))),
    )
    fused = fuse_pointwise(GraphCost(block, 10))
    assert [(o.name, o.activations) for o in fused.ops] == [("cast", 10), ("conv0", 30), ("conv1", 30)]


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
        (["--gpu", "t5"], "unknown GPU 't5'; choose one of: t4,"),
        (["--gpu", "t4", "--precision", "tf32"], "NVIDIA T4 16GB has no TF32"),
        (["--precision", "fp8"], "unknown precision 'fp8'"),
        (["--tables", "onnxruntime"], "no published GPU tables 'onnxruntime' to predict with; choose"),
        (
            ["--tables", "tensorrt"],
            "the tensorrt tables have no fp32 rows to calibrate on; use --precision mixed or tf32",
        ),
        # a file it cannot write: refused before the graph is costed (it was an IsADirectoryError or
        # FileNotFoundError traceback after the predictions were printed)
        (["--predictions", "/"], "--predictions / is a directory"),
        (["--predictions", "/nonexistent-dir/p.json"], "directory /nonexistent-dir does not exist"),
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
    argv = ["predict", "tiny", "--models-dir", str(models_dir), "--gpu", "a100", "--predictions", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "predicted (not measured)" in printed
    from serve_bench.predict import shipped_version

    # the frozen fit the figures come from, named in one line (version and the hash's first 12 digits)
    fit = shipped_version()
    assert f"fit {fit.name}, sha256 {fit.sha256[:12]}" in printed
    # the A100's own architecture (Ampere) is in the tensorflow tables: its interval, and no warning
    assert "held-out errors of Ampere: a100, device or model left out of the fit):" in printed
    assert "no table of this architecture" not in printed and "no model left out" not in printed
    assert "largest batch that fits in 40 GB: at most " in printed and "(an upper bound:" in printed
    assert max(len(line) for line in printed.splitlines() if not line.startswith("predictions: ")) <= 80
    import json

    (row,) = json.loads(out.read_text())["predictions"]
    assert row["predicted"] is True and row["device"] == "a100" and len(row["images_per_s"]) == len(BATCH_SIZES)
    assert row["runtime"] == "tensorflow"
    # the fit it was made with: the shipped version's name and hash, and the parameters it used
    assert (row["fit"]["version"], row["fit"]["sha256"]) == (FIT_VERSION, shipped_version().sha256)
    assert row["fit"]["fitted"] == dataclasses.asdict(fitted("fp32", "tensorflow"))
    assert row["device_figures"]["tf32_tflops"] == 156 and row["device_figures"]["mem_bw_gbs"] == 1555


def test_a_prediction_is_of_a_served_request_its_images_copied_then_computed(tiny_cost):
    """The TensorRT tables' benchmark hid its copy behind the computation (``copy_overlaps`` in the
    fit); a served request's images arrive with it, so a prediction adds the copy at PCIe's rate:
    each latency is the formula with the copy added, above the overlapped one."""
    device = get_device("a30")
    p = predict(tiny_cost, device, "tf32", tables="tensorrt")
    eff, fused = calibration("fp32", "tensorrt").efficiency, run_by(tiny_cost, "tensorrt")
    for b, t in zip(p.batch_sizes, p.latency_s):
        assert t == pytest.approx(time_per_batch(fused, device, "tf32", b, eff), rel=1e-12)
        assert t > time_per_batch(fused, device, "tf32", b, eff, copy_overlaps=True)


def test_predict_with_tensorrt_costs_the_fused_graph_and_says_so(models_dir, tmp_path, capsys):
    """--tables tensorrt: the same model on the same device, calibrated on the Paddle-TRT tables,
    its point-wise ops fused; tiny's biases and ReLUs no longer cost a kernel launch each (and the
    fitted launch cost is lower), so at batch 1, where launches dominate, it is faster than under
    TensorFlow. Its tables hold one
    model, so no model-left-out line."""
    out = tmp_path / "p.json"
    base = ["predict", "tiny", "--models-dir", str(models_dir), "--gpu", "a30", "--precision", "tf32"]
    assert main([*base, "--tables", "tensorrt", "--predictions", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "NVIDIA A30 24GB, tf32, run by tensorrt" in printed
    assert "calibrated on published tables of: a10 a100-80gb a30" in printed
    assert "held-out errors of Ampere: a10 a100-80gb a30, device left out of the fit):" in printed
    assert "no model left out (the tensorrt tables have one model): expect more" in printed
    import json

    (trt,) = json.loads(out.read_text())["predictions"]
    assert trt["runtime"] == "tensorrt" and "model_error" not in trt
    assert main([*base, "--predictions", str(out)]) == 0
    (tf,) = json.loads(out.read_text())["predictions"]
    assert trt["latency_ms"][0] < tf["latency_ms"][0]


def _prediction_row(device: str, images_per_s: list[float]) -> dict[str, object]:
    batches = [1, 2, 4, 8][: len(images_per_s)]
    return {
        "device": device,
        "name": device.upper(),
        "precision": "fp32",
        "batch_sizes": batches,
        "latency_ms": [b / v * 1e3 for b, v in zip(batches, images_per_s)],
        "images_per_s": images_per_s,
        "gain": max(images_per_s) / images_per_s[0],
        "saturating_batch": 4,
        "largest_batch_that_fits": 900,
        "usd_per_million_images": None,
        "error": {"median": 0.23, "worst": 0.64, "gain_median": 0.32, "gain_worst": 0.5},
        "unknown_ops": [],
        "predicted": True,
    }


def test_the_report_keeps_predictions_in_their_own_section_beside_a_measured_gpu(tmp_path):
    """predictions.json adds a "Predicted (not measured)" section and changes nothing else on the page.

    A GPU target named after a predicted device (triton-a100) is set beside the prediction with
    measured / predicted; a prediction for a device the run did not measure (t4) stands alone.
    """
    import json
    import re

    from serve_bench.report import PREDICTIONS_FILE, build_report
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for batch, cpu_us, gpu_us in ((1, 80_000, 4_000), (2, 150_000, 5_000), (4, 280_000, 8_000)):
            writer.append(make_point("local-cpu", "cpu", batch, cpu_us))
            writer.append(make_point("triton-a100", "gpu", batch, gpu_us))
        writer.write_run({"settings": {}})
    before = build_report(run_dir, models_dir=tmp_path, plots=False).html.read_text()
    assert "Predicted (not measured)" not in before

    rows = [_prediction_row("a100", [500.0, 800.0, 1000.0]), _prediction_row("t4", [100.0, 150.0])]
    rows[1].update(runtime="tensorrt", calibrated_on=["a10", "a100-80gb", "a30"])  # older files say neither
    (run_dir / PREDICTIONS_FILE).write_text(json.dumps({"model": "inception_v3", "predictions": rows, "cpu": None}))
    after = build_report(run_dir, models_dir=tmp_path, plots=False).html.read_text()

    section = re.search(r"<h2>Predicted \(not measured\)</h2>.*?(?=\n?<h2>)", after, re.S)
    assert section is not None
    assert after.replace(section.group(0), "") == before  # the decision table, verdict and cells untouched
    a100, t4 = section.group(0).split("<h3>")[1:]
    # measured images/s of triton-a100 at batch 1, 2, 4: 250, 400, 500; predicted 500, 800, 1000
    assert "measured images/s (triton-a100)" in a100
    assert re.findall(r"<td>(\d+\.\d\d)</td></tr>", a100) == ["0.50", "0.50", "0.50"]
    assert "measured" not in t4.replace("not measured", "")
    assert a100.startswith("A100, fp32</h3>") and t4.startswith("T4, fp32, run by tensorrt</h3>")
    assert "Calibrated on published tables of a10 a100-80gb a30." in t4 and "Calibrated" not in a100


def test_a_measured_gpu_stands_beside_a_prediction_only_when_the_same_runtime_ran_it():
    """A TensorRT prediction is not set against a target that ran TensorFlow (or did not say); a
    TensorFlow prediction takes a target that said tensorflow or nothing; an old predictions file
    (no runtime) takes any."""
    from serve_bench.report._predicted import matching_gpu_target
    from tests._points import make_point

    unstated = [make_point("triton-a100", "gpu", b, 4_000) for b in (1, 2)]
    onnx = [dataclasses.replace(p, target=dataclasses.replace(p.target, runtime="onnxruntime")) for p in unstated]
    assert matching_gpu_target("a100", unstated, tables="tensorrt") is None
    assert matching_gpu_target("a100", unstated, tables="tensorflow") is not None
    assert matching_gpu_target("a100", onnx, tables="tensorflow") is None
    assert matching_gpu_target("a100", onnx) is not None


def test_a_broken_predictions_file_is_one_line_not_a_traceback(tmp_path, capsys):
    from serve_bench.report import PREDICTIONS_FILE
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        writer.append(make_point("local-cpu", "cpu", 1, 80_000))
        writer.write_run({"settings": {}})
    (run_dir / PREDICTIONS_FILE).write_text("{not json")
    assert main(["report", str(run_dir), "--models-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "predictions.json: not readable JSON" in err, err


_CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
model name\t: {name}
cpu MHz\t\t: 2000.000
flags\t\t: fpu sse2 {flags}

processor\t: 1
vendor_id\t: {vendor}
model name\t: {name}
cpu MHz\t\t: 1200.000
flags\t\t: fpu sse2
"""


@pytest.mark.parametrize(
    ("vendor", "flags", "bits", "gflops"),
    [
        # Intel with AVX-512: two 512-bit FMA units, 16 lanes x 2 FLOPs x 2 units x 2 GHz x 4 cores
        ("GenuineIntel", "avx avx2 fma avx512f", 512, 512.0),
        # AMD Zen 4 reports avx512f but runs it as two 256-bit halves: 8 lanes x 2 x 2 x 2 x 4
        ("AuthenticAMD", "avx avx2 fma avx512f", 256, 256.0),
        ("GenuineIntel", "avx avx2 fma", 256, 256.0),
        ("GenuineIntel", "", 128, 64.0),  # SSE2, no FMA: 4 lanes x 2 x 1 unit x 2 GHz x 4 cores
    ],
)
def test_the_host_cpus_peak_is_read_from_its_first_processor(vendor, flags, bits, gflops):
    """Fields of /proc/cpuinfo as the kernel writes them (arch/x86/kernel/cpu/proc.c: "model name",
    "cpu MHz", "flags"); only the first processor's block is read."""
    from serve_bench.predict import read_host_cpu

    text = _CPUINFO.format(vendor=vendor, name="Some CPU", flags=flags)
    spec = read_host_cpu(text, cores=4, mem_gb=16, bw_gbs=20)
    assert (spec.name, spec.ghz, spec.vector_bits) == ("Some CPU", 2.0, bits)
    assert spec.peak_gflops == pytest.approx(gflops)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cores=two", "--cpu cores='two': not a whole number"),
        ("cores=0", "--cpu cores=0: must be greater than 0"),
        ("cores=" + "9" * 400, "must be a finite number"),  # past float's range: an OverflowError traceback before
        ("threads=4", "expected KEY=VALUE pairs with keys cores, ghz"),
        ("cores", "expected KEY=VALUE pairs"),
    ],
)
def test_a_malformed_cpu_description_is_one_line(text, says):
    from serve_bench.errors import UserError
    from serve_bench.predict import CpuSpec, parse_cpu

    host = CpuSpec("host", 2, 2.6, 256, 2, 25.0, 24.0)
    with pytest.raises(UserError, match=re.escape(says)):
        parse_cpu(text, host)
    described = parse_cpu("cores=8,call_ms=0", host)
    assert (described.cores, described.call_ms, described.ghz) == (8, 0.0, 2.6)


def test_a_run_without_cpu_points_is_one_line_before_tensorflow_loads(tmp_path, capsys):
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        writer.append(make_point("triton-a100", "gpu", 1, 4_000))
        writer.append(make_point("local-cpu", "cpu", 1, 80_000, concurrency=8))  # server batching: not client's
        writer.write_run({"settings": {}})
    # no exported model either: the run directory is judged first
    assert main(["predict", "inception_v3", str(run_dir), "--models-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "has no CPU points of inception_v3 at one request in flight" in err, err
    assert main(["predict", "inception_v3", "--from-run", str(tmp_path / "nowhere")]) == 2
    assert "is not a results directory" in capsys.readouterr().err


RECORDED = Path(__file__).parent / "data" / "demo_2core_20261125"
RECORDING_CPU = dict(name="AMD EPYC", cores=2, ghz=2.6, vector_bits=256, fma_units=2, bw_gbs=25.0, mem_gb=24.0)


def _recorded(model: str) -> tuple[GraphCost, dict[int, float]]:
    """A `make demo` run recorded on a 2-core AMD EPYC VM (2026-11-25, random weights) and its graph's costs.

    graph_cost.json is cost_saved_model of the exported model the run served (the walker's output,
    kept so this test needs no InceptionV3 export).
    """
    import json

    from serve_bench.predict import cpu_points

    cost = GraphCost.from_json(json.loads((RECORDED / model / "graph_cost.json").read_text()))
    target, measured = cpu_points(RECORDED / model, model)
    assert target == "local-grpc" and sorted(measured) == [1, 2, 4, 8]  # REST has as many: the first wins
    return cost, measured


@pytest.mark.parametrize(("model", "other"), [("inception_v3", "mobilenet_v2"), ("mobilenet_v2", "inception_v3")])
def test_one_measured_point_predicts_the_other_batch_sizes_of_a_recorded_demo_run(model, other):
    """Issue 21: calibrated on batch 1, the CPU model predicts batch 2, 4 and 8 within 20%.

    The per-call cost is fitted on the *other* model's run (fit_cpu), so nothing of this model's
    batches 2-8 goes into their prediction. Measured images/s, gRPC, one request in flight:
    InceptionV3 13.5, 13.2, 15.9, 15.6; MobileNetV2 49.4, 68.4, 89.1, 103.9 (a 2.1x gain the
    pure roofline misses: with no per-call cost it is off by 45% at batch 4).
    """
    from serve_bench.predict import CpuSpec, calibrate_cpu, fit_cpu

    cost, measured = _recorded(model)
    other_cost, other_measured = _recorded(other)
    _, call_s = fit_cpu(other_cost, CpuSpec(**RECORDING_CPU), other_measured)
    spec = CpuSpec(**RECORDING_CPU, call_ms=call_s * 1e3)
    calibrated = calibrate_cpu(cost, spec, measured, batch=1, batch_sizes=(16,))
    assert calibrated.predicted[1] == pytest.approx(measured[1])
    assert sorted(calibrated.errors) == [2, 4, 8] and 16 in calibrated.predicted
    assert max(abs(e) for e in calibrated.errors.values()) <= 0.20, calibrated.errors

    no_call = calibrate_cpu(cost, CpuSpec(**RECORDING_CPU, call_ms=0.0), measured, batch=1)
    if model == "mobilenet_v2":  # the per-call term is what carries the CPU's batching gain
        assert no_call.errors[4] < -0.4, no_call.errors


def test_the_shipped_per_call_cost_is_what_the_recorded_runs_fit():
    from serve_bench.predict import CALL_MS, CpuSpec, fit_cpu

    calls = []
    for model in ("inception_v3", "mobilenet_v2"):
        cost, measured = _recorded(model)
        calls.append(fit_cpu(cost, CpuSpec(**RECORDING_CPU), measured)[1])
    assert CALL_MS == pytest.approx(1e3 * sum(calls) / 2, rel=0.05), calls


def test_predict_with_a_run_calibrates_the_cpu_and_its_report_shows_the_predictions(models_dir, tmp_path, capsys):
    """`predict MODEL RUN`: the CPU table (measured, predicted, error), GPU rows against the CPU's best,
    predictions.json in the run directory, and `report` of that run showing them apart."""
    import json

    from serve_bench.report import PREDICTIONS_FILE
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for batch, latency_us in ((1, 2_000), (2, 3_000), (4, 5_000)):
            writer.append(make_point("local-grpc", "cpu", batch, latency_us, model="tiny"))
        writer.write_run({"settings": {}})
    cpu = "cores=2,ghz=2.6,vector_bits=256,fma_units=2,bw_gbs=25,mem_gb=24,call_ms=1"
    argv = ["predict", "tiny", str(run_dir), "--models-dir", str(models_dir), "--gpu", "t4"]
    assert main([*argv, "--cpu", cpu]) == 0
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines() if not line.startswith("predictions: ")) <= 80
    assert "this CPU, calibrated on batch 1 of local-grpc" in printed and "(per call:" not in printed
    assert re.search(r"\n\s+1\s+500\.0\s+500\.0\s+calib\.\n", printed), printed  # 1 image / 2 ms
    assert "x this CPU's measured best (800.0)" in printed  # 4 images / 5 ms
    # RUN after an option reads the same (argparse had left it unrecognized); after --gpu, which takes every
    # word after it, it is named for what it is
    moved = ["predict", "tiny", "--models-dir", str(models_dir), str(run_dir), "--gpu", "t4", "--cpu", cpu]
    assert main(moved) == 0 and capsys.readouterr().out == printed
    assert main(["predict", "tiny", "--models-dir", str(models_dir), "--cpu", cpu, "--gpu", "t4", str(run_dir)]) == 2
    assert f"--gpu took {str(run_dir)!r}, a run: give RUN before --gpu" in capsys.readouterr().err

    record = json.loads((run_dir / PREDICTIONS_FILE).read_text())
    assert record["cpu"]["calibrated_on"] == 1 and set(record["cpu"]["errors"]) == {"2", "4"}
    assert [row["device"] for row in record["predictions"]] == ["t4"]
    assert record["predictions"][0]["fit"]["sha256"] == shipped_version().sha256
    assert main(["report", str(run_dir), "--models-dir", str(models_dir)]) == 0
    page = (run_dir / "report.html").read_text()
    assert "Predicted (not measured)" in page and "This CPU (local-grpc), calibrated on batch 1" in page

    assert main([*argv, "--cpu", cpu, "--calibrate-batch", "3"]) == 2
    assert "the run measured batch sizes 1, 2, 4 only" in capsys.readouterr().err


def test_predicts_old_flags_still_work_and_say_their_new_names(models_dir, tmp_path, capsys, monkeypatch):
    """--runtime, --device and --run-dir (which meant something else in the other commands) are aliases of
    --tables, --gpu and RUN / --from-run: the same printout and predictions, and one line each on stderr."""
    from serve_bench import errors
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    monkeypatch.setattr(errors, "_SAID", set())
    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for batch, latency_us in ((1, 2_000), (2, 3_000)):
            writer.append(make_point("local-grpc", "cpu", batch, latency_us, model="tiny"))
        writer.write_run({"settings": {}})
    cpu = "cores=2,ghz=2.6,vector_bits=256,fma_units=2,bw_gbs=25,mem_gb=24,call_ms=1"
    common = ["--models-dir", str(models_dir), "--precision", "tf32", "--cpu", cpu, "--predictions"]
    new = ["predict", "tiny", str(run_dir), "--gpu", "a30", "l4", "--tables", "tensorrt", *common]
    assert main([*new, str(tmp_path / "new.json")]) == 0
    printed = capsys.readouterr()
    assert printed.err == ""
    old = ["predict", "tiny", "--run-dir", str(run_dir), "--device", "a30", "l4", "--runtime", "tensorrt", *common]
    assert main([*old, str(tmp_path / "old.json")]) == 0
    printed_old = capsys.readouterr()
    assert printed_old.out.replace("old.json", "new.json") == printed.out
    assert (tmp_path / "old.json").read_text() == (tmp_path / "new.json").read_text()
    assert printed_old.err.splitlines() == [
        "serve-bench predict: --run-dir is now --from-run (--run-dir still works for now)",
        "serve-bench predict: --device is now --gpu (--device still works for now)",
        "serve-bench predict: --runtime is now --tables (--runtime still works for now)",
    ]


def test_predicts_output_keeps_to_80_columns_with_a_long_cpu_name_and_the_shipped_call_cost(
    models_dir, tmp_path, capsys, monkeypatch
):
    """The host's name as Intel writes it, and the default per-call cost (13 ms) held to half of a fast
    point's time (2 ms per image here): every printed line stays within 80 columns."""
    import serve_bench.predict._host as host
    from serve_bench.predict import CpuSpec
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    name = "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz with a name longer than any line may be"
    monkeypatch.setattr(host, "read_host_cpu", lambda **_: CpuSpec(name, 2, 2.7, 512, 2, 30.0, 24.0))
    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for batch, latency_us in ((1, 2_000), (2, 3_000)):
            writer.append(make_point("local-grpc", "cpu", batch, latency_us, model="tiny"))
        writer.write_run({"settings": {}})
    assert main(["predict", "tiny", "--models-dir", str(models_dir), "--from-run", str(run_dir)]) == 0
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines() if not line.startswith("predictions: ")) <= 80, printed
    assert "per call 1 ms (fitted on make demo" in printed and "held to half of batch 1's time" in printed


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["{run}", "--cpu", "ghz=nan"], "--cpu ghz=nan: must be a finite number"),
        (["--from-run", "{run}", "--cpu", "call_ms=inf"], "--cpu call_ms=inf: must be a finite number"),
        (["--calibrate-batch", "1"], "give the run too (RUN)"),
        (["--cpu", "cores=2"], "give the run too (RUN)"),
        (["{run}", "--from-run", "{run}-other"], "give the run once: RUN"),
    ],
)
def test_cpu_flags_are_checked_before_anything_runs(tmp_path, capsys, argv, says):
    """No model is exported under tmp_path: each refusal comes before TensorFlow would cost it."""
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        writer.append(make_point("local-grpc", "cpu", 1, 2_000, model="tiny"))
        writer.write_run({"settings": {}})
    argv = [a.format(run=run_dir) for a in argv]
    assert main(["predict", "tiny", *argv, "--models-dir", str(tmp_path)]) == 2  # RUN comes right after MODEL
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and says in err, err


def test_a_fully_described_cpu_reads_nothing_of_this_host(monkeypatch):
    import serve_bench.predict._host as host
    from serve_bench.predict import parse_cpu

    def unreadable(**_: object) -> None:
        raise FileNotFoundError("/proc/cpuinfo")

    monkeypatch.setattr(host, "read_host_cpu", unreadable)
    spec = parse_cpu("cores=4,ghz=3,vector_bits=256,fma_units=2,bw_gbs=40,mem_gb=16")
    assert (spec.name, spec.peak_gflops) == ("the CPU described", 4 * 3 * 8 * 2 * 2)
    from serve_bench.errors import UserError

    with pytest.raises(UserError, match="cannot read this host's CPU"):
        parse_cpu("cores=4")


def test_calibration_points_are_float_client_batching_points_that_ran_their_course(tmp_path):
    """A JPEG point (decoding in the graph), a point cut off, server batching (8 in flight) and another
    model are left out; two repeats of a batch size count by their median."""
    import dataclasses

    from serve_bench.predict import cpu_points
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        writer.append(make_point("local-grpc", "cpu", 1, 10_000, model="tiny"))  # 100 images/s
        writer.append(make_point("local-grpc", "cpu", 1, 12_500, model="tiny", repeat=1))  # 80
        writer.append(make_point("local-grpc", "cpu", 1, 8_000, model="tiny", repeat=2))  # 125
        writer.append(dataclasses.replace(make_point("local-grpc", "cpu", 2, 1_000, model="tiny"), payload="jpeg"))
        writer.append(make_point("local-grpc", "cpu", 4, 1_000, model="tiny", cut_off="target down"))
        writer.append(make_point("local-grpc", "cpu", 8, 1_000, model="tiny", concurrency=8))
        writer.append(make_point("local-grpc", "cpu", 16, 1_000, model="other"))
        writer.write_run({"settings": {}})
    assert cpu_points(run_dir, "tiny") == ("local-grpc", {1: pytest.approx(100.0)})


def test_a_predictions_file_with_a_broken_row_is_one_line(tmp_path, capsys):
    import json

    from serve_bench.report import PREDICTIONS_FILE
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        writer.append(make_point("local-cpu", "cpu", 1, 80_000))
        writer.write_run({"settings": {}})
    row = _prediction_row("t4", [100.0, 150.0])
    for broken in ({**row, "images_per_s": [100.0]}, {k: v for k, v in row.items() if k != "batch_sizes"}, "t4"):
        (run_dir / PREDICTIONS_FILE).write_text(json.dumps({"model": "m", "predictions": [broken], "cpu": None}))
        assert main(["report", str(run_dir), "--models-dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "not a serve-bench predictions file" in err, err
