"""The frozen fit (issue 32, item 1) and the GPUs it was frozen for (issue 31, item 5).

Predictions for the H100 and H200 were committed in benchmarks/results/predicted-2026-11-26/ before
either was measured. These tests hold the shipped fit to them: its hash must be the recorded one
(a refit, a changed row or a changed formula cannot pass as that fit), the hash must move with each
of those, and the frozen files must be what the shipped code predicts from their recorded graph
costs. A deliberate refit takes a new ``FIT_VERSION`` and a new folder of frozen predictions
(benchmarks/predict_frozen.py), and this file's FROZEN then names the folder its fit is held to.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from serve_bench.predict import (
    FIT_VERSION,
    GraphCost,
    content_hash,
    device_table,
    get_device,
    predict,
    shipped_inputs,
    shipped_tables,
    shipped_version,
)
from serve_bench.predict._model import PCIE_GBS_PER_LANE, time_per_batch

FROZEN = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "predicted-2026-11-26"


def _frozen_predictions() -> list[Path]:
    return sorted(p for p in FROZEN.glob("*.json") if p.name != "fit.json")


def test_the_hash_moves_with_a_fitted_parameter_a_table_row_and_a_calibration_device() -> None:
    inputs = shipped_inputs()
    shipped = shipped_version().sha256
    assert content_hash(inputs) == shipped and re.fullmatch(r"[0-9a-f]{64}", shipped)

    refit = copy.deepcopy(inputs)
    refit["fitted"]["tensorflow"]["fp32"]["memory"] *= 1.01
    assert content_hash(refit) != shipped

    noise = copy.deepcopy(inputs)  # another machine's last bits are not a refit
    noise["fitted"]["tensorrt"]["mixed"]["memory"] *= 1 + 1e-9
    assert content_hash(noise) == shipped

    tables = shipped_tables()
    assert content_hash(shipped_inputs(dict(tables))) == shipped
    for name, old, new in (
        ("published_tf1_convnets.csv", ",191.23,", ",191.24,"),  # A100 TF32 ResNet-50 batch 1
        ("published_paddle_trt_resnet50.csv", ",969.11,", ",969.12,"),
        ("tf1_convnets_costs.json", '"input_elements": 150528', '"input_elements": 150529'),
    ):
        assert old in tables[name], name
        assert content_hash(shipped_inputs({**tables, name: tables[name].replace(old, new, 1)})) != shipped, name
    crlf = {name: text.replace("\n", "\r\n") for name, text in tables.items()}  # a Windows checkout: no change
    assert content_hash(shipped_inputs(crlf)) == shipped

    device = copy.deepcopy(inputs)
    device["calibration_devices"]["a100"]["mem_bw_gbs"] = 1600
    assert content_hash(device) != shipped


def test_the_hash_moves_with_the_form_even_where_the_fits_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fits are cached; a formula that gives 1% more time (or a PCIe lane's rate changed) still moves
    the hash, through the form's constants and what it predicts for the reference models."""
    shipped = shipped_version().sha256

    def slower(*args: Any, **kwargs: Any) -> float:
        return time_per_batch(*args, **kwargs) * 1.01

    monkeypatch.setattr("serve_bench.predict._predict.time_per_batch", slower)
    assert content_hash(shipped_inputs()) != shipped
    monkeypatch.undo()
    monkeypatch.setitem(PCIE_GBS_PER_LANE, 5, 4.0)
    assert content_hash(shipped_inputs()) != shipped


def test_the_shipped_fit_is_the_one_the_frozen_predictions_were_made_with() -> None:
    """benchmarks/results/predicted-2026-11-26/fit.json and every prediction there name the shipped version
    and hash; where the hash differs, the recorded inputs say which part moved."""
    recorded = json.loads((FROZEN / "fit.json").read_text())
    now = shipped_inputs()
    moved = sorted(key for key in now if now[key] != recorded["inputs"].get(key))
    assert not moved, f"the shipped fit is no longer {recorded['version']}: {moved} changed"
    assert (FIT_VERSION, shipped_version().sha256) == (recorded["version"], recorded["sha256"])
    files = _frozen_predictions()
    assert len(files) == 15  # 3 models x (tensorflow fp32, tf32, mixed; tensorrt tf32, mixed)
    for path in files:
        for row in json.loads(path.read_text())["predictions"]:
            assert (row["fit"]["version"], row["fit"]["sha256"]) == (FIT_VERSION, shipped_version().sha256), path.name


def test_the_frozen_predictions_are_what_the_shipped_fit_predicts_from_their_graph_costs() -> None:
    """Each frozen file's images/s, latency and device figures, predicted again from the graph costs recorded
    beside them (no TensorFlow needed), on the H100 and the H200."""
    costs: dict[str, GraphCost] = {}
    seen: set[tuple[str, str, str, str]] = set()
    for path in _frozen_predictions():
        record = json.loads(path.read_text())
        model = record["model"]
        if model not in costs:
            costs[model] = GraphCost.from_json(json.loads((FROZEN / "graph_costs" / f"{model}.json").read_text()))
        for row in record["predictions"]:
            again: dict[str, Any] = predict(
                costs[model], get_device(row["device"]), row["precision"], tables=row["runtime"]
            ).to_json()
            for key in ("batch_sizes", "latency_ms", "images_per_s", "device_figures", "fit"):
                assert again[key] == row[key], (path.name, row["device"], key)
            seen.add((model, row["device"], row["runtime"], row["precision"]))
    assert {d for _, d, _, _ in seen} == {"h100", "h200"}
    assert {(r, p) for _, _, r, p in seen} == {
        ("tensorflow", "fp32"),
        ("tensorflow", "tf32"),
        ("tensorflow", "mixed"),
        ("tensorrt", "tf32"),
        ("tensorrt", "mixed"),
    }


def test_the_h100_is_the_sxm5_part_the_gpu_host_has() -> None:
    """The host's GPU is "NVIDIA H100 80GB HBM3" (NVML): the SXM5 part, HBM3, 132 SMs at up to 1980 MHz."""
    h100 = get_device("h100")
    assert "SXM5" in h100.name and "NVIDIA H100 80GB HBM3" in h100.sources["name"]
    assert (h100.fp32_tflops, h100.tf32_tflops, h100.fp16_tflops) == (66.9, 494.7, 989.4)
    assert (h100.mem_bw_gbs, h100.mem_gb, h100.pcie_gen, h100.pcie_lanes) == (3350, 80, 5, 16)


def test_the_h200_is_the_h100s_compute_with_hbm3e() -> None:
    """NVIDIA's H200 SXM: the H100 SXM5's GH100 at the same 1980 MHz boost (FP32 66.9, TF32 dense 494.7,
    FP16 dense 989.4 TFLOPS: half the datasheet's figures with sparsity), 141 GB of HBM3e at 4.8 TB/s,
    PCIe Gen5 x16, 700 W; no public price found."""
    h100, h200 = get_device("h100"), get_device("h200")
    assert (h200.fp32_tflops, h200.tf32_tflops, h200.fp16_tflops) == (h100.fp32_tflops, 494.7, 989.4)
    assert (h200.mem_bw_gbs, h200.mem_gb, h200.pcie_gen, h200.pcie_lanes, h200.tdp_w) == (4800, 141, 5, 16, 700)
    assert h200.price_per_hour_usd is None and "1.98 GHz boost" in h200.sources["fp32_tflops"]
    for figure in ("name", "fp32_tflops", "tf32_tflops", "fp16_tflops", "mem_bw_gbs", "mem_gb", "pcie_gen", "tdp_w"):
        assert "https://" in h200.sources[figure], figure


@pytest.mark.parametrize("device", sorted(device_table()))
def test_every_figure_of_every_device_names_its_source(device: str) -> None:
    """As the table's ``about`` says: each figure it states says where it came from."""
    entry = get_device(device)
    stated = ["fp32_tflops", "fp16_tflops", "mem_bw_gbs", "mem_gb", "pcie_gen", "pcie_lanes"]
    stated += [f for f in ("tf32_tflops", "tdp_w", "price_per_hour_usd") if getattr(entry, f) is not None]
    for figure in stated:
        source = entry.sources.get(figure, "")
        assert source and not source.startswith("NOT FOUND"), (device, figure)
