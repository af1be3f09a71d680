"""Where a run writes: results/<name>-<time>, named in one place for sweep, tune, pipeline and import-locust.

``choose_run_dir`` is what a command calls: the directory the user gave (``--run-dir``), else, resuming,
the newest run of that name, else a new one stamped with the time. It only names the directory;
``ResultsWriter`` (or tune) makes it when the first thing is written, so a command refused before then
leaves nothing behind.
"""

from __future__ import annotations

import datetime as _dt
import glob
import re
from pathlib import Path

from serve_bench.errors import UserError

__all__ = [
    "RUN_STAMP",
    "check_run_dir",
    "choose_run_dir",
    "latest_stamped_run_dir",
    "nothing_to_resume",
    "stamped_run_dir",
]

RUN_STAMP = "%Y%m%d-%H%M%S"  # a run's directory is <name>-<stamp>: sorted by name, the newest is last
_STAMPED = re.compile(r"\d{8}-\d{6}(-\d{2,})?")  # RUN_STAMP's text, and stamped_run_dir's -02, -03...


def stamped_run_dir(root: str | Path, name: str) -> Path:
    """``root/<name>-<YYYYmmdd-HHMMSS>``: the directory of a run of ``name`` started now; ``-02``, ``-03``...
    after it when a run of that second is there already (zero-padded, they sort in order, after it and before
    the next second). Two runs that both name theirs before either writes meet at the results file's lock."""
    stamped = Path(root) / f"{name}-{_dt.datetime.now().strftime(RUN_STAMP)}"
    run_dir, n = stamped, 1
    while run_dir.exists():
        n += 1
        run_dir = stamped.with_name(f"{stamped.name}-{n:02d}")
    return run_dir


def latest_stamped_run_dir(root: str | Path, name: str, *, holding: str = "") -> Path | None:
    """The newest ``root/<name>-<stamp>`` (``-NN`` after it for a second's later runs; only those holding the file
    ``holding``, when given), or None."""
    folder = Path(root)
    if not folder.is_dir():
        return None
    # the name literally: a spec named "cpu[2]" or "a**b" is no pattern (it matched nothing, or raised ValueError);
    # then a stamp, and nothing else: "local-*" also matched local-cpu's runs, and --resume continued one of them
    runs = sorted(
        p
        for p in folder.glob(f"{glob.escape(name)}-*")
        if _STAMPED.fullmatch(p.name[len(name) + 1 :]) and (not holding or (p / holding).exists())
    )
    return runs[-1] if runs else None


def choose_run_dir(
    asked: str | Path | None, root: str | Path, name: str, *, resume: bool = False, holding: str = ""
) -> Path:
    """The directory a run of ``name`` writes to: ``asked`` when given; else, with ``resume``, the newest under
    ``root`` (``latest_stamped_run_dir``) or a new one if there is none; else a new one (``stamped_run_dir``).
    UserError (one line) when that path is there and is not a directory (``check_run_dir``)."""
    if asked:
        run_dir = Path(asked)
    else:
        # a run's name is one path component: "../../etc/x" wrote outside its results' folder
        if name in ("", ".", "..") or Path(name).name != name or "\\" in name:
            raise UserError(
                f"the run's name {name!r} must be a plain name (no '/' or '..'): it names a folder in {root}"
            )
        run_dir = (resume and latest_stamped_run_dir(root, name, holding=holding)) or stamped_run_dir(root, name)
    check_run_dir(run_dir)
    return run_dir


def check_run_dir(run_dir: Path) -> None:
    """UserError (one line) where ``run_dir`` is there and is not a folder: mkdir would say "File exists", which
    reads as a folder there. ``choose_run_dir`` checks before a command starts; the results writer again where a
    command names its folder itself (bench)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"{run_dir} is a file, not a folder; choose another --run-dir")


def nothing_to_resume(run_dir: Path, *holding: str) -> str:
    """The line a ``--resume`` that finds nothing to continue prints before it measures, or "" where ``run_dir``
    holds one of the files ``holding`` with something in it (sweep: points.jsonl; tune: configs.jsonl, or the
    points of a first configuration it was stopped in). Resuming what is not there starts a new run (a script may
    say --resume every time), but a mistyped --run-dir, or a spec renamed since the run it meant, must not pass
    for a continued run: the user sees it before anything is measured."""
    if any((run_dir / name).is_file() and (run_dir / name).stat().st_size > 0 for name in holding):
        return ""
    return f"nothing to resume: {run_dir} holds no {' or '.join(holding)} yet, so this is a new run"
