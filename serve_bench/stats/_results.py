"""results/<run>/points.jsonl and run.json: appended and flushed as each point ends, read back checked."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError
from serve_bench.stats._point import Point
from serve_bench.stats._run_dir import check_run_dir
from serve_bench.stats._schema import RUN_SCHEMA_VERSION, migrate_run, point_from_data, point_to_data

__all__ = [
    "BEST_BATCHING_FILE",
    "BEST_MLSERVER_SERVER_SETTINGS_FILE",
    "BEST_MLSERVER_SETTINGS_FILE",
    "BEST_TRITON_CONFIG_FILE",
    "POINTS_FILE",
    "RUN_FILE",
    "TUNE_ANSWER_FILE",
    "ResultsFileError",
    "ResultsWriter",
    "read_points",
    "read_run",
]

POINTS_FILE = "points.jsonl"
RUN_FILE = "run.json"
# a tune run also writes these (serve-bench tune); report reads them
TUNE_ANSWER_FILE = "answer.json"
BEST_BATCHING_FILE = "best_batching_parameters.txt"  # TF Serving's (and the local server's)
BEST_TRITON_CONFIG_FILE = "best_config.pbtxt"
BEST_MLSERVER_SETTINGS_FILE = "best_model-settings.json"
BEST_MLSERVER_SERVER_SETTINGS_FILE = "best_settings.json"  # MLServer's parallel_workers, when tuned
TORN_SUFFIX = ".torn"


class ResultsFileError(UserError):
    """A results file that cannot be read: the message names the file and line and what is wrong."""


def _points_path(run: Path) -> Path:
    return run / POINTS_FILE if run.is_dir() else run


def _repair_torn_tail(path: Path) -> str:
    """Cut a last line that has no newline (a run killed mid-write) and keep it beside the file.

    Returns the fragment removed ("" when the file was whole).
    """
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return ""
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return ""
        # find the last newline: the torn fragment starts after it
        chunk, position = 65536, size
        start = 0
        while position > 0:
            step = min(chunk, position)
            position -= step
            f.seek(position)
            block = f.read(step)
            newline = block.rfind(b"\n")
            if newline >= 0:
                start = position + newline + 1
                break
        f.seek(start)
        fragment = f.read()
        f.truncate(start)
        f.flush()
        os.fsync(f.fileno())
    with open(path.with_name(path.name + TORN_SUFFIX), "ab") as torn:
        torn.write(fragment + b"\n")
    return fragment.decode("utf-8", "replace")


class ResultsWriter:
    """Appends points to ``run_dir/points.jsonl``, each flushed to disk before the next point starts.

    A torn last line left by a killed run is cut off first (and kept in
    ``points.jsonl.torn``), so new points never glue onto a fragment.

    One writer at a time: the file is held with an exclusive ``flock`` while open (the kernel drops it
    when the process ends, however it ends). A second writer, e.g. a sweep started in the same second
    as another of its spec (one stamped folder) or a ``--resume`` of a run still measuring, is refused
    in one line before it repairs or appends anything: its points would interleave with the first's.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        path = run_dir / POINTS_FILE
        check_run_dir(run_dir)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write results to {run_dir} ({exc.strerror or exc})") from exc
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise UserError(
                f"{run_dir} is being written by another serve-bench run (its {POINTS_FILE} is locked); "
                "wait for that run to end, or choose another --run-dir"
            ) from None
        except OSError:  # a filesystem without flock (some network and FUSE mounts): written unguarded, as before
            pass
        try:
            self.repaired = _repair_torn_tail(path)
        except OSError as exc:
            self._file.close()
            raise UserError(f"cannot write results to {run_dir} ({exc.strerror or exc})") from exc

    def append(self, point: Point) -> None:
        self._file.write(json.dumps(point_to_data(point), sort_keys=True, separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())  # a killed run keeps every finished point

    def write_run(self, metadata: dict[str, Any]) -> None:
        """run.json (replaced atomically), stamped with its schema version."""
        path = self.run_dir / RUN_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps({**metadata, "schema_version": RUN_SCHEMA_VERSION}, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_points(
    run: Path, *, include_superseded: bool = False, on_skip: Callable[[str], None] | None = None
) -> list[Point]:
    """Every point of a run, in file order; points re-measured by a later point are left out.

    ``run`` is a run directory or a points.jsonl file. A torn last line (a run
    killed mid-write: no newline, not a whole JSON line) is skipped, and ``on_skip``
    is told which line and why in one line; any other line that is not a point
    raises ResultsFileError naming the file and line.
    """
    path = _points_path(run)
    if not path.exists():
        raise ResultsFileError(f"no results at {path}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ResultsFileError(f"cannot read {path} ({exc.strerror or exc})") from None
    lines = raw.split(b"\n")
    torn_tail = not raw.endswith(b"\n")
    points: list[Point] = []
    for number, line_bytes in enumerate(lines, 1):
        if not line_bytes.strip():
            continue
        torn = torn_tail and number == len(lines)
        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            if torn:  # cut inside a character
                _skipped(on_skip, path, number, line_bytes)
                continue
            raise ResultsFileError(
                f"{path}:{number}: not UTF-8 text (byte 0x{line_bytes[exc.start]:02x} at column "
                f"{exc.start + 1}); is this a serve-bench points.jsonl?"
            ) from None
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError; an integer past 4300 digits; nesting past the stack
            if torn:  # the run was killed while writing this line
                _skipped(on_skip, path, number, line_bytes)
                continue
            raise ResultsFileError(f"{path}:{number}: not valid JSON; is this a serve-bench points.jsonl?") from None
        try:
            points.append(point_from_data(data, line))
        except ValueError as exc:
            raise ResultsFileError(f"{path}:{number}: {exc}") from None
    if include_superseded:
        return points
    superseded = {p.supersedes for p in points if p.supersedes}
    return [p for p in points if p.id not in superseded]


def _skipped(on_skip: Callable[[str], None] | None, path: Path, number: int, line: bytes) -> None:
    if on_skip is not None:
        on_skip(
            f"{path}:{number}: skipped the last line, torn ({len(line)} bytes, no newline, not a whole JSON "
            "line: a run killed while writing it); the points before it are read"
        )


def read_run(run_dir: Path) -> dict[str, Any]:
    """run.json as the current version's dict; {} when the run has none."""
    path = run_dir / RUN_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ResultsFileError(f"{path}: not a readable JSON file ({str(exc)[:200] or type(exc).__name__})") from None
    try:
        return migrate_run(data, str(path))
    except ValueError as exc:
        raise ResultsFileError(str(exc)) from None
