"""Import Locust's CSV output (--csv PREFIX) as serve-bench points.

Locust users are a closed loop (each waits for its answer). Locust keeps
response times in its own rounded buckets (2 significant digits above 100 ms)
and reports percentiles from them, so imported latencies are coarser than
serve-bench's HdrHistogram (3 digits); every imported point says so. With a
step load shape, each user-count step of the stats history becomes one point.

Locust rewrites its CSV rows once a second and only closes the files at exit
(locust 2.47 stats.py StatsCSVFileWriter.stats_writer, main.py shutdown), so
the last second of a headless run is not in them: an imported point is a
snapshot up to a second before the end, consistent in itself (its requests/s
is Locust's count over Locust's elapsed time at that snapshot).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError, first_line
from serve_bench.stats import (
    PERCENTILE_NAMES,
    ClientView,
    Codec,
    Counts,
    Latency,
    LoadInfo,
    Percentiles,
    Point,
    Stability,
    Target,
    Throughput,
    encode,
    new_histogram,
    point_key,
    server_kind_name,
)

__all__ = ["LOCUST_NOTE", "import_locust"]

LOCUST_NOTE = (
    "imported from Locust: closed loop of Locust users; latencies from Locust's rounded buckets "
    "(2 significant digits above 100 ms), coarser than serve-bench's 3-digit histograms"
)
_NAME = re.compile(r"predict (?P<model>\S+) b(?P<batch>\d+)")
# Locust's CSV column for each of serve-bench's percentiles
_PERCENTILES = {name: f"{p:g}%" for name, p in PERCENTILE_NAMES.items()}


def _read(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            if rows and "Name" not in (reader.fieldnames or ()):  # every Locust CSV names its rows
                raise UserError(
                    f"{path} has no Name column, which every CSV Locust writes has; give the --csv PREFIX Locust wrote"
                )
            return rows
    except OSError as exc:
        raise UserError(f"cannot read {path} ({exc.strerror or exc}); give the --csv PREFIX Locust wrote") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"{path} is not a CSV file Locust wrote ({first_line(exc)}); give its --csv PREFIX") from None


def _number(row: dict[str, str], key: str) -> float:
    value = row.get(key, "") or "0"
    try:
        number = float(value)
    except ValueError:
        return 0.0
    if not math.isfinite(number) or number < 0:  # Locust writes none: a hand-edited or foreign file
        raise UserError(f"{key} {value!r} in a Locust CSV row: expected a finite number >= 0 ({row.get('Name', '')})")
    return number


def _approximate_histogram(latency_ms: dict[str, float], count: int) -> str:
    """An HdrHistogram holding the percentile values in their proportions (Locust keeps no raw values)."""
    histogram = new_histogram()
    marks = [
        (50.0, latency_ms["p50"]),
        (40.0, latency_ms["p90"]),
        (5.0, latency_ms["p95"]),
        (4.0, latency_ms["p99"]),
        (0.9, latency_ms["p99_9"]),
        (0.1, latency_ms["max"]),
    ]
    for share, value in marks:
        n = max(1, round(count * share / 100))
        histogram.record_value(max(1, int(value * 1000)), n)
    return encode(histogram)


def _protocol(request_type: str) -> str:
    """A Locust row's protocol: the gRPC user reports request_type "grpc"; FastHttpUser the HTTP method."""
    return "grpc" if request_type.lower() == "grpc" else "rest"


def _point(
    name: str,
    request_type: str,
    users: int,
    requests: float,
    failures: float,
    duration: float,
    latency_ms: dict[str, float],
    options: dict[str, Any],
    by_protocol: bool = False,
) -> Point:
    match = _NAME.search(name)
    given = options.get("batch_size")
    model = options.get("model") or (match["model"] if match else "")
    said = given if given is not None else (match["batch"] if match else None)
    if not model or said is None:
        # it was read as model "unknown" at batch 1: a run at batch 8 imported at an eighth of its images/s
        needed = [flag for flag, missing in (("--model", not model), ("--batch-size", said is None)) if missing]
        raise UserError(
            f"the request name {name!r} does not say the model and batch size (serve-bench's Locust users name "
            f"theirs 'predict MODEL bBATCH'); pass {' and '.join(needed)}"
        )
    batch = int(said)
    if not 1 <= batch <= 2**63 - 1:  # a tensor's dimension is an int64; 400 digits were an OverflowError below
        where = "--batch-size" if given is not None else f"the request name {name!r}"
        raise UserError(f"{where}: a batch size must be a whole number from 1 to 2**63 - 1, got {batch}")
    if failures > requests:
        raise UserError(f"{name!r}: {failures:g} failures of {requests:g} requests; is this Locust's stats CSV?")
    protocol = _protocol(request_type)
    load = LoadInfo("locust", concurrency=users)
    ok = int(requests - failures)
    rps = ok / duration if duration > 0 else 0.0
    latency = Percentiles(**{k: v * 1000 for k, v in latency_ms.items()}, count=ok)
    target = options.get("target_name") or "locust"
    if by_protocol:  # one key per protocol: "predict tiny b1" was sent over both
        target = f"{target}-{protocol}"
    signature = options.get("signature") or "serving_default"
    payload = options.get("payload", "float")
    return Point(
        target=Target(
            target,
            options.get("url", ""),
            options.get("device", "cpu"),
            server=server_kind_name(options.get("server", "")),  # an old spelling is written in the one name
            protocol=protocol,
        ),
        model=model,
        signature=signature,
        payload=payload,
        batch_size=batch,
        load=load,
        duration_s=round(duration, 3),
        counts=Counts.of(int(requests), ok, ok * batch, {"locust-failure": int(failures)}),
        throughput=Throughput(rps, rps * batch),
        latency=Latency(latency, histogram=_approximate_histogram(latency_ms, max(ok, 1))),
        # Locust keeps no windows: stability cannot be judged, which is not the same as unstable
        stability=Stability(stable=True, judged_on="not judged (Locust keeps no windows)"),
        client=ClientView(),
        codec=Codec(),
        key=point_key(target, model, signature, payload, batch, load, 0),
        notes=(LOCUST_NOTE, "server metrics unavailable: imported from Locust"),
    )


def _latencies(row: dict[str, str], prefix: str = "") -> dict[str, float]:
    values = {k: _number(row, column) for k, column in _PERCENTILES.items()}
    values["max"] = _number(row, f"{prefix}Max Response Time") or _number(row, "100%")
    values["mean"] = _number(row, f"{prefix}Average Response Time")
    return values


def import_locust(prefix: str, on_skip: Callable[[str], None] | None = None, **options: Any) -> list[Point]:
    """Points from Locust's ``PREFIX_stats.csv`` (and ``PREFIX_stats_history.csv`` for step loads).

    Rows whose names say no model and batch size (and no --model and --batch-size say them) are left out, said
    through ``on_skip``, where other rows do say them (a locustfile that also sends a health check); where none
    does, the first is refused naming the flags it needs."""
    stats = _read(Path(f"{prefix}_stats.csv"))
    history_path = Path(f"{prefix}_stats_history.csv")
    history = _read(history_path) if history_path.exists() else []
    requests_rows = [r for r in stats if r.get("Name") != "Aggregated" and _number(r, "Request Count") > 0]
    if not requests_rows:
        raise UserError(f"{prefix}_stats.csv holds no requests; did the Locust run send any?")
    flags_say_all = bool(options.get("model")) and options.get("batch_size") is not None
    said: list[dict[str, str]] = []
    left: list[str] = []
    for row in requests_rows:
        if flags_say_all or _NAME.search(row.get("Name", "")):
            said.append(row)
        else:
            left.append(row.get("Name", ""))
    if said and left:
        if on_skip is not None:
            on_skip(
                f"{prefix}_stats.csv: left out {len(left)} row{'s' * (len(left) > 1)} whose name says no model and "
                f"batch size ({', '.join(map(repr, left[:3]))}{', ...' if len(left) > 3 else ''}); serve-bench's "
                "requests are named 'predict MODEL bBATCH'"
            )
        requests_rows = said
    aggregated = [r for r in history if r.get("Name") == "Aggregated"]
    steps: list[tuple[int, list[dict[str, str]]]] = []
    for row in aggregated:
        users = int(_number(row, "User Count"))
        if users <= 0:
            continue
        if steps and steps[-1][0] == users:
            steps[-1][1].append(row)
        else:
            steps.append((users, [row]))
    points = []
    if len(requests_rows) == 1 and len(steps) > 1:
        if said and left:  # the steps are read from the history's Aggregated rows: the rows left out are in them
            raise UserError(
                f"{prefix}_stats_history.csv: a step load is read from Locust's totals over every request, "
                f"{', '.join(map(repr, left[:3]))} included; run the step load with serve-bench's requests alone"
            )
        (row,) = requests_rows
        previous_total = 0.0
        previous_failures = 0.0
        previous_time = _number(steps[0][1][0], "Timestamp")
        for users, rows in steps:
            last = rows[-1]
            total, failures = _number(last, "Total Request Count"), _number(last, "Total Failure Count")
            now = _number(last, "Timestamp")
            duration = max(now - previous_time, 1.0)
            point = _point(
                row["Name"],
                row.get("Type", ""),
                users,
                total - previous_total,
                failures - previous_failures,
                duration,
                _latencies(last, "Total "),
                options,
            )
            points.append(
                point.with_notes(
                    "one step of a step load shape; percentiles are Locust's rolling window at the step's end"
                )
            )
            previous_total, previous_failures, previous_time = total, failures, now
        return points
    users = max((u for u, _ in steps), default=int(options.get("users") or 1))
    duration = (
        (_number(aggregated[-1], "Timestamp") - _number(aggregated[0], "Timestamp")) if len(aggregated) > 1 else 0.0
    )
    by_protocol = len({_protocol(row.get("Type", "")) for row in requests_rows}) > 1  # gRPC and REST users in one run
    for row in requests_rows:
        requests = _number(row, "Request Count")
        rps = _number(row, "Requests/s")
        span = duration if duration > 0 else (requests / rps if rps else 1.0)
        points.append(
            _point(
                row["Name"],
                row.get("Type", ""),
                users,
                requests,
                _number(row, "Failure Count"),
                span,
                _latencies(row),
                options,
                by_protocol,
            )
        )
    _one_point_per_key(points, requests_rows, prefix)
    return points


def _one_point_per_key(points: list[Point], rows: list[dict[str, str]], prefix: str) -> None:
    """UserError where two rows became one point (--model or --batch-size given for rows that differ): report would
    show them as repeats of one measurement."""
    seen: dict[str, dict[str, str]] = {}
    for point, row in zip(points, rows):
        if point.key in seen:
            first = seen[point.key]
            raise UserError(
                f"{prefix}_stats.csv: rows {first.get('Name', '')!r} and {row.get('Name', '')!r} both become point "
                f"{point.key} (one target, model, batch size and user count); leave out --model and --batch-size "
                "(they apply to every row) so that each row's name decides, or name each request 'predict MODEL bBATCH'"
            )
        seen[point.key] = row
