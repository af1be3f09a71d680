"""Check `make mutants`' test selection before mutmut forks a child per mutant from it.

    .venv/bin/python -m benchmarks.mutants_selection

mutmut runs the selected tests once in its own process, then forks one child per mutant from that
process. A test that leaves TensorFlow loaded or a native thread running (TensorFlow's tf_Compute,
gRPC's executors) leaves locks that a forked child can find held: the child hangs until mutmut's
timeout, and a timed-out mutant counts as killed. On 2026-11-29 two tests added that day did so, and a
run that had taken 13 minutes stalled on the first module they reached.

This runs pyproject.toml's selection (``pytest_add_cli_args_test_selection``) in one process and exits
1 naming each test after which TensorFlow is imported or a thread that is not Python's own is alive:
deselect it there, as the tests before it are. Python's own threads (an aiohttp resolver's pool) carry
the interpreter's name and hold no lock across a fork that a test's child takes.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _foreign_threads() -> list[str]:
    """Names of this process's threads other than the interpreter's own (the main thread's name)."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():  # not Linux: nothing to read, nothing to say
        return []
    main = Path(f"/proc/self/task/{os.getpid()}/comm").read_text().strip()
    names = []
    for task in tasks.iterdir():
        try:
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended while being read
            continue
        if name != main:
            names.append(name)
    return sorted(names)


class _Watch:
    def __init__(self) -> None:
        self.offenders: list[str] = []
        self._said: tuple[bool, tuple[str, ...]] = (False, ())

    def pytest_runtest_teardown(self, item: Any) -> None:
        state = ("tensorflow" in sys.modules, tuple(sorted(set(_foreign_threads()))))
        if state != self._said and (state[0] or state[1]):
            what = ["TensorFlow imported"] if state[0] else []
            if state[1]:
                what.append("threads " + ", ".join(state[1]))
            self.offenders.append(f"{item.nodeid}: {'; '.join(what)}")
        self._said = state


def main() -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    watch = _Watch()
    code = pytest.main([*config["pytest_add_cli_args_test_selection"], "-q", "-p", "no:cacheprovider"], plugins=[watch])
    if code != 0:
        print(f"the selection's tests fail (pytest exit {code}): fix them before mutating", file=sys.stderr)
        return 1
    if watch.offenders:
        print("tests that leave what a forked mutant's child can hang on (deselect them in pyproject.toml):")
        for line in watch.offenders:
            print(f"  {line}")
        return 1
    print("the selection leaves no TensorFlow and no foreign thread behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
