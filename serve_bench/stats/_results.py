"""results/<run>/points.jsonl: appended and flushed to disk as each point ends."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError
from serve_bench.stats._point import Point

__all__ = ["ResultsWriter", "read_points", "POINTS_FILE", "RUN_FILE"]

POINTS_FILE = "points.jsonl"
RUN_FILE = "run.json"


class ResultsWriter:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            self._file = open(run_dir / POINTS_FILE, "a", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write results to {run_dir} ({exc.strerror or exc}); choose another --out") from exc

    def append(self, point: Point) -> None:
        self._file.write(point.to_json() + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())  # a killed run keeps every finished point

    def write_run(self, metadata: dict[str, Any]) -> None:
        path = self.run_dir / RUN_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_points(run_dir: Path) -> list[Point]:
    """Every complete point of a run; a torn last line (a run killed mid-write) is skipped."""
    path = run_dir / POINTS_FILE if run_dir.is_dir() else run_dir
    if not path.exists():
        raise UserError(f"no results at {path}; run `serve-bench sweep SPEC.toml` or `serve-bench bench` first")
    points = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            points.append(Point.from_dict(json.loads(line)))
        except json.JSONDecodeError:
            if number == len(lines):
                continue
            raise UserError(f"{path}:{number} is not valid JSON; the results file is damaged") from None
        except (TypeError, ValueError) as exc:
            raise UserError(f"{path}:{number}: {exc}") from None
    return points
