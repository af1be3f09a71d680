"""One name per concept (issue 22, item 1): every subcommand's --help, the old names' aliases, the specs' sections.

The help texts are what a user reads, so they are what is checked: each subcommand's
``serve-bench <cmd> --help`` is run and its flags collected; a concept (the run directory, the
models directory, the target, the target's name, the per-request timeout) spelled two ways across
them fails, as does a second default for the timeout. ``serve`` is left out on purpose: it takes
``tensorflow_model_server``'s flags (docs/cli.md, "Flags and spec keys").
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from serve_bench import errors
from serve_bench._cli_args import RENAMED
from serve_bench.cli import COMMANDS, build_parser
from serve_bench.errors import UserError
from serve_bench.load import PointSettings
from serve_bench.sweep import parse_spec
from serve_bench.tune import parse_tune_spec

ROOT = Path(__file__).resolve().parent.parent

# Every spelling of each concept seen in this project or its neighbours (perf_analyzer, Locust, pyperf):
# two of them in the help texts at once is two names for one thing.
CONCEPTS = {
    "run directory": {"--out", "-o", "--output", "--run-dir", "--results", "--results-dir", "--output-dir"},
    "models directory": {"--out", "--models-dir", "--models_dir", "--model-dir", "--model-repository"},
    "target": {"URL", "--url", "--target", "--host", "-u", "-H"},
    "target name": {"--name", "--target-name", "--label"},
    "timeout": {"--timeout", "--request-timeout", "--timeout-s", "--deadline"},
}
# a positional argument and the flag of the same name are one name
SAME = {"URL": "--url", "RUN": "--run-dir", "RUN_A": "--run-dir", "RUN_B": "--run-dir"}
_OPTION = re.compile(r"^  (\S.*?)(?:\s{2,}(.*))?$")


def _help(command: str) -> str:
    env = {**os.environ, "COLUMNS": "400"}  # one line per flag
    result = subprocess.run(
        [sys.executable, "-m", "serve_bench", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _flags(help_text: str, *, same: bool = True) -> dict[str, str]:
    """Every name in the help's argument lists (positional metavars and option strings) -> its help line; with
    ``same``, a positional is named as its flag (``SAME``)."""
    names: dict[str, str] = {}
    listing = help_text.split("\n\n", 1)[1]  # past the usage
    for line in listing.splitlines():
        match = _OPTION.match(line)
        if not match:
            continue
        spec, text = match.group(1), match.group(2) or ""
        for part in spec.split(", "):
            name = part.split(" ")[0]
            names[SAME.get(name, name) if same else name] = text
    return names


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    commands = [c for c in COMMANDS if c != "serve"]
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(commands, pool.map(_help, commands)))


def test_every_subcommand_is_checked(helps: dict[str, str]) -> None:
    top = subprocess.run(
        [sys.executable, "-m", "serve_bench", "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    ).stdout
    listed = set(re.search(r"\{([\w,-]+)\}", top).group(1).split(","))  # type: ignore[union-attr]
    assert listed == set(COMMANDS) and set(helps) == listed - {"serve"}


@pytest.mark.parametrize("concept", sorted(CONCEPTS))
def test_help_texts_name_each_concept_once(helps: dict[str, str], concept: str) -> None:
    seen: dict[str, list[str]] = {}
    for command, text in helps.items():
        for name in _flags(text):
            if name in CONCEPTS[concept]:
                seen.setdefault(name, []).append(command)
    assert len(seen) == 1, f"the {concept} is spelled {len(seen)} ways: {seen}"


# A flag that several subcommands take means one thing in each: its help says so in the same words.
# (predict's --runtime meant which published tables calibrate it, its --device a list of GPUs and its --run-dir
# a run it reads: now --tables, --gpu and RUN / --from-run.)
MEANINGS = {
    "--run-dir": "run directory",  # where a run is written
    "--device": "label for the target (cpu, gpu)",
    "--runtime": "(tensorflow, onnxruntime, openvino",  # what the target runs
}


@pytest.mark.parametrize("flag", sorted(MEANINGS))
def test_a_flag_means_one_thing_in_every_subcommand(helps: dict[str, str], flag: str) -> None:
    said = {command: _flags(text, same=False).get(flag) for command, text in helps.items()}
    taken = {command: line for command, line in said.items() if line is not None}
    assert len(taken) >= 2, f"{flag} is in one subcommand only: {taken}"
    other = {command: line for command, line in taken.items() if MEANINGS[flag] not in line}
    assert not other, f"{flag} means something else in {other}"


def test_predict_names_its_own_concepts(helps: dict[str, str]) -> None:
    flags = _flags(helps["predict"], same=False)
    assert {"MODEL", "RUN", "--from-run", "--gpu", "--tables"} <= set(flags)
    assert "run directory" in flags["RUN"] and "as RUN" in flags["--from-run"]


def test_one_timeout_default(helps: dict[str, str]) -> None:
    defaults = {}
    for command, text in helps.items():
        line = _flags(text).get("--timeout")
        if line is not None:
            match = re.search(r"default (\d+(?:\.\d+)?)", line)
            assert match, f"{command} --timeout does not state its default: {line!r}"
            defaults[command] = float(match.group(1))
    assert len(defaults) >= 2 and set(defaults.values()) == {PointSettings().timeout_s}, defaults


_SPEC = 'model = "m"\nbatch_sizes = [1]\n[[targets]]\nname = "a"\nurl = "grpc://h:1"\n'
_TUNE = 'model = "tiny"\n[space]\nmax_batch_size = [4]\n[load]\nconcurrency = [4]\n'


def test_one_until_stable_default_for_bench_sweep_and_tune() -> None:
    parser, _ = build_parser()
    bench = parser.parse_args(["bench", "grpc://h:1", "--model", "m"])
    assert bench.until_stable is True
    assert parse_spec(_SPEC).settings.until_stable is True
    assert parse_tune_spec(_TUNE).settings.until_stable is True
    assert parser.parse_args(["bench", "grpc://h:1", "--model", "m", "--no-until-stable"]).until_stable is False


# --- old names: each still works and says the new one, in one line ---------------------------------------------

# what each subcommand needs besides the flag under test
_REQUIRED = {
    "export": [],
    "demo": [],
    "bench": ["grpc://h:1", "--model", "m"],
    "import-locust": ["results/locust/steps"],
    "pipeline": ["clip.mp4"],
    "predict": ["m"],
}
_ALIASES = [(command, old, new) for command, names in RENAMED.items() for old, new in names.items()]


@pytest.fixture(autouse=True)
def _fresh_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "_SAID", set())  # each test sees its own first use


@pytest.mark.parametrize(("command", "old", "new"), _ALIASES, ids=[f"{c} {o}" for c, o, _ in _ALIASES])
def test_an_old_flag_still_works_and_says_its_new_name(
    command: str, old: str, new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser, _ = build_parser()
    argv = [command, *_REQUIRED[command]]
    with_new = parser.parse_args([*argv, new, "some/value"])
    assert capsys.readouterr().err == ""
    with_old = parser.parse_args([*argv, old, "some/value", old, "some/value"])  # typed twice: said once
    assert vars(with_old) == vars(with_new)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and old in err and new in err, err
    assert err.startswith(f"serve-bench {command}: ")


def test_old_flags_are_hidden_from_help(helps: dict[str, str]) -> None:
    for command, names in RENAMED.items():
        flags = _flags(helps[command], same=False)  # predict's RUN is not its old --run-dir
        for old, new in names.items():
            assert new in flags and old not in flags, (command, old)


def test_an_old_flag_runs_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Past parsing: bench --out and --name write the point where --run-dir and --target-name would."""
    from serve_bench.cli import main
    from serve_bench.stats import read_points
    from tests._delay_server import MODEL, DelayServer

    with DelayServer(delay=0.002) as server:
        argv = ["bench", server.grpc_url, "--model", MODEL, "--metrics", "", "--warmup", "0.1", "--duration", "0.3"]
        code = main([*argv, "--no-until-stable", "--out", str(tmp_path / "run"), "--name", "old"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (point,) = read_points(tmp_path / "run")
    assert point.target.name == "old"
    assert captured.err.splitlines() == [
        "serve-bench bench: --out is now --run-dir (--out still works for now)",
        "serve-bench bench: --name is now --target-name (--name still works for now)",
    ]


def test_a_tune_spec_with_the_old_section_name_works_and_says_the_new_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    new = parse_tune_spec(_TUNE, "new.toml")
    assert capsys.readouterr().err == ""
    old = parse_tune_spec(_TUNE.replace("[load]", "[workload]"), "old.toml")
    err = capsys.readouterr().err
    assert err == "old.toml: [workload] is now [load] ([workload] still works for now)\n"
    assert replace(old, text="") == replace(new, text="")
    with pytest.raises(UserError, match=r"give the load once, as \[load\]"):
        parse_tune_spec(_TUNE + "[workload]\nconcurrency = [8]\n")


def test_sweep_and_tune_specs_share_their_sections() -> None:
    """[load], [durations] and [slo] mean the same in both: the same keys give the same settings."""
    durations = "[durations]\nwarmup_s = 0.5\nmin_duration_s = 2\ntimeout_s = 9\n"
    sweep = parse_spec(_SPEC + "[load]\nconcurrency = [4]\narrival = 'constant'\n" + durations)
    tune = parse_tune_spec(_TUNE.replace("concurrency = [4]", "concurrency = [4]\narrival = 'constant'") + durations)
    assert sweep.settings == tune.settings and sweep.concurrency == tune.concurrency
    assert sweep.arrival == tune.arrival == "constant"


def test_shipped_specs_and_docs_use_the_new_names() -> None:
    docs = [ROOT / "README.md", *ROOT.glob("docs/*.md")]
    shipped = [*ROOT.glob("loadtests/**/*.toml"), *docs, *ROOT.glob("examples/*.py")]
    for path in shipped:
        text = path.read_text()
        assert "[workload]" not in text.replace("`[workload]`", ""), path
    for page in docs:
        text = page.read_text()
        for command, names in RENAMED.items():
            for old in names:
                # a command line in the README or docs/ uses no old flag of its command
                for line in re.findall(rf"serve-bench {command} [^\n`]*", text):
                    assert not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", line), (page.name, line)


def test_the_alias_action_is_argparse_compatible() -> None:
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--new", default="d")
    parser.add_argument("--old", dest="new", action=errors.Renamed, new="--new", help=argparse.SUPPRESS)
    assert parser.parse_args([]).new == "d"
    assert "--old" not in parser.format_help()
