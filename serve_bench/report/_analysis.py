"""The answer from the points: batching gains, latency model, CPU vs GPU, best under the SLO.

Everything here is computed from the measured cells; each sentence of the verdict
names the cells (``gpu b64 c1``) its numbers come from, and those cells are rows
of the report's tables. Two kinds of batching are kept apart:

* client batching: B images per request, at the baseline's requests in flight;
* server batching: single-image requests at C in flight, batched by the server.

The baseline is batch 1 with the fewest requests in flight (one, when measured).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from serve_bench.report._cells import Cell, cells_of
from serve_bench.runtimes import DEFAULT_RUNTIME
from serve_bench.stats import Estimate, Point, Slo, format_ratio, ratio, ratio_text

__all__ = [
    "Analysis",
    "DeviceRatio",
    "Gain",
    "LatencyModel",
    "TargetAnalysis",
    "analyze_run",
    "fit_latency_model",
    "like_for_like",
]

_CURVE_MODES = ("closed", "locust", "stream")  # modes with a fixed number in flight


@dataclass(frozen=True)
class LatencyModel:
    """latency(B) ≈ a + b·B: a is the fixed cost per call, b the cost per item (µs).

    ``bound`` is the gain bound with its ±2 sigma range from the fit's residuals (no range
    with fewer than three batch sizes: a line through two points has no residuals).
    """

    a_us: float
    b_us: float
    r_squared: float
    points: int
    bound: Estimate  # the gain bound (a + b) / b with its range when the fit has one

    def latency_us(self, batch: float) -> float:
        return self.a_us + self.b_us * batch

    def items_per_s(self, batch: float, concurrency: int = 1) -> float:
        return concurrency * batch / (self.latency_us(batch) / 1e6)

    @property
    def gain_bound(self) -> float:
        """Throughput gain from batch 1 to an unbounded batch: (a + b) / b."""
        return self.bound.value

    def describe(self) -> str:
        return (
            f"{self.a_us / 1000:.2f} ms + {self.b_us / 1000:.3f} ms × batch (R² {self.r_squared:.3f}, "
            f"{self.points} batch sizes)"
        )


def fit_latency_model(batches: list[int], latencies_us: list[float]) -> LatencyModel | None:
    """Least squares on relative errors (weights 1/latency), so batch 1 counts as much as batch 64;
    a >= 0: a negative fixed cost is noise, so then the line goes through the origin. None with fewer
    than two batch sizes, or when latency does not grow with the batch (no per-image cost to fit)."""
    if len(set(batches)) < 2:
        return None
    x = np.asarray(batches, dtype=float)
    y = np.asarray(latencies_us, dtype=float)
    w2 = 1.0 / np.maximum(y, 1e-9) ** 2
    # The weighted normal equations by Cramer's rule, each sum over pairs of points (Lagrange's identity):
    # det = Σ wi·wj·(xj - xi)² > 0 as soon as two batch sizes differ, where sw·sxx - sx² can cancel to 0 (a
    # 0 µs latency weighs 1e18); and latencies exactly proportional to whole batch sizes give xj·yi - xi·yj = 0,
    # so a fixed cost of exactly 0, not ±1e-15, whose sign would pick the branch below.
    i, j = np.triu_indices(len(x), 1)
    wij, dx = w2[i] * w2[j], x[j] - x[i]
    det = float((wij * dx * dx).sum())
    a = float((wij * dx * (x[j] * y[i] - x[i] * y[j])).sum()) / det
    b = float((wij * dx * (y[j] - y[i])).sum()) / det
    sw, sx, sxx = float(w2.sum()), float((w2 * x).sum()), float((w2 * x * x).sum())
    through_origin = a < 0
    if through_origin:
        a, b = 0.0, float((w2 * x * y).sum()) / sxx
    # latency does not grow with the batch here: a per-image cost cannot be read from it. A slope of 0 (a flat
    # curve, or 1000/3000/1000 µs) comes out of the solve as ±1e-13 µs, a bound of 1e16×: under a billionth
    # of the latency across the batches measured is rounding, not a cost
    if b * x.max() <= 1e-9 * y.max():
        return None
    residuals = y - (a + b * x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residuals**2).sum()) / ss_tot  # ss_tot > 0: equal latencies returned None above
    gain = float((a + b) / b)
    bound = Estimate(gain)
    free = len(x) - (1 if through_origin else 2)
    if free > 0:  # b > 0 here: a flat or falling curve returned None above
        variance = float((w2 * residuals**2).sum()) / free
        if through_origin:
            bound = Estimate(gain, 1.0, 1.0, "±2 sigma of the fit")  # no fixed cost: batching cannot raise throughput
        else:
            cov = variance * np.array([[sxx, -sx], [-sx, sw]]) / det  # the normal matrix [[sw, sx], [sx, sxx]]⁻¹
            # delta method on g = 1 + a/b
            grad = np.array([1.0 / b, -a / b**2])
            sigma = math.sqrt(max(float(grad @ cov @ grad), 0.0))
            bound = Estimate(gain, max(1.0, gain - 2 * sigma), gain + 2 * sigma, "±2 sigma of the fit")
    return LatencyModel(float(a), float(b), r2, len(x), bound)


@dataclass(frozen=True)
class Gain:
    """items/s of ``top`` over items/s of ``base`` (two cells of the same target)."""

    ratio: Estimate
    top: Cell
    base: Cell

    def text(self) -> str:
        return ratio_text(self.ratio)


def _gain(top: Cell, base: Cell) -> Gain:
    return Gain(ratio(top.items_per_s, base.items_per_s), top, base)


@dataclass(frozen=True)
class TargetAnalysis:
    name: str
    device: str
    protocol: str
    server_kind: str
    cells: tuple[Cell, ...]  # every measured (batch, load), the baseline first
    baseline: Cell | None  # batch 1, fewest requests in flight
    client_curve: dict[int, Cell]  # batch -> cell at the baseline's requests in flight
    server_curve: dict[int, Cell]  # requests in flight -> batch-1 cell
    best_by_batch: dict[int, Cell]  # batch -> the cell with the most items/s (any load)
    model: LatencyModel | None  # fitted on the client curve's mean latency
    model_contradicted: bool  # the model's bound lies below the gain measured on the same curve
    client_gain: Gain | None  # best of the client curve over the baseline
    server_gain: Gain | None  # best of the server curve over the baseline
    best_under_slo: Cell | None
    slo_gain: Gain | None  # best under the SLO over the baseline (when the baseline meets it)
    gflops: dict[int, float] = field(default_factory=dict)  # batch -> achieved GFLOP/s of best_by_batch
    runtime: str = ""  # the software that ran the model (Target.runtime)
    payload: str = "float"  # what its requests carried (a target sent two is two series)

    @property
    def best(self) -> Cell | None:
        usable = [c for c in self.cells if c.usable]
        return max(usable, key=lambda c: c.items_per_s.value) if usable else None


@dataclass(frozen=True)
class DeviceRatio:
    """GPU over CPU at one batch size (each device's best cell at that batch)."""

    batch_size: int
    gpu: Cell
    cpu: Cell
    items_ratio: Estimate
    p99_ratio: Estimate


@dataclass(frozen=True)
class Analysis:
    targets: list[TargetAnalysis]
    slo: Slo | None
    device_ratios: list[DeviceRatio]
    verdict_lines: tuple[str, ...]
    warnings: list[str]
    flops_per_image: float | None

    @property
    def verdict(self) -> str:
        return " ".join(self.verdict_lines)


def _order(cell: Cell, baseline: Cell | None) -> tuple[object, ...]:
    mode_rank = {"closed": 0, "stream": 1, "locust": 2, "open": 3}.get(cell.mode, 4)
    rate = cell.points[0].load.rate or 0.0
    return (cell is not baseline, mode_rank, cell.batch_size, cell.in_flight, rate)


def _analyze_target(points: list[Point], slo: Slo | None, flops: float | None, name: str) -> TargetAnalysis:
    first = points[0]
    cells = cells_of(points, "" if name == first.target.name else name)
    usable = [c for c in cells if c.usable]
    curve_cells = [c for c in usable if c.mode in _CURVE_MODES]
    ones = [c for c in curve_cells if c.batch_size == 1]
    baseline = min(ones, key=lambda c: c.in_flight) if ones else None
    ordered = tuple(sorted(cells, key=lambda c: _order(c, baseline)))

    client_curve: dict[int, Cell] = {}
    server_curve: dict[int, Cell] = {}
    if baseline is not None:
        for cell in sorted(curve_cells, key=lambda c: c.batch_size):
            if cell.in_flight == baseline.in_flight and cell.mode == baseline.mode:
                client_curve.setdefault(cell.batch_size, cell)
        for cell in sorted(ones, key=lambda c: c.in_flight):
            if cell.mode == baseline.mode:
                server_curve.setdefault(cell.in_flight, cell)
    best: dict[int, Cell] = {}
    for cell in usable:
        current = best.get(cell.batch_size)
        if current is None or cell.items_per_s.value > current.items_per_s.value:
            best[cell.batch_size] = cell

    client_gain = server_gain = None
    if baseline is not None and baseline.items_per_s.value > 0:
        batched = [c for b, c in client_curve.items() if b > 1]
        if batched:
            client_gain = _gain(max(batched, key=lambda c: c.items_per_s.value), baseline)
        concurrent = [c for n, c in server_curve.items() if n > baseline.in_flight]
        if concurrent:
            server_gain = _gain(max(concurrent, key=lambda c: c.items_per_s.value), baseline)

    best_slo = slo_gain = None
    if slo is not None:
        meeting = [c for c in usable if all(slo.met_by(p) for p in c.points)]
        if meeting:
            best_slo = max(meeting, key=lambda c: c.items_per_s.value)
            if baseline is not None and baseline in meeting and baseline.items_per_s.value > 0:
                slo_gain = _gain(best_slo, baseline)

    model = fit_latency_model(list(client_curve), [c.point.latency.mean for c in client_curve.values()])
    # a bound below a gain measured on the same curve is not a bound: it is never stated as one
    contradicted = model is not None and client_gain is not None and client_gain.ratio.value > model.gain_bound
    gflops = {b: c.items_per_s.value * flops / 1e9 for b, c in best.items()} if flops else {}
    return TargetAnalysis(
        name,
        first.target.device,
        first.target.protocol,
        first.target.server_kind,
        ordered,
        baseline,
        client_curve,
        server_curve,
        dict(sorted(best.items())),
        model,
        contradicted,
        client_gain,
        server_gain,
        best_slo,
        slo_gain,
        gflops,
        first.target.runtime,
        first.payload,
    )


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


def _device_pick(targets: list[TargetAnalysis], device: str, runtime: str | None = None) -> TargetAnalysis | None:
    candidates = [
        t for t in targets if t.device == device and t.best is not None and (runtime is None or t.runtime == runtime)
    ]
    if not candidates:
        return None
    # gRPC first (the least client overhead): TF Serving's, then the Open Inference Protocol's (Triton, MLServer)
    grpc = [t for t in candidates if t.protocol == "grpc"]
    v2_grpc = [t for t in candidates if t.protocol == "v2-grpc"]
    return (grpc or v2_grpc or candidates)[0]


def _noise(gain: Gain) -> bool:
    """The gain's range holds 1: the difference is within the noise and is not called a gain."""
    r = gain.ratio
    return r.low is not None and r.high is not None and r.low <= 1.0 <= r.high


def _target_lines(target: TargetAnalysis, slo: Slo | None) -> list[str]:
    lines = []
    if target.client_gain is not None:
        g = target.client_gain
        what, where = f"{target.name}: batch {g.top.batch_size}", f"({g.top.label} vs {g.base.label})"
        if _noise(g):
            lines.append(f"{what} against batch 1: {g.text()} the images/s, within the noise {where}.")
        else:
            lines.append(f"{what} gives {g.text()} the images/s of batch 1 {where}.")
    if target.server_gain is not None:
        g = target.server_gain
        what = f"{target.name}: server batching of single images at {g.top.in_flight} in flight"
        where = f"({g.top.label} vs {g.base.label})"
        if _noise(g):
            lines.append(f"{what}: {g.text()} the images/s, within the noise {where}.")
        else:
            lines.append(f"{what} gives {g.text()} the images/s {where}.")
    if slo is not None:
        if target.best_under_slo is None:
            lines.append(f"{target.name}: no point meets {slo.label()}.")
        else:
            best = target.best_under_slo
            lines.append(
                f"{target.name}: within {slo.label()} the best is {best.label}: "
                f"{best.items_per_s.text(digits=1)} images/s."
            )
    return lines


def _batching_gain(target: TargetAnalysis) -> Gain | None:
    """The larger of a target's two batching gains (client batches, server batching), noise excluded."""
    gains = [g for g in (target.client_gain, target.server_gain) if g is not None and not _noise(g)]
    return max(gains, key=lambda g: g.ratio.value) if gains else None


def _overlap(a: Estimate, b: Estimate) -> bool:
    if None in (a.low, a.high, b.low, b.high):
        return False
    return bool(a.low <= b.high and b.low <= a.high)  # type: ignore[operator]


def _runtime_lines(targets: list[TargetAnalysis]) -> list[str]:
    """Per device with two runtimes or more: each runtime's best over TensorFlow's (or the first one's),
    and which lever moved throughput more, batching (on the baseline runtime) or the runtime."""
    lines = []
    for device in dict.fromkeys(t.device for t in targets):
        runtimes = list(dict.fromkeys(t.runtime for t in targets if t.device == device and t.runtime))
        if len(runtimes) < 2:
            continue
        base_runtime = DEFAULT_RUNTIME if DEFAULT_RUNTIME in runtimes else runtimes[0]
        picks = {r: _device_pick(targets, device, r) for r in runtimes}
        base = picks[base_runtime]
        if base is None or base.best is None or base.best.items_per_s.value <= 0:
            continue
        parts, switches = [], []
        for runtime, pick in picks.items():
            if runtime == base_runtime or pick is None or pick.best is None:
                continue
            gain = Gain(ratio(pick.best.items_per_s, base.best.items_per_s), pick.best, base.best)
            switches.append((runtime, gain))
            p99 = pick.best.p99_us.value / 1000
            rate = pick.best.items_per_s.value
            parts.append(f"{runtime} {gain.text()} ({pick.best.label}: {rate:.1f} images/s, p99 {p99:.1f} ms)")
        if not switches:
            continue
        lines.append(
            f"Runtimes on {device} at their best, over {base_runtime} ({base.best.label}: "
            f"{base.best.items_per_s.value:.1f} images/s, p99 {base.best.p99_us.value / 1000:.1f} ms): "
            + "; ".join(parts)
            + "."
        )
        runtime, switch = max(switches, key=lambda rg: rg[1].ratio.value)
        if switch.ratio.value <= 1.0 or _noise(switch):
            lines.append(f"Which lever on {device}: no runtime was faster than {base_runtime} beyond the noise.")
            continue
        batching = _batching_gain(base)
        by_runtime = f"the runtime ({runtime}, {switch.text()})"
        if batching is None:
            lever = f"batching gave {base_runtime} no gain beyond the noise (or none measured): {by_runtime} it is."
        else:
            by_batching = f"batching ({batching.text()} on {base_runtime})"
            if _overlap(batching.ratio, switch.ratio):
                lever = f"{by_batching} and {by_runtime} move it alike, within the noise; use both."
            # ranges apart, or none: alike as the reader sees them (2.004× and 1.996× both read 2.00×) is a tie
            elif format_ratio(batching.ratio.value) == format_ratio(switch.ratio.value):
                lever = f"{by_batching} and {by_runtime} move it alike; use both."
            elif batching.ratio.value > switch.ratio.value:
                lever = f"{by_batching} moved throughput more than {by_runtime}."
            else:
                lever = f"{by_runtime} moved throughput more than {by_batching}."
        lines.append(f"Which lever on {device}: {lever}")
    return lines


def like_for_like(targets: list[TargetAnalysis]) -> list[TargetAnalysis]:
    """The series a run's comparisons across devices, runtimes and servers set side by side: those of one payload
    (float where the run sent float), so that a GPU's JPEG rows are never set against a CPU's float ones."""
    payloads = [t.payload for t in targets]
    chosen = "float" if "float" in payloads else (payloads[0] if payloads else "")
    return [t for t in targets if t.payload == chosen]


def _verdict(targets: list[TargetAnalysis], slo: Slo | None) -> tuple[str, ...]:
    lines: list[str] = []
    for target in targets:
        lines += _target_lines(target, slo)
    like = like_for_like(targets)
    lines += _runtime_lines(like)
    gpu, cpu = _device_pick(like, "gpu"), _device_pick(like, "cpu")
    if gpu is not None and cpu is not None:
        within = ""
        best_g, best_c = gpu.best, cpu.best
        if slo is not None and gpu.best_under_slo is not None and cpu.best_under_slo is not None:
            best_g, best_c, within = gpu.best_under_slo, cpu.best_under_slo, f" within {slo.label()}"
        if best_g is not None and best_c is not None and best_c.items_per_s.value > 0:
            r = ratio(best_g.items_per_s, best_c.items_per_s)
            lines.append(
                f"GPU over CPU at their best{within}: {Gain(r, best_g, best_c).text()} "
                f"({best_g.label}: {best_g.items_per_s.value:.1f} images/s; "
                f"{best_c.label}: {best_c.items_per_s.value:.1f})."
            )
    elif targets and not any(t.device == "gpu" for t in targets):
        lines.append("No GPU target in this run.")
    if not any(t.client_gain or t.server_gain for t in targets):
        lines.append(
            "Not enough points for a batching gain: measure batch 1 and a larger batch (or more requests "
            "in flight) per target."
        )
    return tuple(lines)


def series_name(point: Point, payloads: set[str]) -> str:
    """The rows a point belongs to: its target's, or, where its target was sent more than one payload (a sweep's
    ``payloads = ["float", "jpeg"]``), its target's for that payload ("rest jpeg"): float pixels and JPEG bytes
    decoded in the server are two workloads, and a gain or a best taken across them compares the two. (The
    pipeline names its targets after their payload already.)"""
    return f"{point.target.name} {point.payload}" if len(payloads) > 1 else point.target.name


def analyze_run(points: list[Point], slo: Slo | None = None, flops_per_image: float | None = None) -> Analysis:
    payloads: dict[str, set[str]] = defaultdict(set)  # each target's
    for point in points:
        payloads[point.target.name].add(point.payload)
    by_target: dict[str, list[Point]] = defaultdict(list)
    for point in points:
        by_target[series_name(point, payloads[point.target.name])].append(point)
    targets = [_analyze_target(group, slo, flops_per_image, name) for name, group in by_target.items()]
    ratios = []
    like = like_for_like(targets)
    gpu, cpu = _device_pick(like, "gpu"), _device_pick(like, "cpu")
    if gpu is not None and cpu is not None:
        for batch in sorted(set(gpu.best_by_batch) & set(cpu.best_by_batch)):
            g, c = gpu.best_by_batch[batch], cpu.best_by_batch[batch]
            ratios.append(DeviceRatio(batch, g, c, ratio(g.items_per_s, c.items_per_s), ratio(g.p99_us, c.p99_us)))
    return Analysis(targets, slo, ratios, _verdict(targets, slo), _warnings(points), flops_per_image)
