"""The deployer's decision: per device, the best configuration under the SLO, what it costs and what it burns.

One row per device (``cpu``, ``gpu``, …): its best cell under the SLO (the best measured
when no SLO was given), images/s, p99, cost per million images, joules per image, and
mean watts beside idle watts; then GPU/CPU ratios of each figure, and a three-sentence
verdict on cost, energy and latency saying how much batching contributed to each
(the device's best cell over its batch-1 baseline, both named).

Every figure carries its uncertainty (an ``Estimate``) or says why it is missing:
cost needs ``price_per_hour`` on the target ("no price given"); energy needs a
telemetry source that measured it ("not measured: …", with the telemetry's own reason).

    cost per million images = price_per_hour / 3600 / images_per_s × 1e6
    joules per image        = mean watts over the point / images_per_s (EnergyView.joules_per_item)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from serve_bench.report._analysis import Analysis, TargetAnalysis, like_for_like
from serve_bench.report._cells import Cell
from serve_bench.stats import NOT_MEASURED, Estimate, Point, Slo, format_ratio, ratio, ratio_text

__all__ = [
    "NO_PRICE",
    "Batching",
    "Decision",
    "DecisionRow",
    "Ratios",
    "cost_energy_ratios",
    "cost_estimate",
    "cost_per_million",
    "decide",
    "format_figure",
    "idle_watts",
    "joules_estimate",
    "with_range",
]

NO_PRICE = "no price given"
_NO_TELEMETRY = "no telemetry"
_DEVICE_ORDER = {"gpu": 0, "cpu": 1}


def cost_per_million(price_per_hour: float, items_per_s: float) -> float | None:
    """What a million images cost at ``items_per_s`` on a machine priced ``price_per_hour`` (None at 0 images/s)."""
    if not items_per_s > 0:
        return None
    return price_per_hour / 3600.0 / items_per_s * 1e6


def cost_estimate(price_per_hour: float, items_per_s: Estimate) -> Estimate | None:
    """Cost per million images with the range that the images/s range implies (the price is exact)."""
    value = cost_per_million(price_per_hour, items_per_s.value)
    if value is None:
        return None
    low = cost_per_million(price_per_hour, items_per_s.high) if items_per_s.high is not None else None
    high = cost_per_million(price_per_hour, items_per_s.low) if items_per_s.low is not None else None
    if low is None or high is None:
        return Estimate(value)
    return Estimate(value, low, high, items_per_s.basis)


def _energy_why(point: Point) -> str:
    """Why a point has no joules per image, in the telemetry's own words."""
    if point.energy is None:
        return _NO_TELEMETRY
    notes = [n for n in point.energy.notes if n.startswith(NOT_MEASURED)] or list(point.energy.notes)
    return notes[0] if notes else NOT_MEASURED


def joules_estimate(cell: Cell) -> tuple[Estimate | None, str]:
    """(joules per image, why not) of a cell.

    One measurement: mean watts / images/s, its range from the images/s interval (the
    energy counter's difference is exact to its resolution). Repeats: the median and
    the range of the repeats' own joules per image. (None, reason) when not measured.
    """
    values = []
    for point in cell.measured:
        value = point.energy.joules_per_item(point.items_per_s) if point.energy is not None else None
        if value is None:
            return None, _energy_why(point)
        values.append(value)
    if len(values) > 1:
        ordered = sorted(values)
        mid = len(ordered) // 2
        median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        return Estimate(median, ordered[0], ordered[-1], f"range of {len(values)} repeats"), ""
    point = cell.measured[0]
    assert point.energy is not None
    watts = point.energy.watts()
    assert watts is not None
    items = cell.items_per_s
    if items.low is not None and items.high is not None and items.low > 0:
        return Estimate(values[0], watts / items.high, watts / items.low, items.basis), ""
    return Estimate(values[0]), ""


def _scope(point: Point) -> str:
    """Which devices' energy the joules count: "GPU+CPU", "GPU" or "CPU"."""
    energy = point.energy
    if energy is None:
        return ""
    parts = [d.upper() for d in ("gpu", "cpu") if getattr(energy, f"{d}_watts_mean") is not None]
    return "+".join(parts)


@dataclass(frozen=True)
class Batching:
    """What batching did on one device: its best cell over its batch-1 baseline (ratios best / baseline)."""

    best: Cell
    baseline: Cell
    items: Estimate  # images/s: > 1 means batching helped
    cost: Estimate | None  # cost per image: 1 / items (the price is the same)
    joules: Estimate | None  # joules per image
    p99: Estimate  # p99 latency: > 1 means batching made it slower

    @property
    def same(self) -> bool:
        return self.best is self.baseline


@dataclass(frozen=True)
class DecisionRow:
    """One device's best configuration and its figures (None with a reason where not known)."""

    device: str
    target: TargetAnalysis | None
    cell: Cell | None
    why_none: str  # when cell is None: e.g. "no point meets p99 ≤ 100 ms"
    items_per_s: Estimate | None
    p99_us: Estimate | None
    price_per_hour: float | None
    currency: str
    cost_per_million: Estimate | None
    joules_per_image: Estimate | None
    energy_why: str  # why joules_per_image is None
    energy_scope: str  # "GPU+CPU", "GPU", "CPU"
    watts: float | None
    idle_watts: float | None
    batching: Batching | None

    @property
    def configuration(self) -> str:
        if self.cell is None:
            return self.why_none
        point = self.cell.point
        text = f"{self.cell.label} {point.target.protocol}"
        if point.server_config:
            text += " " + ", ".join(f"{k}={v}" for k, v in point.server_config)
        return text

    def cost_text(self) -> str:
        if self.cell is None:
            return ""
        if self.cost_per_million is None:
            return NO_PRICE if self.price_per_hour is None else "not measured (no images/s)"
        return with_range(self.cost_per_million, f" {self.currency}".rstrip())

    def joules_text(self) -> str:
        if self.cell is None:
            return ""
        if self.joules_per_image is None:
            # the telemetry's own words go to the notes under the table (one per reason, not per cell)
            return f"not measured ({self.energy_why})" if self.energy_why == _NO_TELEMETRY else "not measured"
        return with_range(self.joules_per_image, " J") + f" ({self.energy_scope})"

    @property
    def energy_short(self) -> str:
        """Why energy is missing, in a few words: no telemetry asked for, or see the telemetry notes."""
        return self.energy_why if self.energy_why == _NO_TELEMETRY else "why: telemetry notes"

    def watts_text(self) -> str:
        if self.watts is None:
            return "not measured" if self.cell is not None else ""
        idle = f" (idle {format_figure(self.idle_watts)} W)" if self.idle_watts is not None else " (idle not measured)"
        return f"{format_figure(self.watts)} W{idle}"


@dataclass(frozen=True)
class Ratios:
    """GPU over CPU for each figure of the decision table (None: one side not known)."""

    gpu: DecisionRow
    cpu: DecisionRow
    items: Estimate | None
    p99: Estimate | None
    cost: Estimate | None
    cost_why: str
    joules: Estimate | None
    joules_why: str


@dataclass(frozen=True)
class Decision:
    rows: tuple[DecisionRow, ...]
    ratios: Ratios | None
    verdict: tuple[str, ...]
    notes: tuple[str, ...]  # telemetry notes (unavailable endpoints, counter wraps/resets), with the points
    slo: Slo | None


def format_figure(value: float) -> str:
    """Three significant figures, without exponent for the usual range (0.00123 … 123456)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


def with_range(estimate: Estimate, unit: str) -> str:
    text = f"{format_figure(estimate.value)}{unit}"
    if estimate.low is not None and estimate.high is not None:
        text += f" [{format_figure(estimate.low)}–{format_figure(estimate.high)}]"
    return text


def _pick(targets: list[TargetAnalysis], slo: Slo | None) -> tuple[TargetAnalysis | None, Cell | None]:
    """The device's best cell under the SLO (or the best measured without one), over all its targets."""
    best: tuple[TargetAnalysis | None, Cell | None] = (None, None)
    for target in targets:
        cell = target.best_under_slo if slo is not None else target.best
        if cell is not None and (best[1] is None or cell.items_per_s.value > best[1].items_per_s.value):
            best = (target, cell)
    return best


def _row(device: str, targets: list[TargetAnalysis], slo: Slo | None) -> DecisionRow:
    target, cell = _pick(targets, slo)
    if target is None or cell is None:
        why = f"no point meets {slo.label()}" if slo is not None else "no usable point"
        return DecisionRow(device, None, None, why, None, None, None, "", None, None, "", "", None, None, None)
    point = cell.point
    price, currency = point.target.price_per_hour, point.target.currency
    cost = cost_estimate(price, cell.items_per_s) if price is not None else None
    joules, why = joules_estimate(cell)
    energy = point.energy
    watts = energy.watts() if energy is not None else None
    idle = idle_watts(point)
    baseline = target.baseline
    batching = None
    if baseline is not None and baseline.items_per_s.value > 0:
        base_joules, _ = joules_estimate(baseline)
        items = ratio(cell.items_per_s, baseline.items_per_s)
        batching = Batching(
            cell,
            baseline,
            items,
            ratio(baseline.items_per_s, cell.items_per_s) if price is not None else None,
            ratio(joules, base_joules) if joules is not None and base_joules is not None else None,
            ratio(cell.p99_us, baseline.p99_us),
        )
    return DecisionRow(
        device,
        target,
        cell,
        "",
        cell.items_per_s,
        cell.p99_us,
        price,
        currency,
        cost,
        joules,
        why,
        _scope(point),
        watts,
        idle,
        batching,
    )


def idle_watts(point: Point) -> float | None:
    """Idle watts of the devices whose watts the point measured (None when any idle figure is missing)."""
    energy = point.energy
    if energy is None or energy.watts() is None:
        return None
    total = energy.watts()
    above = energy.watts(above_idle=True)
    return None if total is None or above is None else total - above


def _ratios(gpu: DecisionRow, cpu: DecisionRow) -> Ratios:
    items = p99 = cost = joules = None
    cost_why = joules_why = ""
    if gpu.items_per_s is not None and cpu.items_per_s is not None:
        items = ratio(gpu.items_per_s, cpu.items_per_s)
    if gpu.p99_us is not None and cpu.p99_us is not None:
        p99 = ratio(gpu.p99_us, cpu.p99_us)
    if gpu.cost_per_million is not None and cpu.cost_per_million is not None:
        if gpu.currency == cpu.currency:
            cost = ratio(gpu.cost_per_million, cpu.cost_per_million)
        else:
            cost_why = f"prices in different currencies ({gpu.currency or '?'} and {cpu.currency or '?'})"
    else:
        unpriced = [r.device for r in (gpu, cpu) if r.cost_per_million is None]
        cost_why = f"{NO_PRICE} for {' and '.join(unpriced)}"
    if gpu.joules_per_image is not None and cpu.joules_per_image is not None:
        joules = ratio(gpu.joules_per_image, cpu.joules_per_image)
    else:  # which side, as the cost's cell says which has no price (the verdict adds why, from each row)
        joules_why = "not measured on " + " and ".join(r.device for r in (gpu, cpu) if r.joules_per_image is None)
    return Ratios(gpu, cpu, items, p99, cost, cost_why, joules, joules_why)


def _clear(estimate: Estimate) -> str:
    """ "lower"/"higher" when the ratio's whole range lies on one side of 1, else "" (no clear winner)."""
    low = estimate.low if estimate.low is not None else estimate.value
    high = estimate.high if estimate.high is not None else estimate.value
    if high < 1:
        return "lower"
    if low > 1:
        return "higher"
    return ""


def _batching_phrase(rows: Iterable[DecisionRow], figure: str) -> str:
    """``batching cut it 6.10× on gpu (gpu b32 c1 vs gpu b1 c1) and 1.67× on cpu (…)``: the factor by
    which each device's best cell changed ``figure`` against its batch-1 baseline ("left it unchanged"
    where that factor prints as 1.00×)."""
    parts: list[str] = []
    said = ""  # the verb last said: repeated only when it changes
    for row in rows:
        b = row.batching
        if b is None:
            continue
        if b.same:
            parts.append(f"batching did not help on {row.device} (its best is its batch-1 baseline {b.baseline.label})")
            said = ""
            continue
        est = {"cost": b.cost, "joules": b.joules, "p99": b.p99}[figure]
        if est is None or not est.value > 0:
            continue
        size = est.value if est.value > 1 else 1 / est.value
        what = "p99" if figure == "p99" else "it"
        detail = f"{b.best.label} vs {b.baseline.label}"
        if figure == "p99":
            before, after = b.baseline.p99_us.value / 1000, b.best.p99_us.value / 1000
            detail = f"{format_figure(before)} → {format_figure(after)} ms, {detail}"
        if format_ratio(size) == format_ratio(1.0):  # a factor that prints as 1.00× moved nothing a reader sees
            parts.append(f"batching left {what} unchanged on {row.device} ({detail})")
            said = ""
            continue
        verb = "raised" if est.value > 1 else "cut"
        lead = f"batching {verb} {what} " if verb != said else ""
        said = verb
        parts.append(f"{lead}{format_ratio(size)} on {row.device} ({detail})")
    return " and ".join(parts)


def _sentence(subject: str, winner: str, detail: str, batching: str) -> str:
    text = f"{subject}: {winner} ({detail})"
    return text + (f"; {batching}." if batching else ".")


def _verdict(rows: tuple[DecisionRow, ...], ratios: Ratios | None, slo: Slo | None) -> tuple[str, ...]:
    measured = [r for r in rows if r.cell is not None]
    if not measured:
        return (f"No device has a usable point{f' within {slo.label()}' if slo else ''}: nothing to decide.",)
    if ratios is None:
        row = measured[0]
        others = ", ".join(r.device for r in rows if r.cell is None)
        missing = f"no usable point on {others}" if others else "only one device in this run"
        assert row.items_per_s is not None and row.p99_us is not None
        figures = [
            f"{format_figure(row.items_per_s.value)} images/s",
            f"p99 {format_figure(row.p99_us.value / 1000)} ms",
        ]
        figures.append(f"{row.cost_text()} per million images" if row.cost_per_million else NO_PRICE)
        figures.append(
            f"{row.joules_text()} per image" if row.joules_per_image else f"energy not measured ({row.energy_short})"
        )
        return (f"Only {row.device} can be judged ({missing}): {row.configuration}: {', '.join(figures)}.",)
    gpu, cpu = ratios.gpu, ratios.cpu
    lines = []
    if ratios.cost is not None:
        side = _clear(ratios.cost)
        winner = {"lower": "GPU is cheaper", "higher": "CPU is cheaper"}.get(side, "no clear winner within the ranges")
        detail = f"{gpu.cost_text()} vs {cpu.cost_text()} per million images, GPU/CPU {ratio_text(ratios.cost)}"
    else:
        winner, detail = "not compared", ratios.cost_why
    lines.append(_sentence("Cost", winner, detail, _batching_phrase((gpu, cpu), "cost")))
    if ratios.joules is not None:
        side = _clear(ratios.joules)
        winner = {"lower": "GPU uses less energy", "higher": "CPU uses less energy"}.get(
            side, "no clear winner within the ranges"
        )
        detail = f"{gpu.joules_text()} vs {cpu.joules_text()} per image, GPU/CPU {ratio_text(ratios.joules)}"
        if "CPU" in cpu.energy_scope and "CPU" not in gpu.energy_scope:
            detail += "; the gpu figure leaves out its host's CPU (add a node exporter to its telemetry)"
    else:
        gone = [f"{r.device} ({r.energy_short})" for r in (gpu, cpu) if r.joules_per_image is None]
        winner, detail = "not compared", "not measured on " + " and ".join(gone)
    lines.append(_sentence("Energy", winner, detail, _batching_phrase((gpu, cpu), "joules")))
    if ratios.p99 is not None:
        side = _clear(ratios.p99)
        winner = {"lower": "GPU answers faster", "higher": "CPU answers faster"}.get(
            side, "no clear winner within the ranges"
        )
        assert gpu.p99_us is not None and cpu.p99_us is not None
        detail = (
            f"p99 {format_figure(gpu.p99_us.value / 1000)} vs {format_figure(cpu.p99_us.value / 1000)} ms "
            f"at their best{f' within {slo.label()}' if slo else ''}, GPU/CPU {ratio_text(ratios.p99)}"
        )
        lines.append(_sentence("Latency", winner, detail, _batching_phrase((gpu, cpu), "p99")))
    return tuple(lines)


def _servers_verdict(rows: tuple[DecisionRow, ...], slo: Slo | None) -> tuple[str, ...]:
    """Servers on one device side by side: who serves most images/s, each one's batching gain, latency."""
    within = f" within {slo.label()}" if slo else ""
    measured = sorted(
        (r for r in rows if r.cell is not None and r.items_per_s is not None),
        key=lambda r: -(r.items_per_s.value if r.items_per_s else 0.0),
    )
    if not measured:
        return (f"No server has a usable point{within}: nothing to compare.",)
    lead = measured[0]
    assert lead.items_per_s is not None
    lines = []
    others = []
    for row in measured[1:]:
        assert row.items_per_s is not None
        r = ratio(row.items_per_s, lead.items_per_s)
        clear = "" if _clear(r) == "lower" else ", within the noise"
        others.append(f"{row.device} {ratio_text(r)} of it{clear}")
    missing = [f"{r.device} ({r.why_none})" for r in rows if r.cell is None]
    text = (
        f"Servers{within}: {lead.device} serves the most, {format_figure(lead.items_per_s.value)} images/s "
        f"({lead.configuration})"
    )
    if others:
        text += "; " + "; ".join(others)
    if missing:
        text += "; no usable point on " + ", ".join(missing)
    lines.append(text + ".")
    gains = []
    for row in measured:
        b = row.batching
        if b is None:
            gains.append(f"{row.device}: no batch-1 baseline")
        elif b.same:
            gains.append(f"{row.device}: none (its best is its batch-1 baseline {b.baseline.label})")
        else:
            gains.append(f"{row.device} {ratio_text(b.items)} ({b.best.label} vs {b.baseline.label})")
    lines.append("Batching gain, each server's best over its own batch-1 baseline: " + "; ".join(gains) + ".")
    latencies = [f"{r.device} {format_figure(r.p99_us.value / 1000)} ms" for r in measured if r.p99_us is not None]
    lines.append(f"p99 at each server's best{within}: " + ", ".join(latencies) + ".")
    return tuple(lines)


def _notes(points: Iterable[Point]) -> tuple[str, ...]:
    """Each telemetry note once, with the points it was written for (wraps, resets, endpoints down)."""
    where: dict[str, list[str]] = defaultdict(list)
    for point in points:
        if point.energy is None:
            continue
        for note in point.energy.notes:
            where[note].append(f"{point.target.name} b{point.batch_size} {point.load.level()}")
    lines = []
    for note, labels in where.items():
        unique = list(dict.fromkeys(labels))
        shown = ", ".join(unique[:4]) + (f" and {len(unique) - 4} more" if len(unique) > 4 else "")
        lines.append(f"{note} ({len(labels)} point{'s' if len(labels) != 1 else ''}: {shown})")
    return tuple(lines)


def decide(analysis: Analysis, points: Iterable[Point] | None = None) -> Decision:
    """The decision table of an analysed run; ``points`` (default: every point of the analysis' cells)
    are where the telemetry notes are gathered from."""
    # Servers of several kinds on one device (local, Triton, MLServer): compare the servers as devices are
    like = like_for_like(analysis.targets)  # one payload's series: a GPU's JPEG rows are not set against float ones
    by_server = len({t.server_kind for t in like}) > 1 and len({t.device for t in like}) == 1
    by_device: dict[str, list[TargetAnalysis]] = defaultdict(list)
    for target in like:
        by_device[f"{target.server_kind} ({target.device})" if by_server else target.device].append(target)
    devices = sorted(by_device, key=lambda d: (_DEVICE_ORDER.get(d, 2), d))
    rows = tuple(_row(device, by_device[device], analysis.slo) for device in devices)
    named = {r.device: r for r in rows}
    ratios = None
    if "gpu" in named and "cpu" in named and named["gpu"].cell is not None and named["cpu"].cell is not None:
        ratios = _ratios(named["gpu"], named["cpu"])
    if points is None:
        points = [p for t in analysis.targets for c in t.cells for p in c.points]
    verdict = _servers_verdict(rows, analysis.slo) if by_server else _verdict(rows, ratios, analysis.slo)
    return Decision(rows, ratios, verdict, _notes(points), analysis.slo)


def cost_energy_ratios(a: Point, b: Point) -> dict[str, float | None]:
    """B over A per image, for `compare`: ``cost_ratio`` (both priced, same currency) and
    ``joules_ratio`` (both measured); None where a side lacks the figure."""
    cost_a, cost_b = (
        cost_per_million(p.target.price_per_hour, p.items_per_s) if p.target.price_per_hour is not None else None
        for p in (a, b)
    )
    same_unit = a.target.currency == b.target.currency
    joules_a, joules_b = (p.energy.joules_per_item(p.items_per_s) if p.energy is not None else None for p in (a, b))
    return {
        "cost_ratio": cost_b / cost_a if cost_a and cost_b is not None and same_unit else None,
        "joules_ratio": joules_b / joules_a if joules_a and joules_b is not None else None,
    }
