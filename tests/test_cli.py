"""The command line: one table of commands, bad numbers refused in one line naming the flag, library reachable."""

from __future__ import annotations

import argparse
import math

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
