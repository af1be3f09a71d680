"""The command line: one table of commands, bad numbers refused in one line naming the flag, library reachable."""

from __future__ import annotations

import argparse
import datetime as dt
import math
from pathlib import Path

import pytest

from serve_bench.cli import COMMANDS, Command, main
from serve_bench.errors import InvalidValue
from serve_bench.load import PointSettings, check_load, check_settings
from serve_bench.stats import POINTS_FILE, LoadInfo, Slo
from serve_bench.sweep import measure
from tests._delay_server import MODEL, DelayServer
from tests.conftest import free_port


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_in_the_table_answers_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([name, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert f"serve-bench {name}" in out and COMMANDS[name].help.split()[0] in out


def test_the_table_holds_the_commands_design_md_names() -> None:
    assert {"export", "serve", "bench", "sweep", "tune", "pipeline", "report", "compare", "demo"} <= set(COMMANDS)


@pytest.mark.parametrize(
    "flags, words",
    [
        ("--rate nan", ["--rate", "finite", "nan"]),
        ("--rate inf", ["--rate", "finite", "inf"]),
        ("--rate -5", ["--rate", "> 0", "-5"]),
        ("--concurrency 0", ["--concurrency", ">= 1", "got 0"]),
        ("--batch-size 0", ["--batch-size", ">= 1", "got 0"]),
        ("--processes 0", ["--processes", ">= 1"]),
        ("--duration inf", ["--duration", "finite", "inf"]),
        ("--duration 0", ["--duration", "> 0"]),
        ("--warmup -1", ["--warmup", ">= 0"]),
        ("--tolerance -1", ["--tolerance", "> 0", "-1"]),
        ("--tolerance nan", ["--tolerance", "finite"]),
        ("--windows 0", ["--windows", ">= 1"]),
        ("--timeout 0", ["--timeout", "> 0"]),
        ("--until-stable --duration 10 --max-duration 5", ["--max-duration", "min_duration_s"]),
        ("--max-errors nan", ["--max-errors", "finite"]),
        ("--max-errors 2", ["--max-errors", "at most 1", "a share of the requests"]),
        ("--rate 0.01 --duration 1", ["--rate", "more than 0.5 requests/s", "schedules no request"]),
        ("--runtime tensorrt", ["--runtime", "tensorflow | onnxruntime | openvino", "tensorrt"]),
    ],
)
def test_bench_refuses_bad_numbers_naming_the_flag(flags: str, words: list[str], tmp_path, capsys) -> None:
    # nothing listens on the port: each refusal must come before any connection is tried
    argv = [
        "bench",
        f"grpc://127.0.0.1:{free_port()}",
        "--model",
        "m",
        "--run-dir",
        str(tmp_path / "b"),
        *flags.split(),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("serve-bench bench: error: ")
    for word in words:
        assert word in err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "slo, words",
    [
        ("p99=-5", ["--slo", "> 0", "-5"]),
        ("p99=nan", ["--slo", "finite"]),
        ("p99=inf", ["--slo", "finite"]),
        ("p99=fast", ["--slo", "number", "fast"]),
        ("p42=5", ["--slo percentile", "p99", "p42"]),
        ("p99", ["--slo", "p99=100"]),
    ],
)
def test_report_refuses_a_bad_slo(slo: str, words: list[str], tmp_path, capsys) -> None:
    assert main(["report", str(tmp_path), "--slo", slo]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    for word in words:
        assert word in err


@pytest.mark.parametrize(
    "content, words",
    [
        (b"\xff\xfe\x00garbage\n", [":1:", "UTF-8"]),
        (b"[1, 2, 3]\n", [":1:"]),
        (b'{"schema_version": 2}\n', [":1:"]),
    ],
    ids=["not-utf8", "json-list", "json-not-a-point"],
)
def test_report_names_the_bad_line_of_a_results_file(content: bytes, words: list[str], tmp_path, capsys) -> None:
    (tmp_path / POINTS_FILE).write_bytes(content)
    assert main(["report", str(tmp_path), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    for word in words:
        assert word in err


def test_a_missing_optional_package_leaves_the_other_commands_working(monkeypatch, capsys) -> None:
    def needs_av(parser: argparse.ArgumentParser) -> None:
        raise ImportError("No module named 'av'")

    monkeypatch.setitem(COMMANDS, "pipeline", Command("decode a video", needs_av, lambda args: 0))
    assert main(["pipeline", "clip.mp4", "--url", "grpc://h:1"]) == 2
    err = capsys.readouterr().err
    assert "pipeline command is not available" in err and "'av'" in err
    with pytest.raises(SystemExit) as info:
        main(["export", "--help"])
    assert info.value.code == 0


def test_library_checks_name_the_parameter_not_a_flag() -> None:
    """Library errors say what is wrong in the library's terms; only the CLI speaks of flags."""
    with pytest.raises(InvalidValue) as info:
        check_settings(PointSettings(min_duration_s=math.inf))
    assert str(info.value) == "min_duration_s must be a finite number > 0, got inf"
    assert info.value.name == "min_duration_s"
    with pytest.raises(InvalidValue, match=r"^rate must be a finite number > 0, got nan$"):
        check_load(LoadInfo("open", rate=math.nan, arrival="poisson"))
    with pytest.raises(InvalidValue, match=r"^max_ms must be a finite number > 0, got -5$"):
        Slo("p99", -5)
    assert Slo.parse("p99_9=250") == Slo("p99_9", 250.0)


def test_measure_is_reachable_from_python(tmp_path) -> None:
    """One point from Python, no CLI: the same checks, the same Point the commands write."""
    with DelayServer(delay=0.002) as server:
        settings = PointSettings(warmup_s=0.1, min_duration_s=0.4, min_requests=5)
        point = measure(
            server.grpc_url,
            MODEL,
            batch_size=2,
            load=LoadInfo("closed", concurrency=2),
            settings=settings,
            metrics_url="",
        )
        with pytest.raises(InvalidValue, match=r"^batch_size"):
            measure(server.grpc_url, MODEL, batch_size=0, settings=settings)
    assert point.batch_size == 2 and point.load.concurrency == 2 and point.target.url == server.grpc_url
    assert point.counts.ok >= settings.min_requests and point.duration_s >= settings.min_duration_s


def test_sweep_exits_1_when_points_measured_nothing_usable(tmp_path, capsys) -> None:
    with DelayServer(delay=0.002) as server:
        spec = tmp_path / "spec.toml"
        # the delay server answers metadata for any model but NOT_FOUND to its predictions
        spec.write_text(
            'model = "other"\nbatch_sizes = [1]\n[durations]\nwarmup_s = 0.1\nmin_duration_s = 0.3\n'
            f'max_duration_s = 0.5\n[[targets]]\nname = "d"\nurl = "{server.grpc_url}"\nmetrics = ""\n'
        )
        code = main(["sweep", str(spec), "--run-dir", str(tmp_path / "run"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1
    assert "1 points measured nothing usable" in out and "--resume" in out
    assert "nothing to resume" not in out  # a new run that was not asked to resume says nothing of it


def test_a_sweep_resumed_where_nothing_was_measured_says_it_is_a_new_run(tmp_path, capsys, monkeypatch) -> None:
    """``--resume`` into a folder with no points (a mistyped --run-dir, a spec renamed since) starts a new run, as a
    script that says --resume every time wants, but says so on the line after where the results go, before
    anything is measured; resuming that run then says nothing of the kind and skips its point."""
    monkeypatch.setenv("COLUMNS", "300")  # rich wraps the console's lines at the terminal's width
    run_dir = tmp_path / "run"
    said = f"nothing to resume: {run_dir} holds no points.jsonl yet, so this is a new run"
    with DelayServer(delay=0.002) as server:
        spec = tmp_path / "spec.toml"
        spec.write_text(
            f'model = "{MODEL}"\nbatch_sizes = [1]\n[durations]\nwarmup_s = 0.1\nmin_duration_s = 0.3\n'
            f'max_duration_s = 0.5\n[[targets]]\nname = "d"\nurl = "{server.grpc_url}"\nmetrics = ""\n'
        )
        sweep = ["sweep", str(spec), "--run-dir", str(run_dir), "--no-progress", "--resume"]
        assert main(sweep) == 0, capsys.readouterr()
        first = capsys.readouterr().out.splitlines()
        assert main(sweep) == 0, capsys.readouterr()
        again = capsys.readouterr().out
    assert first[1] == said and first[-1] == f"1 points measured -> {run_dir / POINTS_FILE}", first
    assert "nothing to resume" not in again and "resumed: 1 points were already measured" in again, again


def test_a_results_folder_that_is_a_file_and_a_demo_spec_that_cannot_be_read_are_said_first(tmp_path, capsys) -> None:
    """``--run-dir`` naming a file said "cannot write results to F (File exists)", which reads as a folder there; it
    now says it is a file. ``demo --spec`` that cannot be read was said only after the models were exported and the
    server started; it is said before anything is made."""
    taken = tmp_path / "r.sh"
    taken.write_text("#!/bin/sh\n")
    assert main(["bench", f"grpc://127.0.0.1:{free_port()}", "--model", "m", "--run-dir", str(taken)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"serve-bench bench: error: {taken} is a file, not a folder; choose another --run-dir"
    )
    models = tmp_path / "models"
    argv = ["demo", "--models", "tiny", "--models-dir", str(models), "--results-root", str(tmp_path / "results")]
    assert main([*argv, "--spec", str(tmp_path / "nope.toml")]) == 2
    assert f"cannot read sweep spec {tmp_path / 'nope.toml'}" in capsys.readouterr().err
    assert not models.exists() and not (tmp_path / "results").exists()


def test_nothing_to_resume_counts_a_file_with_something_in_it(tmp_path: Path) -> None:
    """An empty points.jsonl (the writer makes it when it takes the folder's lock) holds nothing to resume; tune's
    folder holds something where either of its files does."""
    from serve_bench.stats import nothing_to_resume

    assert nothing_to_resume(tmp_path / "absent", "points.jsonl").startswith("nothing to resume: ")
    (tmp_path / "points.jsonl").write_text("")
    assert nothing_to_resume(tmp_path, "points.jsonl") == (
        f"nothing to resume: {tmp_path} holds no points.jsonl yet, so this is a new run"
    )
    (tmp_path / "points.jsonl").write_text("{}\n")
    assert nothing_to_resume(tmp_path, "points.jsonl") == ""
    assert nothing_to_resume(tmp_path, "configs.jsonl", "points.jsonl") == ""
    (tmp_path / "configs.jsonl").write_text("{}\n")
    (tmp_path / "points.jsonl").write_text("")
    assert nothing_to_resume(tmp_path, "configs.jsonl", "points.jsonl") == ""
    neither = nothing_to_resume(tmp_path / "a", "configs.jsonl", "points.jsonl")
    assert "holds no configs.jsonl or points.jsonl" in neither


# --- one function names a run's directory (sweep, tune, pipeline, import-locust) ------------------------------


class _Clock:
    """Stands for the datetime module in stats._run_dir: its now() is 2026-01-02 03:04:05."""

    class datetime:
        @staticmethod
        def now() -> dt.datetime:
            return dt.datetime(2026, 1, 2, 3, 4, 5)


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> str:
    import serve_bench.stats._run_dir as run_dir

    monkeypatch.setattr(run_dir, "_dt", _Clock)
    return "20260102-030405"


def test_sweep_tune_pipeline_and_import_locust_name_their_run_the_same_way(
    fixed_clock: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each names a new run <root>/<name>-<time> through stats.choose_run_dir (a clock of its own would not
    see this one stopped)."""
    from serve_bench.stats import choose_run_dir, read_points
    from serve_bench.sweep import new_run_dir, parse_spec
    from serve_bench.tune import parse_tune_spec

    spec = parse_spec(
        f'name = "s"\nmodel = "m"\nbatch_sizes = [1]\nout = "{tmp_path}"\n[[targets]]\nname = "a"\nurl = "grpc://h:1"\n'
    )
    assert new_run_dir(spec) == tmp_path / f"s-{fixed_clock}"
    tune = parse_tune_spec(
        f'name = "t"\nmodel = "tiny"\nout = "{tmp_path}"\n[space]\nmax_batch_size = [4]\n[load]\nconcurrency = [4]\n'
    )
    assert choose_run_dir(None, tune.out, tune.name) == tmp_path / f"t-{fixed_clock}"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "locust_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Requests/s,Average Response Time,Max Response Time,"
        "50%,90%,95%,99%,99.9%,100%\n"
        "grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
        ",Aggregated,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
    )
    assert main(["import-locust", str(tmp_path / "locust")]) == 0, capsys.readouterr().err
    assert len(read_points(tmp_path / "results" / f"locust-{fixed_clock}")) == 1


def test_choose_run_dir_takes_the_asked_one_the_latest_when_resuming_or_a_new_one(
    fixed_clock: str, tmp_path: Path
) -> None:
    from serve_bench.errors import UserError
    from serve_bench.stats import choose_run_dir

    assert choose_run_dir(None, tmp_path, "p") == tmp_path / f"p-{fixed_clock}"
    assert choose_run_dir(None, tmp_path, "p", resume=True) == tmp_path / f"p-{fixed_clock}"  # none yet: new
    (tmp_path / f"p-{fixed_clock}").mkdir()  # a run of this second: the next one gets a folder of its own
    assert choose_run_dir(None, tmp_path, "p") == tmp_path / f"p-{fixed_clock}-02"
    for n in range(2, 10):
        (tmp_path / f"p-{fixed_clock}-{n:02d}").mkdir()
    assert choose_run_dir(None, tmp_path, "p") == tmp_path / f"p-{fixed_clock}-10"
    (tmp_path / f"p-{fixed_clock}-10").mkdir()
    assert choose_run_dir(None, tmp_path, "p", resume=True) == tmp_path / f"p-{fixed_clock}-10"  # the newest
    for made in tmp_path.glob(f"p-{fixed_clock}*"):
        made.rmdir()
    assert choose_run_dir(str(tmp_path / "mine"), tmp_path, "p", resume=True) == tmp_path / "mine"
    for stamp in ("20250101-000000", "20250102-000000"):
        (tmp_path / f"p-{stamp}").mkdir()
    (tmp_path / "p-20250101-000000" / "configs.jsonl").write_text("")
    assert choose_run_dir(None, tmp_path, "p", resume=True) == tmp_path / "p-20250102-000000"
    held = choose_run_dir(None, tmp_path, "p", resume=True, holding="configs.jsonl")
    assert held == tmp_path / "p-20250101-000000"  # tune resumes a run that began a tune
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="is a file, not a folder; choose another --run-dir"):
        choose_run_dir(tmp_path / "file", tmp_path, "p")
    # a spec's name is one folder in its out: one that climbs out of it, or has folders of its own, is refused
    for name in ("../../etc/x", "a/b", "..", "", "a\\b"):
        with pytest.raises(UserError, match="must be a plain name"):
            choose_run_dir(None, tmp_path / "out", name)
    assert not (tmp_path / "etc").exists()
    # a run of "p" is p-<stamp>[-NN]: the newer runs of a spec named "p-cpu" (or "p-x") are not "p"'s to resume
    for other in ("p-cpu-20990101-000000", "p-x", "p-20990101-000000-cpu"):
        (tmp_path / other).mkdir()
    assert choose_run_dir(None, tmp_path, "p", resume=True) == tmp_path / "p-20250102-000000"
    (tmp_path / "p-20250102-000000-03").mkdir()  # the third of that second
    assert choose_run_dir(None, tmp_path, "p", resume=True) == tmp_path / "p-20250102-000000-03"


def test_sigterm_is_handled_only_where_it_had_its_default(monkeypatch) -> None:
    """The CLI turns SIGTERM into an unwinding Terminated only where SIGTERM had Python's default: a launcher that
    ignores it, or a program embedding serve-bench with a handler of its own, keeps its own, during the command
    and after it (the sweep's test in test_sweep.py sends a real one)."""
    import signal

    from serve_bench import cli

    seen = []
    parser, runs = cli.build_parser()
    monkeypatch.setitem(runs, "export", lambda args: seen.append(signal.getsignal(signal.SIGTERM)) or 0)
    monkeypatch.setattr(cli, "build_parser", lambda: (parser, runs))
    mine = lambda signum, frame: None  # noqa: E731
    before = signal.getsignal(signal.SIGTERM)
    try:
        for handler, during in ((signal.SIG_DFL, cli._on_sigterm), (signal.SIG_IGN, signal.SIG_IGN), (mine, mine)):
            signal.signal(signal.SIGTERM, handler)
            assert cli.main(["export", "--list"]) == 0
            assert seen.pop() is during and signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, before)
