"""Judging a measured point, and keeping one run directory's points measured alike."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError
from serve_bench.load import PointPlan, PointSettings, what_failed
from serve_bench.stats import (
    POINTS_FILE,
    InvalidTarget,
    Point,
    ResultsWriter,
    collect_run_metadata,
    parse_target,
    read_points,
    read_run,
)

__all__ = [
    "check_a_sweep_s_run",
    "check_measured_alike",
    "check_one_server_per_key",
    "holds_points",
    "open_point_run",
    "point_failure",
    "same_name_elsewhere",
]


def point_failure(point: Point, max_error_share: float = 0.0) -> str:
    """Why the point does not measure the server ("" when it does).

    Cut off (the target went down), no request answered, or more than
    ``max_error_share`` of its requests failed.
    """
    if point.cut_off:
        return f"the point was cut off: {point.cut_off}"
    requests = point.counts.requests
    said = what_failed(point.notes, point.counts.errors_by_status())
    said = f"; {said}" if said else ""
    if point.counts.ok == 0:
        return f"no request succeeded ({point.counts.describe()}){said}"
    share = point.error_count / requests if requests else 0.0
    if share > max_error_share:
        return (
            f"{point.error_count} of {requests} requests failed ({share:.1%}, more than the "
            f"{max_error_share:.1%} allowed): {point.counts.describe()}{said}"
        )
    return ""


def _as_json(settings: PointSettings) -> dict[str, Any]:
    # compared with what run.json holds, so both go through JSON
    data: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(settings)))
    return data


def holds_points(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a measured point (a folder whose first command failed before one holds none)."""
    return (run_dir / POINTS_FILE).is_file() and bool(read_points(run_dir, include_superseded=True))


def check_measured_alike(run_dir: Path, settings: PointSettings, advice: str) -> None:
    """UserError where ``run_dir``, which holds points, has a run.json recording other settings (or none):
    ``compare`` and ``report`` would mix points measured differently. ``advice``: what to do instead."""
    held = read_run(run_dir).get("settings")
    if held is None:
        raise UserError(
            f"{run_dir} holds a run that recorded no settings (import-locust's, pipeline's); choose another folder"
        )
    differences = [
        f"{key} {held.get(key)} there, {value} now"
        for key, value in _as_json(settings).items()
        if held.get(key) != value
    ]
    if differences:
        raise UserError(f"{run_dir} holds points measured with other settings ({'; '.join(differences)}); {advice}")


def check_a_sweep_s_run(run_dir: Path) -> None:
    """UserError where ``run_dir``, which holds points, is not a sweep's run (its run.json names no sweep spec):
    bench's, tune's, pipeline's, import-locust's. ``--resume`` continued a bench's folder as if it were a sweep's,
    appending the spec's points beside bench's and writing the sweep's run.json over bench's."""
    held = read_run(run_dir)
    if "spec_name" in held and not held.get("tune"):
        return
    command = "tune" if held.get("tune") else str(held.get("command") or "").split(" ")[0]
    made = f"`serve-bench {command}`" if command else "another command"
    raise UserError(f"{run_dir} holds a run of {made}, not of a sweep spec; choose another --run-dir")


def _server_at(url: str) -> tuple[str, str, int] | None:
    """What names one server in a URL: scheme, host (``parse_target`` lower-cases it) and port (the scheme's
    default where none is written); None where it names none (an import's "", a point from an older serve-bench)."""
    try:
        parts = parse_target(url)
    except InvalidTarget:
        return None
    return parts.scheme, parts.host, parts.port


def check_one_server_per_key(run_dir: Path, plan: PointPlan) -> None:
    """UserError where ``run_dir`` holds a point of ``plan``'s key measured at another server, or at none that a URL
    names: ``report`` and ``compare`` pool the points of one key as repeats of one measurement, so a gRPC and a
    REST point (or two servers) under one key became one figure and one interval. Points of other keys may come
    from other servers (the README's bench lines: gRPC, then REST at another load)."""
    here = _server_at(plan.target.url)
    for point in read_points(run_dir):  # those report pools (a superseded point is not among them)
        if point.key == plan.key and _server_at(point.target.url) != here:
            raise UserError(
                f"{run_dir} holds point {plan.key} measured at {point.target.url or 'no URL'}, and this one is at "
                f"{plan.target.url}: report would take them for repeats of one measurement; name this target with "
                "--target-name, or write it to another --run-dir"
            )


def same_name_elsewhere(run_dir: Path, plan: PointPlan) -> str:
    """The URL of another server whose points ``run_dir`` holds under ``plan``'s target name ("" where none):
    ``report`` groups a folder's points by target name, so two servers under one name read as one target (its
    label the first point's, its batching gain across both). Allowed (other points, other loads), but said."""
    here = _server_at(plan.target.url)
    for point in read_points(run_dir) if (run_dir / POINTS_FILE).is_file() else []:
        if point.target.name == plan.target.name and _server_at(point.target.url) != here:
            return point.target.url
    return ""


def open_point_run(
    run_dir: Path, settings: PointSettings, *, command: str, source: str, plan: PointPlan
) -> ResultsWriter:
    """A writer that appends ``plan``'s point to ``run_dir``, whose run.json records ``settings``.

    A folder without points gets a (new) run.json; one that already holds points keeps its run.json,
    must have been measured with the same settings (``check_measured_alike``) and may hold ``plan``'s key
    only at its server (``check_one_server_per_key``).
    """
    writer = ResultsWriter(run_dir)  # first: the lock, and a torn tail cut off, before its points are read
    try:
        if holds_points(run_dir):
            check_measured_alike(run_dir, settings, "write these to another directory")
            check_one_server_per_key(run_dir, plan)
        else:
            writer.write_run(
                collect_run_metadata(source, command=command, run_dir=str(run_dir), settings=_as_json(settings))
            )
    except BaseException:
        writer.close()
        raise
    return writer
