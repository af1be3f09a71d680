"""From records to a point's figures: throughput, latency, lag, stability, client limits."""

from __future__ import annotations

from collections import Counter
import numpy as np

from serve_bench.load._generators import LoadRun, PointSettings
from serve_bench.stats import (
    OK,
    ClientView,
    Codec,
    Counts,
    Figures,
    Latency,
    Percentiles,
    RequestRecord,
    Stability,
    Throughput,
    Window,
    encode,
    histogram_of,
)

__all__ = ["analyze", "window_stats", "is_stable"]

LOOP_BUSY_LIMIT = 0.90  # event loop busy > 90% of the window: the client, not the server, set the pace
LAG_LIMIT_US = 5_000  # open loop: sends more than 5 ms late at p99 have fallen behind


def _arrays(records: list[RequestRecord]) -> dict[str, np.ndarray]:
    if not records:
        empty = np.zeros(0)
        return {"intended": empty, "sent": empty, "done": empty, "ok": np.zeros(0, bool), "items": empty,
                "decode": empty}
    intended, sent, done, status, items, _, decode, *_ = zip(*records)
    return {"intended": np.array(intended), "sent": np.array(sent), "done": np.array(done),
            "ok": np.array([s == OK for s in status]), "items": np.array(items, dtype=np.int64),
            "decode": np.array(decode)}


def window_stats(done: np.ndarray, latency_s: np.ndarray, items: np.ndarray, start: float, end: float,
                 windows: int) -> list[dict[str, float]]:
    """items/s and mean latency in ``windows`` consecutive windows holding equal numbers of requests.

    Equal counts rather than equal times: at low request rates a time slice can
    hold no completion at all, which says nothing about stability.
    """
    order = np.argsort(done)
    groups = [g for g in np.array_split(order, windows)]
    result = []
    lower = start
    for index, group in enumerate(groups):
        upper = end if index == len(groups) - 1 else (float(done[group[-1]]) if len(group) else lower)
        span = max(upper - lower, 1e-9)
        result.append({
            "items_per_s": float(items[group].sum() / span) if len(group) else 0.0,
            "mean_latency_us": float(latency_s[group].mean() * 1e6) if len(group) else 0.0,
            "requests": int(len(group)),
        })
        lower = upper
    return result


def _spread(values: list[float]) -> float:
    mean = float(np.mean(values)) if values else 0.0
    return float((max(values) - min(values)) / mean) if mean > 0 else 0.0


def is_stable(records: list[RequestRecord], start: float, end: float, windows: int, tolerance: float) -> bool:
    arrays = _arrays([r for r in records if r.status == OK and start <= r.done < end])
    stats = window_stats(arrays["done"], arrays["done"] - arrays["intended"], arrays["items"], start, end, windows)
    return (all(w["requests"] >= 2 for w in stats)
            and _spread([w["items_per_s"] for w in stats]) <= tolerance
            and _spread([w["mean_latency_us"] for w in stats]) <= tolerance)


def _window_records(windows: list[dict[str, float]]) -> tuple[Window, ...]:
    return tuple(Window(int(w["requests"]), w["items_per_s"], w["mean_latency_us"]) for w in windows)


def analyze(run: LoadRun, mode: str, settings: PointSettings, encode_us: float = 0.0) -> Figures:
    """The figures of one load run: counts, throughput, latency, stability and the client's own view.

    ``encode_us`` is the one-off encoding time of the prepared request (outside the timed region).
    """
    a = _arrays(run.records)
    start, end = run.window_start, run.window_end
    if mode == "open":
        # every request scheduled inside the window counts, however late its answer
        in_window = (a["intended"] >= start) & (a["intended"] < end)
    else:
        in_window = (a["done"] >= start) & (a["done"] < end)
    ok = in_window & a["ok"]
    duration = end - start
    if mode == "open" and ok.any():
        duration = max(duration, float(a["done"][ok].max()) - start)  # a server that lags is not credited
    duration = max(duration, 1e-9)

    latency_s = a["done"] - a["intended"]
    histogram = histogram_of(latency_s[ok] * 1e6)
    sent = lag = None
    if mode == "open":
        sent = Percentiles.of_values((a["done"] - a["sent"])[ok] * 1e6)
        lag = Percentiles.of_values(np.maximum(a["sent"] - a["intended"], 0)[in_window] * 1e6)

    statuses = Counter(s.status for s, w in zip(run.records, in_window) if w and s.status != OK)
    requests_ok = int(ok.sum())
    items_ok = int(a["items"][ok].sum())
    span = max(end - start, 1e-9)
    scheduled = achieved = None
    if mode == "open":
        # scheduled: due inside the window; achieved: actually sent inside it
        scheduled = int(in_window.sum()) / span
        achieved = int(((a["sent"] >= start) & (a["sent"] < end)).sum()) / span
    throughput = Throughput(requests_ok / duration, items_ok / duration,
                            requested_rate=float(run.requested_rate or 0.0) if mode == "open" else None,
                            scheduled_rate=scheduled, achieved_rate=achieved)

    windows = window_stats(a["done"][ok], latency_s[ok], a["items"][ok], start, end, settings.windows)
    items_spread = _spread([w["items_per_s"] for w in windows])
    latency_spread = _spread([w["mean_latency_us"] for w in windows])
    enough = all(w["requests"] >= 2 for w in windows)
    stable = enough and items_spread <= settings.tolerance and latency_spread <= settings.tolerance

    loop_busy = run.loop_cpu_seconds / span
    reasons = []
    if loop_busy > LOOP_BUSY_LIMIT:
        reasons.append(f"event loop busy {loop_busy:.0%} of the window")
    if mode == "open" and lag is not None and run.safety_cap_hits == 0:
        if lag.p99 > LAG_LIMIT_US:
            reasons.append(f"sends fell behind schedule (lag p99 {lag.p99 / 1000:.1f} ms)")
        if scheduled and achieved is not None and achieved < 0.98 * scheduled:
            reasons.append(f"sent {achieved:.1f} req/s of {scheduled:.1f} scheduled")
    decode = a["decode"][ok]
    nbytes = int(run.records[0].nbytes) if run.records else 0
    return Figures(
        duration_s=round(duration, 4),
        counts=Counts.of(int(in_window.sum()), requests_ok, items_ok, statuses),
        throughput=throughput,
        latency=Latency(Percentiles.of(histogram), sent, encode(histogram)),
        stability=Stability(stable, settings.tolerance, _window_records(windows), items_spread, latency_spread,
                            enough),
        client=ClientView(round(100 * loop_busy, 1), round(100 * run.process_cpu_seconds / span, 1), bool(reasons),
                          tuple(reasons), run.safety_cap_hits, lag),
        codec=Codec(round(encode_us, 1), round(float(decode.mean() * 1e6), 1) if len(decode) else 0.0, nbytes),
        notes=tuple(run.notes),
        cut_off=run.cut_off,
    )
