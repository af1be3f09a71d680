"""From a load run to a point's figures: counts, throughput, latency with their uncertainty, stability, client.

One path for one process and for many: the run is read as a RunDigest (histograms
and counters, plus the same per 0.25 s slice), made from the records when there
is no digest yet. Stability and confidence intervals both come from the slices:

* Stability: the window is cut into ``settings.windows`` windows of about equal
  numbers of successful requests; each needs ``MIN_WINDOW_REQUESTS``; closed-loop
  points are stable when the windows' items/s and mean latency agree within the
  tolerance, open-loop points when their mean latency does (the schedule, not the
  server, sets an open loop's throughput).
* Uncertainty: a block bootstrap over equal-time blocks of slices (consecutive
  slices stay together, so short-range correlation is kept) gives 95% intervals for
  items/s, p50 and p99. With too few requests for ``MIN_BLOCKS`` blocks there is
  no interval, and the point says so.
"""

from __future__ import annotations

import math

import numpy as np

from serve_bench.load._digest import SLICE_S, RunDigest, SliceDigest, digest_records
from serve_bench.load._generators import LoadRun, PointSettings
from serve_bench.stats import (
    MAX_BLOCKS,
    MIN_BLOCKS,
    OK,
    ClientView,
    Codec,
    Counts,
    Figures,
    Interval,
    Latency,
    Percentiles,
    RequestRecord,
    Stability,
    Throughput,
    Window,
    bounds,
    decode,
    resample_weights,
)

__all__ = ["MIN_WINDOW_REQUESTS", "analyze", "is_stable", "stability_of"]

LOOP_BUSY_LIMIT = 0.90  # event loop busy > 90% of the window: the client, not the server, set the pace
LAG_LIMIT_US = 5_000  # open loop: sends more than 5 ms late at p99 have fallen behind
# A window's mean latency from n requests with a coefficient of variation of 0.3 (typical of a
# busy server) is uncertain by 0.3/sqrt(n): 9.5% at n = 10, the default tolerance. With fewer,
# windows disagree from sampling noise alone, so they cannot vouch for stability.
MIN_WINDOW_REQUESTS = 10
MIN_BLOCK_REQUESTS = 5  # a bootstrap block needs a few requests to carry a percentile


def _spread(values: list[float]) -> float:
    mean = float(np.mean(values)) if values else 0.0
    return float((max(values) - min(values)) / mean) if mean > 0 else 0.0


def stability_of(digest: RunDigest, windows: int, tolerance: float) -> Stability:
    """The one stability rule (analysis and the closed loop's until-stable use it alike)."""
    parts = digest.windows(windows)
    records = tuple(Window(requests, items_per_s, latency_us) for requests, items_per_s, latency_us, _ in parts)
    items_spread = _spread([w.items_per_s for w in records])
    latency_spread = _spread([w.mean_latency_us for w in records])
    enough = bool(records) and all(w.requests >= MIN_WINDOW_REQUESTS for w in records)
    if digest.mode == "open":
        judged_on, agree = "latency", latency_spread <= tolerance
    else:
        judged_on, agree = "throughput and latency", items_spread <= tolerance and latency_spread <= tolerance
    return Stability(enough and agree, tolerance, records, items_spread, latency_spread, enough, judged_on)


def _window_digest(records: list[RequestRecord], start: float, end: float) -> RunDigest:
    """The slices of a closed loop's records without histograms: all that stability needs, cheaply.

    The until-stable check runs on the event loop while requests are in flight, so it
    must take milliseconds, not the time of encoding a histogram per slice.
    """
    done = np.fromiter((r.done for r in records), float, len(records))
    sent = np.fromiter((r.intended for r in records), float, len(records))
    good = np.fromiter((r.status == OK for r in records), bool, len(records)) & (done >= start) & (done < end)
    items = np.fromiter((r.items for r in records), float, len(records))[good]
    index = np.floor((done[good] - start) / SLICE_S).astype(np.int64)
    latency = (done - sent)[good]
    slices = tuple(
        SliceDigest(int(i), int(n), int(k), float(lat))
        for i, n, k, lat in zip(
            *(np.unique(index, return_counts=True)),
            np.bincount(index, weights=items)[np.unique(index)],
            np.bincount(index, weights=latency)[np.unique(index)],
        )
    )
    return RunDigest("closed", start, end, ok=int(good.sum()), slices=slices)


def is_stable(records: list[RequestRecord], start: float, end: float, windows: int, tolerance: float) -> bool:
    """Closed loop, while running: do the records answered in [start, end) make a stable point?"""
    return stability_of(_window_digest(records, start, end), windows, tolerance).stable


def _recorded(encoded: str) -> list[tuple[int, int]]:
    """(value, count) of each bucket an encoded histogram holds, as HdrHistogram reports values.

    Reads the counts array directly: hdrh's recorded-value iterator walks every
    sub-bucket in Python, thousands of times slower for a sparse histogram.
    """
    histogram = decode(encoded)
    counts = np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len]
    return [
        (int(histogram.get_highest_equivalent_value(histogram.get_value_from_index(int(i)))), int(counts[i]))
        for i in np.flatnonzero(counts)
    ]


def _block_tables(digest: RunDigest) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Per equal-time block of slices: items, span (s), and latency counts over one shared value grid."""
    if not digest.slices:
        return None
    last = max(
        max(s.index for s in digest.slices) + 1,
        math.ceil((digest.window_end - digest.window_start) / digest.slice_s - 1e-9),
    )
    blocks = min(MAX_BLOCKS, digest.ok // MIN_BLOCK_REQUESTS, last)
    if blocks < MIN_BLOCKS:
        return None
    owner = np.minimum(np.arange(last) * blocks // last, blocks - 1)  # slice index -> block
    remaining = (digest.window_end - digest.window_start) - np.arange(last) * digest.slice_s
    # the window's last slice may be cut short; open-loop answers after the window count whole slices
    spans = np.where(remaining > 0, np.minimum(digest.slice_s, remaining), digest.slice_s)
    block_span = np.bincount(owner, weights=spans, minlength=blocks)
    items = np.zeros(blocks)
    per_block: list[dict[int, int]] = [{} for _ in range(blocks)]
    for piece in digest.slices:
        block = int(owner[piece.index])
        items[block] += piece.items
        if piece.histogram:
            counts = per_block[block]
            for value, n in _recorded(piece.histogram):
                counts[value] = counts.get(value, 0) + n
    grid = np.array(sorted({v for counts in per_block for v in counts}), dtype=float)
    position = {int(v): i for i, v in enumerate(grid)}
    table = np.zeros((blocks, len(grid)))
    for block, counts in enumerate(per_block):
        for value, n in counts.items():
            table[block, position[value]] = n
    return items, np.maximum(block_span, 1e-9), table, grid, owner


def _percentile_rows(cumulative: np.ndarray, grid: np.ndarray, percentile: float) -> np.ndarray:
    """HdrHistogram's rule per row: the first value whose cumulative count reaches p% of the total."""
    totals = cumulative[:, -1]
    wanted = np.maximum(np.ceil(totals * percentile / 100.0), 1.0)
    index = np.array([np.searchsorted(row, w) for row, w in zip(cumulative, wanted)])
    rows: np.ndarray = grid[np.minimum(index, len(grid) - 1)]
    return rows


def _intervals(digest: RunDigest, items_per_s: float, latency: Percentiles) -> tuple[Interval | None, ...]:
    """95% block-bootstrap intervals for items/s, p50 and p99 (None when there are too few requests)."""
    tables = _block_tables(digest)
    if tables is None or items_per_s <= 0:
        return None, None, None
    items, spans, table, grid, _ = tables
    blocks = len(items)
    # seeded by the data, so a point's interval is the same each time it is analysed
    weights = resample_weights(blocks, np.random.default_rng(int(digest.ok) * 1_000_003 + int(digest.items)))
    rate = (weights @ items) / (weights @ spans)
    full_rate = items.sum() / spans.sum()
    cumulative = np.cumsum(weights @ table, axis=1)
    return (
        bounds(rate, items_per_s, items_per_s / full_rate if full_rate > 0 else 0.0),
        bounds(_percentile_rows(cumulative, grid, 50.0), latency.p50),
        bounds(_percentile_rows(cumulative, grid, 99.0), latency.p99),
    )


def analyze(run: LoadRun, mode: str, settings: PointSettings, encode_us: float = 0.0) -> Figures:
    """The figures of one load run: counts, throughput, latency (with 95% intervals), stability, client.

    ``encode_us`` is the one-off encoding time of the prepared request (outside the timed region).
    """
    start, end = run.window_start, run.window_end
    if run.cut_off and run.records:
        # cut off (e.g. the target died), possibly in warm-up: count what it met from the first request
        start = min(start, min(r.intended for r in run.records))
        end = max(end, start)
    digest = run.digest if run.digest is not None else digest_records(run.records, mode, start, end)
    span = max(end - start, 1e-9)
    duration = span
    if mode == "open" and digest.ok:
        duration = max(span, digest.last_done - start)  # a server that lags is not credited
    latency = Percentiles.of(digest.histogram("latency"))
    sent = lag = None
    scheduled = achieved = None
    if mode == "open":
        sent = Percentiles.of(digest.histogram("latency_sent"))
        lag = Percentiles.of(digest.histogram("schedule_lag"))
        scheduled = digest.requests / span  # due inside the window
        achieved = digest.sent_in_window / span  # actually sent inside it: the realized rate
    items_per_s = digest.items / duration
    items_ci, p50_ci, p99_ci = _intervals(digest, items_per_s, latency)
    throughput = Throughput(
        digest.ok / duration,
        items_per_s,
        items_ci,
        requested_rate=float(run.requested_rate or 0.0) if mode == "open" else None,
        scheduled_rate=scheduled,
        achieved_rate=achieved,
    )

    loop_busy = run.loop_cpu_seconds / span
    reasons = []
    # A cut-off point (target down) ended because the server stopped answering: a busy loop or a
    # lagging schedule then says nothing about the client, so it is not flagged client-limited.
    if loop_busy > LOOP_BUSY_LIMIT and not run.cut_off:
        reasons.append(f"event loop busy {loop_busy:.0%} of the window")
    if mode == "open" and lag is not None and run.safety_cap_hits == 0 and not run.cut_off:
        if lag.p99 > LAG_LIMIT_US:
            reasons.append(f"sends fell behind schedule (lag p99 {lag.p99 / 1000:.1f} ms)")
        if scheduled and achieved is not None and achieved < 0.98 * scheduled:
            reasons.append(f"sent {achieved:.1f} req/s of {scheduled:.1f} scheduled")
    notes = list(run.notes)
    if digest.ok and items_ci is None:
        notes.append(
            f"no confidence interval: {digest.ok} answered requests are too few for {MIN_BLOCKS} "
            f"bootstrap blocks of {MIN_BLOCK_REQUESTS}"
        )
    return Figures(
        duration_s=round(duration, 6),  # to the µs: a short stream's items/s × duration gives back its items
        counts=Counts(digest.requests, digest.ok, digest.items, digest.errors),
        throughput=throughput,
        latency=Latency(latency, sent, digest.latency, p50_ci, p99_ci),
        stability=stability_of(digest, settings.windows, settings.tolerance),
        client=ClientView(
            round(100 * loop_busy, 1),
            round(100 * run.process_cpu_seconds / span, 1),
            bool(reasons),
            tuple(reasons),
            run.safety_cap_hits,
            lag,
        ),
        codec=Codec(
            round(encode_us, 1), round(digest.decode_seconds / digest.ok * 1e6, 1) if digest.ok else 0.0, digest.nbytes
        ),
        notes=tuple(notes),
        cut_off=run.cut_off,
    )
