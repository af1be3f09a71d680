"""The prepared GPU run (benchmarks/gpu/run.py) on this CPU, so the command cannot rot between GPU visits.

The same script, steps and files as on the GPU host, with the tiny model on the CPU alone: the floor,
a served sweep, the server's own batching filled, packed after every step.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_runtime

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "run.py"


def _driver(path: Path, body: str) -> Path:
    """A script at ``path`` that loads run.py as the module ``run`` (in its own process), then runs ``body``."""
    preamble = f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("gpu_run", {str(SCRIPT)!r})
        run = importlib.util.module_from_spec(spec)
        sys.modules["gpu_run"] = run
        spec.loader.exec_module(run)
        """
    path.write_text(textwrap.dedent(preamble) + textwrap.dedent(body))
    return path


def _script():
    spec = importlib.util.spec_from_file_location("gpu_run", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_run"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_gpu_run_on_this_cpu_writes_ordinary_runs_and_packs_them(tmp_path):
    """Every step ends with its record in progress.jsonl and the archive re-packed; the runs are run
    directories the report reads, their points recorded as the jax runtime said it ran (random weights)."""
    require_runtime("jax")
    out, archive = tmp_path / "gpu-run", tmp_path / "gpu-run.tar.gz"
    args = ["--out", str(out), "--archive", str(archive), "--models", "tiny", "--devices", "cpu"]
    args += ["--cpu-batch-sizes", "1,4", "--fill", "2,4", "--in-flight", "1,2", "--budget-s", "300"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [
        "host",
        "served tiny cpu-fp32",
        "in flight tiny cpu-fp32 batch 1 at 1,2",
        "server batching tiny cpu-fp32 concurrency 2,4",
        "floor tiny cpu fp32",
        "overhead tiny cpu-fp32",
    ]
    assert not [s for s in steps if "error" in s or "skipped" in s]
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    for name in (
        "runs/tiny/points.jsonl",
        "runs/tiny/run.json",
        "runs/tiny/report.html",
        "floor/tiny-cpu-fp32.jsonl",
        "floor/tiny-cpu-fp32.stderr.txt",
        "overhead-tiny-cpu-fp32.txt",
    ):
        assert f"gpu-run/{name}" in names
    assert not [n for n in names if "/models/" in n or "xla-cache" in n]  # no model files, no caches
    # where a served figure's time goes, at both sizes: in process, a bare gRPC server, served with its split
    overhead = (out / "overhead-tiny-cpu-fp32.txt").read_text()
    for size in _script().OVERHEAD_SIZES.split(","):
        section = overhead.split(f"batch {size}: µs per request")[1].split("batch ")[0]
        for figure in ("in process (floor)", "bare gRPC server", "served/in-process", "runtime_latency"):
            assert figure in section, overhead
    points = [json.loads(line) for line in (out / "runs/tiny/points.jsonl").read_text().splitlines()]
    assert sorted(p["batch_size"] for p in points) == [1, 4]
    for point in points:
        assert point["target"]["runtime"] == "jax" and point["target"]["device"] == "cpu"
        assert any("weights random" in note and "precision fp32" in note for note in point["notes"])
    assert "gpu_details" in json.loads((out / "runs/tiny/run.json").read_text())
    batched = [json.loads(line) for line in (out / "runs/tiny-server-batching/points.jsonl").read_text().splitlines()]
    assert sorted(p["load"]["concurrency"] for p in batched) == [2, 4]
    flying = [json.loads(line) for line in (out / "runs/tiny-batch1-in-flight/points.jsonl").read_text().splitlines()]
    assert sorted((p["batch_size"], p["load"]["concurrency"]) for p in flying) == [(1, 1), (1, 2)]
    floor = [json.loads(line) for line in (out / "floor/tiny-cpu-fp32.jsonl").read_text().splitlines()]
    assert floor[0]["model"] == "tiny"  # what predict_vs_measured checks against a prediction's model
    assert floor[0]["in_effect"]["weights"].startswith("random")
    witness = floor[0]["precision_witness"]  # float32 on a CPU: rounding error alone
    assert set(witness) == {"conv3x3_max_relative_error", "conv1x1_max_relative_error"}
    assert max(witness.values()) < 1e-5
    assert [(x["batch_size"], x["calls"] >= 5) for x in floor[1:]] == [(1, True), (4, True)]
    for x in floor[1:]:  # with its 95% interval (tests/test_floor_interval.py: how)
        assert x["images_per_s_ci"][0] <= x["images_per_s"] <= x["images_per_s_ci"][1]
    # the answer's table, from the same folder: the row's figures are the report's own and the floor's
    summary = subprocess.run(
        [sys.executable, str(SCRIPT.with_name("summarize.py")), str(out), "--cpu-price-per-hour", "0.5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert summary.returncode == 0, summary.stderr[-2000:]
    (row,) = [line for line in summary.stdout.splitlines() if line.startswith("| cpu-fp32 |")]  # not in-flight's
    cells = [c.strip() for c in row.strip("|").split("|")]
    best = max(points, key=lambda p: p["throughput"]["items_per_s"])
    one = next(p for p in points if p["batch_size"] == 1)
    assert cells[2].startswith(f"{best['throughput']['items_per_s']:,.0f} [") and cells[2].endswith(
        f"({best['batch_size']})"
    )
    served_over_floor = one["throughput"]["items_per_s"] / floor[1]["images_per_s"]
    assert cells[5].startswith(f"{served_over_floor:.2f} ·")
    assert cells[7] == f"{0.5 / (3600 * best['throughput']['items_per_s']) * 1e6:.3f}"
    best_floor = max(x["images_per_s"] for x in floor[1:])  # and a million images at its best, at the price given
    cost = f"{0.5 / (3600 * best_floor) * 1e6:.2f}"
    assert f"convolutions {max(witness.values()):.1e} off float64; ${cost} per million images at its best." in (
        summary.stdout
    )
    # the batch-1 call in process on the fresh array and on the server's view (no first runs on a CPU)
    assert (
        f"compile {sum(x['compile_s'] for x in floor[1:]):.0f} s in all; a batch-1 call {floor[1]['p50_ms']:.2f} ms"
        f" median, {floor[1]['as_served_p50_ms']:.2f} ms on a view as the server passes it,"
        f" {floor[1]['gapped_p50_ms']:.2f} ms after 2 ms idle; convolutions"
    ) in summary.stdout
    # batch 1 at each in flight, over the floor's batch 1, with the server's runtime call
    for point in sorted(flying, key=lambda p: p["load"]["concurrency"]):
        rate = point["throughput"]["items_per_s"]
        runtime_ms = point["server"]["runtime_us_mean"] / 1e3
        assert (
            f"{point['load']['concurrency']} in flight {rate:,.0f} [" in summary.stdout
            and f"img/s, {rate / floor[1]['images_per_s']:.2f} of in process, runtime call {runtime_ms:.2f} ms"
            in summary.stdout
        ), summary.stdout
    assert "Batch 1 unbatched on cpu-fp32: 1 in flight" in summary.stdout
    # the in-process gain with its interval: the floor's intervals' extremes (stats' ratio)
    by_size = {x["batch_size"]: x for x in floor[1:]}
    low, high = (
        by_size[4]["images_per_s_ci"][0] / by_size[1]["images_per_s_ci"][1],
        (by_size[4]["images_per_s_ci"][1] / by_size[1]["images_per_s_ci"][0]),
    )
    assert (
        f"({by_size[4]['images_per_s'] / by_size[1]['images_per_s']:.2f}× [{low:.2f}×–{high:.2f}×])" in summary.stdout
    )


def test_a_run_cut_short_by_the_hard_limit_still_packs_the_step_under_way(tmp_path):
    """visit.sh's hard limit sends SIGTERM mid-step: what that step measured so far (a sweep's points, a floor's
    sizes) is packed at once, before its servers are stopped, and progress says which step was cut short."""
    driver = _driver(
        tmp_path / "driver.py",
        """
            import os, signal, time, types

            def steps(plan, args):
                def finished():
                    (plan.out / "floor").mkdir()
                    (plan.out / "floor" / "m-gpu-tf32.jsonl").write_text("{}\\n")
                    return {}

                def cut_short():
                    (plan.out / "runs" / "m").mkdir(parents=True)
                    (plan.out / "runs" / "m" / "points.jsonl").write_text("{}\\n")
                    try:
                        os.kill(os.getpid(), signal.SIGTERM)
                        time.sleep(60)
                    finally:  # a step's servers stopping after the pack
                        (plan.out / "stopped").write_text("")
                    return {}

                return [run.Step("finished", finished), run.Step("cut short", cut_short), run.Step("never", finished)]

            run.build_steps = steps
            run.JAX = types.SimpleNamespace(require=lambda: None)
            sys.exit(run.main(sys.argv[1:]))
            """,
    )
    out, archive = tmp_path / "gpu-run", tmp_path / "gpu-run.tar.gz"
    done = subprocess.run(
        [sys.executable, str(driver), "--out", str(out), "--archive", str(archive)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 143, done.stderr[-2000:]
    steps = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == ["host", "finished", "cut short"]
    assert steps[-1]["interrupted"] == "SystemExit 143" and steps[-1]["seconds"] < 30
    assert (out / "stopped").exists()
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        packed = [json.loads(line) for line in tar.extractfile("gpu-run/progress.jsonl").read().splitlines()]
    assert {"gpu-run/runs/m/points.jsonl", "gpu-run/floor/m-gpu-tf32.jsonl"} <= names
    assert packed[-1]["step"] == "cut short"
    assert not archive.with_name(archive.name + ".part").exists()


def test_an_overhead_step_stopped_by_the_hard_limit_leaves_no_server_running(jax_models, tmp_path):
    """The second call's overhead step runs benchmarks/server_overhead.py, whose servers each run in a session of
    their own. visit.sh's hard limit stopped it with SIGKILL to its group, so its server outlived the step (the
    rehearsal of 2026-11-29 found InceptionV3's still serving 20 minutes later, where a third call would have shared
    the host's cores with it). Stopped now, the step's child stops its servers before it exits."""
    import psutil

    out = tmp_path / "gpu-run"
    out.mkdir()
    (out / "models").symlink_to(jax_models)
    driver = _driver(
        tmp_path / "driver.py",
        f"""
            import signal
            from pathlib import Path
            plan = run.Plan(Path({str(out)!r}), 400, None)
            signal.signal(signal.SIGTERM, plan.terminate)
            run._overhead(plan, "tiny", "cpu", "fp32", "jax")
            """,
    )
    env = {**os.environ, "SERVE_BENCH_PERF_ANALYZER": str(tmp_path / "none")}
    step = subprocess.Popen([sys.executable, str(driver)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def serving() -> list[psutil.Process]:
        found = []
        for process in psutil.process_iter(["cmdline"]):
            line = " ".join(process.info["cmdline"] or ())
            if "serve_bench serve" in line and str(jax_models.resolve()) in line:  # it resolves the models' link
                found.append(process)
        return found

    deadline = time.monotonic() + 240
    servers: list[psutil.Process] = []
    try:
        while not servers and step.poll() is None and time.monotonic() < deadline:
            servers = serving()  # the step's servers, once it has started them
            time.sleep(0.2)  # a poll's interval, not a wait for the event: the 2 cores are compiling
        assert servers, (step.poll(), [f.read_text(errors="replace")[-2000:] for f in out.glob("overhead-*.txt")])
        step.send_signal(signal.SIGTERM)
        assert step.wait(timeout=60) == 143
        _, alive = psutil.wait_procs(servers, timeout=30)
        assert not alive and not serving(), [p.cmdline() for p in alive]
    finally:  # red or not, nothing of this test's is left serving
        step.kill()
        for process in serving():
            process.kill()


def _visit(out: Path, wheels: Path, site: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``bash visit.sh ARGS`` with this interpreter, its results under ``out``, wheels from ``wheels``."""
    env = {**os.environ, "OUT": str(out), "WHEELS": str(wheels), "SITE": str(site), "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(SCRIPT.with_name("visit.sh")), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_a_visit_whose_wheels_do_not_install_still_brings_back_what_the_host_is(tmp_path):
    """visit.sh records the host (nvidia-smi, Python, packages, environment) before it installs the carried wheels,
    so a wheel for the wrong Python or platform still brings back host.txt, and pip's refusal in log.txt."""
    wheels, out = tmp_path / "whl", tmp_path / "out"
    wheels.mkdir()
    (wheels / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    done = _visit(out, wheels, tmp_path / "site", timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    host = (out / "host.txt").read_text()
    assert sys.version.split()[0] in host and "environment:" in host
    assert "did not install" in (out / "log.txt").read_text()
    assert not (out / "gpu-run.tar.gz").exists()


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_visit_and_requires_help_run_nothing(tmp_path, flag):
    """``visit.sh --help`` prints what it does and run.py's options, and installs, measures and writes
    nothing (it used to start a visit); ``requires.py --help`` prints its usage instead of checking."""
    out = tmp_path / "out"
    done = _visit(out, tmp_path, tmp_path / "site", flag, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("One GPU visit, as the device tool runs it")
    assert "usage: run.py" in done.stdout and "--budget-s" in done.stdout
    assert not out.exists() and not (tmp_path / "site").exists()
    requires = subprocess.run(
        [sys.executable, str(SCRIPT.with_name("requires.py")), flag], capture_output=True, text=True, timeout=60
    )
    assert requires.returncode == 0 and requires.stdout.startswith("Check that the carried wheels"), requires.stderr


def test_a_step_past_the_budget_is_skipped_and_listed(tmp_path):
    require_runtime("jax")
    out = tmp_path / "gpu-run"
    args = ["--out", str(out), "--models", "tiny", "--devices", "cpu", "--budget-s", "0"]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()][1:]
    assert steps and all(s["skipped"] == "past the 0 s budget" for s in steps)


def test_the_gpu_visit_measures_the_headline_first(tmp_path, monkeypatch):
    """On the GPU host (the defaults): model by model, InceptionV3 and MobileNetV2 (the README's headline) first:
    its GPU floor in each precision (only the first doubles past the last size), its served sweep of every
    device, the server's own batching, its CPU floor. A visit whose compiles are slow brings back the headline's
    models whole (the order used to measure every model's GPU steps first, and the batching and CPU steps of
    none fitted the budget when compiles were slow)."""
    script = _script()
    parser = script.arguments().parse_args([])  # the defaults, as the visit runs them
    plan = script.Plan(tmp_path, 420, None)
    monkeypatch.setattr(script, "_jax_gpus", lambda plan: ["cuda:0 NVIDIA H100 80GB HBM3"])  # as on the host
    names = [step.name for step in script.build_steps(plan, parser)]
    assert names[:7] == [
        "floor inception_v3 gpu tf32",
        "floor inception_v3 gpu fp32",
        "served inception_v3 gpu-tf32 gpu-fp32",
        "served inception_v3 cpu-fp32",  # a sweep of its own, at the CPU's sizes
        "in flight inception_v3 gpu-tf32 batch 1 at 1,2,4",
        "server batching inception_v3 gpu-tf32 concurrency 8,32,128",
        "floor inception_v3 cpu fp32",
    ]
    # then where the first model's served time goes (server_overhead), part of its answer: last, it was past the
    # budget of a visit of three models at 2 s points (about 250 s a model against 400)
    assert names[7] == "overhead inception_v3 gpu-tf32"
    assert names[8::7] == ["floor mobilenet_v2 gpu tf32", "floor resnet50 gpu tf32"]
    assert len(names) == 22 and [n for n in names if n.startswith("overhead")] == [names[7]]
    # the servers take bodies that hold InceptionV3's largest batch over gRPC (the server caps a gRPC input at a
    # quarter of --max_body_bytes in floats: server/_grpc.py)
    assert script.BODY_BYTES // 4 >= 256 * 299 * 299 * 3
    # the copies a host without TensorFlow builds: the catalogue model, random weights, nothing else
    for model in ("inception_v3", "resnet50", "mobilenet_v2"):
        assert json.loads((tmp_path / f"models/jax/{model}/1/conversion.json").read_text())["weights"] == "random"


def test_a_gpu_floor_that_measured_nothing_does_not_send_the_servers_every_size_cold(tmp_path, monkeypatch):
    """A first GPU floor cut off before its first size (a compile slower than its allowance) leaves nothing in
    the compile cache: the served sweep then takes the sizes the other precision's floor measured, else the
    smallest size alone, never the whole list (every size compiled cold, per precision, before AVAILABLE)."""
    script = _script()
    import argparse

    args = argparse.Namespace(
        models="tiny",
        devices="gpu",
        precisions="tf32,fp32",
        batch_sizes="4,1,16",
        cpu_batch_sizes="1",
        cpu_runtime="jax",
        beyond=0,
        fill="4",
        in_flight="1,2",
        gpu_price_per_hour=None,
        cpu_price_per_hour=None,
        warmup_s=0.3,
        min_duration_s=1.0,
        floor_share=0.25,
        steps="gpu-floor,served,batching,cpu-floor",
    )
    monkeypatch.setattr(script, "_jax_gpus", lambda plan: ["cuda:0 NVIDIA H100 80GB HBM3"])
    served: list[str] = []
    monkeypatch.setattr(script, "_served", lambda plan, model, targets, sizes, *rest, **kw: served.append(sizes) or {})
    for other_floor_sizes, expected in (([], "1"), ([1, 4], "1,4")):
        floors = iter([[], other_floor_sizes])
        monkeypatch.setattr(script, "_floor", lambda *a, **kw: {"sizes": next(floors)})
        steps = script.build_steps(script.Plan(tmp_path, 420, None), args)
        assert [s.name for s in steps[:3]] == [
            "floor tiny gpu tf32",
            "floor tiny gpu fp32",
            "served tiny gpu-tf32 gpu-fp32",
        ]
        for step in steps[:3]:
            step.run()
        assert served[-1] == expected


def test_the_gpu_batching_server_compiles_only_what_the_floor_compiled(tmp_path, monkeypatch):
    """The batching server compiles every allowed batch size before it is AVAILABLE. On the GPU they are the sizes
    the first floor measured, up to the largest fill (the compile cache holds them): with 1, 4, 16 and 256
    measured, 1, 4 and 16, so no size is compiled cold (it used to ask for every power of two up to 128: up to
    seven cold compiles of InceptionV3 on a GPU that autotunes each). A floor that measured no size past 1 leaves
    1 and the largest fill, so the server still batches. On the CPU (compiles of a second), every power of two."""
    from serve_bench.export import BatchingParams

    script = _script()
    monkeypatch.setattr(script, "_jax_gpus", lambda plan: ["cuda:0 NVIDIA H100 80GB HBM3"])
    allowed: list[tuple[int, ...]] = []

    def served(plan, model, targets, sizes, concurrency, name, prices, durations, batching=None):
        if batching is not None:
            allowed.append(BatchingParams.from_text(batching.read_text()).allowed_batch_sizes)
        return {}

    monkeypatch.setattr(script, "_served", served)
    for devices, floor_sizes, expected in (
        ("gpu", [1, 4, 16, 256], (1, 4, 16)),
        ("gpu", [1, 256], (1, 128)),
        ("gpu", [], (1, 128)),
        ("cpu", [1, 8, 64], (1, 2, 4, 8, 16, 32, 64, 128)),
    ):
        monkeypatch.setattr(script, "_floor", lambda *a, sizes=floor_sizes, **kw: {"sizes": list(sizes)})
        args = script.arguments().parse_args(["--models", "tiny", "--devices", devices, "--precisions", "tf32"])
        steps = script.build_steps(script.Plan(tmp_path, 420, None), args)
        for step in steps:
            step.run()
        assert allowed[-1] == expected, (devices, floor_sizes)


def test_a_floor_is_stopped_only_well_past_a_slow_compile(tmp_path, monkeypatch):
    """A floor process is stopped at three times its allowance, and never before 150 s: a GPU whose compiles take
    40 s a size (InceptionV3, cuDNN autotuning) still measures batch 1 and the largest within a 30 s allowance
    (stopped at 90 s, as it was, it kept batch 1 alone and lost the compile under way). What it measured before
    it was stopped is kept.

    And JAX's allocator may take 90% of the GPU's memory (its default stops at 75% even when it grows), asked
    under the name jaxlib 0.11 reads alone: its generate_pjrt_gpu_plugin_options (jaxlib/xla_client.py:180-187,
    0.11.2) raises ValueError when XLA_PYTHON_CLIENT_MEM_FRACTION is set beside XLA_CLIENT_MEM_FRACTION, the
    CUDA plugin is not loaded, and JAX lists no GPU: the first H100 visit (2026-11-26) lost its six GPU floors so.
    The deprecated name is removed even where the caller's environment has it."""
    script = _script()
    limits: list[float] = []
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")

    def run(command, *, stdout, timeout, env, **kw):
        limits.append(timeout)
        assert env["XLA_CLIENT_MEM_FRACTION"] == "0.9"
        assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in env
        stdout.write(json.dumps({"batch_size": 1, "images_per_s": 10.0, "compile_s": 40.0}) + "\n")
        stdout.flush()
        raise subprocess.TimeoutExpired(command, timeout)

    monkeypatch.setattr(script.subprocess, "run", run)
    plan = script.Plan(tmp_path, 420, None)
    for allowance, limit in ((30.0, 150.0), (80.0, 240.0)):
        result = script._floor(plan, tmp_path / "copy", "m", "gpu", "tf32", "1,256", 0, allowance)
        assert limits[-1] == limit
        assert result["sizes"] == [1] and result["error"] == f"the floor ran past {limit:.0f} s and was stopped"


@pytest.mark.parametrize(
    "bad",
    [["--devices", "tpu"], ["--precisions", "fp8"], ["--batch-sizes", "0"], ["--devices", "gpu,cpu"], ["--models", ""]],
)
def test_bad_arguments_are_one_line(tmp_path, bad):
    from serve_bench.stats._metadata import gpu_names

    if "gpu,cpu" in bad and gpu_names():
        pytest.skip("this host has a GPU")
    if "gpu,cpu" in bad:
        require_runtime("jax")  # the refusal is JAX's: it lists no GPU
    args = ["--out", str(tmp_path / "r"), "--models", "tiny", *bad]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_floor_covers_the_curve_soonest_and_stops_on_time(jax_models, tmp_path):
    """Sizes go in breadth-first order (both ends, then the middle of each gap), so a floor cut short by its
    time allowance keeps the ends and an even spread; past the allowance it starts no size, once both ends
    are measured, and says which it left out."""
    from serve_bench.runtimes._floor import coverage_order

    assert coverage_order((1, 2, 4, 8, 16, 32, 64, 128, 256)) == [1, 256, 16, 4, 64, 2, 8, 32, 128]
    assert coverage_order((64, 1, 8)) == [1, 64, 8] and coverage_order((4, 1)) == [1, 4]
    copy = jax_models / "jax" / "tiny" / "1" / "conversion.json"
    floor = [sys.executable, "-m", "serve_bench.runtimes._floor", str(copy), "--batch-sizes", "1,2,4,8"]
    done = subprocess.run(
        [*floor, "--max-seconds", "0", "--min-seconds", "0.05", "--min-calls", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [x["batch_size"] for x in lines if "images_per_s" in x] == [1, 8]
    assert lines[-1] == {"left_out": [2, 4], "reason": "past 0 s"}


def test_a_second_visit_runs_only_the_kinds_of_step_asked(tmp_path, monkeypatch):
    """--steps: the second H100 visit (2026-11-26) ran the GPU floors and served sweeps the first lacked, in the
    device time left, and none of the steps the first had brought back. An unknown kind is one line, before any
    step or model copy."""
    script = _script()
    monkeypatch.setattr(script, "_jax_gpus", lambda plan: ["cuda:0 NVIDIA H100 80GB HBM3"])
    args = script.arguments().parse_args(["--models", "tiny", "--steps", "gpu-floor,served"])
    names = [step.name for step in script.build_steps(script.Plan(tmp_path, 420, None), args)]
    assert names == [
        "floor tiny gpu tf32",
        "floor tiny gpu fp32",
        "served tiny gpu-tf32 gpu-fp32",
        "served tiny cpu-fp32",
    ]
    args = script.arguments().parse_args(["--models", "tiny", "--steps", "cpu-floor"])
    assert [s.name for s in script.build_steps(script.Plan(tmp_path / "b", 420, None), args)] == ["floor tiny cpu fp32"]
    for bad in ("floors", ""):
        args = script.arguments().parse_args(["--models", "tiny", "--steps", bad])
        with pytest.raises(script.UserError, match="give some of " + ",".join(script.STEP_KINDS)):
            script.build_steps(script.Plan(tmp_path / "c", 420, None), args)
        assert not (tmp_path / "c" / "models").exists()


def _summarize() -> Any:
    """benchmarks/gpu/summarize.py as a module (a script, not in a package)."""
    spec = importlib.util.spec_from_file_location("gpu_summarize", SCRIPT.with_name("summarize.py"))
    assert spec is not None and spec.loader is not None
    summarize = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summarize)
    return summarize


def test_the_summary_adds_up_a_gpus_first_runs_apart_from_its_compiles():
    """On a GPU each size's program runs once before it is timed or served (first_run_s); a CPU floor has none."""
    summarize = _summarize()
    floor = {1: {"first_run_s": 4.2}, 16: {"first_run_s": 0.05}, 256: {"first_run_s": None}}
    assert summarize._first_runs(floor) == ", first runs 4.2 s (the longest 4.20)"
    assert summarize._first_runs({1: {"first_run_s": None}, 8: {}}) == ""


def test_the_summary_reads_the_first_visits_floors_and_refuses_what_is_not_a_run(tmp_path, capsys):
    """The first H100 visit's floors (2026-11-26) name their model only in their copy's path: each still has its
    in-process line (the README's 9.2-20.6x for that visit came from them). A folder with no floor/ and no runs/,
    and a price that is not a positive number, are refused in one line; a cost under half a cent keeps two digits
    rather than reading $0.00."""
    summarize = _summarize()
    first = SCRIPT.parents[1] / "results/h100-2026-11-26/visit-2"
    assert summarize.main([str(first)]) == 0
    out = capsys.readouterr().out
    assert "In process on gpu-tf32: 220 img/s at batch 1, 4,534 at 256 (20.6×)" in out
    assert "In process on gpu-fp32: 187 img/s at batch 1, 1,719 at 256 (9.19×)" in out
    assert summarize.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"summarize.py: no floor/ or runs/ in {tmp_path}")
    for price in ("-3", "nan", "0", "abc"):
        with pytest.raises(SystemExit):
            summarize.main([str(first), "--gpu-price-per-hour", price])
        assert "give a positive price in dollars an hour" in capsys.readouterr().err
    # that visit's first call left its GPU floors empty (stopped before their headers) and the second measured them
    # again: given both calls' floors, the empty ones are no second measurement
    for visit in ("visit-1", "visit-2"):
        shutil.copytree(first.parent / visit / "floor", tmp_path / "calls" / visit / "floor")
    assert not (tmp_path / "calls/visit-1/floor/inception_v3-gpu-tf32.jsonl").read_text()
    assert summarize.main([str(tmp_path / "calls/visit-1"), str(tmp_path / "calls/visit-2")]) == 0
    assert "In process on gpu-tf32: 220 img/s at batch 1" in capsys.readouterr().out
    assert summarize._money(0.00049, 2) == "0.00049" and summarize._money(0.79, 2) == "0.79"
    assert summarize._money(5.597, 3) == "5.597"


def test_where_throughput_stops_growing_is_said_as_far_as_the_measured_sizes_go():
    """The smallest batch within 5% of the best, and what the sizes left out leave unknown: InceptionV3's GPU
    floor of 2026-11-27 measured 1, 4, 16 and 256 and still grew at 256 ("past 16", not "256"); its CPU floor,
    1, 8 and 64, was within 5% at 8 ("by 8"); ResNet-50's, every size to 1024, stopped at 512."""
    summarize = _summarize()
    stops = summarize.stops_growing
    assert stops({1: 288.0, 4: 989.0, 16: 3219.0, 256: 4329.0}) == "past 16"
    assert stops({1: 28.6, 8: 55.0, 64: 57.1}) == "by 8"
    assert stops({1: 403.0, 256: 5711.0, 512: 6929.0, 1024: 6978.0}) == "512"
    assert stops({64: 2046.0, 128: 2200.0, 256: 2445.0}) == "256 or later"
    assert stops({64: 2400.0, 128: 2420.0, 256: 2445.0}) == "64"
    assert stops({1: 7.0}) == "1 or later"


def test_the_next_visits_command_measures_what_the_last_left(tmp_path, monkeypatch):
    """The calls benchmarks/gpu/README.md gives for a next visit's first (read from it, so the two cannot drift): on
    an H100 the headline models' tf32 floors (the sizes the second visit left out, with the idle-gap calls), batch 1
    in flight unbatched, and the server's batching on the sizes those floors compile, nothing the second visit
    measured; on an H200, never measured, the same for all three models, ResNet-50 last."""
    readme = SCRIPT.with_name("README.md").read_text()
    lines = [x for x in readme.splitlines() if x.startswith("bash benchmarks/gpu/visit.sh --models")]
    assert len(lines) == 2  # an H100's (what its two visits left) and an H200's (nothing measured yet)
    script = _script()
    monkeypatch.setattr(script, "_jax_gpus", lambda plan: ["cuda:0 NVIDIA H100 80GB HBM3"])
    for line, models in zip(lines, (("inception_v3", "mobilenet_v2"), ("inception_v3", "mobilenet_v2", "resnet50"))):
        args = script.arguments().parse_args(line.split()[2:])
        names = [step.name for step in script.build_steps(script.Plan(tmp_path, 400, None), args)]
        assert names == [
            f"{kind} {model} gpu{rest}"
            for model in models
            for kind, rest in (
                ("floor", " tf32"),
                ("in flight", "-tf32 batch 1 at 1,2,4"),
                ("server batching", "-tf32 concurrency 8,32,128"),
            )
        ]
        assert args.floor_share == 0.5


def test_the_second_call_measures_where_the_time_goes_with_perf_analyzer_beside(tmp_path, monkeypatch):
    """The README's second call for a next visit: the host's CPU floor by ONNX Runtime for the three models, and
    where InceptionV3's served time goes at tf32 after its floor; with perf_analyzer carried (visit.sh sets
    SERVE_BENCH_PERF_ANALYZER to .whl/perf_analyzer) and starting there, server_overhead runs it in each round, and
    without it the step runs as before."""
    import types

    readme = SCRIPT.with_name("README.md").read_text()
    (line,) = [x for x in readme.splitlines() if x.startswith("END_S=") and "overhead" in x]
    script = _script()
    args = script.arguments().parse_args(line.split("visit.sh ")[1].split())
    monkeypatch.setattr(script, "_jax_gpus", lambda plan: ["cuda:0 NVIDIA H100 80GB HBM3"])
    drawn: list[str] = []  # the ONNX Runtime copies, drawn from the skeletons carried (tests/test_onnx_skeleton.py)
    kept = types.SimpleNamespace(write_random=lambda models, model, version: drawn.append(model) or models / model)
    monkeypatch.setattr(script, "record", lambda name: kept)
    plan = script.Plan(tmp_path, 400, None)
    steps = script.build_steps(plan, args)
    assert [step.name for step in steps] == [
        "floor inception_v3 cpu fp32 onnxruntime",
        "overhead inception_v3 gpu-tf32",
        "floor mobilenet_v2 cpu fp32 onnxruntime",
        "floor resnet50 cpu fp32 onnxruntime",
    ]
    assert drawn == ["inception_v3", "mobilenet_v2", "resnet50"]

    commands: list[list[str]] = []
    real_popen = script.subprocess.Popen

    class Finished:  # server_overhead's child, stood in: its command is what is checked
        pid = 0

        def wait(self, timeout: float | None = None) -> int:
            return 0

        def poll(self) -> int:
            return 0

    def popen(command: list[str], **kwargs: object) -> object:
        if "benchmarks.server_overhead" not in command:  # perf_analyzer's start check runs for real
            return real_popen(command, **kwargs)
        commands.append(command)
        return Finished()

    monkeypatch.setattr(script.subprocess, "Popen", popen)
    carried = tmp_path / "perf_analyzer"
    carried.mkdir()
    (carried / "perf_analyzer").write_text("#!/bin/sh\necho 'Usage: perf_analyzer [options] --service-kind'\n")
    (carried / "perf_analyzer").chmod(0o755)  # one that starts: it prints its usage
    monkeypatch.setenv("SERVE_BENCH_PERF_ANALYZER", str(carried))
    script._overhead(plan, "inception_v3", "gpu", "tf32")
    monkeypatch.setenv("SERVE_BENCH_PERF_ANALYZER", str(tmp_path / "none"))
    script._overhead(plan, "inception_v3", "gpu", "tf32")
    assert "--perf-analyzer" in commands[0] and "--perf-analyzer" not in commands[1]


def test_the_third_call_serves_the_hosts_cpu_by_onnx_runtime(tmp_path, monkeypatch):
    """The README's third call, where device time is left: each model's served sweep on the host's CPU by ONNX
    Runtime (the CPU's served rows by a deployable runtime), from copies drawn from the carried skeletons, and no
    GPU step, so the CPU rehearsal is the call itself."""
    import types

    readme = SCRIPT.with_name("README.md").read_text()
    (line,) = [x for x in readme.splitlines() if x.startswith("END_S=") and "--steps served" in x]
    script = _script()
    args = script.arguments().parse_args(line.split("visit.sh ")[1].split())
    drawn: list[str] = []
    kept = types.SimpleNamespace(write_random=lambda models, model, version: drawn.append(model) or models / model)
    monkeypatch.setattr(script, "record", lambda name: kept)
    steps = script.build_steps(script.Plan(tmp_path, 90, None), args)
    assert [step.name for step in steps] == [
        f"served {model} cpu-fp32-onnxruntime" for model in ("inception_v3", "mobilenet_v2", "resnet50")
    ]
    assert drawn == ["inception_v3", "mobilenet_v2", "resnet50"]


def test_the_hosts_cpu_measured_by_onnx_runtime_from_a_carried_skeleton(models_dir, tmp_path, monkeypatch):
    """--cpu-runtime onnxruntime (on the 2-core VM XLA:CPU ran these convnets 2-28x slower than ONNX Runtime, which
    the GPU host has): the CPU's copy drawn from the skeleton SERVE_BENCH_ONNX_SKELETONS names, as visit.sh points
    the run at .whl/onnx; its served target and its floor name the runtime, and summarize.py puts that floor beside
    that target's served figures. Asked for GPU steps alone, the run draws no CPU copy (no skeleton needed)."""
    require_runtime("onnxruntime")
    from serve_bench.export import converted_model_path
    from serve_bench.runtimes._onnxruntime import SKELETONS_ENV, strip_weights

    skeletons = tmp_path / "skeletons"
    strip_weights(converted_model_path(models_dir, "onnxruntime", "tiny", 1), skeletons / "tiny.onnx")
    out = tmp_path / "gpu-run"
    args = ["--out", str(out), "--models", "tiny", "--devices", "cpu", "--cpu-runtime", "onnxruntime"]
    args += ["--cpu-batch-sizes", "1,4", "--steps", "served,cpu-floor", "--budget-s", "300"]
    env = {**os.environ, SKELETONS_ENV: str(skeletons)}
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == ["host", "served tiny cpu-fp32-onnxruntime", "floor tiny cpu fp32 onnxruntime"]
    assert all("error" not in s for s in steps), steps
    conversion = json.loads((out / "models/onnx/tiny/1/conversion.json").read_text())
    assert conversion["weights"].startswith("random") and "tiny.onnx" in conversion["converter"]
    floor = [json.loads(line) for line in (out / "floor/tiny-cpu-fp32-onnxruntime.jsonl").read_text().splitlines()]
    assert floor[0]["runtime"] == "onnxruntime" and floor[0]["in_effect"]["runtime"].startswith("onnxruntime ")
    points = [json.loads(line) for line in (out / "runs/tiny/points.jsonl").read_text().splitlines()]
    assert {p["target"]["runtime"] for p in points} == {"onnxruntime"}
    assert {p["target"]["name"] for p in points} == {"cpu-fp32-onnxruntime"}
    summary = subprocess.run(
        [sys.executable, str(SCRIPT.with_name("summarize.py")), str(out)], capture_output=True, text=True, timeout=300
    )
    assert summary.returncode == 0, summary.stderr[-2000:]
    (row,) = [line for line in summary.stdout.splitlines() if line.startswith("| cpu-fp32-onnxruntime |")]
    one = next(p for p in points if p["batch_size"] == 1)
    served_over_floor = one["throughput"]["items_per_s"] / floor[1]["images_per_s"]
    assert [c.strip() for c in row.strip("|").split("|")][5].startswith(f"{served_over_floor:.2f} ·")
    assert "In process on cpu-fp32-onnxruntime:" in summary.stdout
    # the next visit measures the CPU's floor in one call and its served sweep in another (benchmarks/gpu/README.md):
    # given both folders, the answer is the one folder's, the served share read from the other call's floor
    floor_call, served_call = tmp_path / "visit-2", tmp_path / "visit-3"
    shutil.copytree(out / "floor", floor_call / "floor")
    shutil.copytree(out / "runs", served_call / "runs")
    script = str(SCRIPT.with_name("summarize.py"))
    calls = subprocess.run([sys.executable, script, str(served_call), str(floor_call)], capture_output=True, text=True)
    assert calls.returncode == 0 and calls.stdout == summary.stdout, calls.stderr[-2000:]
    # the same floor in two calls' folders is two measurements: which one the share is over, the user says
    shutil.copytree(out / "floor", served_call / "floor")
    twice = subprocess.run([sys.executable, script, str(served_call), str(floor_call)], capture_output=True, text=True)
    assert twice.returncode == 2 and not twice.stdout, twice.stdout
    assert twice.stderr.count("\n") == 1 and "tiny-cpu-fp32-onnxruntime.jsonl is in both" in twice.stderr
    shutil.rmtree(served_call / "floor")
    shutil.copytree(out / "runs", floor_call / "runs")  # and a target served in both
    twice = subprocess.run([sys.executable, script, str(served_call), str(floor_call)], capture_output=True, text=True)
    assert twice.returncode == 2 and "tiny served on cpu-fp32-onnxruntime is in both" in twice.stderr, twice.stderr
    # a floor measured with no served target beside it (a visit's call that ran cpu-floor alone) still has its line
    for run in (out / "runs").iterdir():
        (run / "points.jsonl").unlink()
    alone = subprocess.run(
        [sys.executable, str(SCRIPT.with_name("summarize.py")), str(out)], capture_output=True, text=True, timeout=300
    )
    assert alone.returncode == 0 and "In process on cpu-fp32-onnxruntime:" in alone.stdout, alone.stderr[-2000:]
    # no step that runs the CPU: no copy drawn, so no skeleton asked for (the same run with none carried)
    monkeypatch.delenv(SKELETONS_ENV, raising=False)
    script = _script()
    plan = script.Plan(out=tmp_path / "gpu-only", budget_s=60, archive=None)
    args = script.arguments().parse_args(["--models", "tiny", "--devices", "cpu", "--cpu-runtime", "onnxruntime"])
    args.steps = "gpu-floor"
    assert script.build_steps(plan, args) == []
    assert not (tmp_path / "gpu-only/models/onnx").exists()
    with pytest.raises(script.UserError, match="no ONNX skeleton of tiny"):
        args.steps = "cpu-floor"
        script.build_steps(plan, args)
