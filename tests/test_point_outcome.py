"""How bench judges a measured point (``point_failure``, its exit status) and keeps one run folder's points measured
alike (``open_point_run``), on synthetic points: each assertion is a boundary a one-line change would move."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from serve_bench.errors import UserError
from serve_bench.load import PointSettings
from serve_bench.stats import config_hash, read_run
from serve_bench.sweep import open_point_run, point_failure
from tests._points import make_point


def test_a_point_fails_when_cut_off_when_nothing_answered_or_past_the_error_share():
    """Cut off comes first, whatever else the point holds; then no answer at all; then the share of failed
    requests, counted over every request sent (not over those answered), where exactly the share allowed passes."""
    assert point_failure(make_point("t", "cpu", 1, 1000.0)) == ""
    for answered in (95, 0):  # cut off, with or without answers before: said as cut off, not as failures
        cut = make_point("t", "cpu", 1, 1000.0, errors=100 - answered, ok=answered, cut_off="the target went down")
        assert point_failure(cut) == "the point was cut off: the target went down"
    assert point_failure(make_point("t", "cpu", 1, 1000.0, errors=5, ok=0)) == (
        "no request succeeded (5 errors of 5 requests (UNAVAILABLE ×5))"
    )  # no first-error note on this point: nothing after the counts
    half = make_point("t", "cpu", 1, 1000.0, errors=50, ok=50)  # 50 of 100 requests failed: 50%, not 100% of 50 ok
    assert point_failure(half, max_error_share=0.5) == ""
    assert point_failure(half, max_error_share=0.49).startswith(
        "50 of 100 requests failed (50.0%, more than the 49.0% allowed): "
    )
    assert point_failure(make_point("t", "cpu", 1, 1000.0, errors=1, ok=99)).startswith("1 of 100 requests failed")


def test_a_run_folder_takes_points_measured_alike_and_a_refusal_leaves_it_free(tmp_path):
    """The first bench writes run.json with its settings. Another with other settings is refused, naming the
    difference, and releases the folder's lock (a refused bench held it until the process ended). A run.json
    from before a setting was recorded (the key absent) is a difference too: its points were measured under a
    default nobody can check."""
    settings = PointSettings(min_duration_s=2.0)
    with open_point_run(tmp_path, settings, command="bench", source="test") as writer:
        writer.append(make_point("t", "cpu", 1, 1000.0))
    assert read_run(tmp_path)["settings"]["min_duration_s"] == 2.0

    with pytest.raises(UserError, match=r"with other settings \(min_duration_s 2.0 there, 5.0") as refused:
        open_point_run(tmp_path, replace(settings, min_duration_s=5.0), command="bench", source="test")
    # the refused one let go of it, though its traceback (held here, as by a caller that keeps the error) still
    # holds the writer it made
    open_point_run(tmp_path, settings, command="bench", source="test").close()
    del refused

    run = json.loads((tmp_path / "run.json").read_text())
    del run["settings"]["drain_s"]
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(UserError, match=r"\(drain_s None there, 30.0 now\)"):
        open_point_run(tmp_path, settings, command="bench", source="test")


def test_a_failed_point_says_what_its_most_frequent_failure_said():
    """After the counts comes the first-error note of the status that failed most (``what_failed``), so the
    user reads the server's words, not only a count."""
    said = "first error UNAVAILABLE: failed to connect to all addresses"
    nothing = replace(make_point("t", "cpu", 1, 1000.0, errors=5, ok=0), notes=(said,))
    assert point_failure(nothing) == f"no request succeeded (5 errors of 5 requests (UNAVAILABLE ×5)); {said}"
    some = replace(make_point("t", "cpu", 1, 1000.0, errors=10, ok=90), notes=(said,))
    assert point_failure(some, max_error_share=0.05).endswith(f"of 100 requests (UNAVAILABLE ×10); {said}")


def test_a_refusal_names_every_difference_and_what_to_do_and_a_new_run_json_says_who_wrote_it(tmp_path):
    """Each setting that differs is named, joined by "; ", then the advice; a folder's first bench records its
    command, the folder and the hash of its configuration in run.json (what ``report`` and ``compare`` show)."""
    settings = PointSettings(min_duration_s=2.0)
    with open_point_run(tmp_path, settings, command="bench --batch-sizes 1", source="model: tiny") as writer:
        writer.append(make_point("t", "cpu", 1, 1000.0))
    run = read_run(tmp_path)
    assert (run["command"], run["run_dir"]) == ("bench --batch-sizes 1", str(tmp_path))
    assert run["config_hash"] == config_hash("model: tiny")
    other = replace(settings, min_duration_s=5.0, drain_s=1.0)
    with pytest.raises(UserError) as refused:
        open_point_run(tmp_path, other, command="bench", source="test")
    assert str(refused.value).endswith(
        "(min_duration_s 2.0 there, 5.0 now; drain_s 30.0 there, 1.0 now); write these to another directory"
    )
