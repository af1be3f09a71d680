"""The answer from the points: batching gain, latency model, CPU vs GPU, best under the SLO.

Everything here is computed from the measured points; no sentence holds a
number that was not derived from them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from serve_bench.stats import Point, Slo

__all__ = ["Slo", "LatencyModel", "TargetAnalysis", "Analysis", "analyze_run", "fit_latency_model", "format_ratio"]


@dataclass(frozen=True)
class LatencyModel:
    """latency(B) ≈ a + b·B: a is the fixed cost per call, b the cost per item (µs)."""

    a_us: float
    b_us: float
    r_squared: float
    points: int

    def latency_us(self, batch: float) -> float:
        return self.a_us + self.b_us * batch

    def items_per_s(self, batch: float, concurrency: int = 1) -> float:
        return concurrency * batch / (self.latency_us(batch) / 1e6)

    @property
    def gain_bound(self) -> float:
        """Throughput gain from batch 1 to an unbounded batch: (a + b) / b."""
        return (self.a_us + self.b_us) / self.b_us if self.b_us > 0 else float("inf")


def fit_latency_model(batches: list[int], latencies_us: list[float]) -> LatencyModel | None:
    """Least squares on relative errors (weights 1/latency), so batch 1 counts as much as batch 64;
    a >= 0: a negative fixed cost is noise, so then the line goes through the origin."""
    if len(set(batches)) < 2:
        return None
    x = np.asarray(batches, dtype=float)
    y = np.asarray(latencies_us, dtype=float)
    weights = 1.0 / np.maximum(y, 1e-9)
    b, a = np.polyfit(x, y, 1, w=weights)
    if a < 0:
        a, b = 0.0, float((weights**2 * x * y).sum() / (weights**2 * x * x).sum())
    predicted = a + b * x
    ss_res = float(((y - predicted) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return LatencyModel(float(a), float(b), r2, len(x))


@dataclass
class TargetAnalysis:
    name: str
    device: str
    protocol: str
    server_kind: str
    # batch size -> the closed-loop point with the fewest requests in flight (the latency(B) curve)
    batch_curve: dict[int, Point]
    best_by_batch: dict[int, Point]  # batch size -> the point with the most items/s
    model: LatencyModel | None
    baseline: Point | None  # batch 1, lowest concurrency
    client_gain: float | None  # best items/s with client batches > 1 over the baseline
    client_gain_batch: int | None
    server_gain: float | None  # best items/s of batch-1 requests at concurrency > 1 over the baseline
    server_gain_concurrency: int | None
    slo_gain: float | None  # best under the SLO over the baseline (if the baseline meets it)
    slo_gain_batch: int | None
    best_under_slo: Point | None
    gflops: dict[int, float] = field(default_factory=dict)  # batch -> achieved GFLOP/s


@dataclass
class Analysis:
    targets: list[TargetAnalysis]
    slo: Slo | None
    device_ratios: list[dict[str, Any]]  # per batch size: gpu/cpu items/s and p99
    verdict: str
    warnings: list[str]
    flops_per_image: float | None


def format_ratio(value: float | None) -> str:
    if value is None or not np.isfinite(value):
        return "n/a"
    return f"{value:.2f}×" if value < 10 else f"{value:.1f}×"


def _concurrency(point: Point) -> int:
    return point.load.concurrency or 1


def _analyze_target(points: list[Point], slo: Slo | None, flops: float | None) -> TargetAnalysis:
    first = points[0]
    closed = [p for p in points if p.load.mode in ("closed", "locust", "stream") and p.counts.ok > 0]
    curve: dict[int, Point] = {}
    for point in sorted(closed, key=lambda p: (p.batch_size, _concurrency(p), -p.items_per_s)):
        curve.setdefault(point.batch_size, point)
    best: dict[int, Point] = {}
    for point in points:
        if point.counts.ok == 0:
            continue
        current = best.get(point.batch_size)
        if current is None or point.items_per_s > current.items_per_s:
            best[point.batch_size] = point
    ones = [p for p in closed if p.batch_size == 1]
    baseline = min(ones, key=_concurrency) if ones else None
    base_rate = baseline.items_per_s if baseline else None

    client_gain = client_batch = server_gain = server_conc = None
    if base_rate:
        batched = [p for p in closed if p.batch_size > 1]
        if batched:
            top = max(batched, key=lambda p: p.items_per_s)
            client_gain, client_batch = top.items_per_s / base_rate, top.batch_size
        concurrent_ones = [p for p in ones if _concurrency(p) > 1]
        if concurrent_ones:
            top = max(concurrent_ones, key=lambda p: p.items_per_s)
            server_gain, server_conc = top.items_per_s / base_rate, _concurrency(top)

    best_slo = slo_gain = slo_batch = None
    if slo is not None:
        meeting = [p for p in points if slo.met_by(p)]
        if meeting:
            best_slo = max(meeting, key=lambda p: p.items_per_s)
            if baseline is not None and slo.met_by(baseline) and base_rate:
                slo_gain = best_slo.items_per_s / base_rate
                slo_batch = best_slo.batch_size

    model = fit_latency_model([b for b in curve], [p.latency.mean for p in curve.values()])
    gflops = {b: p.items_per_s * flops / 1e9 for b, p in best.items()} if flops else {}
    return TargetAnalysis(first.target.name, first.target.device, first.target.protocol, first.target.server_kind,
                          dict(sorted(curve.items())), dict(sorted(best.items())), model, baseline, client_gain,
                          client_batch, server_gain, server_conc, slo_gain, slo_batch, best_slo, gflops)


def _warnings(points: list[Point]) -> list[str]:
    """One line per problem of a point, worded by the record that has it."""
    warnings = []
    for point in points:
        label = point.key or f"{point.target.name} b{point.batch_size}"
        if point.cut_off:
            warnings.append(f"cut off: {label}: {point.cut_off}")
        if point.stability.flags():
            warnings.append(f"{point.stability.describe()}: {label}")
        if point.client.flags():
            warnings.append(f"{point.client.describe()}: {label}")
        if point.counts.errors:
            warnings.append(f"{point.counts.describe()}: {label}")
        for note in point.notes:
            if "unanswered" in note or "did not become stable" in note:
                warnings.append(f"{label}: {note}")
    return warnings


def _device_pick(targets: list[TargetAnalysis], device: str) -> TargetAnalysis | None:
    candidates = [t for t in targets if t.device == device and t.batch_curve]
    if not candidates:
        return None
    grpc = [t for t in candidates if t.protocol == "grpc"]
    return (grpc or candidates)[0]


def _gain_phrase(target: TargetAnalysis, slo: Slo | None) -> str | None:
    """'9.1× from batch 1 to 64 within p99 ≤ 100 ms' for a target, from its data."""
    if slo is not None and target.slo_gain is not None and target.slo_gain_batch == 1:
        best = target.best_under_slo
        level = f"{best.load.concurrency} requests in flight" if best and best.load.mode != "open" else "its best rate"
        return (f"1.00× within {slo.label()}: batch 1 stays its best there "
                f"({format_ratio(target.slo_gain)} over one request at a time, from {level})")
    if slo is not None and target.slo_gain is not None:
        return f"{format_ratio(target.slo_gain)} from batch 1 to {target.slo_gain_batch} within {slo.label()}"
    if target.client_gain is not None:
        return f"{format_ratio(target.client_gain)} from batch 1 to {target.client_gain_batch}"
    return None


def _verdict(targets: list[TargetAnalysis], slo: Slo | None) -> str:
    gpu, cpu = _device_pick(targets, "gpu"), _device_pick(targets, "cpu")
    if gpu and cpu:
        g, c = _gain_phrase(gpu, slo), _gain_phrase(cpu, slo)
        if g and c:
            c_short = c.split(" from ")[0]
            within = ""
            if slo is not None and gpu.best_under_slo is not None and cpu.best_under_slo is not None:
                best_g, best_c, within = gpu.best_under_slo, cpu.best_under_slo, f" within {slo.label()}"
            else:
                best_g = max(gpu.best_by_batch.values(), key=lambda p: p.items_per_s)
                best_c = max(cpu.best_by_batch.values(), key=lambda p: p.items_per_s)
            ratio = best_g.items_per_s / best_c.items_per_s
            return (f"batching raises GPU throughput {g}; on the CPU {c_short}. At their best{within} the GPU "
                    f"serves {best_g.items_per_s:.1f} images/s (batch {best_g.batch_size}) and the "
                    f"CPU {best_c.items_per_s:.1f} (batch {best_c.batch_size}): {format_ratio(ratio)}.")
    sentences = []
    for target in targets:
        phrase = _gain_phrase(target, slo)
        if phrase:
            line = f"batching raises {target.name} ({target.device}, {target.protocol}) throughput {phrase}"
            if target.model is not None and target.model.b_us > 0:
                line += (f"; its latency model (fixed {target.model.a_us / 1000:.1f} ms per call, "
                         f"{target.model.b_us / 1000:.2f} ms per image) bounds the gain at "
                         f"{format_ratio(target.model.gain_bound)}")
            sentences.append(line)
        if target.server_gain is not None:
            sentences.append(f"server-side batching of batch-1 requests at concurrency "
                             f"{target.server_gain_concurrency} gives {target.name} {format_ratio(target.server_gain)}")
    if not sentences:
        return "not enough points for a verdict: measure batch 1 and at least one larger batch per target."
    missing = " (no GPU target in this run)" if not any(t.device == "gpu" for t in targets) else ""
    return "; ".join(sentences) + missing + "."


def analyze_run(points: list[Point], slo: Slo | None = None, flops_per_image: float | None = None) -> Analysis:
    by_target: dict[str, list[Point]] = defaultdict(list)
    for point in points:
        by_target[point.target.name].append(point)
    targets = [_analyze_target(group, slo, flops_per_image) for group in by_target.values()]
    ratios = []
    gpu, cpu = _device_pick(targets, "gpu"), _device_pick(targets, "cpu")
    if gpu and cpu:
        for batch in sorted(set(gpu.best_by_batch) & set(cpu.best_by_batch)):
            g, c = gpu.best_by_batch[batch], cpu.best_by_batch[batch]
            ratios.append({
                "batch_size": batch,
                "gpu_items_per_s": g.items_per_s, "cpu_items_per_s": c.items_per_s,
                "items_ratio": g.items_per_s / c.items_per_s
                if c.items_per_s else None,
                "gpu_p99_us": g.latency.p99, "cpu_p99_us": c.latency.p99,
                "p99_ratio": g.latency.p99 / c.latency.p99 if c.latency.p99 else None,
            })
    return Analysis(targets, slo, ratios, _verdict(targets, slo), _warnings(points), flops_per_image)
