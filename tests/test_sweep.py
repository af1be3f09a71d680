"""Sweeps: spec validation, resume, unreachable and dying targets, interruption."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from serve_bench.cli import main
from serve_bench.errors import UserError
from serve_bench.load import PointSettings
from serve_bench.stats import SCHEMA_VERSION, LoadInfo, ResultsWriter, read_points
from serve_bench.sweep import load_spec, measure_async, parse_spec, plan_points, run_sweep
from serve_bench.sweep._spec import MAX_POINTS
from tests._delay_server import MODEL, DelayServer
from tests._servers import local_server
from tests.conftest import free_port

ROOT = Path(__file__).parent.parent


def _spec(url: str, **extra: str) -> str:
    text = f"""
name = "t"
model = "{MODEL}"
batch_sizes = [1, 2]
[load]
concurrency = [1, 2]
[durations]
warmup_s = 0.1
min_duration_s = 0.4
min_requests = 3
max_duration_s = 1.5
[[targets]]
name = "delay"
url = "{url}"
metrics = ""
"""
    for key, value in extra.items():
        text = text.replace(f"{key} = ", f"{key} = {value} #", 1) if f"{key} = " in text else text + value
    return text


def test_shipped_specs_parse():
    for path in sorted((ROOT / "loadtests" / "sweeps").glob("*.toml")):
        spec = load_spec(path)
        assert spec.targets and plan_points(spec)
    assert {t.device for t in load_spec(ROOT / "loadtests/sweeps/cpu-vs-gpu.toml").targets} == {"cpu", "gpu"}


# a valid spec's targets; each bad-number case below appends one table (repeats go before any table)
_TARGET = "model = 'x'\nbatch_sizes = [1]\n[[targets]]\nname='a'\nurl='grpc://h:1'\n"


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "model = 'x'\nbatch_sizes = [1]\n[[targets]]\nname='a'\nurl='grpc://h:1'\n[load]\nconcurency = [1]\n",
            ["concurency", "[load]", "concurrency"],
        ),
        ("model = 'x'\nbatch_size = [1]\n[[targets]]\nname='a'\nurl='grpc://h:1'\n", ["batch_size", "batch_sizes"]),
        (
            "model = 'x'\nbatch_sizes = [1]\n[[targets]]\nname='a'\nurl='grpc://h:1'\ndevise='gpu'\n",
            ["devise", "targets", "#1"],
        ),
        ("model = 'x'\nbatch_sizes = [1,,2]\nname = 'a'\n", ["not valid TOML", "line 2"]),
        (
            "model = 'x'\nbatch_sizes = [0]\n[[targets]]\nname='a'\nurl='grpc://h:1'\n",
            ["batch_sizes[0]", ">= 1", "got 0"],
        ),
        ("model = 'x'\nbatch_sizes = [1]\n[[targets]]\nname='a'\nurl='ftp://h:1'\n", ["grpc://"]),
        ("model = 'x'\nbatch_sizes = [1]\n", ["targets"]),
        ("model = 'x'\nbatch_sizes = [1]\n[[targets]]\nname='a'\nurl='grpc://h:1'\n[slo]\npercentile='p42'\n", ["p99"]),
    ]
    + [
        (_TARGET + extra, words)
        for extra, words in [
            ("[load]\nrates = [inf]\n", ["load.rates[0]", "finite", "got inf"]),
            ("[load]\nrates = [5, nan]\n", ["load.rates[1]", "finite", "got nan"]),
            ("[load]\nconcurrency = [2, 0]\n", ["load.concurrency[1]", ">= 1"]),
            ("[load]\nprocesses = 0\n", ["load.processes", ">= 1"]),
            ("[durations]\nmin_duration_s = inf\n", ["durations.min_duration_s", "finite", "got inf"]),
            ("[durations]\ntolerance = -1\n", ["durations.tolerance", "> 0", "got -1"]),
            ("[durations]\nwarmup_s = -0.5\n", ["durations.warmup_s", ">= 0"]),
            ("[durations]\nwindows = 0\n", ["durations.windows", ">= 1"]),
            (
                "[durations]\nuntil_stable = true\nmin_duration_s = 10\nmax_duration_s = 5\n",
                ["durations.max_duration_s", "min_duration_s"],
            ),
            ("[slo]\nmax_ms = -5\n", ["slo.max_ms", "> 0", "got -5"]),
            ("[slo]\nmax_ms = nan\n", ["slo.max_ms", "finite"]),
            ("[slo]\nsearch = true\nsearch_steps = 0\n", ["slo.search_steps", ">= 1"]),
            (
                "[load]\nrates = [5, 10]\n[slo]\nsearch = true\nsearch_steps = 1000000000\n",
                ["slo.search_steps", "at most 30", "0.001 requests/s", "got 1000000000"],
            ),
            # the same point twice was measured twice, the first marked superseded as if it had failed
            ("[load]\nconcurrency = [1, 4, 1]\n", ["load.concurrency", "1 twice", "repeats"]),
            ("[load]\nrates = [5, 5.0]\n", ["load.rates", "5.0 twice"]),
            # refused when the spec is read, before any server is launched: a window of no request measures nothing
            ("[load]\nrates = [5, 0.1]\n[durations]\nmin_duration_s = 2\n", ["load.rates[1]", "schedules no request"]),
        ]
    ]
    + [("repeats = 0\n" + _TARGET, ["repeats", ">= 1", "got 0"])]
    + [("repeats = 1000000000\n" + _TARGET, ["1,000,000,000 points", "repeats", "at most 100,000"])]
    + [("version = 99999999999999999999\n" + _TARGET, ["version", "from 1 to 9223372036854775807", "int64"])]
    + [(_TARGET.replace("batch_sizes = [1]", "batch_sizes = [1, 2, 1]"), ["batch_sizes", "1 twice"])]
    + [('payloads = ["float", "float"]\n' + _TARGET, ["payloads", "'float' twice"])]
    # measured at concurrency 1, as if the key were absent (batch_sizes = [] is refused)
    + [(_TARGET + "[load]\nconcurrency = []\n", ["load.concurrency is empty", "concurrency = [1, 8]"])]
    + [(_TARGET.replace("name='a'", "name=' '"), ["targets[0].name is empty"])]  # the verdict read "• : batch 2…"
    + [(_TARGET + "metrics = 'ftp://h/metrics'\n", ["targets[0].metrics", "http:// or https://", "'ftp://h/metrics'"])],
    ids=[
        "load-key",
        "top-key",
        "target-key",
        "toml-syntax",
        "zero-batch",
        "scheme",
        "no-targets",
        "percentile",
        "rate-inf",
        "rate-nan",
        "concurrency-0",
        "processes-0",
        "duration-inf",
        "tolerance-negative",
        "warmup-negative",
        "windows-0",
        "cap-below-minimum",
        "slo-negative",
        "slo-nan",
        "search-steps-0",
        "search-steps-billion",
        "concurrency-twice",
        "rates-twice",
        "rate-schedules-none",
        "repeats-0",
        "repeats-billion",
        "version-past-int64",
        "batch-twice",
        "payload-twice",
        "concurrency-empty",
        "target-name-empty",
        "metrics-not-http",
    ],
)
def test_bad_specs_say_what_and_where(text, words):
    with pytest.raises(UserError) as info:
        parse_spec(text, "spec.toml")
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_the_grid_is_counted_as_it_is_planned_and_refused_past_its_most(tmp_path, capsys):
    """spec.size() is the number of plans plan_points builds (server-batching levels at batch 1 only, those not
    already in concurrency); a spec one point past MAX_POINTS is refused in one line before any plan is built,
    where `repeats = 1000000000` used to die of MemoryError building a billion plans."""
    grid = (
        "model = 'x'\nbatch_sizes = [1, 4]\npayloads = ['float', 'jpeg']\nrepeats = {repeats}\n"
        "[load]\nconcurrency = [1, 2]\nrates = [5]\nserver_batching_concurrency = [2, 8]\n"
        "[[targets]]\nname='a'\nurl='grpc://h:1'\n[[targets]]\nname='b'\nurl='grpc://h:2'\n"
    )
    spec = parse_spec(grid.format(repeats=3), "spec.toml")
    plans = plan_points(spec)
    # 2 targets x 2 payloads x ((2 + 1 + 1 at batch 1) + (2 + 1 at batch 4)) x 3 repeats
    assert spec.size() == len(plans) == 2 * 2 * 7 * 3
    assert {p.batch_size for p in plans if p.load.concurrency == 8} == {1}  # server batching: batch 1 alone
    one = _TARGET.replace("batch_sizes = [1]", "batch_sizes = [4]")  # one point a repeat
    assert parse_spec(f"repeats = {MAX_POINTS}\n{one}", "spec.toml").size() == MAX_POINTS
    with pytest.raises(UserError, match=f"the grid has {MAX_POINTS + 1:,} points"):
        parse_spec(f"repeats = {MAX_POINTS + 1}\n{one}", "spec.toml")
    path = tmp_path / "huge.toml"
    path.write_text(grid.format(repeats=10**9))
    assert main(["sweep", str(path), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "28,000,000,000 points" in err and "\n" not in err
    assert not (tmp_path / "run").exists()


def test_the_slo_search_takes_as_many_steps_as_the_rounding_allows():
    """30 halvings take MAX_RATE below the 0.001 requests/s a searched rate is rounded to: 30 is taken, 31 is
    refused (tests above), where 1,000,000,000 steps looped for ever on rates already measured."""
    text = _TARGET + "[load]\nrates = [5, 10]\n[slo]\nsearch = true\nsearch_steps = 30\n"
    assert parse_spec(text, "spec.toml").slo_search_steps == 30
    with pytest.raises(UserError, match="at most 30"):
        parse_spec(text.replace("search_steps = 30", "search_steps = 31"), "spec.toml")


def test_cli_reports_spec_errors_in_one_line(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text("model = 'x'\nbatch_sizes = [1]\n[[targets]]\nname='a'\nurl='grpc://h:1'\nspeed = 3\n")
    assert main(["sweep", str(spec)]) == 2
    err = capsys.readouterr().err.strip()
    assert "speed" in err and "\n" not in err


async def test_sweep_writes_every_point_and_resume_skips_them(tmp_path):
    with DelayServer(delay=0.002) as server:
        spec = parse_spec(_spec(server.grpc_url))
        run_dir = tmp_path / "run"
        outcome = await run_sweep(spec, run_dir)
        assert len(outcome.measured) == 4
        points = read_points(run_dir)
        assert [p.key for p in points] == [p.key for p in plan_points(spec)]
        assert all(p.counts.ok > 0 and p.schema_version == SCHEMA_VERSION for p in points)
        run = json.loads((run_dir / "run.json").read_text())
        assert run["config_hash"] and run["cpu_model"] and "grpcio" in run["libraries"]

        # a second run with --resume measures nothing new
        again = await run_sweep(spec, run_dir, resume=True)
        assert again.measured == [] and again.skipped == 4
        # a run extended by one batch size measures only the new points
        bigger = parse_spec(_spec(server.grpc_url).replace("batch_sizes = [1, 2]", "batch_sizes = [1, 2, 4]"))
        extended = await run_sweep(bigger, run_dir, resume=True)
        assert extended.skipped == 4 and len(extended.measured) == 2
        assert len(read_points(run_dir)) == 6

        # a runtime stated now where none was (runs from before runtimes were recorded served TensorFlow)
        stated = parse_spec(_spec(server.grpc_url).replace('metrics = ""', 'metrics = ""\nruntime = "tensorflow"'))
        kept = await run_sweep(stated, run_dir, resume=True)
        assert kept.skipped == 4 and kept.measured == []
        # the same target name, now declared on another runtime: nothing measured before counts for it
        relabelled = parse_spec(_spec(server.grpc_url).replace('metrics = ""', 'metrics = ""\nruntime = "openvino"'))
        assert relabelled.targets[0].runtime == "openvino"
        redone = await run_sweep(relabelled, run_dir, resume=True)
        assert redone.skipped == 0 and redone.remeasured == 4 and len(redone.measured) == 4
        current = read_points(run_dir)  # superseded lines stay in the file, out of the report
        assert {p.target.runtime for p in current if p.batch_size in (1, 2)} == {"openvino"}


async def test_a_run_folder_being_written_is_refused_before_launching_or_connecting(tmp_path):
    """``--resume`` of a run still measuring (its writer holds points.jsonl's lock): refused at once in the
    lock's words, before a second server is started beside the run's (servers/<name>) or a target is dialled
    (the unreachable one would otherwise say "not usable")."""
    run_dir = tmp_path / "run"
    launched = parse_spec(
        f'name = "t"\nmodel = "{MODEL}"\nbatch_sizes = [1]\n[[targets]]\nname = "a"\nlaunch = "local"\n'
    )
    unreachable = parse_spec(_spec(f"grpc://127.0.0.1:{free_port()}"))
    with ResultsWriter(run_dir):
        for spec in (launched, unreachable):
            with pytest.raises(UserError, match="is being written by another serve-bench run"):
                await run_sweep(spec, run_dir, resume=True)
    assert sorted(p.name for p in run_dir.iterdir()) == ["points.jsonl"]


async def test_unreachable_target_fails_before_measuring(tmp_path):
    spec = parse_spec(_spec(f"grpc://127.0.0.1:{free_port()}"))
    with pytest.raises(UserError) as info:
        await run_sweep(spec, tmp_path / "run")
    assert "delay" in str(info.value) and "not usable" in str(info.value)
    assert not (tmp_path / "run" / "points.jsonl").exists()


async def test_target_dying_mid_sweep_keeps_points_and_skips_the_rest(tmp_path):
    server = DelayServer(delay=0.002).start()
    spec = parse_spec(_spec(server.grpc_url))
    seen = []

    def on_point(plan, point, done, total, eta):
        if point is not None:
            seen.append(point)
            if len(seen) == 1:
                server.stop()  # the server dies after the first point

    outcome = await run_sweep(spec, tmp_path / "run", on_point=on_point)
    points = read_points(tmp_path / "run")
    assert points[0].counts.ok > 0
    assert len(points) == 2  # the point that met the dead server records its errors
    assert points[1].counts.ok == 0 and points[1].error_count > 0
    assert "delay" in outcome.failed_targets


def test_unwritable_results_directory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with DelayServer(delay=0.002) as server:
        spec = tmp_path / "spec.toml"
        spec.write_text(_spec(server.grpc_url))
        assert main(["sweep", str(spec), "--run-dir", str(blocker / "run")]) == 2
    err = capsys.readouterr().err
    assert "cannot write results" in err


def test_ctrl_c_keeps_finished_points(tmp_path):
    with DelayServer(delay=0.002) as server:
        spec = tmp_path / "spec.toml"
        spec.write_text(_spec(server.grpc_url).replace("min_duration_s = 0.4", "min_duration_s = 1.0"))
        run_dir = tmp_path / "run"
        process = subprocess.Popen(
            [sys.executable, "-m", "serve_bench", "sweep", str(spec), "--run-dir", str(run_dir), "--no-progress"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (run_dir / "points.jsonl").exists() and (run_dir / "points.jsonl").read_text().count("\n") >= 1:
                break
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 130, output
    assert "--resume" in output and "Traceback" not in output
    kept = read_points(run_dir)
    assert 1 <= len(kept) < 4


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc: a launched server runs in a session of its own)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_sigterm_stops_the_server_the_sweep_launched(tmp_path, models_dir):
    """SIGTERM (what `timeout`, a CI's cancel and `docker stop` send) to a sweep that launched its server: the
    sweep stops as from Ctrl-C (143, "terminated", no traceback) and the server it launched is gone. The server
    runs in a session of its own, so a signal to the sweep's process group does not reach it; before, Python's
    default on SIGTERM ended the sweep with no cleanup and left the server running, its ports held, with no
    parent (found by a fresh-eyes review)."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
name = "t"
model = "tiny"
models_dir = "{models_dir}"
batch_sizes = [1]
[durations]
warmup_s = 0.1
min_duration_s = 60
[[targets]]
name = "local"
launch = "local"
"""
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "serve_bench", "sweep", str(spec), "--run-dir", str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    output = []
    for line in process.stdout:  # the first point starts once its server answers
        output.append(line)
        if "[1/" in line:
            break
    servers = _children(process.pid)
    assert servers, "".join(output)
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=60)
    output.append(rest)
    assert process.returncode == 143, "".join(output)
    assert "terminated: every finished point is kept" in rest and "Traceback" not in rest
    assert not [pid for pid in servers if Path(f"/proc/{pid}").exists()], "".join(output)


async def test_until_stable_stops_once_windows_agree(tmp_path):
    from serve_bench.client import connect
    from serve_bench.load import PointSettings, analyze, is_stable, make_inputs, run_closed_loop

    with DelayServer(delay=0.005) as server:
        settings = PointSettings(
            warmup_s=0.2, min_duration_s=0.5, min_requests=10, until_stable=True, max_duration_s=10.0, tolerance=0.2
        )
        async with connect(server.grpc_url, MODEL) as client:
            prepared = client.prepare(make_inputs("float", 1, client.signature_info))
            run = await run_closed_loop(
                client,
                prepared,
                2,
                settings,
                stable=lambda r, s, e: is_stable(r, s, e, settings.windows, settings.tolerance),
            )
    figures = analyze(run, "closed", settings)
    assert figures.stability.stable
    assert run.window_end - run.window_start < 5.0  # stopped well before max_duration_s
    assert not run.notes


def test_bench_with_two_processes_merges_their_load(tmp_path, capsys):
    """Two processes with two requests in flight each: their answers are counted together.

    The baseline is one process with two in flight, against the same server in the same test.
    The server serves every request at once after 5 ms, so four in flight answer about twice
    as fast as two; ratios measured here on the shared 2-core box: 1.71, 1.74, 1.81 (two
    generator processes and the server share the cores), so > 1.3 leaves room for that spread
    while a second process whose answers were lost (ratio ~1) fails.
    """

    def bench(out: Path, concurrency: int, processes: int) -> int:
        argv = f"bench {server.grpc_url} --model {MODEL} --warmup 0.3 --duration 1.5 --metrics="
        return main(
            [*argv.split(), "--concurrency", str(concurrency), "--processes", str(processes), "--run-dir", str(out)]
        )

    with DelayServer(delay=0.005) as server:
        assert bench(tmp_path / "one", 2, 1) == 0
        assert bench(tmp_path / "two", 4, 2) == 0
    (single,) = read_points(tmp_path / "one")
    (merged,) = read_points(tmp_path / "two")
    assert merged.load.processes == 2 and "load from 2 processes" in merged.notes
    ratio = merged.throughput.requests_per_s / single.throughput.requests_per_s
    print(f"two processes / one: {ratio:.2f}")
    assert ratio > 1.3, f"two processes answered only {ratio:.2f}x one process's requests"


async def test_slo_search_finds_the_highest_rate_that_meets_it(tmp_path):
    with DelayServer(delay=0.01) as server:
        server.set_capacity(1)  # 10 ms of service, one at a time: saturates at 100 req/s
        spec = parse_spec(f"""
name = "slo"
model = "{MODEL}"
batch_sizes = [1]
[load]
rates = [20, 300]
arrival = "constant"
[durations]
warmup_s = 0.2
min_duration_s = 1.2
[slo]
percentile = "p99"
max_ms = 50
search = true
search_steps = 3
[[targets]]
name = "delay"
url = "{server.grpc_url}"
metrics = ""
""")
        outcome = await run_sweep(spec, tmp_path / "run")
        # Resumed, the search goes on from the steps already measured: with the same spec it measures
        # nothing (the grid is complete, every step is in the file); with one more step it measures
        # exactly that step, bisecting the bracket the first three left.
        same = await run_sweep(spec, tmp_path / "run", resume=True)
        longer = parse_spec(spec.text.replace("search_steps = 3", "search_steps = 4"))
        extended = await run_sweep(longer, tmp_path / "run", resume=True)
        # The server's capacity on this machine, measured in the same run (closed loop, 4 in flight,
        # so its one slot never idles): the baseline the search's bracket is judged against.
        capacity = await measure_async(
            server.grpc_url,
            MODEL,
            load=LoadInfo("closed", concurrency=4),
            settings=PointSettings(warmup_s=0.2, min_duration_s=1.2, min_requests=20),
            metrics_url="",
        )

    def meets(point) -> bool:
        return point.error_count == 0 and point.latency.p99 / 1000 <= 50

    first = {p.load.rate: p for p in outcome.measured[:2]}
    assert meets(first[20.0]) and not meets(first[300.0])
    searched = [p for p in outcome.measured if any("slo-search" in n for n in p.notes)]
    assert len(searched) == 3 and all(p.load.mode == "open" for p in searched)
    low, high = 20.0, 300.0  # bisection: each step halves the bracket by its own result
    for point in searched:
        assert point.load.rate == round((low + high) / 2, 3)
        low, high = (point.load.rate, high) if meets(point) else (low, point.load.rate)
    # The bracket ends near the server's capacity. Above: the delay server sleeps 10 ms per request,
    # one at a time, so no rate above 100 req/s can meet the SLO on any machine (a bound set by the
    # server's design, not by this machine's speed; +5% for the schedule's granularity). Below: the
    # capacity measured above on this machine, in this run (it reads low on a busy machine, 79 req/s
    # with a core kept busy, so it is a conservative floor); three halvings of 20..300 cannot stop
    # further below it than one final halving of the bracket (35 req/s).
    assert low <= 1.05 * 100
    assert high >= 0.5 * capacity.throughput.requests_per_s
    assert same.measured == [] and same.skipped == 2
    (fourth,) = extended.measured
    assert fourth.load.rate == round((low + high) / 2, 3) and "slo-search step 4" in fourth.notes
    assert len(read_points(tmp_path / "run")) == 6


async def test_resume_measures_again_the_points_a_dead_target_left(tmp_path):
    """A point with no successes or cut off is measured again on resume; its old line stays, superseded."""
    server = DelayServer(delay=0.002).start()
    spec = parse_spec(_spec(server.grpc_url))
    run_dir = tmp_path / "run"

    def on_point(plan, point, done, total, eta):
        if point is not None and done == 1:
            server.stop()  # the server dies after the first point

    await run_sweep(spec, run_dir, on_point=on_point)
    before = read_points(run_dir)
    unusable = {p.id for p in before if p.needs_remeasure}
    assert before[0].counts.ok > 0 and unusable  # the point that met the dead server at least
    server.start()  # the same server is back on the same ports
    try:
        again = await run_sweep(spec, run_dir, resume=True)
    finally:
        server.stop()
    current = read_points(run_dir)
    assert sorted(p.key for p in current) == sorted(p.key for p in plan_points(spec))
    assert all(p.counts.ok > 0 and not p.needs_remeasure for p in current)
    everything = read_points(run_dir, include_superseded=True)
    assert {p.supersedes for p in everything if p.supersedes} == unusable  # each old line kept, marked
    assert again.remeasured == len(unusable) and again.skipped == 1


def test_bench_refuses_to_mix_settings_in_one_directory(tmp_path, capsys):
    out = tmp_path / "bench"
    with DelayServer(delay=0.002) as server:
        argv = ["bench", server.grpc_url, "--model", MODEL, "--metrics", "", "--run-dir", str(out), "--warmup", "0.1"]
        argv.append("--no-until-stable")  # settings are under test here, not stability: fixed-length points
        assert main([*argv, "--duration", "0.4"]) == 0
        recorded = json.loads((out / "run.json").read_text())
        assert recorded["settings"]["min_duration_s"] == 0.4 and recorded["command"] == "bench"
        assert main([*argv, "--duration", "0.4", "--concurrency", "2", "--runtime", "openvino"]) == 0  # appended
        # --runtime labels the point (the delay server runs nothing; a real OVMS target would)
        assert [p.target.runtime for p in read_points(out)] == ["", "openvino"]
        capsys.readouterr()
        assert main([*argv, "--duration", "0.8"]) == 2  # measured differently: refused before measuring
    err = capsys.readouterr().err
    assert "min_duration_s 0.4 there, 0.8 now" in err and "\n" not in err.strip()
    assert len(read_points(out)) == 2
    assert json.loads((out / "run.json").read_text()) == recorded  # not overwritten


def test_a_folder_holds_each_point_at_one_server_and_a_sweep_continues_only_its_own(tmp_path, capsys):
    """bench's target is named "bench" unless --target-name says otherwise: a REST bench of the same point into a
    folder that held it over gRPC was appended, and ``report`` pooled the two as repeats of one point ("bench b1 c1
    ×2", one interval over two protocols). It is refused in one line before measuring; under its own name it is
    taken, and so is another point (another load) under the same name, as the README's bench lines do.
    A sweep (with or without --resume) into that bench folder is refused too: --resume appended the spec's points
    beside bench's and wrote the sweep's run.json over bench's."""
    out = tmp_path / "bench"
    with DelayServer(delay=0.002) as server:
        argv = ["--model", MODEL, "--metrics", "", "--run-dir", str(out), "--warmup", "0.1", "--duration", "0.3"]
        argv.append("--no-until-stable")
        assert main(["bench", server.grpc_url, *argv]) == 0
        recorded = (out / "run.json").read_bytes()
        capsys.readouterr()
        assert main(["bench", server.rest_url, *argv]) == 2
        err = capsys.readouterr().err.strip()
        key = "bench|delay|serving_default|float|b1|closed|c1|#0"
        assert err.endswith(
            f"{out} holds point {key} measured at {server.grpc_url}, and this one is at {server.rest_url}: report "
            "would take them for repeats of one measurement; name this target with --target-name, or write it to "
            "another --run-dir"
        ), err
        assert "\n" not in err and len(read_points(out)) == 1
        assert main(["bench", server.rest_url, *argv, "--target-name", "rest"]) == 0
        assert capsys.readouterr().err == ""
        assert main(["bench", server.rest_url, *argv, "--concurrency", "2"]) == 0
        # taken, and said: report groups a folder's points by target name, so one name reads as one server
        assert capsys.readouterr().err == (
            f"serve-bench bench: warning: {out} also holds target 'bench' at {server.grpc_url}: report shows both "
            "servers as one target; give each its own --target-name\n"
        )
        assert [(p.target.name, p.target.url, p.load.concurrency) for p in read_points(out)] == [
            ("bench", server.grpc_url, 1),
            ("rest", server.rest_url, 1),
            ("bench", server.rest_url, 2),
        ]
        spec = parse_spec(_spec(server.grpc_url, batch_sizes="[1]", concurrency="[1]", min_duration_s="0.3"))
        for resume in (True, False):
            with pytest.raises(UserError) as refused:
                asyncio.run(run_sweep(spec, out, resume=resume))
            said = f"{out} holds a run of `serve-bench bench`, not of a sweep spec; choose another --run-dir"
            assert str(refused.value) == said
    assert len(read_points(out)) == 3 and (out / "run.json").read_bytes() == recorded


def test_a_metrics_page_the_user_names_is_an_http_url_and_one_that_does_not_answer_is_said(tmp_path, capsys):
    """``--metrics notaurl`` (or ftp://, or a spec's ``metrics``) was measured and said only as a note inside
    points.jsonl; it is refused before anything is made, naming the flag or key. A page that is a URL but does not
    answer still measures the point (the client's figures stand) and says so on stderr, since the user asked for
    the server's split; without --metrics (the server's default page) nothing more is said."""
    out = tmp_path / "bench"
    common = ["--model", MODEL, "--run-dir", str(out), "--warmup", "0.1", "--duration", "0.3", "--no-until-stable"]
    for url in ("notaurl", "ftp://x/metrics"):
        assert main(["bench", f"grpc://127.0.0.1:{free_port()}", *common, "--metrics", url]) == 2
        assert capsys.readouterr().err.strip() == (
            f"serve-bench bench: error: --metrics must be an http:// or https:// URL of a Prometheus metrics page, "
            f"got {url!r}"
        )
    assert not out.exists()
    with pytest.raises(UserError, match=r"^spec: targets\[0\]\.metrics must be an http:// or https:// URL of a "):
        parse_spec(_spec("grpc://127.0.0.1:1").replace('metrics = ""', 'metrics = "notaurl"'))
    silent = f"http://127.0.0.1:{free_port()}/metrics"
    with DelayServer(delay=0.002) as server:
        assert main(["bench", server.grpc_url, *common, "--metrics", silent]) == 0
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"serve-bench bench: warning: server metrics unavailable: metrics endpoint {silent} ")
        assert err.endswith("; the point has no server split") and "\n" not in err, err
        assert main(["bench", server.grpc_url, *common, "--metrics", ""]) == 0  # none asked: nothing said
        assert capsys.readouterr().err == ""
    assert len(read_points(out)) == 2


def test_a_bench_that_measured_nothing_leaves_its_folder_free(tmp_path, capsys):
    """A first bench refused at connect (a wrong port) wrote run.json and no point; a second, with other settings,
    measures into the same folder and its run.json says how (it was refused for "other settings" of no point)."""
    out = tmp_path / "bench"
    common = ["--model", MODEL, "--metrics", "", "--run-dir", str(out), "--warmup", "0.1", "--no-until-stable"]
    assert main(["bench", f"grpc://127.0.0.1:{free_port()}", *common, "--duration", "0.3"]) == 2
    with DelayServer(delay=0.002) as server:
        capsys.readouterr()
        assert main(["bench", server.grpc_url, *common, "--duration", "0.4"]) == 0, capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["settings"]["min_duration_s"] == 0.4
    assert len(read_points(out)) == 1


async def test_a_sweep_into_a_folder_that_holds_points_resumes_it_or_is_refused(tmp_path):
    """A folder with points is one run: a sweep without --resume is refused (it appended every key a second time,
    unmarked, and report showed one of each pair), and --resume with other [durations] is refused naming them, as
    bench is (it kept the old points and wrote the new settings into run.json)."""
    run_dir = tmp_path / "run"
    with DelayServer(delay=0.002) as server:
        spec = parse_spec(_spec(server.grpc_url, batch_sizes="[1]", concurrency="[1]"))
        await run_sweep(spec, run_dir)
        written = (run_dir / "points.jsonl").read_bytes(), (run_dir / "run.json").read_bytes()
        with pytest.raises(UserError, match="already holds points; continue that run with --resume"):
            await run_sweep(spec, run_dir)
        longer = parse_spec(_spec(server.grpc_url, batch_sizes="[1]", concurrency="[1]", min_duration_s="0.5"))
        with pytest.raises(UserError, match=r"other settings \(min_duration_s 0.4 there, 0.5 now\)"):
            await run_sweep(longer, run_dir, resume=True)
        assert ((run_dir / "points.jsonl").read_bytes(), (run_dir / "run.json").read_bytes()) == written
        assert (await run_sweep(spec, run_dir, resume=True)).skipped == 1  # the same spec resumes it


async def test_resuming_a_folder_of_another_command_s_points_names_what_to_do(tmp_path):
    """A folder of another command's points (import-locust's, whose run.json records no settings): --resume is
    refused naming that command, with advice that can be followed (it said "resume it with the [durations] it was
    measured with", which none can)."""
    from tests._points import make_point

    run_dir = tmp_path / "locust"
    with ResultsWriter(run_dir) as writer:
        writer.append(make_point("cpu", "cpu", 1, 5_000.0))
        writer.write_run({"command": "import-locust"})
    spec = parse_spec(_spec(f"grpc://127.0.0.1:{free_port()}"))
    with pytest.raises(UserError, match=r"holds a run of `serve-bench import-locust`, not of a sweep spec; choose"):
        await run_sweep(spec, run_dir, resume=True)


def test_bench_exits_1_when_no_request_succeeded(tmp_path, capsys):
    with DelayServer(delay=0.002) as server:
        # the delay server answers metadata for any name but NOT_FOUND to a prediction for another model
        code = main(
            [
                "bench",
                server.grpc_url,
                "--model",
                "other",
                "--metrics",
                "",
                "--run-dir",
                str(tmp_path / "b"),
                "--warmup",
                "0.1",
                "--duration",
                "0.3",
            ]
        )
    err = capsys.readouterr().err
    assert code == 1
    assert "no request succeeded" in err and "NOT_FOUND" in err
    (point,) = read_points(tmp_path / "b")  # the failed point is kept, flagged
    assert point.counts.ok == 0 and "no successes" in point.flags()


def test_sweeps_run_until_stable_with_a_cap_unless_told_not_to():
    """Issue 11: until_stable with a time cap is the sweep default; a spec can still turn it off."""
    default = parse_spec(_TARGET).settings
    assert default.until_stable and default.max_duration_s > default.min_duration_s
    assert not parse_spec(_TARGET + "[durations]\nuntil_stable = false\n").settings.until_stable


def _write_images(directory: Path, count: int) -> Path:
    from PIL import Image

    directory.mkdir()
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(directory / f"{i}.png")
    return directory


async def test_bench_and_sweep_send_real_images(models_dir, tmp_path, capsys):
    """--input-data / input_data: the points record the images they sent instead of synthetic ones."""
    images = _write_images(tmp_path / "images", 3)
    with local_server(models_dir) as server:
        argv = f"bench {server.grpc_url} --model tiny --warmup 0.1 --duration 0.4 --min-requests 5 --batch-size 2"
        code = await asyncio.to_thread(
            main, [*argv.split(), "--input-data", str(images), "--metrics", "", "--run-dir", str(tmp_path / "b")]
        )
        assert code == 0
        spec = parse_spec(f"""
model = "tiny"
batch_sizes = [4]
input_data = "{images}"
[durations]
warmup_s = 0.1
min_duration_s = 0.4
min_requests = 5
max_duration_s = 1
[[targets]]
name = "local"
url = "{server.rest_url}"
metrics = ""
""")
        await run_sweep(spec, tmp_path / "s")
    for run in ("b", "s"):
        (point,) = read_points(tmp_path / run)
        assert point.inputs is not None and point.inputs.kind == "images", run
        assert point.inputs.count == 3 and point.inputs.path == str(images) and point.counts.ok > 0


@pytest.mark.parametrize(
    "extra, words",
    [
        ('input_data = "/no/such/dir"\n', ["input_data", "no such file"]),
        ('input_data = "."\n[load]\nprocesses = 2\n', ["input_data", "load.processes = 1"]),
    ],
)
def test_bad_input_data_in_a_spec(extra, words):
    with pytest.raises(UserError) as info:
        parse_spec("model = 'x'\nbatch_sizes = [1]\n" + extra + "[[targets]]\nname='a'\nurl='grpc://h:1'\n", "s.toml")
    for word in words:
        assert word in str(info.value)


def test_a_launched_server_runs_from_relative_folders(models_dir, tmp_path, monkeypatch, capsys):
    """``--run-dir`` and ``models_dir`` relative to where the command runs (the default run folder is
    ``results/<name>-<time>``): the launched server runs with its own folder as its working folder, so every path
    it is given must be absolute (its monitoring config was given relative to the sweep's folder, and the server
    exited at start, 2026-11-29)."""
    monkeypatch.chdir(tmp_path)
    Path("spec.toml").write_text(
        f'name = "rel"\nmodel = "tiny"\nmodels_dir = "{os.path.relpath(models_dir, tmp_path)}"\nbatch_sizes = [1]\n'
        "[durations]\nwarmup_s = 0.1\nmin_duration_s = 0.3\nuntil_stable = false\n"
        '[[targets]]\nname = "local"\nlaunch = "local"\nbatching = { batching_parameters_file = "batching.txt" }\n'
    )
    Path("batching.txt").write_text("max_batch_size { value: 4 }\nbatch_timeout_micros { value: 1000 }\n")
    assert main(["sweep", "spec.toml", "--run-dir", "run"]) == 0, capsys.readouterr().err
    assert [p.counts.ok > 0 for p in read_points(Path("run"))] == [True]
