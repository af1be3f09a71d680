"""Tune on real Triton (2.51) and MLServer (1.7.1): the spec in each server's own knob names, each
configuration's file loaded by the real server from results/<run>/configs/<id>/, Triton's refusal
recorded with Triton's reason while the tune goes on, and the best configuration under the SLO.

The rules these tests hold the code to come from the servers' release sources: Triton core branch
``r24.10`` (tritonserver 2.51) and MLServer tag ``1.7.1``. The mirrors' HEADs are newer: Triton's
line numbers have moved there (the rules have not), MLServer's cited lines are unchanged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from serve_bench.errors import UserError
from serve_bench.export import triton_config_text
from serve_bench.stats import Point, read_points
from serve_bench.tune import MLServerConfig, TritonConfig, TuneEvent, load_tune_spec, parse_tune_spec, run_tune
from serve_bench.tune._run import planned_configs
from tests.conftest import _servers_env_or_skip

ROOT = Path(__file__).resolve().parents[1]
MAX_MS = 1000.0
DURATIONS = """
[durations]
warmup_s = 0.2
min_duration_s = 0.8
min_requests = 20
windows = 2
"""


def spec_text(
    kind: str, space: str, models_dir: Path | str = "exported_models", extra: str = "", protocol: str = "grpc"
) -> str:
    return f"""
name = "tune-{kind}-tiny"
model = "tiny"
{extra}
[server]
kind = "{kind}"
models_dir = "{models_dir}"
protocol = "{protocol}"
startup_timeout_s = 120
[space]
{space}
[load]
concurrency = [8]
{DURATIONS}
[slo]
percentile = "p99"
max_ms = {MAX_MS}
"""


def _entries(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "configs.jsonl").read_text().splitlines()]


def _best_under_slo(points: list[Point]) -> Point:
    """The point with the most images/s among those meeting p99 <= MAX_MS with no errors, computed here."""
    meeting = [
        p
        for p in points
        if not p.needs_remeasure and p.error_count == 0 and p.counts.ok > 0 and p.latency.due.ms("p99") <= MAX_MS
    ]
    return max(meeting, key=lambda p: p.items_per_s)


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def _gpu_here() -> bool:
    """Whether this host has an NVIDIA GPU Triton could place a KIND_GPU instance on."""
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


# ---------------------------------------------------------------- the spec (no server started)


def test_a_triton_spec_searches_tritons_own_knobs_from_tritons_defaults() -> None:
    """Knobs left out keep Triton's defaults: ``max_batch_size`` 4 (core r24.10 src/backend_model.cc:481,
    ``default-max-batch-size``), one instance (model_config_utils.cc:991-1008, Python backend), no queue
    delay. ``defaults`` writes ``dynamic_batching`` with delay 0 and no preferred sizes, which Triton reads
    as "prefer max_batch_size" (model_config_utils.cc:734-745) and "send what is queued at once"
    (dynamic_batch_scheduler.cc:619); ``no_batching`` writes no block, Triton's default scheduler
    (backend_model.cc:835-845), where delay and preferred sizes mean nothing and collapse."""
    spec = parse_tune_spec(
        spec_text(
            "triton",
            "dynamic_batching = [true, false]\nmax_batch_size = [4, 8]\n"
            'preferred_batch_size = ["none", [4, 2]]\ninstance_count = [1, 2]',
        )
    )
    assert spec.family.name == "triton" and spec.server.protocol == "grpc"
    ids = [c.id for c in spec.configs]
    assert ids == [
        "defaults",
        "i2",
        "pref2.4",
        "pref2.4-i2",
        "mbs8",
        "mbs8-i2",
        "mbs8-pref2.4",
        "mbs8-pref2.4-i2",
        "nobatch",  # the preferred sizes collapse without the batcher
        "nobatch-i2",
        "nobatch-mbs8",
        "nobatch-mbs8-i2",
    ]
    baselines = spec.family.baselines
    assert (baselines["defaults"].id, baselines["no_batching"].id) == ("defaults", "nobatch")
    assert planned_configs(spec) == len(ids)  # both baselines are in the grid: measured once

    defaults = triton_config_text("tiny", (64, 64, 3), 32, TritonConfig().batching())
    assert "max_batch_size: 4\n" in defaults and "count: 1 kind: KIND_CPU" in defaults
    assert "dynamic_batching { max_queue_delay_microseconds: 0 }" in defaults and "preferred" not in defaults
    assert "dynamic_batching" not in triton_config_text("tiny", (64, 64, 3), 32, TritonConfig(False).batching())

    config = next(c for c in spec.configs if c.id == "mbs8-pref2.4-i2")
    assert dict(config.knobs()) == {
        "config": "mbs8-pref2.4-i2",
        "dynamic_batching": "true",
        "max_batch_size": "8",
        "max_queue_delay_microseconds": "0",
        "preferred_batch_size": "2,4",
        "instance_count": "2",
        "instance_kind": "KIND_CPU",
        "runtime": "tensorflow",  # the SavedModel, unless [space] runtime names another
    }
    assert dict(next(c for c in spec.configs if c.id == "nobatch").knobs())["max_queue_delay_microseconds"] == "off"
    # --resume rebuilds each finished configuration from its configs.jsonl record
    assert spec.family.config_from(json.loads(json.dumps(dataclasses.asdict(config)))) == config


def test_mlservers_unbatched_configurations_are_one_and_so_are_its_baselines() -> None:
    """MLServer loads adaptive batching only when ``max_batch_size`` > 1 and ``max_batch_time`` > 0
    (mlserver/batching/hooks.py:82-86, 1.7.1): every other configuration is the same server, ``nobatch``,
    which is also what ModelSettings' defaults give (max_batch_size 0, max_batch_time 0.0, settings.py:457-462)."""
    assert MLServerConfig().id == MLServerConfig(max_batch_size=1).id == "nobatch"
    assert MLServerConfig(max_batch_size=8, max_batch_time=0).id == "nobatch"
    assert MLServerConfig(max_batch_size=8, max_batch_time=0.002, parallel_workers=2).id == "mbs8-t2ms-w2"
    spec = parse_tune_spec(
        spec_text("mlserver", "max_batch_size = [1, 8]\nmax_batch_time = [0, 0.002]\nparallel_workers = [0]")
    )
    assert [c.id for c in spec.configs] == ["nobatch-w0", "mbs8-t2ms-w0"]
    assert {c.id for c in spec.family.baselines.values()} == {"nobatch"}
    assert planned_configs(spec) == 3  # the grid, and nobatch (1 worker) measured once for both baselines
    off = dict(spec.configs[0].knobs())
    assert (off["max_batch_size"], off["max_batch_time"], off["parallel_workers"]) == ("off", "off", "0")


@pytest.mark.parametrize(
    ("kind", "knob", "message"),
    [
        ("triton", "batch_timeout_micros", "'batch_timeout_micros' is TF Serving's knob, not Triton's; "),
        ("triton", "max_batch_time", "'max_batch_time' is MLServer's knob, not Triton's; "),
        ("local", "max_queue_delay_microseconds", "'max_queue_delay_microseconds' is Triton's knob, not TF Serving's"),
        ("mlserver", "num_batch_threads", "'num_batch_threads' is TF Serving's knob, not MLServer's; "),
        ("mlserver", "instance_count", "'instance_count' is Triton's knob, not MLServer's; "),
        ("triton", "max_batch_sise", "unknown key 'max_batch_sise' in [space] (did you mean 'max_batch_size'?)"),
    ],
)
def test_another_servers_knob_is_a_one_line_error_listing_the_spec_servers_knobs(
    kind: str, knob: str, message: str
) -> None:
    listing = {
        "triton": "Triton's knobs are dynamic_batching, max_batch_size, max_queue_delay_microseconds, "
        "preferred_batch_size, instance_count, instance_kind, runtime",
        "mlserver": "MLServer's knobs are max_batch_size, max_batch_time, parallel_workers, runtime",
        "local": "TF Serving's knobs are batching, max_batch_size, batch_timeout_micros",
    }[kind]
    with pytest.raises(UserError) as info:
        parse_tune_spec(spec_text(kind, f"{knob} = [1]"), "t.toml")
    text = str(info.value)
    assert text.startswith("t.toml: ") and message in text and listing in text and "\n" not in text


@pytest.mark.parametrize(
    ("kind", "space", "extra", "message"),
    [
        # model_config_utils.cc:1422-1437 (r24.10): "dynamic batching preferred size must be <= max batch size"
        (
            "triton",
            "max_batch_size = [8]\npreferred_batch_size = [[4, 16]]",
            "",
            "preferred_batch_size must be between 1 and max_batch_size (8), got 16",
        ),
        ("triton", "max_batch_size = [0]", "", "max_batch_size must be a whole number >= 1, got 0"),
        ("triton", 'instance_kind = ["KIND_TPU"]', "", "instance_kind must be KIND_CPU or KIND_GPU"),
        ("triton", 'preferred_batch_size = ["max"]', "", 'each value must be "none" or a list of sizes'),
        # the default baselines keep Triton's max_batch_size 4: requests of 8 images would all be refused
        ("triton", "max_batch_size = [8]", "batch_size = 8", "configuration defaults has max_batch_size 4, less"),
        ("mlserver", "max_batch_size = [8]", "", "gives max_batch_size but not max_batch_time"),
        ("mlserver", "max_batch_time = [0.01]", "", "gives max_batch_time but not max_batch_size"),
        ("mlserver", "parallel_workers = [-1]", "", "parallel_workers must be 0 or more, got -1"),
    ],
)
def test_what_the_server_would_refuse_is_an_error_before_anything_runs(
    kind: str, space: str, extra: str, message: str
) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        parse_tune_spec(spec_text(kind, space, extra=extra), "t.toml")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("server", "protocol", "message"),
    [
        ('url = "v2+grpc://localhost:8001"', "grpc", "server.url is not used with kind 'triton': serve-bench starts"),
        ('service = "triton"', "grpc", "server.service is not used with kind 'triton'"),
        ("", "http", "server.protocol must be grpc or rest"),
    ],
)
def test_a_server_started_here_takes_no_address(server: str, protocol: str, message: str) -> None:
    text = spec_text("triton", "max_batch_size = [8]", protocol=protocol)
    with pytest.raises(UserError, match=message):
        parse_tune_spec(text.replace('kind = "triton"', f'kind = "triton"\n{server}'), "t.toml")


def test_the_shipped_triton_and_mlserver_specs_parse() -> None:
    triton = load_tune_spec(ROOT / "loadtests" / "tune" / "triton-cpu.toml")
    mlserver = load_tune_spec(ROOT / "loadtests" / "tune" / "mlserver-cpu.toml")
    assert (triton.family.name, triton.server.protocol, triton.model) == ("triton", "grpc", "tiny")
    assert (mlserver.family.name, mlserver.server.protocol, mlserver.model) == ("mlserver", "rest", "tiny")
    # small enough for "a few minutes" on 2 cores: the grid plus the baselines not in it
    assert planned_configs(triton) == planned_configs(mlserver) == 9


# ---------------------------------------------------------------- real servers


TRITON_SPACE = 'max_batch_size = [4, 8]\ninstance_kind = ["KIND_CPU", "KIND_GPU"]'


def test_tune_on_triton_loads_each_written_config_pbtxt_and_names_the_best(models_dir: Path, tmp_path: Path) -> None:
    """Every measured configuration's config.pbtxt in configs/<id>/ is the very file tritonserver loaded, and
    Triton's own view of the loaded model (GET /v2/models/tiny/config) agrees with it, down to the preferred
    size Triton fills in for an empty ``dynamic_batching`` (core r24.10 model_config_utils.cc:734-745). A
    KIND_GPU instance on a host without a GPU is refused by Triton at load (model_config_utils.cc:1660-1680):
    recorded as failed with Triton's words, and the next configuration is measured. The recommendation is
    the point with the most images/s under the SLO, and its best_config.pbtxt loads to READY in tritonserver."""
    _servers_env_or_skip()
    text = spec_text("triton", TRITON_SPACE, models_dir, protocol="rest")
    spec = parse_tune_spec(text + '[search]\nbaselines = ["no_batching"]\n')
    run_dir = tmp_path / "run"
    loaded: dict[str, dict[str, Any]] = {}

    def on_event(event: TuneEvent) -> None:
        if event.kind == "point" and event.point is not None:  # the server is up: ask Triton what it loaded
            base = event.point.target.url.replace("v2+http://", "http://")
            loaded[event.config] = _get_json(f"{base}/v2/models/tiny/config")

    outcome = asyncio.run(run_tune(spec, run_dir, on_event=on_event))
    entries = _entries(run_dir)
    assert [e["config"] for e in entries] == ["nobatch", "defaults", "gpu", "mbs8", "mbs8-gpu"]
    measured = [e["config"] for e in entries if e["status"] == "measured"]
    if _gpu_here():
        assert measured == [e["config"] for e in entries]
    else:
        assert measured == ["nobatch", "defaults", "mbs8"]  # "mbs8" came after a refusal: the tune went on
        for entry in entries[2::2]:
            assert entry["status"] == "failed", entry
            assert (
                "failed to load 'tiny' version 1: Invalid argument: instance group tiny_0 of model tiny has "
                "kind KIND_GPU but" in entry["why"]
            ), entry

    configs = {c.id: c for c in (*spec.configs, *spec.family.baselines.values())}
    for cid in measured:
        config = configs[cid]
        assert isinstance(config, TritonConfig)
        kept = run_dir / "configs" / cid / "config.pbtxt"
        assert os.path.samefile(kept, run_dir / "configs" / cid / "server" / "repository" / "tiny" / "config.pbtxt")
        assert kept.read_text() == triton_config_text(
            "tiny", (64, 64, 3), 32, config.batching(), {"EXECUTION_ENV_PATH": str(ROOT / ".venv-servers")}
        )
        triton = loaded[cid]
        assert int(triton["max_batch_size"]) == config.max_batch_size
        assert [(g["count"], g["kind"]) for g in triton["instance_group"]] == [(1, config.instance_kind)]
        if config.dynamic_batching:
            assert [int(s) for s in triton["dynamic_batching"]["preferred_batch_size"]] == [config.max_batch_size]
            assert int(triton["dynamic_batching"]["max_queue_delay_microseconds"]) == 0
        else:
            assert "dynamic_batching" not in triton

    points = read_points(run_dir)
    assert {p.target.server for p in points} == {"triton"} and {p.target.protocol for p in points} == {"v2-rest"}
    for point in points:
        assert ("config", point.key.split("|")[0]) in point.server_config
    best = _best_under_slo(points)
    best_id = best.key.split("|")[0]
    answer = json.loads((run_dir / "answer.json").read_text())
    assert answer["best"]["config"] == best_id and answer["best"]["items_per_s"] == best.items_per_s
    assert outcome.answer is not None and outcome.answer.best is not None and outcome.answer.best.config == best_id
    assert answer["best_file"] == "best_config.pbtxt" and outcome.best_file == run_dir / "best_config.pbtxt"
    best_text = outcome.best_file.read_text()
    assert best_text.startswith(f"# serve-bench tune tune-triton-tiny: best configuration {best_id}\n")
    body = "".join(line + "\n" for line in best_text.splitlines() if not line.startswith("#"))
    assert body == (run_dir / "configs" / best_id / "config.pbtxt").read_text()

    from serve_bench.report._tune import read_tune_answer, tune_html

    typed = read_tune_answer(run_dir)
    assert typed is not None and typed.best_files == ("best_config.pbtxt",)
    assert "<h3>best_config.pbtxt</h3>" in tune_html(typed, run_dir, "")

    # best_config.pbtxt, exactly as written (comments and all), is what a fresh tritonserver loads to READY
    from serve_bench.servers import TritonServer, http_ok

    server = TritonServer(models_dir, "tiny", work_dir=tmp_path / "reload")  # its own file says max_batch_size 4
    shutil.copyfile(outcome.best_file, server.repository / "tiny" / "config.pbtxt")
    with server:
        assert http_ok(f"{server.http_base}/v2/models/tiny/ready")
        again = _get_json(f"{server.http_base}/v2/models/tiny/config")
    assert again == loaded[best_id]


MLSERVER_SPACE = "max_batch_size = [1, 8]\nmax_batch_time = [0.002]\nparallel_workers = [0]"


def test_tune_on_mlserver_end_to_end(models_dir: Path, tmp_path: Path) -> None:
    """Two configurations on real MLServer over gRPC: each one's model-settings.json and settings.json in
    configs/<id>/ are the files MLServer loaded; ``parallel_workers`` 0 reaches the server (no worker
    process runs: MLServer 1.7.1 reads it from settings.json, settings.py:170, and would ignore it in
    model-settings.json, parallel/registry.py:196-215); the best under the SLO is named, and
    best_model-settings.json is the winner's file as loaded."""
    _servers_env_or_skip()
    spec = parse_tune_spec(spec_text("mlserver", MLSERVER_SPACE, models_dir) + "[search]\nbaselines = []\n")
    run_dir = tmp_path / "run"
    workers: dict[str, int] = {}

    def on_event(event: TuneEvent) -> None:
        if event.kind == "point" and event.point is not None and event.point.target.pid is not None:
            workers[event.config] = len(psutil.Process(event.point.target.pid).children(recursive=True))

    outcome = asyncio.run(run_tune(spec, run_dir, on_event=on_event))
    assert [(e["config"], e["status"]) for e in _entries(run_dir)] == [
        ("nobatch-w0", "measured"),
        ("mbs8-t2ms-w0", "measured"),
    ]
    assert workers == {"nobatch-w0": 0, "mbs8-t2ms-w0": 0}
    for cid, (size, seconds) in {"nobatch-w0": (0, 0.0), "mbs8-t2ms-w0": (8, 0.002)}.items():
        folder = run_dir / "configs" / cid
        repository = folder / "server" / "repository"
        assert os.path.samefile(folder / "model-settings.json", repository / "tiny" / "model-settings.json")
        assert os.path.samefile(folder / "settings.json", repository / "settings.json")
        settings = json.loads((folder / "model-settings.json").read_text())
        assert (settings["max_batch_size"], settings["max_batch_time"]) == (size, seconds)
        assert "parallel_workers" not in settings
        assert json.loads((folder / "settings.json").read_text())["parallel_workers"] == 0

    points = read_points(run_dir)
    assert {p.target.server for p in points} == {"mlserver"} and {p.target.protocol for p in points} == {"v2-grpc"}
    best_id = _best_under_slo(points).key.split("|")[0]
    answer = json.loads((run_dir / "answer.json").read_text())
    assert answer["best"]["config"] == best_id
    assert answer["best_files"] == ["best_model-settings.json", "best_settings.json"]
    assert outcome.best_file == run_dir / "best_model-settings.json"
    assert outcome.best_file.read_bytes() == (run_dir / "configs" / best_id / "model-settings.json").read_bytes()
    assert json.loads((run_dir / "best_settings.json").read_text()) == {"parallel_workers": 0}


def test_ctrl_c_while_tritonserver_starts_leaves_no_server(models_dir: Path, tmp_path: Path) -> None:
    """A real SIGINT to `serve-bench tune` while the first configuration's tritonserver is starting (its
    start runs in a thread, which cannot be interrupted): exit 130, and no process of the run is left."""
    _servers_env_or_skip()
    spec_path = tmp_path / "tune.toml"
    spec_path.write_text(spec_text("triton", "max_batch_size = [8]", models_dir))
    run_dir = tmp_path / "run"
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
        if line.startswith("[1/"):
            break
    # interrupt once tritonserver runs (the thread is then inside the launcher's readiness poll)
    deadline = time.monotonic() + 60
    while not _processes_of(run_dir) and cli.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_of(run_dir), "".join(seen)
    cli.send_signal(signal.SIGINT)
    seen += cli.stdout.readlines()
    assert cli.wait(timeout=120) == 130, "".join(seen)
    assert _processes_of(run_dir) == []
    assert not (run_dir / "configs.jsonl").exists()  # nothing finished, nothing recorded as failed


def _processes_of(run_dir: Path) -> list[int]:
    """The processes whose command line names the run's directory (tritonserver, its Python stubs)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if str(run_dir) in " ".join(process.info["cmdline"] or []):
                found.append(process.pid)
        except psutil.Error:
            continue
    return found
