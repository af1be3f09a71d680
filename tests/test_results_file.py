"""points.jsonl and run.json: typed round trip, the v1 migration, torn lines, bad files, superseded points."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serve_bench.cli import main
from serve_bench.errors import UserError
from serve_bench.stats import (
    POINTS_FILE,
    RUN_SCHEMA_VERSION,
    SCHEMA_HISTORY,
    SCHEMA_VERSION,
    Point,
    ResultsFileError,
    ResultsWriter,
    ServerView,
    _schema,
    read_points,
    read_run,
    server_kind_name,
)
from tests._points import make_point

DATA = Path(__file__).parent / "data"


def _mutable_parts(value: Any, where: str = "point") -> list[str]:
    """Paths of every list, dict or set inside a record (an immutable point has none)."""
    if isinstance(value, (list, dict, set)):
        return [where]
    found = []
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            found += _mutable_parts(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            found += _mutable_parts(item, f"{where}[{i}]")
    return found


def test_points_round_trip_unchanged_and_hold_no_mutable_parts(tmp_path):
    points = [
        make_point("gpu", "gpu", 8, 12_000.0, errors=2),
        make_point("cpu", "cpu", 1, 70_000.0, stable=False),
        make_point("gpu", "gpu", 1, 9_000.0, ok=0, errors=5, cut_off="target down"),
    ]
    with ResultsWriter(tmp_path) as writer:
        for point in points:
            writer.append(point)
    again = read_points(tmp_path)
    assert again == points
    assert all(p.schema_version == SCHEMA_VERSION for p in again)
    assert [_mutable_parts(p) for p in again] == [[], [], []]
    with pytest.raises(dataclasses.FrozenInstanceError):
        again[0].counts.ok = 3  # type: ignore[misc]


def test_version_1_points_are_migrated():
    """Lines written by serve-bench 0.1 (commit 1228b33) read as typed points with the same figures."""
    points = read_points(DATA / "points_v1.jsonl")
    raw = [json.loads(line) for line in (DATA / "points_v1.jsonl").read_text().splitlines()]
    assert len(points) == len(raw) == 5
    for point, old in zip(points, raw):
        assert point.schema_version == SCHEMA_VERSION and point.key == old["key"]
        assert point.latency.p99 == old["latency_us"]["p99"] and point.latency.due.count == old["latency_us"]["count"]
        assert point.counts.errors_by_status() == old["counts"]["errors"]
        assert point.throughput.items_per_s == old["throughput"]["items_per_s"]
        assert point.stability.stable == old["stability"]["stable"]
        assert point.stability.items_spread == old["stability"]["spread"]["items_per_s"]
        assert point.codec.encode_once_us == old["codec_us"].get("encode_once", 0.0)
        assert point.target.protocol == old["target"]["protocol"]
        # the kind's one name: serve-bench-local is local, tensorflow-serving tfserving (stats.server_kind_name)
        assert point.target.server_kind == server_kind_name(old["target"]["server_kind"])
        assert _mutable_parts(point) == []
    assert {p.target.server_kind for p in points} == {"local", "tfserving", "unknown"}
    closed, open_loop, dead, _synthetic, local = points
    assert open_loop.latency.sent is not None and open_loop.latency.sent.p99 == raw[1]["latency_uncorrected_us"]["p99"]
    assert open_loop.client.schedule_lag is not None
    assert open_loop.client.schedule_lag.p99 == raw[1]["schedule_lag_us"]["p99"]
    assert dead.needs_remeasure and not closed.needs_remeasure
    assert closed.server == ServerView.unavailable("no metrics endpoint configured")
    assert local.server == ServerView(
        requests=122.0,
        errors=0.0,
        request_us_mean=5400.0,
        queue_us_mean=150.0,
        compute_us_mean=5100.0,
        overhead_us_mean=150.0,
        tf_calls=122.0,
        input_batch_mean=1.0,
        processed_batch_mean=1.0,
        padding_share=0.0,
    )
    # a v1 line's id is derived from its text: stable between reads, distinct between lines
    assert [p.id for p in read_points(DATA / "points_v1.jsonl")] == [p.id for p in points]
    assert len({p.id for p in points}) == 5


def test_run_json_is_versioned(tmp_path):
    assert read_run(tmp_path) == {}  # a run without run.json
    shutil.copy(DATA / "run_v1.json", tmp_path / "run.json")
    migrated = read_run(tmp_path)
    assert migrated["schema_version"] == RUN_SCHEMA_VERSION and migrated["spec_name"]
    with ResultsWriter(tmp_path / "new") as writer:
        writer.write_run({"command": "bench"})
    assert json.loads((tmp_path / "new" / "run.json").read_text())["schema_version"] == RUN_SCHEMA_VERSION
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ResultsFileError, match="schema_version 99"):
        read_run(tmp_path)


def test_schema_history_is_written_down_for_every_version():
    assert set(SCHEMA_HISTORY) == set(range(1, SCHEMA_VERSION + 1))
    doc = _schema.__doc__ or ""
    for version in SCHEMA_HISTORY:
        assert f"\n{version}. " in doc


def test_a_torn_last_line_is_skipped_then_repaired_before_appending(tmp_path):
    first, second, third = (make_point("cpu", "cpu", b, 10_000.0 * b) for b in (1, 2, 4))
    with ResultsWriter(tmp_path) as writer:
        writer.append(first)
        writer.append(second)
    path = tmp_path / POINTS_FILE
    whole = path.read_bytes()
    fragment = whole.splitlines()[1][:57]
    path.write_bytes(whole.splitlines(keepends=True)[0] + fragment)  # killed while writing the second line
    assert read_points(tmp_path) == [first]
    with ResultsWriter(tmp_path) as writer:
        assert writer.repaired == fragment.decode()
        writer.append(third)
    assert read_points(tmp_path) == [first, third]
    assert (tmp_path / (POINTS_FILE + ".torn")).read_bytes() == fragment + b"\n"
    with ResultsWriter(tmp_path) as writer:  # a whole file is left alone
        assert writer.repaired == ""
    assert read_points(tmp_path) == [first, third]


_HOLD = """
import sys
from pathlib import Path
from serve_bench.stats import ResultsWriter
from tests._points import make_point
with ResultsWriter(Path(sys.argv[1])) as writer:
    writer.append(make_point("cpu", "cpu", 1, 10_000.0))
    print("held", flush=True)
    sys.stdin.read()  # hold the run until the test says otherwise
"""


def test_a_run_being_written_by_another_process_is_refused_until_that_process_ends(tmp_path):
    """Two sweeps of one spec started in the same second name one stamped folder; a ``--resume`` may
    be typed while the run still measures. The second writer is refused in one line before it
    repairs or appends anything, and the folder is free again once the first process is gone, even
    killed (the kernel drops a flock with its last descriptor)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parent.parent,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        path = tmp_path / POINTS_FILE
        (held,) = read_points(tmp_path)
        with path.open("ab") as f:
            f.write(b'{"torn')  # what the holder is writing: never "repaired" by the one refused
        before = path.read_bytes()
        with pytest.raises(UserError) as caught:
            ResultsWriter(tmp_path)
        assert str(caught.value) == (
            f"{tmp_path} is being written by another serve-bench run (its points.jsonl is locked); "
            "wait for that run to end, or choose another --run-dir"
        )
        assert path.read_bytes() == before and not (tmp_path / (POINTS_FILE + ".torn")).exists()
    finally:
        holder.kill()
        holder.wait()
    with ResultsWriter(tmp_path) as writer:
        assert writer.repaired == '{"torn'
    assert read_points(tmp_path) == [held]


def test_one_process_gets_one_writer_per_run(tmp_path):
    """The lock is per open file, so a second writer in the same process is refused as well."""
    with ResultsWriter(tmp_path):
        with pytest.raises(UserError, match="is being written by another serve-bench run"):
            ResultsWriter(tmp_path)
    with ResultsWriter(tmp_path) as writer:  # closed: free
        assert writer.repaired == ""


@pytest.mark.parametrize(
    "content, line, message",
    [
        (b'{"name": "not a point"}\n', 1, "not a serve-bench point"),
        (b"[1, 2, 3]\n", 1, "expected a point"),
        (b'{\n  "schema_version": 2\n}\n', 1, "not valid JSON"),
        (b"POINT\n" + b"\xff\xfe\n", 1, "not valid JSON"),
        (b"\xff\xfe{}\n", 1, "not UTF-8 text (byte 0xff at column 1)"),
        (b'{"schema_version": 7}\n', 1, "schema_version 7"),
        (b'{"schema_version": ' + b"9" * 5000 + b"}\n", 1, "not valid JSON"),  # past Python's 4300 digits
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", 1, "not valid JSON"),  # nested past the stack
    ],
    ids=["other-object", "array", "pretty-printed", "garbage", "not-utf8", "newer-version", "huge-int", "deep"],
)
def test_a_file_that_is_not_points_names_file_and_line(tmp_path, content, line, message):
    (tmp_path / POINTS_FILE).write_bytes(content)
    with pytest.raises(ResultsFileError) as caught:
        read_points(tmp_path)
    assert f"{tmp_path / POINTS_FILE}:{line}: " in str(caught.value) and message in str(caught.value)


def test_a_point_with_a_wrong_field_names_the_field(tmp_path):
    good = make_point("cpu", "cpu", 1, 5_000.0)
    data = _schema.point_to_data(good)
    data["counts"]["ok"] = "many"
    bad_key = dict(_schema.point_to_data(good), colour="blue")
    missing = _schema.point_to_data(good)
    del missing["latency"]
    lines = [json.dumps(_schema.point_to_data(good)), json.dumps(data), json.dumps(bad_key), json.dumps(missing)]
    for number, expected in (
        (2, "counts.ok: expected an integer, found a string"),
        (3, "unknown field 'colour'"),
        (4, "missing field 'latency'"),
    ):
        (tmp_path / POINTS_FILE).write_text(lines[0] + "\n" + lines[number - 1] + "\n")
        with pytest.raises(ResultsFileError, match=f":2: .*{expected}"):
            read_points(tmp_path)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d.update(batch_size=0), "batch_size: expected a whole number >= 1, found 0"),
        (lambda d: d["load"].update(mode="open", rate=None), "load.rate: an open-loop point needs its rate"),
    ],
    ids=["batch-0", "open-without-rate"],
)
def test_a_hand_edited_point_that_no_figure_can_use_names_the_field(tmp_path, capsys, edit, expected):
    """Values the reader's types allow but every figure divides by or prints (report went on to ZeroDivisionError
    and TypeError tracebacks): the line and the field, in one line."""
    data = _schema.point_to_data(make_point("cpu", "cpu", 1, 5_000.0))
    edit(data)
    (tmp_path / POINTS_FILE).write_text(json.dumps(data) + "\n")
    assert main(["report", str(tmp_path), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / POINTS_FILE}:1: " in err and expected in err and "Traceback" not in err, err


def test_a_run_json_past_what_json_reads_is_a_one_line_error(tmp_path):
    from serve_bench.stats import read_run

    for text in ('{"settings": ' + "9" * 5000 + "}", "[" * 100_000 + "]" * 100_000):
        (tmp_path / "run.json").write_text(text)
        with pytest.raises(ResultsFileError, match=r"run\.json: not a readable JSON file"):
            read_run(tmp_path)


def test_report_on_a_bad_file_exits_2_with_the_line(tmp_path, capsys):
    with ResultsWriter(tmp_path) as writer:
        writer.append(make_point("cpu", "cpu", 1, 5_000.0))
    with (tmp_path / POINTS_FILE).open("ab") as f:
        f.write(b'{"hello": 1}\n')
    assert main(["report", str(tmp_path), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / POINTS_FILE}:2:" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_on_a_torn_last_line_says_which_line_it_skipped(tmp_path, capsys, command):
    """Issue 34, item 7: a killed run's torn last line is skipped (exit 0, the points before it reported)
    and said, in one line on stderr naming the file, the line and why; it used to be skipped silently."""
    points = [make_point("cpu", "cpu", b, 10_000.0 * b) for b in (1, 2, 4)]
    with ResultsWriter(tmp_path) as writer:
        for point in points:
            writer.append(point)
    path = tmp_path / POINTS_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]) + lines[2][:100])  # killed while writing the third line
    argv = ["report", str(tmp_path), "--no-plots"] if command == "report" else ["compare", str(tmp_path), str(tmp_path)]
    assert main(argv) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(set(err)) == 1, err  # compare reads the run twice: the same line
    assert err[0].startswith(f"serve-bench {command}: warning: {path}:3: skipped the last line, torn (100 bytes")
    assert "killed" in err[0]
    assert read_points(tmp_path) == points[:2]


def test_a_torn_last_line_cut_inside_a_character_is_skipped_and_said(tmp_path):
    whole = make_point("cpu", "cpu", 1, 5_000.0)
    with ResultsWriter(tmp_path) as writer:
        writer.append(whole)
    with (tmp_path / POINTS_FILE).open("ab") as f:
        f.write('{"note": "é'.encode()[:-1])  # half of a two-byte character, no newline
    said: list[str] = []
    assert read_points(tmp_path, on_skip=said.append) == [whole]
    assert len(said) == 1 and ":2: skipped the last line, torn" in said[0]


def test_a_remeasured_point_supersedes_the_old_line(tmp_path):
    dead = make_point("cpu", "cpu", 1, 5_000.0, ok=0, errors=40)
    cut = make_point("cpu", "cpu", 2, 5_000.0, cut_off="target down after 1.2 s")
    fine = make_point("cpu", "cpu", 4, 5_000.0)
    assert dead.needs_remeasure and cut.needs_remeasure and not fine.needs_remeasure
    assert "no successes" in dead.flags() and "cut off" in cut.flags() and fine.flags() == ()
    with ResultsWriter(tmp_path) as writer:
        for point in (dead, cut, fine):
            writer.append(point)
    redo = make_point("cpu", "cpu", 1, 6_000.0).superseding(dead)
    with ResultsWriter(tmp_path) as writer:
        writer.append(redo)
    assert redo.key == dead.key and redo.supersedes == dead.id
    assert read_points(tmp_path) == [cut, fine, redo]
    assert read_points(tmp_path, include_superseded=True) == [dead, cut, fine, redo]
    assert len((tmp_path / POINTS_FILE).read_text().splitlines()) == 4  # the old line stays


def test_point_describe_and_flags_come_from_its_records():
    point = make_point("gpu", "gpu", 8, 12_000.0, concurrency=4, stable=False, errors=3)
    line = point.describe()
    assert line.startswith(f"gpu b8 concurrency 4: {point.items_per_s:.1f} items/s")
    assert "p99 14.4 ms" in line and "UNSTABLE" in line and "3 errors of 100 requests (UNAVAILABLE ×3)" in line
    assert point.flags() == ("errors", "unstable")
    assert Point.describe(make_point("gpu", "gpu", 8, 12_000.0)).endswith("p99 14.4 ms")


def test_no_record_of_a_point_declares_a_mutable_field():
    """Every field type reachable from Point (others' records included: ServerView, EnergyView, inputs, pipeline)
    is a scalar, a tuple or another frozen record, so no point can be changed after it is made."""
    import types
    import typing

    seen: set[type] = set()
    problems: list[str] = []

    def walk(tp: Any, where: str) -> None:
        origin = typing.get_origin(tp)
        if origin in (list, dict, set) or tp in (list, dict, set):
            problems.append(f"{where}: {tp}")
        elif origin in (typing.Union, types.UnionType, tuple):
            for arg in typing.get_args(tp):
                if arg is not Ellipsis:
                    walk(arg, where)
        elif dataclasses.is_dataclass(tp) and isinstance(tp, type) and tp not in seen:
            seen.add(tp)
            if not tp.__dataclass_params__.frozen:  # type: ignore[attr-defined]
                problems.append(f"{where}: {tp.__name__} is not frozen")
            for name, hint in typing.get_type_hints(tp).items():
                if name in {f.name for f in dataclasses.fields(tp)}:
                    walk(hint, f"{where}.{name}")

    walk(Point, "Point")
    assert problems == []
    assert len(seen) > 10  # the walk reached the nested records


@pytest.mark.parametrize("name", ["cpu[2]", "a**b", "x?"])
def test_resume_finds_the_latest_run_of_a_name_that_looks_like_a_pattern(tmp_path, name):
    """--resume without --run-dir finds results/<name>-<time> by the name as written: "a**b" raised
    ValueError from pathlib's glob, and "cpu[2]" matched nothing, so the resumed sweep started anew."""
    from serve_bench.stats import choose_run_dir

    older, newer = tmp_path / f"{name}-20260101-000000", tmp_path / f"{name}-20260102-000000"
    for run in (older, newer, tmp_path / "cpu2-20260103-000000", tmp_path / "x1-20260103-000000"):
        run.mkdir()
    assert choose_run_dir(None, tmp_path, name, resume=True) == newer
