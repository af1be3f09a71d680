"""A point's uncertainty and stability (load/_analysis.py): the bootstrap's blocks, its intervals and the windows.

Written from `make mutants`' survivors (MUTANTS.md, issue 35). The block tables are compared with a split made
by hand; the intervals with the bootstrap's definition computed request by request from resamples the test
chooses; stability at its limits, where a `<` for a `<=` changes the verdict. Times and latencies are chosen
to be exact in binary (quarters of a second, whole µs below 2,048 that HdrHistogram holds exactly), so that
"on the limit" is on it to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from serve_bench.load import LoadRun, PointSettings, _analysis, analyze, stability_of
from serve_bench.load._digest import RunDigest, SliceDigest
from serve_bench.stats import OK, RequestRecord, encode, histogram_of
from serve_bench.stats._bootstrap import RESAMPLES

SETTINGS = PointSettings(windows=3, tolerance=0.10)


def _slice(index: int, latencies_us: list[float], items: int) -> SliceDigest:
    return SliceDigest(index, len(latencies_us), items, sum(latencies_us) / 1e6, encode(histogram_of(latencies_us)))


# -- the bootstrap's blocks ----------------------------------------------------------------------------------------


def test_blocks_are_equal_shares_of_the_windows_slices_with_their_items_spans_and_latencies() -> None:
    """Window [10, 13.1) s: 12.4 slices of 0.25 s, so 13, the last 0.1 s long. Answers only in slices 0-9
    (the server stalled for the last 0.85 s): 4 each in slices 0-3, 3 each in 4-9, 34 in all, two images
    each; every answer of slice i took 1000 + 100·(i mod 3) µs.

    By hand: blocks = min(20, 34 // 5 = 6, 13) = 6; slice i belongs to block 6·i // 13:
    slices 0-2 -> 0, 3-4 -> 1, 5-6 -> 2, 7-8 -> 3, 9-10 -> 4, 11-12 -> 5.
    spans: 0.75, 0.5, 0.5, 0.5, 0.5 and 0.25 + 0.1 = 0.35 s; items: 24, 8 + 6 = 14, 12, 12, 6, 0;
    latency counts over the grid (1000, 1100, 1200 µs): slices 0/1/2 give 4 at each; slice 3 (i mod 3 = 0)
    4 at 1000 and slice 4 3 at 1100; slices 5, 6: 3 at 1200, 3 at 1000; 7, 8: 3 at 1100, 3 at 1200; 9: 3 at
    1000; block 5 nothing."""
    pieces = [_slice(i, [1000.0 + 100 * (i % 3)] * (4 if i < 4 else 3), 8 if i < 4 else 6) for i in range(10)]
    digest = RunDigest("closed", 10.0, 13.1, requests=34, ok=34, items=68, slices=tuple(pieces))
    tables = _analysis._block_tables(digest)
    assert tables is not None
    items, spans, table, grid, owner = tables
    assert owner.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert items.tolist() == [24, 14, 12, 12, 6, 0]
    assert spans == pytest.approx([0.75, 0.5, 0.5, 0.5, 0.5, 0.35], abs=1e-12)
    assert grid.tolist() == [1000, 1100, 1200]
    assert table.tolist() == [[4, 4, 4], [4, 3, 0], [3, 0, 3], [0, 3, 3], [3, 0, 0], [0, 0, 0]]


def _steady(ok: int, slices: int, window_s: float, start: float = 0.0) -> RunDigest:
    """``ok`` answers of 1000 µs spread over ``slices`` slices (as evenly as whole numbers go), one image each."""
    counts = [ok // slices + (i < ok % slices) for i in range(slices)]
    pieces = tuple(_slice(i, [1000.0] * n, n) for i, n in enumerate(counts) if n)
    return RunDigest("closed", start, start + window_s, requests=ok, ok=ok, items=ok, slices=pieces)


def test_the_number_of_blocks_is_at_least_five_and_at_most_twenty() -> None:
    """25 answers make 25 // 5 = 5 blocks, the fewest a bootstrap uses; 24 make 4, too few: no table.
    200 answers over 40 slices could make 40 blocks: capped at 20, two slices each."""
    five = _analysis._block_tables(_steady(25, 20, 5.0))
    assert five is not None and len(five[0]) == 5
    assert _analysis._block_tables(_steady(24, 20, 5.0)) is None
    twenty = _analysis._block_tables(_steady(200, 40, 10.0, start=3.0))
    assert twenty is not None
    assert len(twenty[0]) == 20 and twenty[4].tolist() == [i // 2 for i in range(40)]
    assert twenty[1] == pytest.approx([0.5] * 20)


def test_open_loop_answers_after_the_window_count_whole_slices() -> None:
    """An open loop's window [0, 3) s is 12 whole slices; its late answers fall in slices 12 and 13, past
    the end, and each counts as a whole 0.25 s (the window's own last slice is not cut short: 3 s is a whole
    number of them). 70 answers, 5 per slice: 14 blocks of one slice, each 0.25 s."""
    pieces = tuple(_slice(i, [1000.0] * 5, 5) for i in range(14))
    digest = RunDigest("open", 0.0, 3.0, requests=70, ok=70, items=70, slices=pieces)
    tables = _analysis._block_tables(digest)
    assert tables is not None
    assert tables[1].tolist() == [0.25] * 14


def test_a_bootstrap_rows_percentile_follows_hdrhistograms_rule() -> None:
    """Per row: the first grid value whose cumulative count reaches ceil(p% of the row's total), at least 1.

    Grid 10, 20, 30. Row one holds a single count at 10: p50 wants ceil(0.5) = 1 -> 10. Row two holds one
    count at 20 and one at 30: p99 wants ceil(1.98) = 2 -> 30, the last value. Row three holds nothing (a
    resample of empty blocks): it wants 1, which no value reaches -> the last value, 30."""
    grid = np.array([10.0, 20.0, 30.0])
    cumulative = np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0], [0.0, 0.0, 0.0]])
    assert _analysis._percentile_rows(cumulative, grid, 50.0).tolist() == [10.0, 20.0, 30.0]
    assert _analysis._percentile_rows(cumulative, grid, 99.0).tolist() == [10.0, 30.0, 30.0]


# -- the intervals ---------------------------------------------------------------------------------------------------

BLOCKS = 20


class _ChosenResamples:
    """Stands for numpy's Generator in the bootstrap: hands out the block picks the test chose."""

    def __init__(self, picks: Iterator[np.ndarray]) -> None:
        self.picks = picks

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        return next(self.picks)


def _varied_run() -> tuple[LoadRun, list[list[float]], list[int]]:
    """A closed loop over [0, 5) s: 20 slices, one bootstrap block each, 5 answers per slice.

    Answer r of block j took 1000 + 50·j + 7·r µs (all below 2,048: exact in HdrHistogram) and carried
    1 + (j + r) mod 3 images. Returns the run, each block's latencies and each block's images."""
    records, latencies, images = [], [], []
    for j in range(BLOCKS):
        latencies.append([1000.0 + 50 * j + 7 * r for r in range(5)])
        images.append(sum(1 + (j + r) % 3 for r in range(5)))
        for r in range(5):
            done = (1000 * j + 100 + 20 * r) / 4000  # inside slice j
            latency = latencies[j][r] / 1e6
            records.append(RequestRecord(done - latency, done - latency, done, OK, 1 + (j + r) % 3, 100, 0.0))
    return LoadRun(records, 0.0, 5.0), latencies, images


def test_the_intervals_are_the_2_5th_and_97_5th_percentiles_of_the_resampled_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """400 resamples of 20 block picks each, drawn by the test. For each, worked out from its requests
    alone: items/s = the picked blocks' images / (20 × 0.25 s); p50 and p99 = the answers' latencies
    sorted, the value at rank ceil(p% × 100) (HdrHistogram's rule). The interval's ends are those figures'
    2.5th and 97.5th percentiles (numpy's linear interpolation), widened to hold the point's own figure."""
    run, latencies, images = _varied_run()
    picks = [np.random.default_rng(2024 + k).integers(0, BLOCKS, BLOCKS) for k in range(RESAMPLES)]
    seeds: list[int] = []
    monkeypatch.setattr(np.random, "default_rng", lambda seed: seeds.append(seed) or _ChosenResamples(iter(picks)))
    figures = analyze(run, "closed", SETTINGS)
    # the generator is seeded by the data alone, ok · 1,000,003 + images: a point stored today and analysed again
    # by a later serve-bench gets the interval its report printed (another seed would give other draws)
    answered = sum(1 for record in run.records if record.status == OK)
    assert seeds == [answered * 1_000_003 + sum(images)]

    rates, p50s, p99s = [], [], []
    for chosen in picks:
        rates.append(sum(images[j] for j in chosen) / (BLOCKS * 0.25))
        answered = sorted(value for j in chosen for value in latencies[j])
        p50s.append(answered[math.ceil(0.50 * len(answered)) - 1])
        p99s.append(answered[math.ceil(0.99 * len(answered)) - 1])

    def expected(samples: list[float], estimate: float) -> tuple[float, float]:
        low, high = np.percentile(samples, [2.5, 97.5])
        return min(float(low), estimate), max(float(high), estimate)

    items_ci, p50_ci, p99_ci = figures.throughput.items_per_s_ci, figures.latency.p50_ci, figures.latency.p99_ci
    assert items_ci is not None and p50_ci is not None and p99_ci is not None
    assert figures.throughput.items_per_s == sum(images) / 5.0
    assert (items_ci.low, items_ci.high) == pytest.approx(expected(rates, sum(images) / 5.0), rel=1e-12)
    assert (p50_ci.low, p50_ci.high) == pytest.approx(expected(p50s, figures.latency.p50), rel=1e-12)
    assert (p99_ci.low, p99_ci.high) == pytest.approx(expected(p99s, figures.latency.p99), rel=1e-12)
    assert p50_ci.low < figures.latency.p50 < p50_ci.high  # the resamples spread on both sides


def test_a_bootstrap_of_the_data_itself_gives_a_late_open_loops_own_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks' rate is per slice time, which for an open loop with late answers (slices past the window)
    is not the point's duration: the interval is scaled to the point's items/s. Resampling the data itself
    (every block once) must then give the point's own figure at both ends.

    200 requests due every 25 ms over [0, 5) s, each answered 400 ms later: the last answer at 5.375 s, so
    items/s = 200 / 5.375, while the slices (0-21) span 5.5 s."""
    records = [RequestRecord(i / 40, i / 40, i / 40 + 0.4, OK, 1, 100, 0.0) for i in range(200)]
    monkeypatch.setattr(np.random, "default_rng", lambda seed: _ChosenResamples(_itself()))
    figures = analyze(LoadRun(records, 0.0, 5.0, requested_rate=40.0), "open", SETTINGS)
    assert figures.throughput.items_per_s == pytest.approx(200 / 5.375)
    ci = figures.throughput.items_per_s_ci
    assert ci is not None
    assert (ci.low, ci.high) == pytest.approx((200 / 5.375, 200 / 5.375), rel=1e-12)


def _itself() -> Iterator[np.ndarray]:
    while True:
        yield np.arange(BLOCKS)


def test_intervals_are_seeded_by_the_data_and_exist_below_one_image_per_second() -> None:
    """25 answers of one image in 30 s: 0.83 images/s, still a rate with an interval (5 blocks of 6 s). The
    answers come ever further apart (the i-th at 30·(i/25)² s), so the blocks' rates differ and the interval
    has a width. Analysed twice, the same point gets the same intervals. Answers that carry no image give no
    interval."""
    records = [
        RequestRecord(30 * (i / 25) ** 2, 30 * (i / 25) ** 2, 30 * (i / 25) ** 2 + 0.001 * (1 + i % 4), OK, 1, 100, 0.0)
        for i in range(25)
    ]
    first = analyze(LoadRun(records, 0.0, 30.0), "closed", SETTINGS)
    again = analyze(LoadRun(records, 0.0, 30.0), "closed", SETTINGS)
    assert first.throughput.items_per_s == pytest.approx(25 / 30)
    assert first.throughput.items_per_s_ci is not None
    # the blocks are 6 s; the sparsest holds 2 answers (at 25.4 and 27.6 s), so no resample is below 2 / 6 per s
    assert first.throughput.items_per_s_ci.low >= 2 / 6
    assert first.throughput.items_per_s_ci.high > first.throughput.items_per_s_ci.low
    assert first.throughput.items_per_s_ci == again.throughput.items_per_s_ci
    assert first.latency.p50_ci == again.latency.p50_ci and first.latency.p99_ci == again.latency.p99_ci

    empty = [record._replace(items=0) for record in records]
    nothing = analyze(LoadRun(empty, 0.0, 30.0), "closed", SETTINGS)
    assert nothing.throughput.items_per_s_ci is None and nothing.latency.p50_ci is None


# -- the stability windows -------------------------------------------------------------------------------------------

M_S = 2.0**-10  # 976.5625 µs: a latency whose multiples by 3/4, 5/4 and 1e6 are all exact in binary


def _windows_digest(mode: str, items: list[list[int]], latency_s: list[float], ok: list[int]) -> RunDigest:
    """Three windows of four slices each over [0, 3) s; window w's slices answer ``ok`` requests each (in turn)
    carrying ``items[w]`` images, every answer taking ``latency_s[w]``."""
    pieces = []
    for w in range(3):
        for k in range(4):
            n = ok[k]
            pieces.append(SliceDigest(4 * w + k, n, items[w][k], n * latency_s[w]))
    total = sum(p.ok for p in pieces)
    return RunDigest(mode, 0.0, 3.0, requests=total, ok=total, items=sum(p.items for p in pieces), slices=tuple(pieces))


def test_windows_that_differ_by_exactly_the_tolerance_agree() -> None:
    """Each window is 1 s (four slices). Throughput 90, 100, 110 images/s: spread (110 - 90) / 100 = 0.2.
    Latency 3/4, 1 and 5/4 of 976.5625 µs: spread (1220.703125 - 732.421875) / 976.5625 = 0.5. Each spread
    equal to the tolerance is within it."""
    steady_items = [[25, 25, 25, 25]] * 3
    items_drift = _windows_digest("closed", [[22, 22, 23, 23], [25] * 4, [27, 27, 28, 28]], [M_S] * 3, [4] * 4)
    on_items = stability_of(items_drift, 3, 0.2)
    assert on_items.items_spread == 0.2 and on_items.latency_spread == 0.0
    assert on_items.stable and on_items.tolerance == 0.2 and on_items.judged_on == "throughput and latency"

    for mode in ("closed", "open"):
        latency_drift = _windows_digest(mode, steady_items, [0.75 * M_S, M_S, 1.25 * M_S], [4] * 4)
        on_latency = stability_of(latency_drift, 3, 0.5)
        assert on_latency.latency_spread == 0.5 and on_latency.stable, mode
        assert [w.mean_latency_us for w in on_latency.windows] == [732.421875, 976.5625, 1220.703125]
    assert stability_of(latency_drift, 3, 0.5).judged_on == "latency"


def test_windows_of_exactly_the_minimum_number_of_requests_are_enough() -> None:
    """Slices of 3, 2, 3, 2 answers: 10 a window, MIN_WINDOW_REQUESTS, which is enough to judge."""
    assert _analysis.MIN_WINDOW_REQUESTS == 10
    digest = _windows_digest("closed", [[3, 2, 3, 2]] * 3, [M_S] * 3, [3, 2, 3, 2])
    stability = stability_of(digest, 3, 0.1)
    assert [w.requests for w in stability.windows] == [10, 10, 10]
    assert stability.enough_requests and stability.stable


def test_the_spread_is_max_minus_min_over_the_mean_and_zero_without_a_mean() -> None:
    assert _analysis._spread([0.5, 0.7]) == pytest.approx(0.2 / 0.6)  # a mean below 1 still divides
    assert _analysis._spread([0.0, 0.0]) == 0.0
    assert _analysis._spread([4.0, 4.0, 4.0]) == 0.0


def test_the_running_closed_loops_digest_counts_answers_on_the_windows_start_not_on_its_end() -> None:
    """is_stable's cheap digest of [1, 2) s. By hand: answered at 1.0 (on the start, counted, slice 0, 10 ms),
    at 1.3 (3 images, 20 ms) and 1.49 (2 images, 50 ms), both slice 1 (0.3 / 0.25 and 0.49 / 0.25 floor to 1);
    not counted: the answer at 2.0 (on the end), a failure at 1.3 and an answer at 0.9, before the window."""
    records = [
        RequestRecord(0.99, 0.99, 1.0, OK, 1, 100, 0.0),
        RequestRecord(1.99, 1.99, 2.0, OK, 7, 100, 0.0),
        RequestRecord(1.29, 1.29, 1.3, "UNAVAILABLE", 9, 100, 0.0),
        RequestRecord(1.28, 1.28, 1.3, OK, 3, 100, 0.0),
        RequestRecord(1.44, 1.44, 1.49, OK, 2, 100, 0.0),
        RequestRecord(0.89, 0.89, 0.9, OK, 5, 100, 0.0),
    ]
    digest = _analysis._window_digest(records, 1.0, 2.0)
    assert (digest.mode, digest.window_start, digest.window_end, digest.ok) == ("closed", 1.0, 2.0, 3)
    assert [(s.index, s.ok, s.items) for s in digest.slices] == [(0, 1, 1), (1, 2, 5)]
    assert [s.latency_sum_s for s in digest.slices] == pytest.approx([0.01, 0.07])
