"""benchmarks/predict_vs_measured.py on a synthetic GPU run whose figures are worked out by hand.

The run (target ``gpu-h100``, device label ``gpu``, InceptionV3, closed loop at one request in
flight, notes "jax ran with device gpu, precision tf32"), images/s = batch / latency:
- batch 1: 2500 µs → 400 images/s (its 95% interval [380, 420] recorded);
- batch 8: 2000 µs → 4000;
- batch 32, three repeats: 8000, 6400 and 10000 µs → 4000, 5000, 3200; median 4000;
- batch 64: 12800 µs → 5000 (no predicted figure at 64).
Beside it, points that must not count: the same target at fp32 (batch 1, 1000 µs → 1000), a CPU
target, the GPU at eight requests in flight, another model.

The prediction (tf32): batch 1 500, 8 3000, 32 6000, 256 9000 images/s. Errors, predicted /
measured − 1: batch 1 +25.0%, batch 8 −25.0%, batch 32 +50.0%. The gain over the batch sizes both
sides have (1, 8, 32): predicted 6000 / 500 = 12.00x at 32; measured 4000 / 400 = 10.00x, first
reached at 8; error 12 / 10 − 1 = +20.0%. Batch 64's 5000 is measured only, so it is not in the gain.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks.predict_vs_measured import main, point_precision
from serve_bench.stats import Interval, Point, ResultsWriter, Throughput
from tests._points import make_point

TF32 = "jax ran with device gpu, precision tf32"
Capture = pytest.CaptureFixture[str]


def _gpu(batch: int, latency_us: float, note: str = TF32, repeat: int = 0, model: str = "inception_v3") -> Point:
    p = make_point("gpu-h100", "gpu", batch, latency_us, repeat=repeat, model=model)
    return dataclasses.replace(p, notes=(note,) if note else ())


def _write(run: Path, points: list[Point]) -> Path:
    with ResultsWriter(run) as writer:
        for p in points:
            writer.append(p)
    return run


def _run(tmp_path: Path, note: str = TF32) -> Path:
    first = _gpu(1, 2500, note)
    first = dataclasses.replace(
        first, throughput=Throughput(first.throughput.requests_per_s, 400.0, items_per_s_ci=Interval(380.0, 420.0))
    )
    return _write(
        tmp_path / "run",
        [
            first,
            _gpu(8, 2000, note),
            _gpu(32, 8000, note),
            _gpu(32, 6400, note, repeat=1),
            _gpu(32, 10000, note, repeat=2),
            _gpu(64, 12800, note),
            _gpu(1, 1000, "jax ran with device gpu, precision fp32", repeat=3),
            make_point("cpu-16", "cpu", 1, 100),
            make_point("gpu-h100", "gpu", 8, 100, concurrency=8),
            _gpu(8, 100, note, model="resnet50"),
        ],
    )


def _predictions(tmp_path: Path, devices: tuple[str, ...] = ("h100",)) -> Path:
    rows = [
        {
            "device": d,
            "name": f"NVIDIA {d.upper()}",
            "precision": "tf32",
            "runtime": "tensorrt",
            "batch_sizes": [1, 8, 32, 256],
            "images_per_s": [v * scale for v in (500.0, 3000.0, 6000.0, 9000.0)],
            "fit": {"version": "2026-11-26", "sha256": "0123456789abcdef" * 4},
        }
        for scale, d in enumerate(devices, 1)  # a second device's figures twice the first's
    ]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"model": "inception_v3", "predictions": rows}))
    return path


def _table(printed: str) -> dict[int, list[str]]:
    return {int(line.split()[0]): line.split()[1:] for line in printed.splitlines() if line.split()[0].isdigit()}


def test_each_batch_size_and_the_gain_predicted_against_measured(tmp_path: Path, capsys: Capture) -> None:
    assert main([str(_run(tmp_path)), str(_predictions(tmp_path))]) == 0
    printed = capsys.readouterr().out
    table = _table(printed)
    assert table[1] == ["500.0", "400.0", "[380.0,", "420.0]", "+25.0%"]
    assert table[8] == ["3000.0", "4000.0", "-25.0%"]
    assert table[32] == ["6000.0", "4000.0", "+50.0%"]
    assert table[64] == ["-", "5000.0"]
    assert table[256] == ["9000.0", "-"]
    assert "predicted 12.00x (at 32), measured 10.00x (at 8), error +20.0%" in printed
    assert "measured: gpu-h100, precision from its points" in printed
    assert "fit 2026-11-26, sha256 0123456789ab" in printed


def test_precision_is_read_from_the_knobs_too() -> None:
    knob = dataclasses.replace(_gpu(1, 1000, note=""), server_config=(("jax_precision", "bf16"),))
    assert point_precision(knob) == "mixed"
    assert point_precision(_gpu(1, 1000, note="")) is None
    assert point_precision(_gpu(1, 1000, note="in-process ran with threads 2, precision f32")) == "fp32"


def test_points_that_do_not_say_their_precision_need_it_given(tmp_path: Path, capsys: Capture) -> None:
    run, predictions = _run(tmp_path, note=""), _predictions(tmp_path)
    assert main([str(run), str(predictions)]) == 2
    assert "give --precision tf32" in capsys.readouterr().err
    assert main([str(run), str(predictions), "--precision", "fp32"]) == 2
    assert "the prediction is of tf32" in capsys.readouterr().err
    assert main([str(run), str(predictions), "--precision", "tf32"]) == 0
    printed = capsys.readouterr().out
    assert "precision from --precision" in printed
    # the points that say nothing count as tf32; the one that says fp32 (1000 images/s at batch 1) still does not
    assert _table(printed)[1][:2] == ["500.0", "400.0"]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ([], "choose one with --device"),
        (["--device", "h200", "--target", "gpu-h200"], "no client-batching points of inception_v3 on target"),
    ],
)
def test_an_ambiguous_or_missing_choice_is_one_line(
    tmp_path: Path, capsys: Capture, extra: list[str], says: str
) -> None:
    run = _run(tmp_path)
    assert main([str(run), str(_predictions(tmp_path, ("h100", "h200"))), *extra]) == 2
    assert says in capsys.readouterr().err


def test_the_device_chosen_is_the_row_compared(tmp_path: Path, capsys: Capture) -> None:
    predictions = _predictions(tmp_path, ("h100", "h200"))
    assert main([str(_run(tmp_path)), str(predictions), "--device", "h200"]) == 0
    assert _table(capsys.readouterr().out)[1] == ["1000.0", "400.0", "[380.0,", "420.0]", "+150.0%"]
    assert main([str(tmp_path / "run"), str(predictions), "--device", "l4"]) == 2
    assert "the file has no prediction for 'l4': h100, h200" in capsys.readouterr().err


def test_two_gpu_targets_need_one_chosen(tmp_path: Path, capsys: Capture) -> None:
    run = _run(tmp_path)
    with ResultsWriter(run) as writer:
        writer.append(dataclasses.replace(make_point("gpu-h200", "gpu", 1, 2000), notes=(TF32,)))
    assert main([str(run), str(_predictions(tmp_path))]) == 2
    assert "several GPU targets (gpu-h100, gpu-h200)" in capsys.readouterr().err
    assert main([str(run), str(_predictions(tmp_path)), "--target", "gpu-h200"]) == 0
    assert _table(capsys.readouterr().out)[1][:3] == ["500.0", "500.0", "+0.0%"]


def _floor(tmp_path: Path, header: dict[str, object]) -> Path:
    """A GPU floor's file as ``serve_bench.runtimes._floor`` writes it: a header, then a line per size in the order
    measured (1, 256, 8: coverage order), a size left out, and a size that did not fit (neither counts)."""
    lines = [
        {"in_effect": {"runtime": "keras on jax"}, "device": "gpu", "precision": "tf32", **header},
        {"batch_size": 1, "images_per_s": 250.0, "images_per_s_ci": [240.0, 260.0], "p50_ms": 4.0},
        {"batch_size": 256, "images_per_s": 4000.0, "p50_ms": 64.0},
        {"batch_size": 8, "images_per_s": 2000.0, "p50_ms": 4.0},
        {"left_out": [32], "reason": "past 60 s"},
        {"batch_size": 512, "does_not_fit": "RESOURCE_EXHAUSTED: out of memory"},
    ]
    path = tmp_path / "inception_v3-gpu-tf32.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_floor_is_compared_size_by_size_in_process(tmp_path: Path, capsys: Capture) -> None:
    """Prediction 500, 3000, 6000 (32), 9000 (256); floor 250, 2000 (8), 4000 (256): errors +100.0%, +50.0%,
    +125.0%; gains over 1, 8, 256: predicted 9000 / 500 = 18.00x, measured 4000 / 250 = 16.00x, error +12.5%."""
    floor = _floor(tmp_path, {"model": "inception_v3"})
    assert main([str(floor), str(_predictions(tmp_path))]) == 0
    printed = capsys.readouterr().out
    table = _table(printed)
    assert table[1] == ["500.0", "250.0", "[240.0,", "260.0]", "+100.0%"]  # its interval, where the floor has one
    assert table[8] == ["3000.0", "2000.0", "+50.0%"]
    assert table[32] == ["6000.0", "-"]
    assert table[256] == ["9000.0", "4000.0", "+125.0%"]
    assert 512 not in table
    assert "predicted 18.00x (at 256), measured 16.00x (at 256), error +12.5%" in printed
    assert "measured: in process (inception_v3-gpu-tf32.jsonl), precision from the floor's header" in printed


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ({"model": "resnet50"}, "a floor of resnet50, not of inception_v3"),
        ({"model": "inception_v3", "precision": "fp32"}, "a floor at fp32, not at tf32"),
        ({"model": "inception_v3", "device": "cpu"}, "a floor on 'cpu', not on a GPU"),
        # a floor written before the header named its model: the copy's path does (MODELS/jax/MODEL/VERSION/...)
        ({"copy": "/tmp/run/models/jax/mobilenet_v2/1/conversion.json"}, "a floor of mobilenet_v2, not of"),
    ],
)
def test_a_floor_of_something_else_is_one_line(
    tmp_path: Path, capsys: Capture, header: dict[str, object], says: str
) -> None:
    assert main([str(_floor(tmp_path, header)), str(_predictions(tmp_path))]) == 2
    assert says in capsys.readouterr().err


def test_a_floor_named_only_by_its_copy_is_read(tmp_path: Path, capsys: Capture) -> None:
    floor = _floor(tmp_path, {"copy": "/tmp/run/models/jax/inception_v3/1/conversion.json"})
    assert main([str(floor), str(_predictions(tmp_path))]) == 0
    assert _table(capsys.readouterr().out)[1] == ["500.0", "250.0", "[240.0,", "260.0]", "+100.0%"]


def test_a_file_that_is_not_a_floor_is_one_line(tmp_path: Path, capsys: Capture) -> None:
    other = tmp_path / "points.jsonl"
    other.write_text('{"batch_size": 1}\n')
    assert main([str(other), str(_predictions(tmp_path))]) == 2
    assert "not a floor's output" in capsys.readouterr().err
