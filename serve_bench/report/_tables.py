"""summary.csv (perf_analyzer's column names where they apply) and the terminal summary."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from serve_bench.report._analysis import Analysis, format_ratio
from serve_bench.stats import Point

__all__ = ["CSV_COLUMNS", "write_summary_csv", "print_summary"]

CSV_COLUMNS = [
    "Target", "Device", "Protocol", "Server", "Model", "Signature", "Payload", "Batch Size", "Mode", "Concurrency",
    "Request Rate", "Inferences/Second", "Requests/Second", "p50 latency", "p90 latency", "p95 latency",
    "p99 latency", "p99.9 latency", "Avg latency", "Max latency", "Uncorrected p99 latency", "Server Queue",
    "Server Compute Infer", "Server Overhead", "Server Batch Size", "Padding Share", "Errors", "Stable",
    "Client Limited", "Duration (s)", "Key",
]


def _cell(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _row(point: Point) -> list[str]:
    server, lat, sent = point.server, point.latency.due, point.latency.sent
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
    ]


def write_summary_csv(points: list[Point], path: Path) -> Path:
    """One row per point. Latencies in µs, as perf_analyzer writes them."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for point in points:
        writer.writerow(_row(point))
    path.write_text(buffer.getvalue())
    return path


def print_summary(analysis: Analysis, console: object | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    out = console if console is not None else Console()
    for target in analysis.targets:
        table = Table(title=f"{target.name} — {target.device}, {target.protocol}, {target.server_kind}")
        for column in ("batch", "concurrency", "images/s", "p50 ms", "p99 ms", "ms/image (p50)", "GFLOP/s", "flags"):
            table.add_column(column, justify="right")
        for batch, point in target.best_by_batch.items():
            lat = point.latency
            table.add_row(str(batch), point.load.level(),
                          f"{point.items_per_s:.1f}", f"{lat.p50 / 1000:.1f}",
                          f"{lat.p99 / 1000:.1f}", f"{lat.p50 / 1000 / batch:.2f}",
                          f"{target.gflops[batch]:.1f}" if batch in target.gflops else "",
                          ", ".join(point.flags()))
        out.print(table)
        if target.model is not None:
            m = target.model
            out.print(f"  latency model: {m.a_us / 1000:.2f} ms + {m.b_us / 1000:.3f} ms × batch "
                      f"(R² {m.r_squared:.3f}); gain bound (a+b)/b = {format_ratio(m.gain_bound)}")
        if target.best_under_slo is not None and analysis.slo is not None:
            best = target.best_under_slo
            level = f"concurrency {best.load.concurrency}" if best.load.mode != "open" else f"{best.load.rate:g} req/s"
            out.print(f"  best under {analysis.slo.label()}: batch {best.batch_size}, {level}: "
                      f"{best.items_per_s:.1f} images/s")
    if analysis.device_ratios:
        table = Table(title="GPU / CPU")
        for column in ("batch", "GPU images/s", "CPU images/s", "images/s ratio", "p99 ratio"):
            table.add_column(column, justify="right")
        for row in analysis.device_ratios:
            table.add_row(str(row["batch_size"]), f"{row['gpu_items_per_s']:.1f}", f"{row['cpu_items_per_s']:.1f}",
                          format_ratio(row["items_ratio"]), format_ratio(row["p99_ratio"]))
        out.print(table)
    out.print(f"[bold]Verdict:[/bold] {analysis.verdict}")
    for warning in analysis.warnings[:20]:
        out.print(f"[yellow]warning:[/yellow] {warning}")
    if len(analysis.warnings) > 20:
        out.print(f"[yellow]… and {len(analysis.warnings) - 20} more warnings in report.html[/yellow]")
