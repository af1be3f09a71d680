"""RunDigest: what --processes children send instead of their records, and how digests add up."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest

from serve_bench.load._digest import digest_records, merge_digests
from serve_bench.stats import OK, RequestRecord, decode, histogram_of


def _records(seed: int, count: int, start: float, span: float, error_every: int = 0) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    due = np.sort(rng.uniform(start, start + span, count))
    lag = rng.uniform(0, 0.0005, count)
    service = rng.lognormal(np.log(0.01), 0.3, count)
    records = []
    for i, (d, late, s) in enumerate(zip(due, lag, service)):
        failed = bool(error_every) and i % error_every == 0
        records.append(
            RequestRecord(
                float(d), float(d + late), float(d + late + s), "UNAVAILABLE" if failed else OK, 2, 100, 0.0001
            )
        )
    return records


def test_merged_digests_equal_the_digest_of_all_records():
    # two "processes" over the same window: merging their digests must give what one digest
    # of all records gives (histograms added with HdrHistogram.add, counters summed)
    a = _records(1, 3000, 100.0, 6.0, error_every=50)
    b = _records(2, 2000, 100.0, 6.0, error_every=40)  # failures in both: their counts add up
    window = (101.0, 106.0)
    merged = merge_digests([digest_records(a, "open", *window), digest_records(b, "open", *window)])
    whole = digest_records(a + b, "open", *window)
    assert (merged.requests, merged.ok, merged.items) == (whole.requests, whole.ok, whole.items)
    assert merged.errors == whole.errors and dict(merged.errors)["UNAVAILABLE"] > 0
    assert merged.sent_in_window == whole.sent_in_window
    assert whole.decode_seconds > 0 and merged.decode_seconds == pytest.approx(whole.decode_seconds)
    for name in ("latency", "latency_sent", "schedule_lag"):
        left, right = merged.histogram(name), whole.histogram(name)
        assert left.get_total_count() == right.get_total_count() > 0
        for percentile in (50, 99, 99.9):
            assert left.get_value_at_percentile(percentile) == right.get_value_at_percentile(percentile)
    for left, right in zip(merged.windows(3), whole.windows(3)):
        assert left == pytest.approx(right)
    assert merged.processes == 2
    # each slice's latency histogram (the intervals' blocks read them) holds both processes' answers
    assert [piece.index for piece in merged.slices] == [piece.index for piece in whole.slices]
    for left, right in zip(merged.slices, whole.slices):
        assert decode(left.histogram).get_total_count() == left.ok == right.ok > 0
        assert decode(left.histogram).get_value_at_percentile(99) == decode(right.histogram).get_value_at_percentile(99)
    alone = merge_digests([digest_records(b, "open", *window)])  # one process: the digest as it was
    assert alone == replace(digest_records(b, "open", *window), processes=1)


def test_digest_counts_as_the_analysis_does():
    records = _records(3, 1000, 10.0, 4.0)
    open_digest = digest_records(records, "open", 11.0, 13.0)
    due_inside = [r for r in records if 11.0 <= r.intended < 13.0]
    assert open_digest.requests == len(due_inside) == open_digest.ok
    assert open_digest.items == 2 * len(due_inside)
    expected = histogram_of([(r.done - r.intended) * 1e6 for r in due_inside])
    assert open_digest.histogram().get_value_at_percentile(99) == expected.get_value_at_percentile(99)
    closed = digest_records(records, "closed", 11.0, 13.0)
    assert closed.requests == sum(1 for r in records if 11.0 <= r.done < 13.0)
    assert closed.latency_sent == "" and closed.schedule_lag == ""


def test_windows_hold_equal_shares_and_see_a_slowdown():
    # first half answered at 100 items/s, second half at 50: the windows say so
    fast = [RequestRecord(t, t, t + 0.01, OK, 1, 10, 0.0) for t in np.arange(0.0, 5.0, 0.01)]
    slow = [RequestRecord(t, t, t + 0.01, OK, 1, 10, 0.0) for t in np.arange(5.0, 10.0, 0.02)]
    digest = digest_records(fast + slow, "closed", 0.0, 10.0)
    windows = digest.windows(2)
    assert [w[0] for w in windows] == [500, 250] or abs(windows[0][0] - windows[1][0]) <= 30
    rates = [w[1] for w in digest.windows(4)]
    assert rates[0] == pytest.approx(100, rel=0.06) and rates[-1] == pytest.approx(50, rel=0.06)
    assert sum(w[0] for w in digest.windows(3)) == digest.ok


def test_digest_size_is_bounded_whatever_the_request_count():
    # an HdrHistogram has a bounded number of buckets: 4x the requests, well under 2x the digest (1.5x measured)
    records = _records(4, 200_000, 0.0, 5.0)
    quarter = len(pickle.dumps(digest_records(records[::4], "open", 0.0, 5.0)))
    whole = len(pickle.dumps(digest_records(records, "open", 0.0, 5.0)))
    assert whole < 2 * quarter
    assert whole < len(pickle.dumps(records)) / 100


def test_digests_of_different_runs_do_not_merge():
    records = _records(5, 100, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"^digests of different kinds of run cannot be merged$"):
        merge_digests([digest_records(records, "open", 0, 1), digest_records(records, "closed", 0, 1)])
    with pytest.raises(ValueError, match=r"^nothing to merge$"):
        merge_digests([])


def _one(intended: float, sent: float, done: float, status: str = OK) -> RequestRecord:
    return RequestRecord(intended, sent, done, status, 1, 10, 0.0)


def test_a_digest_counts_failures_inside_the_window_only_and_their_schedule_lag_too():
    """Open loop, window [10, 12): a failure due before the window is no error of it; one due inside, sent 0.2 s
    late, is an error whose lag counts (the lag is the generator's, whatever the answer); one that failed at 13 s
    (a timeout) does not move the last answer, which is a good one's (11.2 s)."""
    records = [
        _one(9.5, 9.5, 9.6, "UNAVAILABLE"),  # due before the window
        _one(10.1, 10.3, 10.4, "UNAVAILABLE"),  # sent 0.2 s after it was due
        _one(10.5, 10.5, 10.6),
        _one(11.0, 11.0, 11.2),
        _one(11.5, 11.5, 13.0, "DEADLINE_EXCEEDED"),
    ]
    digest = digest_records(records, "open", 10.0, 12.0)
    assert (digest.requests, digest.ok) == (4, 2)
    assert digest.errors == (("DEADLINE_EXCEEDED", 1), ("UNAVAILABLE", 1))
    assert digest.last_done == 11.2
    lag = digest.histogram("schedule_lag")
    assert lag.get_total_count() == 4 and lag.get_max_value() == pytest.approx(200_000, rel=0.001)


def test_merged_digests_cover_the_window_all_of_them_covered_and_count_every_process():
    """A child whose target went down ends its window early: the merged window is the span all covered (the
    latest start, the earliest end); merging a merged digest again counts the processes of each."""
    a = digest_records([_one(10.5, 10.5, 10.6)], "closed", 10.0, 12.0)
    b = digest_records([_one(10.8, 10.8, 10.9)], "closed", 10.5, 11.5)
    merged = merge_digests([merge_digests([a, b]), a])
    assert (merged.window_start, merged.window_end) == (10.5, 11.5)
    assert merged.processes == 3


def test_a_slice_joins_a_window_when_at_least_half_of_it_lies_within_the_windows_share():
    """Closed loop, window [0, 1), slices of 0.25 s holding 2, 4 and 2 answers: two windows of 4 answers' share
    each. The first slice (0 + 1 ≤ 4) and the second (2 + 2 ≤ 4: half of it exactly inside) join the first window;
    the last window ends at the window's end (1.0 s), not at its last slice's (0.75 s). Then 3 and 1 answers:
    the first slice joins the first window though it holds more than the share (0 + 1.5 ≤ 2)."""
    done = [0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.6, 0.7]  # slices 0, 1 and 2: 2, 4 and 2 answers
    digest = digest_records([_one(t - 0.01, t - 0.01, t) for t in done], "closed", 0.0, 1.0)
    (first, second) = digest.windows(2)
    assert (first[0], first[3]) == (6, 0.5)
    assert (second[0], second[3]) == (2, 0.5)
    uneven = digest_records([_one(t - 0.01, t - 0.01, t) for t in (0.1, 0.15, 0.2, 0.3)], "closed", 0.0, 1.0)
    assert [w[0] for w in uneven.windows(2)] == [3, 1]


def test_a_window_that_takes_the_last_slice_ends_at_the_windows_end_not_the_slices():
    """Window [0, 0.9): its last slice, [0.75, 1.0), is cut by the window's end. Every answer lies in it, so the
    first of two windows takes it (0 + 1 ≤ 1) and spans 0.9 s, not 1.0: its rate is 2 / 0.9 images/s."""
    digest = digest_records([_one(t - 0.01, t - 0.01, t) for t in (0.8, 0.85)], "closed", 0.0, 0.9)
    first = digest.windows(2)[0]
    assert first[0] == 2 and first[3] == pytest.approx(0.9) and first[1] == pytest.approx(2 / 0.9)


def test_a_digest_places_answers_in_slices_from_the_windows_start_and_keeps_its_slice_length():
    """Slices are counted from the window's start (an answer 1.3 s in, at 0.5 s slices, is in slice 2), their
    histograms in µs like the whole window's, and the digest keeps the slice length it was cut with. Without a
    good answer the last answer is at 0, not at some made-up instant."""
    records = [_one(100.0, 100.0, 100.1), _one(100.2, 100.2, 100.6), _one(100.3, 100.3, 101.3)]
    digest = digest_records(records, "closed", 100.0, 102.0, slice_s=0.5)
    assert digest.slice_s == 0.5
    assert [(piece.index, piece.ok) for piece in digest.slices] == [(0, 1), (1, 1), (2, 1)]
    assert decode(digest.slices[2].histogram).get_max_value() == pytest.approx(1_000_000, rel=0.001)
    failed = digest_records([_one(100.0, 100.0, 100.1, "UNAVAILABLE")], "open", 100.0, 102.0)
    assert (failed.ok, failed.last_done) == (0, 0.0)


def test_a_window_without_an_answer_serves_nothing_at_no_latency():
    """Windows hold equal shares of the answers, so answers bunched in one slice leave windows that hold none:
    each is 0 items/s at no latency (0), not 1 item/s or 1 µs."""
    records = [_one(t, t, t + 0.01) for t in (10.0, 10.05, 10.1)]
    windows = digest_records(records, "closed", 10.0, 12.0).windows(3)
    assert [(ok, rate, latency) for ok, rate, latency, _ in windows] == [
        (0, 0.0, 0.0),
        (3, pytest.approx(12.0), pytest.approx(10_000)),
        (0, 0.0, 0.0),
    ]


def test_closed_loop_digests_merge_without_inventing_an_open_loops_histograms():
    """A closed loop has no schedule: its latency-from-sending and schedule-lag histograms are empty ("") and stay
    so when merged, rather than becoming an encoded empty histogram."""
    a = digest_records([_one(10.5, 10.5, 10.6)], "closed", 10.0, 12.0)
    merged = merge_digests([a, a])
    assert (merged.latency_sent, merged.schedule_lag) == ("", "")
    assert merged.histogram("latency_sent").get_total_count() == 0  # read as an empty histogram, not decoded


def test_a_digest_of_no_records_keeps_its_slice_length():
    """A child that recorded nothing still sends the slice length it was told: merging refuses digests cut
    differently, so a default there would refuse a run where one process had no answer."""
    assert digest_records([], "closed", 10.0, 12.0, slice_s=0.5).slice_s == 0.5


def test_a_digests_latencies_are_whole_microseconds_of_the_seconds_measured():
    """Seconds become µs by × 1e6 exactly: 1.048575 s is 1,048,575 µs, the top of its HdrHistogram bucket, so a
    digest's maximum is what one process's histogram of the same latency gives (one µs more opens the next
    bucket, and ``--processes`` percentiles would differ from a single process's)."""
    records = [_one(10.0, 10.0, 10.0 + 1.048575)]
    digest = digest_records(records, "open", 9.0, 12.0)
    expected = histogram_of([1_048_575]).get_max_value()
    for name in ("latency", "latency_sent"):
        assert digest.histogram(name).get_max_value() == expected
    assert decode(digest.slices[0].histogram).get_max_value() == expected
    late = digest_records([_one(10.0, 10.0 + 1.048575, 10.5 + 1.048575)], "open", 9.0, 12.0)
    assert late.histogram("schedule_lag").get_max_value() == expected
