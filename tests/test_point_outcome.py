"""How bench judges a measured point (``point_failure``, its exit status) and keeps one run folder's points measured
alike (``open_point_run``), on synthetic points: each assertion is a boundary a one-line change would move."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from serve_bench.errors import UserError
from serve_bench.load import PointPlan, PointSettings
from serve_bench.stats import LoadInfo, ResultsWriter, config_hash, read_run
from serve_bench.sweep import open_point_run, point_failure
from tests._points import make_point

_T = make_point("t", "cpu", 1, 1000.0).target  # grpc://t:8500, as make_point's points are
_PLAN = PointPlan(_T, "inception_v3", "serving_default", "float", 1, LoadInfo("closed", concurrency=1))


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
    with open_point_run(tmp_path, settings, command="bench", source="test", plan=_PLAN) as writer:
        writer.append(make_point("t", "cpu", 1, 1000.0))
    assert read_run(tmp_path)["settings"]["min_duration_s"] == 2.0

    with pytest.raises(UserError, match=r"with other settings \(min_duration_s 2.0 there, 5.0") as refused:
        open_point_run(tmp_path, replace(settings, min_duration_s=5.0), command="bench", source="test", plan=_PLAN)
    # the refused one let go of it, though its traceback (held here, as by a caller that keeps the error) still
    # holds the writer it made
    open_point_run(tmp_path, settings, command="bench", source="test", plan=_PLAN).close()
    del refused

    run = json.loads((tmp_path / "run.json").read_text())
    del run["settings"]["drain_s"]
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(UserError, match=r"\(drain_s None there, 30.0 now\)"):
        open_point_run(tmp_path, settings, command="bench", source="test", plan=_PLAN)


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
    with open_point_run(
        tmp_path, settings, command="bench --batch-sizes 1", source="model: tiny", plan=_PLAN
    ) as writer:
        writer.append(make_point("t", "cpu", 1, 1000.0))
    run = read_run(tmp_path)
    assert (run["command"], run["run_dir"]) == ("bench --batch-sizes 1", str(tmp_path))
    assert run["config_hash"] == config_hash("model: tiny")
    other = replace(settings, min_duration_s=5.0, drain_s=1.0)
    with pytest.raises(UserError) as refused:
        open_point_run(tmp_path, other, command="bench", source="test", plan=_PLAN)
    assert str(refused.value).endswith(
        "(min_duration_s 2.0 there, 5.0 now; drain_s 30.0 there, 1.0 now); write these to another directory"
    )


def test_a_run_folder_holds_each_point_at_one_server(tmp_path):
    """``report`` and ``compare`` pool one key's points as repeats of one measurement: a second bench of the same
    key at another server (REST beside gRPC) became one figure and one interval with the first ("bench b1 c1 ×2").
    It is refused before measuring, naming the key, both URLs and what to do, and lets go of the folder. The same
    server again is a repeat, however its URL is written (the host's case, the scheme's default port); another
    key (another load here) may come from another server, as the README's bench lines do."""
    settings = PointSettings(min_duration_s=2.0)
    assert _PLAN.key == make_point("t", "cpu", 1, 1000.0).key
    with open_point_run(tmp_path, settings, command="bench", source="test", plan=_PLAN) as writer:
        writer.append(make_point("t", "cpu", 1, 1000.0))
    rest = replace(_PLAN, target=replace(_T, url="http://t:8501"))
    with pytest.raises(UserError) as refused:
        open_point_run(tmp_path, settings, command="bench", source="test", plan=rest)
    assert str(refused.value) == (
        f"{tmp_path} holds point {_PLAN.key} measured at grpc://t:8500, and this one is at http://t:8501: report "
        "would take them for repeats of one measurement; name this target with --target-name, or write it to "
        "another --run-dir"
    )
    del refused
    for same in ("grpc://t:8500", "grpc://T:8500", "grpc://t"):  # a host in any case; 8500 is grpc://'s default
        open_point_run(
            tmp_path, settings, command="bench", source="test", plan=replace(_PLAN, target=replace(_T, url=same))
        ).close()
    for other in ("grpc://t:8600", "grpc://u:8500"):
        with pytest.raises(UserError, match=f"and this one is at {other}:"):
            open_point_run(
                tmp_path, settings, command="bench", source="test", plan=replace(_PLAN, target=replace(_T, url=other))
            )
    nowhere = tmp_path / "imported"  # a point whose URL names no server (an import's ""): not the same server
    with open_point_run(nowhere, settings, command="bench", source="test", plan=_PLAN) as writer:
        writer.append(replace(make_point("t", "cpu", 1, 1000.0), target=replace(_T, url="", protocol="grpc")))
    with pytest.raises(UserError, match="measured at no URL, and this one is at grpc://t:8500: report"):
        open_point_run(nowhere, settings, command="bench", source="test", plan=_PLAN)
    two = replace(rest, load=LoadInfo("closed", concurrency=2))  # another key: taken
    with open_point_run(tmp_path, settings, command="bench", source="test", plan=two) as writer:
        writer.append(replace(make_point("t", "cpu", 1, 1000.0, concurrency=2), target=rest.target))
    with pytest.raises(UserError, match="measured at http://t:8501, and this one is at grpc://t:8500"):
        open_point_run(tmp_path, settings, command="bench", source="test", plan=replace(two, target=_T))


def test_a_sweep_continues_only_a_sweep_s_run(tmp_path):
    """A sweep's run.json names its spec; tune's names one too but says it is tune's; bench, pipeline and
    import-locust name their command (its first word is said); a folder without run.json names nothing."""
    from serve_bench.sweep._outcome import check_a_sweep_s_run

    def refusal(run: dict[str, object]) -> str:
        (tmp_path / "run.json").write_text(json.dumps(run))
        try:
            check_a_sweep_s_run(tmp_path)
        except UserError as exc:
            return str(exc).removeprefix(f"{tmp_path} holds a run of ")
        return ""

    assert refusal({"spec_name": "t", "settings": {}}) == ""
    assert refusal({"spec_name": "t", "tune": False}) == ""
    tail = ", not of a sweep spec; choose another --run-dir"
    assert refusal({"spec_name": "t", "tune": True}) == "`serve-bench tune`" + tail
    assert refusal({"command": "bench --batch-sizes 1"}) == "`serve-bench bench`" + tail
    assert refusal({"command": "import-locust"}) == "`serve-bench import-locust`" + tail
    assert refusal({}) == "another command" + tail


def test_the_same_name_at_another_server_is_found_to_be_said(tmp_path):
    """``report`` groups a folder's points by target name: bench says where the name already stands for another
    server (the URL, once), not where it is the same server written otherwise, nor for another name, nor in a
    folder that holds nothing yet."""
    from serve_bench.sweep import same_name_elsewhere

    assert same_name_elsewhere(tmp_path / "none", _PLAN) == ""
    with ResultsWriter(tmp_path) as writer:
        writer.append(make_point("t", "cpu", 1, 1000.0))  # t at grpc://t:8500
        writer.append(replace(make_point("u", "cpu", 1, 1000.0), target=replace(_T, name="u", url="http://u:1")))
    assert same_name_elsewhere(tmp_path, replace(_PLAN, target=replace(_T, url="grpc://T"))) == ""
    assert same_name_elsewhere(tmp_path, replace(_PLAN, target=replace(_T, url="http://t:8501"))) == "grpc://t:8500"
    assert same_name_elsewhere(tmp_path, replace(_PLAN, target=replace(_T, name="v", url="http://t:8501"))) == ""
