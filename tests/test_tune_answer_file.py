"""tune's answer (stats/_answer.py): how configurations rank, what its headline says, and answer.json read back
with what a file written by hand or by an older serve-bench may leave out. Each assertion is one a one-line
change would break (a mutation sample found nine that no test saw: the suite's files are all written whole)."""

from __future__ import annotations

import json
import math

import pytest

from serve_bench.errors import UserError
from serve_bench.stats import BaselineGain, Estimate, KnobRow, ParetoPoint, Score, TuneAnswer, read_tune_answer


def _answer(best: Score | None, closest: Score | None, *scores: Score, files: tuple[str, ...] = ()) -> TuneAnswer:
    return TuneAnswer("throughput", "p99", 50.0, best, closest, scores, (), (), (), best_files=files)


def test_a_configuration_that_did_not_start_ranks_below_every_one_that_did():
    """Started first, then meeting the SLO, then the objective: a server that did not start ranks below one that
    started and measured nothing within reach (an infinite latency), not level with it."""
    failed = Score("f", False, failed="out of memory")
    unmeasured = Score("u", False)
    slow = Score("s", False, Estimate(10.0), Estimate(80.0))
    fast = Score("q", True, Estimate(30.0), Estimate(20.0))
    assert failed.rank("throughput") == (False, False, -math.inf)
    assert unmeasured.rank("throughput") == (True, False, -math.inf)
    assert [s.config for s in sorted((failed, unmeasured, slow, fast), key=lambda s: s.rank("throughput"))] == [
        "f",
        "u",
        "s",
        "q",
    ]


def test_the_headline_names_the_best_the_closest_that_misses_or_that_nothing_started():
    fast = Score("q", True, Estimate(30.0), Estimate(20.0), load="c4")
    slow = Score("s", False, Estimate(10.0), Estimate(80.0), load="c1")
    failed = Score("f", False, failed="out of memory")
    assert _answer(fast, fast, fast).headline() == (
        "best configuration under p99 <= 50 ms: q: 30.0 items/s, p99 20.0 ms at c4"
    )
    assert _answer(None, slow, slow).headline() == (
        "no configuration meets p99 <= 50 ms; closest: s: 10.0 items/s, p99 80.0 ms at c1 (misses the SLO)"
    )
    assert _answer(None, failed, failed).headline() == "no configuration was measured (every server start failed)"


def test_answer_json_names_the_first_of_the_winners_files():
    data = _answer(None, None, files=("batching.config", "models.config")).to_data()
    assert (data["best_file"], data["best_files"]) == ("batching.config", ["batching.config", "models.config"])


def test_an_answer_json_that_leaves_out_what_it_may_is_read_with_the_defaults(tmp_path):
    """Version 1 as an older serve-bench wrote it: no percentile (p99), a score without its latency (none
    measured: infinite, never 0 ms, which would meet any SLO), a gain with one end of its range (no range), and
    ``best_file`` alone (before ``best_files``)."""
    path = tmp_path / "answer.json"
    path.write_text(
        json.dumps(
            {
                "mode": "throughput",
                "max_ms": 50,
                "scores": [{"config": "a", "feasible": False, "items_per_s": 3.0}],
                "gains": [{"baseline": "b", "config": "a", "ratio": 2.0, "low": 1.5, "high": None}],
                "best_file": "batching.config",
            }
        )
    )
    answer = read_tune_answer(path)
    assert answer is not None
    assert answer.percentile == "p99"
    (score,) = answer.scores
    assert score.latency_ms == math.inf
    assert answer.gains[0].ratio == Estimate(2.0)
    assert answer.best_files == ("batching.config",)


def test_an_answer_json_without_scores_is_refused_in_one_line_saying_so(tmp_path):
    path = tmp_path / "answer.json"
    path.write_text(json.dumps({"mode": "throughput"}))
    with pytest.raises(UserError) as caught:
        read_tune_answer(path)
    assert str(caught.value) == (
        f"{path} is not a tune answer (no scores); rerun `serve-bench tune ... --resume` to rewrite it"
    )


def test_answer_json_reads_back_as_the_answer_that_wrote_it(tmp_path):
    """Every field, every range and every list written by ``write`` is what ``read_tune_answer`` gives back:
    ``report`` and ``tune --resume`` read the same answer tune printed."""
    best = Score("b2", True, Estimate(120.0, 110.0, 130.0, "95% CI"), Estimate(40.0, 35.0, 45.0, "95% CI"), "k2", "c8")
    slow = Score("b1", False, Estimate(60.0), Estimate(90.0, 80.0, 99.0, "95% CI"), "k1", "c4")
    failed = Score("b3", False, failed="out of memory")
    answer = TuneAnswer(
        "throughput",
        "p99_9",
        50.0,
        best,
        best,
        (best, slow, failed),
        (ParetoPoint("b2", "c8", 120.0, 40.0), ParetoPoint("b1", "c4", 60.0, 90.0)),
        (KnobRow("max_batch_size", "8", 1, "b2", True, 120.0, 40.0, 0.0),),
        (
            BaselineGain(
                "default",
                "b2",
                Estimate(2.0, 1.8, 2.2, "95% CI"),
                "2.00× the default",
                "c8",
                Estimate(2.25, 2.0, 2.5, "95% CI"),
            ),
            BaselineGain("other", "b2", None, "not measurable"),
        ),
        evaluated=("b1", "b2", "b3"),
        configs={"b1": {"max_batch_size": "4"}, "b2": {"max_batch_size": "8"}},
        best_files=("batching.config", "models.config"),
    )
    answer.write(tmp_path / "answer.json")
    assert read_tune_answer(tmp_path / "answer.json") == answer
    # a file a person reads too: one key per line, indented by one space, ending in a new line
    lines = (tmp_path / "answer.json").read_text().split("\n")
    assert lines[:3] == ["{", ' "schema_version": 1,', ' "mode": "throughput",'] and lines[-1] == ""


def test_a_score_or_gain_without_its_words_reads_as_empty_and_a_latency_score_is_its_latency(tmp_path):
    """A score without items/s served none (0, not 1); one without its point or load has none (not "None"); a
    gain without its text or load likewise. In latency mode a configuration's objective is its latency."""
    path = tmp_path / "answer.json"
    path.write_text(
        json.dumps(
            {
                "mode": "latency",
                "scores": [{"config": "a", "feasible": False}],
                "gains": [{"baseline": "b", "config": "a", "latency_ratio": 1.5, "latency_low": 1.2}],
            }
        )
    )
    answer = read_tune_answer(path)
    assert answer is not None
    assert answer.scores == (Score("a", False, Estimate(0.0), Estimate(math.inf), "", "", ""),)
    assert answer.gains == (BaselineGain("b", "a", None, "", "", Estimate(1.5)),)
    assert Score("q", True, Estimate(30.0), Estimate(20.0)).objective("latency") == 20.0
    assert Score("q", True, Estimate(30.0), Estimate(20.0)).objective("throughput") == 30.0


def test_an_answer_json_with_a_score_missing_its_name_is_refused_saying_what_was_missing(tmp_path):
    path = tmp_path / "answer.json"
    path.write_text(json.dumps({"mode": "throughput", "scores": [{"feasible": True}]}))
    with pytest.raises(UserError) as caught:
        read_tune_answer(path)
    assert str(caught.value) == (
        f"{path} is not a tune answer (KeyError: 'config'); rerun `serve-bench tune ... --resume` to rewrite it"
    )


def test_a_rank_says_started_feasible_and_the_objective_and_a_failed_start_ranks_last_whatever_it_holds():
    assert Score("q", True, Estimate(30.0), Estimate(20.0)).rank("throughput") == (True, True, 30.0)
    assert Score("s", False, Estimate(10.0), Estimate(80.0)).rank("throughput") == (True, False, -80.0)
    # a file may carry a failed start with figures (from a configuration measured before): it still did not start
    assert Score("f", True, Estimate(30.0), Estimate(20.0), failed="oom").rank("throughput") == (
        False,
        False,
        -math.inf,
    )
