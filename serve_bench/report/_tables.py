"""summary.csv (perf_analyzer's column names where they apply), the terminal summary and the compare table."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from serve_bench.report._analysis import Analysis, TargetAnalysis
from serve_bench.report._cells import Cell
from serve_bench.report._decision import decide
from serve_bench.report._decision_table import COST_ENERGY_COLUMNS, cell_cost_energy, cost_energy_cells, decision_text
from serve_bench.report._terminal import Column, print_fitted
from serve_bench.stats import Point, format_ratio

__all__ = ["CSV_COLUMNS", "model_line", "print_comparison", "print_summary", "write_summary_csv"]

CSV_COLUMNS = [
    "Target", "Device", "Protocol", "Server", "Model", "Signature", "Payload", "Batch Size", "Mode", "Concurrency",
    "Request Rate", "Inferences/Second", "Requests/Second", "p50 latency", "p90 latency", "p95 latency",
    "p99 latency", "p99.9 latency", "Avg latency", "Max latency", "Uncorrected p99 latency", "Server Queue",
    "Server Compute Infer", "Server Overhead", "Server Batch Size", "Padding Share", "Errors", "Stable",
    "Client Limited", "Duration (s)", "Key",
    # serve-bench's own: the 95% intervals, the repeat, and every flag
    "Inferences/Second Low", "Inferences/Second High", "p50 latency Low", "p50 latency High", "p99 latency Low",
    "p99 latency High", "Repeat", "Flags",
    *COST_ENERGY_COLUMNS,  # issue 13: price per hour -> cost per million images; telemetry -> joules per image
]  # fmt: skip


def _cell(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _row(point: Point) -> list[str]:
    server = point.server if point.server is not None and point.server.available else None
    lat, sent = point.latency.due, point.latency.sent
    items_ci, p50_ci, p99_ci = point.throughput.items_per_s_ci, point.latency.p50_ci, point.latency.p99_ci
    return [
        point.target.name, point.target.device, point.target.protocol, point.target.server_kind, point.model,
        point.signature, point.payload, str(point.batch_size), point.load.mode,
        str(point.load.concurrency or ""), _cell(point.load.rate, 3) if point.load.rate else "",
        _cell(point.items_per_s, 2), _cell(point.throughput.requests_per_s, 2),
        *(_cell(lat.get(k), 0) for k in ("p50", "p90", "p95", "p99", "p99_9", "mean", "max")),
        _cell(sent.p99 if sent else None, 0),
        _cell(server.queue_us_mean if server else None, 0), _cell(server.compute_us_mean if server else None, 0),
        _cell(server.overhead_us_mean if server else None, 0),
        _cell(server.processed_batch_mean if server else None, 2),
        _cell(server.padding_share if server else None, 3), str(point.error_count),
        str(point.stability.stable).lower(), str(point.limited).lower(), _cell(point.duration_s, 2),
        point.key,
        _cell(items_ci.low if items_ci else None, 2), _cell(items_ci.high if items_ci else None, 2),
        _cell(p50_ci.low if p50_ci else None, 0), _cell(p50_ci.high if p50_ci else None, 0),
        _cell(p99_ci.low if p99_ci else None, 0), _cell(p99_ci.high if p99_ci else None, 0),
        str(point.repeat), "; ".join(point.flags()), *cost_energy_cells(point),
    ]  # fmt: skip


def write_summary_csv(points: list[Point], path: Path) -> Path:
    """One row per point (every repeat). Latencies in µs, as perf_analyzer writes them."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for point in points:
        writer.writerow(_row(point))
    path.write_text(buffer.getvalue())
    return path


def model_line(target: TargetAnalysis) -> str:
    """The latency model, its bound with the bound's range, and whether the measurements contradict it."""
    model = target.model
    if model is None:
        return ""
    bound = model.bound
    text = f"latency model {model.describe()}; gain bound (a+b)/b = {format_ratio(bound.value)}"
    if bound.low is not None and bound.high is not None:
        text += f" [{format_ratio(bound.low)}–{format_ratio(bound.high)}, {bound.basis}]"
    if target.model_contradicted and target.client_gain is not None:
        text += (
            f" — below the {target.client_gain.text()} measured ({target.client_gain.top.label}): "
            "the model does not describe this server, so its bound is not used"
        )
    return text


def _level(cell: Cell) -> str:
    return cell.points[0].load.describe()


def cell_rows(target: TargetAnalysis) -> list[list[str]]:
    """The per-target table: every measured cell, the baseline first."""
    rows = []
    for cell in target.cells:
        repeats = f" ×{len(cell.points)}" if len(cell.points) > 1 else ""
        role = "baseline" if cell is target.baseline else ""
        server = cell.point.server
        batch = (
            f"{server.processed_batch_mean:.1f}" if server and server.available and server.processed_batch_mean else ""
        )
        rows.append(
            [
                cell.label + repeats,
                role,
                str(cell.batch_size),
                _level(cell),
                cell.items_per_s.text(digits=1),
                cell.p50_us.text(scale=1e-3),
                cell.p99_us.text(scale=1e-3),
                f"{cell.p50_us.value / 1000 / cell.batch_size:.2f}",
                f"{target.gflops[cell.batch_size]:.1f}"
                if target.gflops and target.best_by_batch.get(cell.batch_size) is cell
                else "",
                batch,
                *cell_cost_energy(cell),
                ", ".join(cell.flags()),
            ]
        )
    return rows


# The per-target table's columns (cell_rows' order). In a narrow terminal the lowest-ranked go first;
# summary.csv and report.html keep them all.
CELL_TABLE = (
    Column("point", 0, justify="left"),
    Column("", 5, justify="left"),  # "baseline"
    Column("batch", 6),
    Column("load", 7, justify="left"),
    Column("images/s [95% CI]", 1),
    Column("p50 ms", 3),
    Column("p99 ms", 2),
    Column("ms/image (p50)", 9),
    Column("GFLOP/s", 10),
    Column("server batch", 8),
    Column("cost/M images", 11, wrap=True),
    Column("J/image", 12, wrap=True),
    Column("flags", 4, justify="left", wrap=True),
)
CELL_COLUMNS = tuple(c.header for c in CELL_TABLE)

_RATIO_TABLE = (
    Column("batch", 0),
    Column("GPU images/s", 2),
    Column("CPU images/s", 3),
    Column("images/s ratio", 1),
    Column("p99 ratio", 4),
)


def print_summary(analysis: Analysis, console: Any | None = None) -> None:
    """The terminal summary: decision, a table per target, GPU/CPU ratios, verdict and warnings, in the
    console's width (its narrowest columns dropped first, never a cell cut; see _terminal.py)."""
    from rich.console import Console

    out = console if console is not None else Console()
    decision_text(decide(analysis), out)  # the deployer's answer first (issue 13)
    for target in analysis.targets:
        title = f"{target.name} — {target.device}, {target.protocol}, {target.server_kind}"
        print_fitted(out, title, CELL_TABLE, cell_rows(target))
        if target.model is not None:
            out.print(f"  {model_line(target)}")
    if analysis.device_ratios:
        rows = [
            [
                str(pair.batch_size),
                pair.gpu.items_per_s.text(),
                pair.cpu.items_per_s.text(),
                format_ratio(pair.items_ratio.value),
                format_ratio(pair.p99_ratio.value),
            ]
            for pair in analysis.device_ratios
        ]
        print_fitted(out, "GPU / CPU (each device's best point at the batch size)", _RATIO_TABLE, rows)
    out.print("[bold]Verdict[/bold]")
    for line in analysis.verdict_lines:
        out.print(f"  • {line}")
    for warning in analysis.warnings[:20]:
        out.print(f"[yellow]warning:[/yellow] {warning}")
    if len(analysis.warnings) > 20:
        out.print(f"[yellow]and {len(analysis.warnings) - 20} more warnings in report.html[/yellow]")


_COMPARE_TABLE = (
    Column("configuration", 0, justify="left", wrap=True),
    Column("A target", 9, wrap=True),
    Column("B target", 10, wrap=True),
    Column("A images/s", 3),
    Column("B images/s", 4),
    Column("B/A images/s", 1),
    Column("A p99 ms", 5),
    Column("B p99 ms", 6),
    Column("B/A p99", 2),
    Column("B/A cost/image", 7),
    Column("B/A J/image", 8),
)


def print_comparison(result: Any, title: str, console: Any | None = None) -> None:
    """The table `serve-bench compare` prints: B over A per matching point (result: report.Comparison)."""
    from rich.console import Console

    out = console if console is not None else Console()
    rows = []
    for row in result.rows:
        a, b = row["a"], row["b"]
        rows.append(
            [
                row["config"],
                f"{a.target.name} ({a.target.server_kind})",
                f"{b.target.name} ({b.target.server_kind})",
                f"{a.items_per_s:.1f}",
                f"{b.items_per_s:.1f}",
                format_ratio(row["items_ratio"]),
                f"{a.latency.p99 / 1000:.1f}",
                f"{b.latency.p99 / 1000:.1f}",
                format_ratio(row["p99_ratio"]),
                format_ratio(row.get("cost_ratio")),
                format_ratio(row.get("joules_ratio")),
            ]
        )
    print_fitted(out, title, _COMPARE_TABLE, rows, elsewhere="a wider terminal (COLUMNS=200)")
    for difference in result.differences:
        out.print(f"[yellow]measured differently:[/yellow] {difference}")
    if result.only_a or result.only_b:
        out.print(f"unmatched: {len(result.only_a)} points only in A, {len(result.only_b)} only in B")
