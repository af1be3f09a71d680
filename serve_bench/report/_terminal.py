"""Tables for a terminal of any width: the columns that fit, every cell whole.

rich squeezes a table wider than the terminal by cutting cells to an ellipsis ("lo…", "ba…"),
and a pipe or a log is 80 columns unless ``COLUMNS`` says otherwise. ``print_fitted`` instead
keeps the columns that fit whole, most important first, and names the ones left out (the full
table is in summary.csv and report.html); when not even the first two fit, each row becomes a
line of "header value" pairs, which the console wraps at spaces: so too when the three first-ranked
columns do not fit side by side, as a table without its main figures says little.

``print_predictions`` is ``serve-bench predict``'s printout, beside report's and compare's. report shows
predictions it is given and never fits: it reads them through the protocols below (what a prediction
shows), so it imports nothing of predict; predict's types fit them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Column", "CpuShown", "GraphShown", "PredictionShown", "fit_columns", "print_fitted", "print_predictions"]

# Figures per row when rows are printed as lines.
_LINE_FIGURES = 4
# Light rules, no outer frame: three characters between columns and none at the edges.
_STYLE: dict[str, Any] = {"show_edge": False, "pad_edge": False}


@dataclass(frozen=True)
class Column:
    """One column: its header, its rank (0 first kept), and whether its cells may wrap at spaces.

    Figures (``wrap=False``) are never split; words (a configuration, flags) may wrap onto
    a second line of their cell. A header always may.
    """

    header: str
    rank: int
    justify: str = "right"
    wrap: bool = False


def _longest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def _needs(column: Column, cells: Sequence[str]) -> tuple[int, int, int]:
    """Widths: the narrowest that keeps every cell whole, one that puts every cell on one line, and one
    that puts the header on one line too."""
    fit = max((_longest_word(c) if column.wrap else len(c) for c in cells), default=0)
    one_line = max((len(c) for c in cells), default=0)
    narrowest = max(fit, _longest_word(column.header), 1)
    return narrowest, max(one_line, narrowest), max(one_line, len(column.header), narrowest)


def _table(title: str | None, columns: Sequence[Column], widths: Sequence[int]) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, **_STYLE)
    for column, width in zip(columns, widths):
        # overflow "fold" only as a guard: the widths below leave room for every cell
        table.add_column(column.header, justify=column.justify, width=width, overflow="fold")  # type: ignore[arg-type]
    return table


def _overhead(console: Any, count: int) -> int:
    """Characters the table's rules and padding take beside ``count`` columns."""
    from rich.measure import Measurement

    table = _table(None, [Column("", 0)] * count, [1] * count)
    table.add_row(*["x"] * count)
    return int(Measurement.get(console, console.options, table).maximum) - count


def fit_columns(
    console: Any, columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, keep: int = 3
) -> list[tuple[int, int]] | None:
    """The columns to show within ``width`` as (index, width), in table order; None when the ``keep``
    first-ranked do not fit side by side. Columns with no text in any row are left out."""
    needs = [_needs(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    used = [i for i in range(len(columns)) if i == 0 or any(row[i].strip() for row in rows)]
    chosen: list[int] = []
    for i in sorted(used, key=lambda i: columns[i].rank):
        trial = [*chosen, i]
        if sum(needs[j][0] for j in trial) + _overhead(console, len(trial)) <= width:
            chosen = trial
        elif len(chosen) < keep:
            return None
    chosen.sort()
    widths = {i: needs[i][0] for i in chosen}
    spare = width - sum(widths.values()) - _overhead(console, len(chosen))
    for level in (1, 2):  # room left: put cells on one line, then headers, left to right
        for i in chosen:
            extra = min(spare, needs[i][level] - widths[i])
            widths[i] += extra
            spare -= extra
    return [(i, widths[i]) for i in chosen]


def print_fitted(
    console: Any,
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    elsewhere: str = "summary.csv and report.html",
) -> None:
    """Print ``rows`` under ``columns`` in the console's width with no cell cut; say what was left out and where
    it is (``elsewhere``)."""
    width = int(console.width)
    fitted = fit_columns(console, columns, rows, width)
    if fitted is None:  # a line per row: its first-ranked figures, "header value", wrapped at spaces
        console.print(title)
        ranked = sorted(range(1, len(columns)), key=lambda i: columns[i].rank)[:_LINE_FIGURES]
        for row in rows:
            figures = [f"{columns[i].header} {row[i]}".strip() for i in ranked if row[i].strip()]
            console.print(f"  {row[0]}: " + "; ".join(figures), overflow="fold")
        console.print(f"  (the other columns are in {elsewhere})")
        return
    shown = [i for i, _ in fitted]
    table = _table(title, [columns[i] for i in shown], [w for _, w in fitted])
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    console.print(table)
    left_out = [
        c.header or "role" for i, c in enumerate(columns) if i not in shown and any(row[i].strip() for row in rows)
    ]
    if left_out:
        console.print(f"  (not shown at {width} columns: {', '.join(left_out)}; all are in {elsewhere})")


# --- serve-bench predict ------------------------------------------------------------------------------------------


class _Fit(Protocol):
    def describe(self) -> str: ...


class _Lines(Protocol):
    def lines(self) -> list[str]: ...


class _Gpu(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def mem_gb(self) -> float: ...
    @property
    def price_per_hour_usd(self) -> float | None: ...


class GraphShown(Protocol):
    """What the printout says of the costed graph (predict's GraphCost)."""

    @property
    def flops_per_image(self) -> float: ...
    @property
    def weight_elements(self) -> float: ...
    @property
    def ops(self) -> Sized: ...
    @property
    def unknown(self) -> Sequence[str]: ...


class PredictionShown(Protocol):
    """What the printout says of one GPU's prediction (predict's Prediction)."""

    @property
    def device(self) -> _Gpu: ...
    @property
    def precision(self) -> str: ...
    @property
    def tables(self) -> str: ...
    @property
    def calibrated_on(self) -> Sequence[str]: ...
    @property
    def expected(self) -> _Lines | None: ...
    @property
    def fit(self) -> _Fit: ...
    @property
    def batch_sizes(self) -> Sequence[int]: ...
    @property
    def latency_s(self) -> Sequence[float]: ...
    @property
    def images_per_s(self) -> Sequence[float]: ...
    @property
    def gain(self) -> float: ...
    @property
    def saturating_batch(self) -> int: ...
    @property
    def largest_batch_that_fits(self) -> int: ...
    @property
    def usd_per_million_images(self) -> float | None: ...


class _CpuSpec(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def cores(self) -> int: ...
    @property
    def ghz(self) -> float: ...
    @property
    def vector_bits(self) -> int: ...
    @property
    def fma_units(self) -> int: ...
    @property
    def peak_gflops(self) -> float: ...
    @property
    def bw_gbs(self) -> float: ...
    @property
    def call_ms(self) -> float: ...


class _Efficiency(Protocol):
    @property
    def compute(self) -> float: ...
    @property
    def per_call_s(self) -> float: ...


class CpuShown(Protocol):
    """What the printout says of this CPU calibrated on a run (predict's CpuCalibration)."""

    @property
    def spec(self) -> _CpuSpec: ...
    @property
    def target(self) -> str: ...
    @property
    def calibrated_on(self) -> int: ...
    @property
    def efficiency(self) -> _Efficiency: ...
    @property
    def measured(self) -> Mapping[int, float]: ...
    @property
    def predicted(self) -> Mapping[int, float]: ...
    @property
    def median_error(self) -> float | None: ...


def print_predictions(
    model: str,
    cost: GraphShown,
    predictions: Sequence[PredictionShown],
    cpu: CpuShown | None = None,
    *,
    call_given: bool = False,
    call_source: str = "",
) -> None:
    """``serve-bench predict``'s printout, within 80 columns: the graph, this CPU against the run that calibrated
    it (``cpu``; ``call_given`` when --cpu gave its per-call cost, else ``call_source`` says where it came from),
    then each GPU's predicted curve with the error to expect."""
    print(
        f"{model}, predicted (not measured): {cost.flops_per_image / 1e9:.2f} GFLOPs, "
        f"{cost.weight_elements / 1e6:.1f} M weights, {len(cost.ops)} ops"
    )
    if predictions:
        print(f"  {predictions[0].fit.describe()}")  # the frozen fit these figures come from
    if cost.unknown:
        print(f"  ops it does not know, costed as copies: {', '.join(cost.unknown)}")
    if cpu is not None:
        _print_cpu(cpu, call_given, call_source)
    for p in predictions:
        _print_gpu(p, cpu)


def _print_cpu(cpu: CpuShown, call_given: bool, call_source: str) -> None:
    spec = cpu.spec
    print(f"\nthis CPU, calibrated on batch {cpu.calibrated_on} of {cpu.target} (measured in the run)")
    print(f"  {spec.name[:76]}")
    print(f"  {spec.cores} cores x {spec.ghz:.2f} GHz x {spec.vector_bits}-bit FMA x {spec.fma_units}")
    print(f"  = {spec.peak_gflops:.0f} GFLOP/s fp32 peak, {spec.bw_gbs:.0f} GB/s")
    used_ms = cpu.efficiency.per_call_s * 1e3
    if call_given:
        print(f"  per call {used_ms:g} ms (--cpu call_ms)")
    else:
        print(f"  per call {used_ms:.3g} ms ({call_source})")
        if used_ms < spec.call_ms:
            print(f"  (the shipped {spec.call_ms:g} ms held to half of batch {cpu.calibrated_on}'s time)")
    speed = cpu.efficiency.compute
    above = " (above 1: caches beat the copy's bandwidth)" if speed > 1 else ""
    print(f"  fitted speed: {speed:.2f}x that roofline{above}")
    print(f"  {'batch':>5} {'measured':>9} {'predicted':>9} {'error':>7}")
    for b, v in cpu.predicted.items():
        seen = cpu.measured.get(b)
        error = "calib." if b == cpu.calibrated_on else (f"{v / seen - 1:+.0%}" if seen else "")
        print(f"  {b:>5} {f'{seen:.1f}' if seen else '-':>9} {v:>9.1f} {error:>7}")
    if cpu.median_error is not None:
        print(f"  median error over the other measured batch sizes: {cpu.median_error:.0%}")


def _print_gpu(p: PredictionShown, cpu: CpuShown | None) -> None:
    print(f"\n{p.device.name}, {p.precision}, run by {p.tables}")
    print(f"  calibrated on published tables of: {' '.join(p.calibrated_on)}")
    for line in p.expected.lines() if p.expected is not None else []:
        print(f"  {line}")
    print(f"  {'batch':>5} {'latency ms':>10} {'images/s':>9}")
    for b, t, ips in zip(p.batch_sizes, p.latency_s, p.images_per_s):
        print(f"  {b:>5} {t * 1e3:>10.2f} {ips:>9.0f}")
    print(f"  batching gain {p.gain:.1f}x; throughput stops growing at batch {p.saturating_batch}")
    print(f"  largest batch that fits in {p.device.mem_gb:g} GB: at most {p.largest_batch_that_fits}")
    print("    (an upper bound: weights and the widest op's tensors only)")
    if p.usd_per_million_images is not None:
        print(f"  ${p.usd_per_million_images:.4f} per million images at ${p.device.price_per_hour_usd}/h")
    if cpu is not None:
        best = max(cpu.measured.values())
        print(f"  best images/s {max(p.images_per_s) / best:.0f}x this CPU's measured best ({best:.1f})")
