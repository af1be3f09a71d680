"""The survivors of the last `make mutants` run, as MUTANTS.md lists them.

    .venv/bin/python -m benchmarks.mutants_report [--guidance MUTANTS.md] > survivors.md
    .venv/bin/python -m benchmarks.mutants_report --scores      # the table of MUTANTS.md's Scores

Reads `mutmut results --all true` and the mutated copy under mutants/ (each mutant is a function
beside the original, `x_<function>__mutmut_<n>`), and prints, per module and function, each
surviving mutant's changed line, with the guidance the file already gives for that function and
without the mutants it already names as equivalent. No mutmut call per mutant: the changed line
comes from comparing the two functions' source.
"""

from __future__ import annotations

import argparse
import ast
import collections
import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SURVIVED = {"survived", "no tests"}


def _results() -> list[tuple[str, str]]:
    out = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "mutmut"), "results", "--all", "true"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [(m[1], m[2]) for line in out.splitlines() if (m := re.match(r"\s*(\S+): (.+)$", line))]


def _functions(module: str) -> dict[str, str]:
    """Every function of the mutated module by name -> its source."""
    path = ROOT / "mutants" / Path(*module.split(".")).with_suffix(".py")
    source = path.read_text()
    lines = source.splitlines()  # by line numbers: ast.get_source_segment re-splits the file on each call
    return {
        node.name: "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _changed_line(original: str, mutant: str, name: str) -> str:
    mutant = mutant.replace(name, name.rpartition("__mutmut_")[0] + "__mutmut_orig", 1)  # the def line names it
    diff = list(difflib.unified_diff(original.splitlines(), mutant.splitlines(), lineterm="", n=0))
    added = [line[1:].strip() for line in diff if line.startswith("+") and not line.startswith("+++")]
    removed = [line[1:].strip() for line in diff if line.startswith("-") and not line.startswith("---")]
    if added:
        return " / ".join(added)
    return "(removed) " + " / ".join(removed) if removed else "(no change in the source)"


def _readable(function: str) -> str:
    """``xǁSloǁparse`` -> ``Slo.parse``; ``x_analyze`` -> ``analyze``."""
    if function.startswith("xǁ"):
        return ".".join(function[2:].split("ǁ"))
    return function[2:]


def _guidance(path: Path) -> tuple[dict[tuple[str, str], str], set[tuple[str, str, int]]]:
    """From a MUTANTS.md: each function's advice, and the (module, function, number) named equivalent."""
    advice: dict[tuple[str, str], str] = {}
    equivalent: set[tuple[str, str, int]] = set()
    module = ""
    for line in path.read_text().splitlines():
        if line.startswith("#### "):
            module = line[5:].strip()
        elif m := re.match(r"\*\*(.+?)\*\* \(\d+ survivors?[^)]*\): (?:gap: )?(.*)$", line):
            advice[(module, m[1])] = m[2]
        elif m := re.match(r"\s+- `([^`]+)` (\S+) #(\d+):", line):
            equivalent.add((m[1], m[2], int(m[3])))
    return advice, equivalent


def _scores(results: list[tuple[str, str]], equivalent: set[tuple[str, str, int]]) -> None:
    """One row per module, led by what the tests alone kill among the mutants that type-check.

    A mutant `mypy --strict` rejects cannot pass `make lint`, so it is counted beside the score, not in it,
    and so is a mutant this file lists as equivalent (no input tells it from the original). The tests-only
    score is killed / (mutants that type-check - equivalent): the share of the wrong figures that could
    ship past the type checker which the tests catch.
    """
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for name, status in results:
        module, _, mutant = name.rpartition(".")
        function, _, number = mutant.rpartition("__mutmut_")
        short = module.removeprefix("serve_bench.").replace(".", "/") + ".py"
        if status in SURVIVED and (short, _readable(function), int(number)) in equivalent:
            status = "equivalent"
        for row in (short, "**total**"):
            counts[row][status] += 1
    print(
        "| module | tests-only score | killed | type-valid | equivalent | survived | not reached"
        " | caught by mypy | mutants |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for module in [*sorted(m for m in counts if m != "**total**"), "**total**"]:
        c = counts[module]
        total = sum(c.values())
        valid = total - c["caught by type check"]
        killed = c["killed"] + c["timeout"]
        scored = valid - c["equivalent"]
        score = f"{100 * killed / scored:.1f}%" if scored else "–"
        cells = [killed, valid, c["equivalent"], c["survived"], c["no tests"], c["caught by type check"], total]
        print(f"| {module} | {score} | {' | '.join(f'{n:,}' for n in cells)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--guidance", type=Path, default=ROOT / "MUTANTS.md", help="keep this file's advice")
    parser.add_argument("--scores", action="store_true", help="print the score per module instead")
    args = parser.parse_args()
    results = _results()
    advice, equivalent = _guidance(args.guidance) if args.guidance.exists() else ({}, set())
    if args.scores:
        _scores(results, equivalent)
        return
    by_function: dict[tuple[str, str], list[tuple[int, str, str]]] = collections.defaultdict(list)
    sources: dict[str, dict[str, str]] = {}
    for name, status in results:
        if status not in SURVIVED:
            continue
        module, _, mutant = name.rpartition(".")
        function, _, number = mutant.rpartition("__mutmut_")
        if module not in sources:  # not setdefault: its argument would parse the module every time
            sources[module] = _functions(module)
        functions = sources[module]
        line = _changed_line(functions.get(f"{function}__mutmut_orig", ""), functions.get(mutant, ""), mutant)
        short = module.removeprefix("serve_bench.").replace(".", "/") + ".py"
        readable = _readable(function)
        line = line.replace(f"{function}__mutmut_orig", readable.rpartition(".")[2])
        if (short, readable, int(number)) in equivalent:
            continue
        by_function[(short, readable)].append((int(number), line, status))
    total = sum(len(v) for v in by_function.values())
    print(f"### Real gaps: {total} (the test to write, then the mutants it should kill)\n")
    for module in sorted({m for m, _ in by_function}):
        print(f"#### {module}\n")
        rows = sorted(((f, v) for (m, f), v in by_function.items() if m == module), key=lambda fv: -len(fv[1]))
        for function, mutants in rows:
            unreached = all(status == "no tests" for _, _, status in mutants)
            count = f"{len(mutants)} survivor{'s' if len(mutants) != 1 else ''}"
            note = advice.get((module, function), "")
            print(f"**{function}** ({count}{', none reached by a selected test' if unreached else ''}): {note}")
            print("```")
            for number, line, status in sorted(mutants):
                print(f"{number:3d} {'(no test) ' if status == 'no tests' else ''}{line}")
            print("```\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
