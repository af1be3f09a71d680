"""Check `make mutants`' test selection before mutmut forks a child per mutant from it.

    .venv/bin/python -m benchmarks.mutants_selection

mutmut runs the selected tests once in its own process, then forks one child per mutant from that
process. A test that leaves TensorFlow loaded or a native thread running (TensorFlow's tf_Compute,
gRPC's executors) leaves locks that a forked child can find held: the child hangs until mutmut's
timeout, and a timed-out mutant counts as killed. On 2026-11-29 a test added that day left TensorFlow's
threads behind, and a run that had taken 13 minutes stalled on the first module it reached.

This runs pyproject.toml's selection (``pytest_add_cli_args_test_selection``) in one process and exits
1 naming each test after which TensorFlow is imported or a native thread (one Python's threading does
not know) is alive once its fixtures are torn down: deselect it there, as the tests before it are.
Python's own threads (an aiohttp resolver's pool) hold no lock across a fork that a test's child takes.
"""

from __future__ import annotations

import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _foreign_threads() -> list[str] | None:
    """Names of the native threads a library started and named (TensorFlow's tf_Compute, gRPC's event_engine);
    None where the process's threads cannot be listed (not Linux).

    Python's own threads are known by id (``threading``; Python 3.14 gives them names). A native thread that
    kept the interpreter's name is let through: numpy's OpenBLAS pool is one (started by the first matrix
    product, fork-safe through its pthread_atfork handlers; every run of `make mutants` has had it). So is a
    library's unnamed thread, which this check cannot tell from it."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    ours = {thread.native_id for thread in threading.enumerate()}
    interpreter = (tasks / str(threading.main_thread().native_id) / "comm").read_text().strip()
    names = []
    for task in tasks.iterdir():
        if int(task.name) in ours:
            continue
        try:
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended while being read
            continue
        if name != interpreter:
            names.append(name)
    return sorted(names)


class _Watch:
    def __init__(self) -> None:
        self.offenders: list[str] = []
        self.readable = True
        self._tensorflow = False
        self._threads: tuple[str, ...] = ()

    @pytest.hookimpl(trylast=True)  # after pytest's own teardown: the test's fixtures have stopped what they started
    def pytest_runtest_teardown(self, item: Any) -> None:
        tensorflow = "tensorflow" in sys.modules
        threads = _foreign_threads()
        if threads is None:
            self.readable = False
            threads = []
        left = tuple(sorted(set(threads)))
        what = []
        if tensorflow and not self._tensorflow:  # named once: the test that imported it
            what.append("TensorFlow imported")
        if left and left != self._threads:
            what.append("threads " + ", ".join(left))
        if what:
            self.offenders.append(f"{item.nodeid}: {'; '.join(what)}")
        self._tensorflow, self._threads = tensorflow, left


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
    if not watch.readable:
        print("the selection leaves no TensorFlow behind; its threads were not checked (no /proc/self/task here)")
        return 0
    print("the selection leaves no TensorFlow and no native thread behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
