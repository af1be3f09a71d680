"""Tune end to end: the tiny model on the local server, restarted per configuration; interrupted by SIGINT,
resumed, answered; the written batching file parses as TF Serving's BatchingParameters."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from google.protobuf import text_format

from serve_bench import _protos
from serve_bench.stats import Target, read_points
from serve_bench.tune import TuneConfig, TuneEvent, parse_tune_spec, run_tune, run_tune_command, search_budget


def spec_text(models_dir: Path, max_ms: float = 2000.0) -> str:
    return f"""
name = "tune-tiny"
model = "tiny"
currency = "USD"
[server]
kind = "local"
price_per_hour = 1.5
models_dir = "{models_dir}"
startup_timeout_s = 120
[space]
batching = [false, true]
max_batch_size = [4]
[load]
concurrency = [4]
[durations]
warmup_s = 0.2
min_duration_s = 0.8
min_requests = 20
windows = 2
[slo]
percentile = "p99"
max_ms = {max_ms}
[search]
method = "grid"
baselines = ["no_batching"]
"""


def _entries(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "configs.jsonl").read_text().splitlines()]


def _args(spec: Path, run_dir: Path, resume: bool) -> argparse.Namespace:
    return argparse.Namespace(
        spec=str(spec), run_dir=str(run_dir), resume=resume, method=None, dry_run=False, input_data=None
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_tune_tiny_on_the_local_server(models_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec_path = tmp_path / "tune.toml"
    spec_path.write_text(spec_text(models_dir))
    run_dir = tmp_path / "run"

    # 1. Ctrl-C (a real SIGINT to `serve-bench tune`) while the second configuration's server starts:
    #    exit 130, what was measured stays, and no server is left running
    cli = subprocess.Popen(
        [sys.executable, "-m", "serve_bench", "tune", str(spec_path), "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert cli.stdout is not None
    seen = []
    for line in cli.stdout:
        seen.append(line)
        if line.startswith("[2/2]"):
            cli.send_signal(signal.SIGINT)
            break
    seen += cli.stdout.readlines()
    assert cli.wait(timeout=60) == 130, "".join(seen)
    assert f"continue with: serve-bench tune {spec_path} --resume --run-dir {run_dir}" in "".join(seen)
    assert [(e["config"], e["status"]) for e in _entries(run_dir)] == [("nobatch", "measured")]
    (first,) = read_points(run_dir)
    assert first.target.pid is not None and not _alive(first.target.pid)
    leftovers = [p.pid for p in psutil.process_iter(["cmdline"]) if str(run_dir) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []

    # 2. --resume measures the rest and not the finished configuration again
    assert run_tune_command(_args(spec_path, run_dir, resume=True)) == 0
    out = capsys.readouterr().out
    assert "nobatch: already measured (resume), not measured again" in out
    assert [e["config"] for e in _entries(run_dir)] == ["nobatch", "mbs4"]
    points = read_points(run_dir)
    assert sorted(p.key.split("|")[0] for p in points) == ["mbs4", "nobatch"]
    assert [p.id for p in points if p.key.startswith("nobatch|")] == [first.id]
    assert {(p.target.price_per_hour, p.target.currency) for p in points} == {(1.5, "USD")}
    for point in points:  # each point records the configuration it measured
        recorded = getattr(point, "server_config", ()) or [n for n in point.notes if n.startswith("server_config")]
        assert f"config={point.key.split('|')[0]}" in str(recorded) or ("config", point.key.split("|")[0]) in recorded

    # 3. the recommendation is the measured point with the most items/s meeting the SLO
    answer = json.loads((run_dir / "answer.json").read_text())
    feasible = [p for p in points if p.error_count == 0 and p.counts.ok and p.latency.due.ms("p99") <= 2000.0]
    top = max(feasible, key=lambda p: p.items_per_s)
    assert answer["best"]["config"] == top.key.split("|")[0]
    assert answer["best"]["items_per_s"] == top.items_per_s
    assert f"best configuration under p99 <= 2000 ms: {top.key.split('|')[0]}" in out
    assert {row["value"] for row in answer["knobs"] if row["knob"] == "max_batch_size"} == {"off", "4"}
    assert answer["gains"][0]["baseline"] == "no_batching"

    # 4. the written files parse as TF Serving's BatchingParameters
    proto_type = _protos.message("tensorflow.serving.BatchingParameters")
    best_text = (run_dir / "best_batching_parameters.txt").read_text()
    best = text_format.Parse(best_text, proto_type())
    # Which configuration wins is measured; what its file must say is written here for each of them, so
    # the file is checked whichever won: TF Serving's flag, and max_batch_size (None: no field at all).
    expected = {"nobatch": ("--enable_batching=false", None), "mbs4": ("--enable_batching=true", 4)}
    winner = answer["best"]["config"]
    flag, size = expected[winner]
    assert f"# serve-bench tune tune-tiny: best configuration {winner}\n" in best_text
    assert f"# tensorflow_model_server flags: {flag}" in best_text
    assert (best.max_batch_size.value if best.HasField("max_batch_size") else None) == size
    mbs4 = text_format.Parse((run_dir / "configs" / "mbs4" / "batching_parameters.txt").read_text(), proto_type())
    assert mbs4.max_batch_size.value == 4 and not mbs4.HasField("batch_timeout_micros")
    from serve_bench.server._config import parse_batching_parameters  # the local server reads it too

    assert parse_batching_parameters(str(run_dir / "configs" / "mbs4" / "batching_parameters.txt")).max_batch_size == 4

    # 5. `serve-bench report` on the tune run: the answer as a section, the knob table, the two tune plots
    from serve_bench.report import build_report

    report = build_report(run_dir, models_dir=models_dir)
    page = report.html.read_text()
    assert "<h2>Tune</h2>" in page and f"<b>{answer['best']['config']}</b>" in page
    for row in answer["knobs"]:
        assert f"<td class=l>{row['knob']}</td><td class=l>{row['value']}</td><td>{row['configs']}</td>" in page
    assert (run_dir / "best_batching_parameters.txt").read_text().splitlines()[0] in page
    assert {"tune_pareto", "tune_knobs"} <= set(report.plots)
    assert page.count("data:image/png;base64,") == len(report.plots)

    # 6. an SLO no configuration meets: the closest is named, exit 1, nothing re-measured
    spec_path.write_text(spec_text(models_dir, max_ms=0.01))
    assert run_tune_command(_args(spec_path, run_dir, resume=True)) == 1
    out = capsys.readouterr().out
    assert "no configuration meets p99 <= 0.01 ms; closest: " in out
    assert len(_entries(run_dir)) == 2 and len(read_points(run_dir)) == 2


class SameServer:
    """A restarter that keeps one running local server: the search and resume logic against real measurements,
    without paying a restart per configuration (the restart itself is covered above)."""

    def __init__(self, grpc_url: str, metrics_url: str) -> None:
        self.target = Target("local", grpc_url, "cpu", metrics_url)
        self.started: list[str] = []

    async def start(self, config: TuneConfig, batching_file: Path, log_path: Path) -> Target:
        self.started.append(config.id)
        return self.target

    async def stop(self) -> None:
        return None

    async def close(self) -> None:
        return None


@pytest.mark.parametrize(
    ("method", "first_two"),
    [
        ("coordinate", ["mbs2-to0-th1", "mbs2-to0-th2"]),  # the recipe's order: threads first
        ("bayesian", ["mbs2-to0-th1", "mbs8-to500-th2"]),  # the recipe's start, then the farthest corner
    ],
)
def test_a_search_resumes_where_it_stopped(models_dir: Path, tmp_path: Path, method: str, first_two: list[str]) -> None:
    """Interrupted after two configurations and resumed, the search measures neither again and ends
    within its budget. Also sends real images (input_data): every point records the input set."""
    import numpy as np

    from tests._clips import write_image
    from tests._servers import local_server

    photos = tmp_path / "photos"
    photos.mkdir()
    for seed in (1, 2):
        write_image(photos / f"{seed}.jpg", np.random.default_rng(seed).integers(0, 255, (48, 40, 3), dtype=np.uint8))

    text = spec_text(models_dir).replace(
        "batching = [false, true]\nmax_batch_size = [4]",
        "max_batch_size = [2, 4, 8]\nbatch_timeout_micros = [0, 500]\nnum_batch_threads = [1, 2]",
    )
    text = text.replace('method = "grid"', f'method = "{method}"').replace(
        'baselines = ["no_batching"]', "baselines = []"
    )
    text = text.replace('model = "tiny"\n', f'model = "tiny"\ninput_data = "{photos}"\n', 1)
    spec = parse_tune_spec(text.replace("min_duration_s = 0.8", "min_duration_s = 0.4"))
    run_dir = tmp_path / "run"
    with local_server(models_dir) as server:
        metrics = f"{server.rest_url}/monitoring/prometheus/metrics"
        first = SameServer(server.grpc_url, metrics)

        def stop_after_two(event: TuneEvent) -> None:
            if event.kind == "done" and len(first.started) == 2:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            asyncio.run(run_tune(spec, run_dir, restarter=first, on_event=stop_after_two))
        second = SameServer(server.grpc_url, metrics)
        outcome = asyncio.run(run_tune(spec, run_dir, resume=True, restarter=second))
    assert first.started == first_two
    assert outcome.skipped == first.started and not set(second.started) & set(first.started)
    ids = [e["config"] for e in _entries(run_dir)]
    assert len(ids) == len(set(ids)) == len(outcome.evaluated) <= search_budget(spec)
    assert outcome.answer is not None and outcome.answer.best is not None
    assert outcome.answer.best.config in ids
    recorded = {(p.inputs.kind, p.inputs.count) if p.inputs else None for p in read_points(run_dir)}
    assert recorded == {("images", 2)}


@pytest.mark.parametrize(
    ("config", "flag", "size"),
    [
        (TuneConfig(batching=False), "--enable_batching=false", None),
        (TuneConfig(max_batch_size=4), "--enable_batching=true", 4),
    ],
    ids=["nobatch", "mbs4"],
)
def test_each_possible_winner_gets_the_flags_and_file_it_needs(config, flag, size):
    """Which configuration wins the tiny tune above is measured, so that test checks one branch per run;
    here both winners' files are checked on their own: TF Serving's flag (main.cc --enable_batching)
    and the BatchingParameters text, with no max_batch_size at all when batching is off."""
    proto_type = _protos.message("tensorflow.serving.BatchingParameters")
    assert flag in config.server_flags("/config/batching.txt")
    parsed = text_format.Parse(config.to_text(), proto_type())
    assert (parsed.max_batch_size.value if parsed.HasField("max_batch_size") else None) == size


def test_tune_runs_from_relative_folders(
    models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--run-dir`` and ``models_dir`` relative to where tune runs (its default run folder is
    ``results/<name>-<time>``): each configuration's server runs in that configuration's folder, so the batching
    file it is given is absolute (it was relative, and every configuration "did not start", 2026-11-29)."""
    from serve_bench.cli import main

    monkeypatch.chdir(tmp_path)
    text = spec_text(Path(os.path.relpath(models_dir, tmp_path)))
    text = text.replace("batching = [false, true]", "batching = [true]")
    Path("tune.toml").write_text(text.replace('baselines = ["no_batching"]', "baselines = []"))
    assert main(["tune", "tune.toml", "--run-dir", "run"]) == 0, capsys.readouterr()
    assert [entry["status"] for entry in _entries(Path("run"))] == ["measured"]
    assert "nothing to resume" not in capsys.readouterr().out  # not asked to resume: a new run says nothing of it


def test_tune_names_a_models_dir_without_the_model_before_it_starts_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A local [server] whose models_dir does not hold the model: one line naming the folder and the export that
    fills it, before a configuration is started (every one "did not start", then "relax the SLO", 2026-11-29)."""
    from serve_bench.cli import main

    monkeypatch.chdir(tmp_path)
    Path("tune.toml").write_text(spec_text(tmp_path / "nowhere"))
    assert main(["tune", "tune.toml", "--run-dir", "run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds no exported version of tiny" in err and "serve-bench export tiny --models-dir" in err, err
    assert not Path("run", "configs").exists()


def test_when_no_configuration_starts_tune_does_not_blame_the_slo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model the server cannot load (a damaged export: its saved_model.pb is not one): each configuration says why
    it did not start, and the end says no configuration started, not "relax the SLO"."""
    from serve_bench.cli import main

    damaged = tmp_path / "models"
    (damaged / "tiny" / "1").mkdir(parents=True)
    (damaged / "tiny" / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
    spec = spec_text(damaged).replace("batching = [false, true]", "batching = [true]")
    (tmp_path / "tune.toml").write_text(spec.replace('baselines = ["no_batching"]', "baselines = []"))
    # --resume of a folder that is not there yet: said before the first configuration, then a new run
    assert main(["tune", str(tmp_path / "tune.toml"), "--run-dir", str(tmp_path / "run"), "--resume"]) == 1
    out = capsys.readouterr().out
    assert "did not start" in out and "no configuration started" in out and "relax the SLO" not in out, out
    said = f"nothing to resume: {tmp_path / 'run'} holds no configs.jsonl or points.jsonl yet, so this is a new run"
    assert said in out.splitlines()[1], out
