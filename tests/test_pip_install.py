"""tools/pip_install.sh: the Makefile's pip install, tried again when the network drops a download.

A CI run failed (2026-11-27) when TensorFlow's 572 MB wheel broke off at 425.7 MB and every one of pip's own
resumes broke off at the same byte; a fresh pip run downloads the file from its start. The network is the
absent part here, so pip is a stand-in that fails a given number of times, then succeeds.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "pip_install.sh"


def _fake_python(tmp_path: Path, failures: int, code: int = 2) -> Path:
    """A 'python' that logs its arguments and exits ``code`` the first ``failures`` times it runs, 0 after."""
    python = tmp_path / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> "{tmp_path}/calls"\n'
        f'n=$(wc -l < "{tmp_path}/calls")\n'
        f'if [ "$n" -le {failures} ]; then echo "pip: connection broken" >&2; exit {code}; fi\n'
    )
    python.chmod(0o755)
    return python


def _install(python: Path, tries: int | str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PIP_TRIES"}
    if tries is not None:
        env["PIP_TRIES"] = str(tries)
    return subprocess.run(
        ["bash", str(SCRIPT), str(python), "--quiet", "-c", "constraints.txt", "numpy<2"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def test_a_dropped_download_is_tried_again_and_then_succeeds(tmp_path):
    done = _install(_fake_python(tmp_path, failures=2))
    assert done.returncode == 0, done.stderr
    # the same command each time, pip's own connection retries raised, the arguments passed as given
    assert _calls(tmp_path) == ["-m pip install --retries 10 --quiet -c constraints.txt numpy<2"] * 3
    assert "pip install failed (exit 2), try 1 of 3; trying again" in done.stderr
    assert "try 2 of 3" in done.stderr


def test_it_gives_up_after_its_tries_with_pips_exit_status(tmp_path):
    done = _install(_fake_python(tmp_path, failures=5, code=7), tries=2)
    assert done.returncode == 7
    assert len(_calls(tmp_path)) == 2
    assert done.stderr.splitlines()[-1] == (
        "tools/pip_install.sh: pip install failed 2 times (exit 7): pip's error is above (a dropped download: run"
        " make again)"
    )


def test_a_success_runs_pip_once(tmp_path):
    done = _install(_fake_python(tmp_path, failures=0))
    assert (done.returncode, len(_calls(tmp_path)), done.stderr) == (0, 1, "")


def test_the_makefile_installs_through_it():
    makefile = (SCRIPT.parents[1] / "Makefile").read_text()
    assert "PIP_INSTALL := bash tools/pip_install.sh" in makefile
    installs = [line for line in makefile.splitlines() if line.startswith("\t") and "-m pip install" in line]
    assert installs == [], f"a pip install past the retries: {installs}"
    assert makefile.count("$(PIP_INSTALL) ") == 4


def test_a_number_of_tries_that_is_not_one_is_refused_before_pip_runs(tmp_path):
    """PIP_TRIES=x once made the give-up test an error, read as false: a pip failing for good looped forever."""
    python = _fake_python(tmp_path, failures=99)
    for tries in ("x", "0", "-1", "2.5"):
        done = _install(python, tries=tries)
        assert done.returncode == 2 and done.stderr.startswith(f"tools/pip_install.sh: PIP_TRIES={tries}: give")
    assert not (tmp_path / "calls").exists()
