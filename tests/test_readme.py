"""The README and docs/ cannot rot: their commands parse, the quick ones run, their links resolve, their
figures are the committed measurements and predictions, and the architecture page is the code's.

The README is what a newcomer reads first: it starts with the two commands a new machine needs
(checked against the Makefile), then the measured answer, and leaves the reference to docs/.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serve_bench.cli import build_parser
from serve_bench.report import analyze_run
from serve_bench.stats import read_points
from serve_bench.stats._estimate import ratio, ratio_text
from serve_bench.sweep import parse_spec

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_SPEC = importlib.util.spec_from_file_location("gpu_summarize", ROOT / "benchmarks" / "gpu" / "summarize.py")
assert _SPEC is not None and _SPEC.loader is not None
SUMMARIZE = importlib.util.module_from_spec(_SPEC)  # the answer's table: where throughput stops growing
_SPEC.loader.exec_module(SUMMARIZE)
DOCS = ROOT / "docs"
USER_DOCS = [README, *sorted(DOCS.glob("*.md"))]
SERVE_BENCH = Path(sys.executable).parent / "serve-bench"

# The README's commands that take seconds, run for real (each as the README spells it, from a copy of what
# it reads): the rest need exported models or a server and are parsed by the real parser instead.
QUICK = (
    "serve-bench --help",
    "serve-bench tune loadtests/tune/tfserving-gpu.toml --dry-run",
)

# "issue 31", "issues 31 and 32", "#19": this project's tracker, which a user of the docs does not have.
ISSUE_NUMBER = re.compile(r"\bissues? #?\d+|(?<![\w/&#])#\d+\b", re.IGNORECASE)


def _fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def _commands(text: str) -> list[str]:
    """Each `serve-bench ...` command of the shell blocks, continuation lines joined, comments dropped."""
    found = []
    for block in _fenced(text, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words:
                if "&&" in words:
                    segment, words = words[: words.index("&&")], words[words.index("&&") + 1 :]
                else:
                    segment, words = words, []
                if segment and segment[0] == "serve-bench":
                    found.append(shlex.join(segment))
    return found


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", text, re.MULTILINE)}


# --- the README -----------------------------------------------------------------------------------


def test_the_readme_starts_with_the_two_commands_and_the_makefile_keeps_them_true() -> None:
    text = README.read_text()
    title, first_block = text.split("\n", 1)[0], _fenced(text, "sh")[0]
    assert title == "# serve-bench"
    assert text.index("```sh") < text.index("\n## "), "the two commands come before any section"
    assert [line.split("#")[0].strip() for line in first_block.splitlines()] == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"^demo: .*\n\t(.*)$", makefile, re.MULTILINE)
    test = re.search(r"^test: .*\n\t(.*)$", makefile, re.MULTILINE)
    assert demo and demo.group(1).endswith("/bin/serve-bench demo"), "make demo runs serve-bench demo"
    assert test and "-m pytest" in test.group(1), "make test runs the test suite"


def test_the_readme_is_short_and_in_the_order_a_newcomer_needs() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    sections = re.findall(r"^## (.*)$", text, re.MULTILINE)
    assert sections == ["The two commands", "The answer, measured", "Point it at your own server", "Documentation"]


H100_RUN = ROOT / "benchmarks" / "results" / "h100-2026-11-27"
PRICES = {"H100": 12.29, "16 cores": 0.714}  # the README's prices: AWS p5.48xlarge over 8 GPUs; c7i.4xlarge
MODELS = {"InceptionV3": "inception_v3", "ResNet-50": "resnet50", "MobileNetV2": "mobilenet_v2"}
# which of the 2026-11-27 visits measured a model (the first ran out of budget before ResNet-50; the third
# measured InceptionV3's CPU floor and server batching; benchmarks/results/h100-2026-11-27/README.md)
VISITS = {"inception_v3": "visit-1", "mobilenet_v2": "visit-1", "resnet50": "visit-2"}
FLOOR_VISITS = {("inception_v3", "cpu"): "visit-3"}


def _answer_rows() -> list[list[str]]:
    text = README.read_text()
    answer = text[text.index("## The answer, measured") : text.index("## Point it at your own server")]
    rows = [r for r in answer.splitlines() if r.startswith("| ") and not r.startswith("| model")]
    assert rows
    return [[cell.strip().replace("**", "") for cell in row.split("|")[1:-1]] for row in rows]


def _floor_figures(model: str, device: str) -> list[str]:
    """Batch 1 and the best (batch) with their 95% intervals, the gain with its interval, where throughput stops
    growing (summarize.stops_growing: as far as the measured sizes say) and the cost
    per million images, of a committed floor, read as summarize.py reads it."""
    kind = "cpu" if device.startswith("16 cores") else "gpu"
    precision = "fp32" if kind == "cpu" else device.split(", ")[1]
    visit = FLOOR_VISITS.get((model, kind), VISITS[model])
    floor = SUMMARIZE._floor(H100_RUN / visit / "floor" / f"{model}-{kind}-{precision}.jsonl")
    rate = {b: SUMMARIZE._in_process(line) for b, line in floor.items()}
    assert all(r.low is not None for r in rate.values()), "a floor of 2026-11-27 records intervals"
    batch = max(rate, key=lambda b: rate[b].value)
    price = PRICES["16 cores" if kind == "cpu" else "H100"]
    return [
        SUMMARIZE._interval(rate[1]),
        f"{SUMMARIZE._interval(rate[batch])} ({batch})",
        ratio_text(ratio(rate[batch], rate[1])),
        SUMMARIZE.stops_growing({b: r.value for b, r in rate.items()}),
        f"${price / (3600 * rate[batch].value) * 1e6:.2f}",
    ]


def _served_figures(model: str, device: str) -> list[str]:
    """Batch 1 and the best (batch) with their 95% intervals, ⚠ where serve-bench judged a point unstable (its
    windows disagree, or too few requests to tell), the gain with its interval, where throughput stops growing
    and the cost per million images, from the committed one-in-flight sweeps, as the report analyses them."""
    if device == "2-core VM":
        points = read_points(ROOT / "tests" / "data" / "demo_2core_20261125" / model / "points.jsonl")
        name, price = "local-grpc", None
    else:
        kind = "gpu" if device.startswith("H100") else "cpu"
        points = read_points(H100_RUN / VISITS[model] / "runs" / (model + ("-cpu" if kind == "cpu" else "")))
        name = "cpu-fp32" if kind == "cpu" else "gpu-" + device.split(", ")[1]
        price = PRICES["16 cores" if kind == "cpu" else "H100"]
    (target,) = [t for t in analyze_run(points).targets if t.name == name]
    base, best = target.baseline, target.best
    assert base is not None and best is not None
    digits = 1 if device == "2-core VM" else 0

    def shown(cell: Any) -> str:
        figure = cell.items_per_s
        text = f"{figure.value:,.{digits}f}"
        if figure.low is not None and figure.high is not None:
            text += f" [{figure.low:,.{digits}f}–{figure.high:,.{digits}f}]"
        return text + ("" if cell.point.stability.stable else " ⚠")

    rates = {b: cell.items_per_s.value for b, cell in target.client_curve.items()}
    return [
        shown(base),
        f"{shown(best)} ({best.batch_size})",
        ratio_text(ratio(best.items_per_s, base.items_per_s)),
        SUMMARIZE.stops_growing(rates),
        "–" if price is None else f"${price / (3600 * best.items_per_s.value) * 1e6:.2f}",
    ]


def test_the_answers_rows_are_the_committed_runs() -> None:
    """Every row of the README's answer is read from a committed run: a floor (in process) or a sweep (served)."""
    checked = 0
    for row in _answer_rows():
        label, device = row[0], row[1]
        model = MODELS[label]
        if device.endswith("in process"):
            assert row[2:] == _floor_figures(model, device.removesuffix(", in process")), row
            checked += 1
        elif device.endswith("served"):
            assert row[2:] == _served_figures(model, device.removesuffix(", served")), row
            checked += 1
    assert checked == 16


def test_the_predictions_error_is_the_frozen_predictions_against_the_floors() -> None:
    """The medians the README gives for the predictions frozen before the visits: each batch size both sides have,
    the absolute error of images/s, and the error of the gain, over the three models at tf32 (both calibrations)
    and fp32 (`tensorflow`), against the floors."""
    import statistics

    from benchmarks.predict_vs_measured import compare, measured_in_process, prediction_row

    by: dict[str, tuple[list[float], list[float]]] = {"tensorflow": ([], []), "tensorrt": ([], [])}
    for model in ("inception_v3", "resnet50", "mobilenet_v2"):
        for tables, precision in (("tensorflow", "tf32"), ("tensorrt", "tf32"), ("tensorflow", "fp32")):
            frozen = ROOT / "benchmarks" / "results" / "predicted-2026-11-26" / f"{model}-{tables}-{precision}.json"
            row = prediction_row(json.loads(frozen.read_text()), "h100")
            floor = measured_in_process(
                H100_RUN / VISITS[model] / "floor" / f"{model}-gpu-{precision}.jsonl", model, precision
            )
            rows, gain = compare(row, floor)
            assert gain is not None
            by[tables][0].extend(abs(r.error) for r in rows if r.error is not None)
            by[tables][1].append(abs(gain.error))
    every = (by["tensorflow"][0] + by["tensorrt"][0], by["tensorflow"][1] + by["tensorrt"][1])
    said = [f"{statistics.median(values):.0%}" for values in (*every, *by["tensorflow"], *by["tensorrt"])]
    text = README.read_text()
    assert (
        f"median error is {said[0]} in images/s and {said[1]} in the gain (`tensorflow` calibration: {said[2]} and "
        f"{said[3]}; `tensorrt`:\n  {said[4]} and {said[5]})"
    ) in text


def test_the_readme_spec_is_a_valid_sweep_spec() -> None:
    (spec,) = _fenced(README.read_text(), "toml")
    parsed = parse_spec(spec)
    assert [t.url for t in parsed.targets] == ["grpc://cpu-host:8500", "v2+grpc://gpu-host:8001"]


@pytest.mark.parametrize("command", QUICK)
def test_the_readmes_quick_commands_run(command: str, tmp_path: Path) -> None:
    """Run where the repository's specs and configs are, as a newcomer would, but writing into tmp_path."""
    assert command in _commands(README.read_text()), "a quick command the README no longer shows"
    for name in ("loadtests", "docker"):
        (tmp_path / name).symlink_to(ROOT / name)
    argv = [str(SERVE_BENCH), *shlex.split(command)[1:]]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip()


# --- every user-facing page -----------------------------------------------------------------------


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_serve_bench_command_parses_with_the_current_names(page: Path) -> None:
    """The real parser takes each documented command, without a renamed flag's notice."""
    parser, _ = build_parser()
    for command in _commands(page.read_text()):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                parser.parse_args(shlex.split(command)[1:])
            except SystemExit as exit:
                if exit.code != 0:  # --help exits 0
                    pytest.fail(f"{page.name}: {command}\n{err.getvalue()}")
        assert not err.getvalue(), f"{page.name}: {command}\n{err.getvalue()}"


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page: Path) -> None:
    """Relative links (files and their #anchors) and images point at something committed."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in _anchors(linked), f"{page.name}: {target} (headings: {sorted(_anchors(linked))})"


# A path in backticks that names a file of the repository (exported_models/ is generated, so not checked).
REPO_PATH = re.compile(r"`((?:serve_bench|loadtests|docker|benchmarks|tests|examples|docs)/[^`\s<>*{}:]*)`")


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_files_the_docs_name_exist(page: Path) -> None:
    missing = [path for path in REPO_PATH.findall(page.read_text()) if not (ROOT / path.rstrip(".,")).exists()]
    assert not missing, f"{page.name}: {missing}"


def test_the_readme_links_every_docs_page_and_its_plot_is_small() -> None:
    text = README.read_text()
    for page in DOCS.glob("*.md"):
        assert f"(docs/{page.name})" in text, f"README does not link docs/{page.name}"
    (image,) = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", text)
    assert (ROOT / image).stat().st_size < 200_000


@pytest.mark.parametrize("page", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_in_user_facing_docs(page: Path) -> None:
    found = {m.group(0) for m in ISSUE_NUMBER.finditer(page.read_text())}
    assert not found, f"{page.name}: {sorted(found)}"


def test_the_issue_number_pattern() -> None:
    for text in ("(issue 21)", "issues 31 and 32", "Issue #7", "see #19"):
        assert ISSUE_NUMBER.search(text), text
    for text in ("pull request 8113", "`docs/cli.md#export`", "[a](#heading)", "HTTP 413", "&#8212;"):
        assert not ISSUE_NUMBER.search(text), text


# --- the architecture page is the code's ----------------------------------------------------------


def _parts() -> set[str]:
    package = ROOT / "serve_bench"
    dirs = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "__main__", "_cli_args", "_cli_commands"}
    return dirs | modules


def test_the_layout_names_every_part_of_serve_bench() -> None:
    text = (DOCS / "architecture.md").read_text()
    layout = _fenced(text[text.index("## Layout") :], "")[0]
    named = set(re.findall(r"^(?:serve_bench/)?\s+(\w+)(?:/|\.py)\s", layout, re.MULTILINE))
    assert named == _parts(), f"missing: {sorted(_parts() - named)}, not in serve_bench/: {sorted(named - _parts())}"


def test_the_import_table_is_test_layers_allowed() -> None:
    from tests.test_layers import ALLOWED

    text = (DOCS / "architecture.md").read_text()
    section = text[text.index("## Who may import whom") :]
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", section, re.MULTILINE)
    documented = {part: set(re.findall(r"`(\w+)`", allowed)) for part, allowed in rows}
    expected = "\n".join(
        f"| `{part}` | {', '.join(f'`{p}`' for p in sorted(allowed)) or 'nothing'} |"
        for part, allowed in ALLOWED.items()
    )
    assert documented == ALLOWED, f"docs/architecture.md's table should read:\n{expected}"


def test_the_docs_give_the_schema_version_points_are_written_in() -> None:
    """docs/cli.md says which schema_version a points.jsonl line carries: the one serve_bench.stats writes (it said
    4 after 5 was introduced)."""
    from serve_bench.stats import SCHEMA_VERSION

    text = (ROOT / "docs" / "cli.md").read_text()
    assert re.findall(r"carries `schema_version` \((\d+)\)", text) == [str(SCHEMA_VERSION)]
