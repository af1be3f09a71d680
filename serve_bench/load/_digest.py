"""A load run reduced to histograms and counters that add up across processes.

With ``--processes N`` each child sends its parent a RunDigest instead of one
record per request, as Locust's workers send their master stats entries rather
than requests: latency histograms (HdrHistogram, merged with ``add``) and
counters. The window is also cut into short time slices, each with its own
counters and latency histogram, so stability windows and confidence intervals
(batch means over windows) can still be computed after the merge.

``digest_records`` makes the same digest from records in one process, so the
analysis can read either.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from hdrh.histogram import HdrHistogram

from serve_bench.stats import OK, RequestRecord, decode, encode, histogram_of, merge, new_histogram

__all__ = ["SLICE_S", "RunDigest", "SliceDigest", "digest_records", "merge_digests"]

SLICE_S = 0.25  # short enough that a 5 s point has 20 slices to group into stability windows


@dataclass(frozen=True)
class SliceDigest:
    """Successful requests that finished in one time slice of the window (all processes together)."""

    index: int  # slice number from the window's start
    ok: int = 0
    items: int = 0
    latency_sum_s: float = 0.0  # sum of latency from when each was due
    histogram: str = ""  # encoded HdrHistogram of those latencies, µs

    def add(self, other: SliceDigest) -> SliceDigest:
        return SliceDigest(
            self.index,
            self.ok + other.ok,
            self.items + other.items,
            self.latency_sum_s + other.latency_sum_s,
            _add_encoded(self.histogram, other.histogram),
        )


@dataclass(frozen=True)
class RunDigest:
    """Histograms and counters of one load run's measured window.

    Which requests count follows the analysis: open loop, those due inside the
    window (however late their answer); closed loop, those answered inside it.
    Latency histograms are in µs. ``errors`` are counts by status (gRPC code name
    or HTTP status).
    """

    mode: str
    window_start: float
    window_end: float
    requests: int = 0
    ok: int = 0
    items: int = 0
    errors: tuple[tuple[str, int], ...] = ()
    latency: str = ""  # due -> answered, successful requests
    latency_sent: str = ""  # sent -> answered (open loop: not corrected for coordinated omission)
    schedule_lag: str = ""  # sent - due, every request counted (open loop)
    sent_in_window: int = 0  # requests actually sent inside the window (open loop's achieved rate)
    last_done: float = 0.0  # latest answer of a counted successful request
    decode_seconds: float = 0.0  # summed over successful requests
    nbytes: int = 0  # one request's size on the wire
    processes: int = 1
    slice_s: float = SLICE_S
    slices: tuple[SliceDigest, ...] = field(default=())

    def histogram(self, name: str = "latency") -> HdrHistogram:
        """Decoded histogram ``latency``, ``latency_sent`` or ``schedule_lag`` (empty when none)."""
        text = getattr(self, name)
        return decode(text) if text else new_histogram()

    def windows(self, count: int) -> list[tuple[int, float, float, float]]:
        """(requests, items/s, mean latency µs, span s) of ``count`` consecutive windows.

        Slices are grouped so that each window holds about the same number of
        successful requests (as the record-based windows do); a window's span runs
        from the end of the previous one, the last ends at the window's end.
        """
        total = sum(s.ok for s in self.slices)
        slices = sorted(self.slices, key=lambda s: s.index)
        result: list[tuple[int, float, float, float]] = []
        lower, position, taken = self.window_start, 0, 0
        for number in range(count):
            last = number == count - 1
            target = total * (number + 1) / count
            ok = items = 0
            latency = 0.0
            upper = lower
            # a slice joins this window when at least half of it lies before the window's share
            while position < len(slices) and (last or taken + slices[position].ok / 2 <= target):
                piece = slices[position]
                ok, items, latency = ok + piece.ok, items + piece.items, latency + piece.latency_sum_s
                taken += piece.ok
                upper = min(self.window_end, self.window_start + (piece.index + 1) * self.slice_s)
                position += 1
            if last:
                upper = self.window_end  # as the record-based windows do
            span = max(upper - lower, 1e-9)
            result.append((ok, items / span if ok else 0.0, latency / ok * 1e6 if ok else 0.0, span))
            lower = upper
        return result


def _add_encoded(*texts: str) -> str:
    """Encoded histograms added up (stats.merge: HdrHistogram.add); "" stands for an empty one."""
    present = [decode(text) for text in texts if text]
    return encode(merge(present)) if present else ""


def _merge_counts(pairs: Iterable[tuple[tuple[str, int], ...]]) -> tuple[tuple[str, int], ...]:
    total: Counter[str] = Counter()
    for items in pairs:
        for key, count in items:
            total[key] += count
    return tuple(sorted(total.items()))


def digest_records(
    records: Sequence[RequestRecord], mode: str, window_start: float, window_end: float, slice_s: float = SLICE_S
) -> RunDigest:
    """The digest of one process's records over [window_start, window_end)."""
    if not records:
        return RunDigest(mode, window_start, window_end, slice_s=slice_s)
    intended = np.fromiter((r.intended for r in records), float, len(records))
    sent = np.fromiter((r.sent for r in records), float, len(records))
    done = np.fromiter((r.done for r in records), float, len(records))
    ok = np.fromiter((r.status == OK for r in records), bool, len(records))
    items = np.fromiter((r.items for r in records), np.int64, len(records))
    decode_s = np.fromiter((r.decode_seconds for r in records), float, len(records))
    key = intended if mode == "open" else done
    counted = (key >= window_start) & (key < window_end)
    good = counted & ok
    latency = done - intended
    errors = Counter(r.status for r, c, g in zip(records, counted, ok) if c and not g)
    slices: list[SliceDigest] = []
    if good.any():
        index = np.floor((done[good] - window_start) / slice_s).astype(np.int64)
        index = np.maximum(index, 0)  # open loop: due inside the window, answered before it ends is impossible
        good_latency, good_items = latency[good], items[good]
        for number in np.unique(index):
            chosen = index == number
            values = good_latency[chosen]
            slices.append(
                SliceDigest(
                    int(number),
                    int(chosen.sum()),
                    int(good_items[chosen].sum()),
                    float(values.sum()),
                    encode(histogram_of(values * 1e6)),
                )
            )
    return RunDigest(
        mode=mode,
        window_start=window_start,
        window_end=window_end,
        requests=int(counted.sum()),
        ok=int(good.sum()),
        items=int(items[good].sum()),
        errors=tuple(sorted(errors.items())),
        latency=encode(histogram_of(latency[good] * 1e6)),
        latency_sent=encode(histogram_of((done - sent)[good] * 1e6)) if mode == "open" else "",
        schedule_lag=encode(histogram_of(np.maximum(sent - intended, 0)[counted] * 1e6)) if mode == "open" else "",
        sent_in_window=int(((sent >= window_start) & (sent < window_end)).sum()),
        last_done=float(done[good].max()) if good.any() else 0.0,
        decode_seconds=float(decode_s[good].sum()),
        nbytes=int(records[0].nbytes),
        slice_s=slice_s,
        slices=tuple(slices),
    )


def merge_digests(digests: Sequence[RunDigest]) -> RunDigest:
    """Several processes' digests of the same window as one (histograms added, counters summed).

    The children count over one agreed window (the same start instant and fixed
    duration); one whose target went down ends its window early, and the merged
    window is the span all of them covered.
    """
    if not digests:
        raise ValueError("nothing to merge")
    first = digests[0]
    if any(d.mode != first.mode or not math.isclose(d.slice_s, first.slice_s) for d in digests):
        raise ValueError("digests of different kinds of run cannot be merged")
    slices: dict[int, SliceDigest] = {}
    for digest in digests:
        for piece in digest.slices:
            slices[piece.index] = slices[piece.index].add(piece) if piece.index in slices else piece
    merged = replace(
        first,
        window_start=max(d.window_start for d in digests),
        window_end=min(d.window_end for d in digests),
        requests=sum(d.requests for d in digests),
        ok=sum(d.ok for d in digests),
        items=sum(d.items for d in digests),
        errors=_merge_counts(d.errors for d in digests),
        sent_in_window=sum(d.sent_in_window for d in digests),
        last_done=max(d.last_done for d in digests),
        decode_seconds=sum(d.decode_seconds for d in digests),
        processes=sum(d.processes for d in digests),
        slices=tuple(slices[i] for i in sorted(slices)),
    )

    def added(name: str) -> str:
        return _add_encoded(*(getattr(digest, name) for digest in digests))

    return replace(
        merged, latency=added("latency"), latency_sent=added("latency_sent"), schedule_lag=added("schedule_lag")
    )
