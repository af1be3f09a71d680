"""load.analyze's figures field by field, on runs whose every figure is worked out by hand.

Written from `make mutants`' survivors in load/_analysis.py (MUTANTS.md, issue 35): the open-loop branch
(requested, scheduled and achieved rates, the credit a lagging server does not get), the client-limited
reasons and where each stops, the client's CPU percentages and the codec figures. Every time is built as a
whole number of milliseconds divided by 1000 (or of 0.1 ms by 10,000), so that a request on a window's edge
is on it exactly and the hand counts below hold to the last request.
"""

from __future__ import annotations

import pytest

from serve_bench.load import LoadRun, PointSettings, analyze
from serve_bench.stats import OK, Counts, RequestRecord

SETTINGS = PointSettings(windows=3, tolerance=0.10)
START, END = 2.0, 6.0  # the measured window, after 2 s of warm-up: a start of 0 would hide `end + start`
DECODE_S = 12.34999e-6  # every answer takes 12.34999 µs to decode: 12.3 to 0.1 µs, 12.4 were it a millionth more
LAST_DONE = 6.1100001234567  # the lagging run's last answer: 4.1100001234567 s after the window's start


def _lagging_records() -> list[RequestRecord]:
    """A 100 req/s schedule from 1.5 s to 5.99 s (450 requests due, i = 0..449, due at 1.5 + 0.01·i s).

    Warm-up (due before 2.0 s, i < 50): sent on time, answered 5 ms later. Inside the window (i >= 50): each
    is sent 100 ms late and answered 20 ms after its send (120 ms from when it was due); every 40th of them
    (i - 50 = 0, 40, ..., 360: ten requests) fails with UNAVAILABLE. Two images per request.
    """
    records = []
    for i in range(450):
        due = (1500 + 10 * i) / 1000
        if i < 50:
            records.append(RequestRecord(due, due, (1505 + 10 * i) / 1000, OK, 2, 100, DECODE_S))
            continue
        done = LAST_DONE if i == 449 else (1620 + 10 * i) / 1000
        status = "UNAVAILABLE" if (i - 50) % 40 == 0 else OK
        records.append(RequestRecord(due, (1600 + 10 * i) / 1000, done, status, 2, 100, DECODE_S))
    return records


def test_an_open_loop_run_that_falls_behind_is_credited_its_own_time_and_told_client_limited() -> None:
    """Window [2, 6) s, 4 s; loop thread 3.7654 s of CPU, process 1.23456 s; encoding took 12.34 µs once.

    By hand:
    * counted (due in the window): i = 50..449, 400 requests; 10 failed, 390 answered, 780 images.
    * duration: the last answer came 6.1100001234567 - 2 = 4.1100001234567 s after the start, past the
      window's 4 s, so the rates are per 4.1100001234567 s (a lagging server is not credited the window),
      and duration_s is that to the µs: 4.11.
    * requested 100/s (the run's); scheduled 400 / 4 = 100.0/s; achieved: sent inside [2, 6) are the
      ones sent at (1600 + 10·i) / 1000 < 6, i = 50..439, 390 of them: 390 / 4 = 97.5/s, under 98% of 100.
    * schedule lag: 100 ms for every counted request; HdrHistogram keeps 100,000 µs in its 64 µs bucket
      [99,968, 100,031] and reports the bucket's top, so p99 = 100,031 µs, "100.0 ms" (> 5 ms).
    * loop 3.7654 / 4 = 94.135% (> 90%: "94%" in the reason, 94.1 as the figure); process
      1.23456 / 4 = 30.864%, 30.9.
    * codec: 12.34 µs -> 12.3; decode 12.34999 µs per answer -> 12.3; 100 bytes a request.
    """
    run = LoadRun(
        _lagging_records(),
        START,
        END,
        loop_cpu_seconds=3.7654,
        process_cpu_seconds=1.23456,
        requested_rate=100.0,
        notes=["a note from the run"],
    )
    figures = analyze(run, "open", SETTINGS, encode_us=12.34)

    assert figures.duration_s == 4.11
    assert figures.counts == Counts(400, 390, 780, (("UNAVAILABLE", 10),))
    throughput = figures.throughput
    assert throughput.requests_per_s == pytest.approx(390 / 4.1100001234567, rel=1e-12)
    assert throughput.items_per_s == pytest.approx(780 / 4.1100001234567, rel=1e-12)
    assert (throughput.requested_rate, throughput.scheduled_rate, throughput.achieved_rate) == (100.0, 100.0, 97.5)

    client = figures.client
    assert (client.loop_cpu_percent, client.process_cpu_percent) == (94.1, 30.9)
    assert client.limited is True
    assert client.reasons == (
        "event loop busy 94% of the window",
        "sends fell behind schedule (lag p99 100.0 ms)",
        "sent 97.5 req/s of 100.0 scheduled",
    )
    assert client.safety_cap_hits == 0
    assert client.schedule_lag is not None and client.schedule_lag.p99 == 100_031
    assert client.flags() == ("client-limited",)

    assert (figures.codec.encode_once_us, figures.codec.decode_mean_us, figures.codec.request_bytes) == (
        12.3,
        12.3,
        100,
    )
    # 390 answers make 20 bootstrap blocks: an interval, so no note beyond the run's own
    assert figures.throughput.items_per_s_ci is not None
    assert figures.notes == ("a note from the run",)
    assert figures.cut_off == ""
    # latency from the send: 20 ms, in HdrHistogram's 16 µs bucket [20,000, 20,015]
    assert figures.latency.sent is not None and figures.latency.sent.p50 == 20_015


def _keeping_up_records() -> list[RequestRecord]:
    """400 requests due inside [2, 6): 392 at 2.0 + 0.01·i s (i = 0..391, up to 5.91 s) sent on time, and 8
    due in the window's last 3 ms (5.997 + 0.0001·j s) sent 4 ms late, after the window's end. Each answered
    5 ms after its send, one image each."""
    records = [
        RequestRecord((2000 + 10 * i) / 1000, (2000 + 10 * i) / 1000, (2005 + 10 * i) / 1000, OK, 1, 80, DECODE_S)
        for i in range(392)
    ]
    records += [
        RequestRecord((59970 + j) / 10000, (60010 + j) / 10000, (60060 + j) / 10000, OK, 1, 80, DECODE_S)
        for j in range(8)
    ]
    return records


def test_an_open_loop_run_on_every_limit_but_past_none_is_not_client_limited() -> None:
    """Each client-limited condition sits exactly on its limit, which is not past it.

    By hand: scheduled 400 / 4 = 100.0/s; achieved 392 / 4 = 98.0/s, exactly 98% of it (not under).
    Lag: 392 sends on time and 8 sent 4 ms late; p99 is the 396th of the 400 lags, one of the late ones:
    4,000 µs in the 2 µs bucket [4,000, 4,001] reads 4,001 µs, under 5 ms. Loop 3.6 / 4 = 90% exactly
    (not over 90%). The run names no requested rate: the open loop reports 0.0. The last answer came at
    6.0067 s, 4.0067 s after the start. No encoding time given: 0.0."""
    run = LoadRun(_keeping_up_records(), START, END, loop_cpu_seconds=3.6)
    figures = analyze(run, "open", SETTINGS)

    assert figures.duration_s == 4.0067
    assert figures.counts == Counts(400, 400, 400, ())
    throughput = figures.throughput
    assert (throughput.requested_rate, throughput.scheduled_rate, throughput.achieved_rate) == (0.0, 100.0, 98.0)
    assert figures.client.schedule_lag is not None and figures.client.schedule_lag.p99 == 4001
    assert figures.client.loop_cpu_percent == 90.0 and figures.client.process_cpu_percent == 0.0
    assert figures.client.limited is False and figures.client.reasons == ()
    assert figures.client.describe() == "client loop 90% busy"
    assert figures.codec.encode_once_us == 0.0 and figures.codec.request_bytes == 80


def test_a_cut_off_open_loop_run_counts_from_its_first_request_and_blames_not_the_client() -> None:
    """The lagging run, cut off (the target died): counted from its first due request, 1.5 s, so the
    window is [1.5, 6) s, 4.5 s, and all 450 requests count (440 answered, 880 images). The loop was busy
    4.2 / 4.5 = 93.3% of it, the lag p99 is 100 ms and 440 of 450 were sent inside it (97.8/s of 100.0/s):
    each would make the client limited, but a point that ended because the server stopped answering says
    nothing about the client."""
    run = LoadRun(_lagging_records(), START, END, loop_cpu_seconds=4.2, requested_rate=100.0, cut_off="target down")
    figures = analyze(run, "open", SETTINGS)

    assert figures.counts == Counts(450, 440, 880, (("UNAVAILABLE", 10),))
    assert figures.throughput.scheduled_rate == pytest.approx(100.0)
    assert figures.throughput.achieved_rate == pytest.approx(440 / 4.5)
    assert figures.client.loop_cpu_percent == 93.3
    assert figures.client.limited is False and figures.client.reasons == ()
    assert figures.cut_off == "target down"


def test_an_open_loop_run_that_hit_the_safety_cap_is_not_also_blamed_for_its_lag() -> None:
    """The lagging run with sends queued by the safety cap 3 times and a quiet loop (1 s of 4): the lag and
    the missed sends are the server's doing (it could not keep up), so there is no reason, only the flag."""
    run = LoadRun(_lagging_records(), START, END, loop_cpu_seconds=1.0, safety_cap_hits=3, requested_rate=100.0)
    figures = analyze(run, "open", SETTINGS)

    assert figures.client.limited is False and figures.client.reasons == ()
    assert figures.client.safety_cap_hits == 3
    assert figures.client.loop_cpu_percent == 25.0
    assert figures.client.flags() == ("safety cap hit",)


def test_a_closed_loop_run_has_no_schedule_figures_and_only_its_loop_to_blame() -> None:
    """The lagging run's records read as a closed loop: counted by when they were answered, inside [2, 6).

    By hand: answers at (1620 + 10·i) / 1000 s for i >= 50, so i = 50..437 (the answer of i = 438 is at 6.0,
    outside); failures among them at i - 50 = 0, 40, ..., 360: 10. So 388 requests, 378 answered, 756 images,
    per the window's 4 s (a closed loop's answers all fall inside it). No requested, scheduled or achieved
    rate, no latency from the send, no schedule lag: only the busy loop (94%) is a reason."""
    run = LoadRun(_lagging_records(), START, END, loop_cpu_seconds=3.7654, requested_rate=100.0)
    figures = analyze(run, "closed", SETTINGS)

    assert figures.duration_s == 4.0
    assert figures.counts == Counts(388, 378, 756, (("UNAVAILABLE", 10),))
    assert figures.throughput.items_per_s == 756 / 4.0
    throughput = figures.throughput
    assert (throughput.requested_rate, throughput.scheduled_rate, throughput.achieved_rate) == (None, None, None)
    assert figures.latency.sent is None and figures.client.schedule_lag is None
    assert figures.client.reasons == ("event loop busy 94% of the window",)


def test_a_run_with_no_answer_has_no_decode_time_and_a_few_answers_say_why_there_is_no_interval() -> None:
    """30 failures in a 3 s window: nothing answered, so no decode mean (0.0) and no note about intervals
    (there is nothing to put one around). 20 answers: 20 // 5 = 4 blocks, under the 5 a bootstrap needs."""
    failed = [RequestRecord(0.1 * i, 0.1 * i, 0.1 * i + 0.001, "UNAVAILABLE", 1, 50, DECODE_S) for i in range(30)]
    figures = analyze(LoadRun(failed, 0.0, 3.0), "closed", SETTINGS)
    assert figures.codec.decode_mean_us == 0.0 and figures.codec.request_bytes == 50
    assert figures.notes == () and figures.duration_s == 3.0

    # a window shorter than a second: 10 answers in 0.5 s are 20 images/s
    short = [RequestRecord(0.05 * i, 0.05 * i, 0.05 * i + 0.001, OK, 1, 50, DECODE_S) for i in range(10)]
    figures = analyze(LoadRun(short, 0.0, 0.5), "closed", SETTINGS)
    assert figures.duration_s == 0.5 and figures.throughput.items_per_s == 20.0

    answered = [RequestRecord(0.1 * i, 0.1 * i, 0.1 * i + 0.001, OK, 1, 50, DECODE_S) for i in range(20)]
    figures = analyze(LoadRun(answered, 0.0, 3.0), "closed", SETTINGS)
    assert figures.throughput.items_per_s_ci is None
    assert figures.notes == ("no confidence interval: 20 answered requests are too few for 5 bootstrap blocks of 5",)


def test_a_closed_loop_merged_from_two_processes_is_timed_by_its_window_not_by_a_later_answer() -> None:
    """Two processes' closed loops, merged (load/_digest.py merge_digests): the window is where both measured,
    [max start, min end) = [2.0, 6.0), while the last answer is the latest of both: 6.03 s, inside the second
    process's own window up to 6.04 s. A closed loop is timed by its window, 4.0 s, whatever its last answer:
    only an open loop is credited the time a lagging server took past the window. 20 + 20 answers of one
    image: 40 / 4.0 images/s."""
    from serve_bench.load._digest import digest_records, merge_digests

    first = [RequestRecord(2.0 + i / 5, 2.0 + i / 5, 2.05 + i / 5, OK, 1, 100, 0.0) for i in range(20)]
    second = [RequestRecord(2.2 + i / 5, 2.2 + i / 5, 2.23 + i / 5, OK, 1, 100, 0.0) for i in range(20)]
    merged = merge_digests([digest_records(first, "closed", 2.0, 6.0), digest_records(second, "closed", 2.0, 6.04)])
    assert (merged.window_end, merged.ok) == (6.0, 40) and merged.last_done == pytest.approx(6.03)
    figures = analyze(LoadRun([], 2.0, 6.0, digest=merged), "closed", SETTINGS)
    assert figures.duration_s == 4.0 and figures.throughput.items_per_s == 40 / 4.0


def test_stability_over_no_windows_is_not_enough_and_spreads_nothing() -> None:
    """Zero windows (stability_of's own input; a point's settings ask for one or more): no window has enough
    requests, so the run is not stable, and a spread over no values is 0, quietly (no mean of nothing)."""
    import warnings

    from serve_bench.load import stability_of
    from serve_bench.load._digest import RunDigest

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stability = stability_of(RunDigest("closed", 0.0, 1.0), 0, 0.1)
    assert (stability.stable, stability.enough_requests, stability.items_spread, stability.latency_spread) == (
        False,
        False,
        0.0,
        0.0,
    )


def test_the_first_error_said_is_the_windows_commonest_status_once_per_status() -> None:
    """A failed point says what the server said (issue of a review, 2026-11-29): the first-error note of the status
    that failed most in the window, not one from the warm-up of another status; a point from several processes
    keeps one note per status, the first child's, where each child had its own."""
    from serve_bench.load import FIRST_ERROR, first_errors, what_failed

    notes = [
        "load from 2 processes",
        f"{FIRST_ERROR} DEADLINE_EXCEEDED: warm-up was slow",
        f"{FIRST_ERROR} FAILED_PRECONDITION: runs on TensorFlow",
        f"{FIRST_ERROR} FAILED_PRECONDITION: runs on TensorFlow (the second child)",
        "did not become stable within 60 s",
    ]
    kept = first_errors(notes)
    assert kept == [notes[0], notes[1], notes[2], notes[4]]
    assert what_failed(kept, {"FAILED_PRECONDITION": 40}) == notes[2]
    assert what_failed(kept, {"FAILED_PRECONDITION": 3, "DEADLINE_EXCEEDED": 5}) == notes[1]
    assert what_failed(kept, {"UNAVAILABLE": 9, "FAILED_PRECONDITION": 1}) == notes[2]  # none kept for UNAVAILABLE
    assert what_failed(kept, {}) == "" and what_failed([], {"UNAVAILABLE": 1}) == ""
    assert what_failed(notes, {"FAILED_PRECONDITION": 2}) == notes[2]  # not yet kept once: still the first given
    other = [f"{FIRST_ERROR}s came after warm-up: 2", f"{FIRST_ERROR}s came after warm-up: 2"]  # not first-error notes
    assert first_errors(other) == other


def test_the_first_error_notes_the_recorder_writes_are_the_ones_read() -> None:
    """The note's format has one writer (``Recorder.error_notes``) and one reader: a status with a colon-free name
    and a message with colons of its own round-trips."""
    from serve_bench.load import Recorder, first_errors, what_failed

    recorder = Recorder.__new__(Recorder)
    recorder.first_errors = {"UNAVAILABLE": "failed to connect to all addresses; last error: UNKNOWN: ipv4:1.2.3.4:5"}
    notes = recorder.error_notes()
    assert first_errors(notes + notes) == notes
    assert what_failed(notes, {"UNAVAILABLE": 7}) == notes[0]
