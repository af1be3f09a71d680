"""The XLA predictions frozen before the next GPU visit (benchmarks/predict_xla.py, issue 31 item 5).

predict's form fitted on the H100's own floors (two visits) predicts the H200 and the H100's sizes its
floors left out; the files in benchmarks/results/predicted-2026-11-28-xla/ were written before either was
measured. A prediction is scored on data it was not fitted on, so these tests hold that folder to what
the fit computes from the floors committed with it, and hold the fit to those floors alone: a later
visit's floors cannot enter it, and a figure changed in them moves every file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import predict_xla
from benchmarks.predict_vs_measured import main as predict_vs_measured

FROZEN = predict_xla.RESULTS / "predicted-2026-11-28-xla"
Capture = pytest.CaptureFixture[str]


def _copy_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fit's inputs (the H100 visits' floors, the frozen graph costs) copied, and the script pointed there."""
    results = tmp_path / "results"
    for name in (*predict_xla.FITTED_ON, "predicted-2026-11-26"):
        shutil.copytree(predict_xla.RESULTS / name, results / name)
    monkeypatch.setattr(predict_xla, "RESULTS", results)
    monkeypatch.setattr(predict_xla, "COSTS", results / "predicted-2026-11-26" / "graph_costs")
    return results


def test_the_frozen_files_are_what_the_h100_floors_give() -> None:
    """Nothing in the folder was edited by hand or refitted since: every file is recomputed and compared."""
    assert predict_xla.check(FROZEN) == []
    assert sorted(p.name for p in FROZEN.glob("*.json")) == sorted(predict_xla.freeze())


def test_a_later_visit_cannot_enter_the_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An H200 visit's floors beside the H100's (as the next visit's results will lie) leave the fit alone."""
    results = _copy_results(tmp_path, monkeypatch)
    later = results / "h200-2026-12-01" / "visit-1" / "floor"
    later.mkdir(parents=True)
    shutil.copy(results / "h100-2026-11-27" / "visit-1" / "floor" / "inception_v3-gpu-tf32.jsonl", later)
    assert predict_xla.check(FROZEN) == []
    assert all(
        source.split("/")[0] in predict_xla.FITTED_ON
        for sources in json.loads((FROZEN / "fit.json").read_text())["sources"].values()
        for source in sources
    )


def test_one_figure_changed_in_the_floors_moves_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = _copy_results(tmp_path, monkeypatch)
    floor = results / "h100-2026-11-27" / "visit-2" / "floor" / "resnet50-gpu-tf32.jsonl"
    lines = floor.read_text().splitlines()
    first_size = json.loads(lines[1])
    first_size["images_per_s"] *= 1.1
    floor.write_text("\n".join([lines[0], json.dumps(first_size), *lines[2:]]) + "\n")
    assert sorted(predict_xla.check(FROZEN)) == sorted(predict_xla.freeze())


def test_each_row_says_which_sizes_were_fitted_and_the_h200_none() -> None:
    record = json.loads((FROZEN / "inception_v3-xla-tf32.json").read_text())
    rows = {row["device"]: row for row in record["predictions"]}
    # InceptionV3 at tf32: the first H100 visit measured 1, 2, 4, 8, 16 and 256, the second 1, 4, 16, 64, 256
    assert rows["h100"]["fitted_batch_sizes"] == [1, 2, 4, 8, 16, 64, 256]
    assert rows["h200"]["fitted_batch_sizes"] == []
    fit = json.loads((FROZEN / "fit.json").read_text())
    assert rows["h200"]["fit"]["sha256"] == fit["sha256"] and fit["version"] == predict_xla.VERSION
    # the same die and clocks with more bandwidth: the H200 is never predicted slower
    assert all(a >= b for a, b in zip(rows["h200"]["images_per_s"], rows["h100"]["images_per_s"]))


def test_the_scorer_reads_them_against_a_floor(capsys: Capture) -> None:
    floor = predict_xla.RESULTS / "h100-2026-11-27" / "visit-1" / "floor" / "inception_v3-gpu-tf32.jsonl"
    assert predict_vs_measured([str(floor), str(FROZEN / "inception_v3-xla-tf32.json"), "--device", "h100"]) == 0
    out = capsys.readouterr().out
    assert f"predicted by xla (fit {predict_xla.VERSION}" in out
    assert "batching gain" in out and "error" in out


def test_write_refuses_a_folder_that_holds_frozen_predictions(capsys: Capture) -> None:
    assert predict_xla.main(["--write", str(FROZEN)]) == 2
    assert "already holds frozen predictions" in capsys.readouterr().err
