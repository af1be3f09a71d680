"""PNG plots: throughput and latency vs batch size, latency-throughput curves, server breakdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from serve_bench.report._analysis import Analysis
from serve_bench.report._cells import Cell

__all__ = ["draw_plots"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        from serve_bench.errors import UserError

        raise UserError("plots need matplotlib: pip install 'serve-bench[report]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _log2_axis(ax: Any, batches: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches)
    ax.set_xticklabels([str(b) for b in batches])


def _bars(cells: list[Cell], which: str, scale: float = 1.0) -> list[list[float]]:
    """matplotlib's yerr: [[below...], [above...]] from the cells' ranges (CI or repeats)."""
    pairs = [getattr(c, which).error_bar(scale) for c in cells]
    return [[p[0] for p in pairs], [p[1] for p in pairs]]


def draw_plots(analysis: Analysis, out_dir: Path, model: str) -> dict[str, Path]:
    """Throughput by images in flight (client and server batching as separate curves), latency by batch,
    latency against throughput, and the server's breakdown; error bars are 95% CIs or the repeats' range."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    if not any(t.cells for t in analysis.targets):
        return paths

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ticks: set[int] = set()
    for target in analysis.targets:
        base = target.baseline.in_flight if target.baseline is not None else 1
        client = list(target.client_curve.values())
        if client:
            xs = [c.batch_size * max(base, 1) for c in client]
            ticks.update(xs)
            ax.errorbar(
                xs,
                [c.items_per_s.value for c in client],
                yerr=_bars(client, "items_per_s"),
                marker="o",
                capsize=3,
                label=f"{target.name}: client batching (batch B, {base} in flight)",
            )
        server = list(target.server_curve.values())
        if len(server) > 1:
            xs = [c.in_flight for c in server]
            ticks.update(xs)
            ax.errorbar(
                xs,
                [c.items_per_s.value for c in server],
                yerr=_bars(server, "items_per_s"),
                marker="s",
                linestyle="--",
                capsize=3,
                label=f"{target.name}: server batching (batch 1, C in flight)",
            )
    if ticks:
        _log2_axis(ax, sorted(ticks))
    ax.set_xlabel("images in flight (batch size × requests in flight)")
    ax.set_ylabel("throughput (images/s)")
    ax.set_title(f"{model}: throughput, client vs server batching")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths["throughput"] = out_dir / "throughput_vs_batch.png"
    fig.savefig(paths["throughput"], dpi=110)
    plt.close(fig)

    batches = sorted({b for t in analysis.targets for b in t.client_curve})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for target in analysis.targets:
        cells = list(target.client_curve.values())
        if not cells:
            continue
        xs = [c.batch_size for c in cells]
        ax.errorbar(
            xs,
            [c.p50_us.value / 1000 for c in cells],
            yerr=_bars(cells, "p50_us", 1e-3),
            marker="o",
            capsize=3,
            label=f"{target.name} p50",
        )
        ax.errorbar(
            xs,
            [c.p99_us.value / 1000 for c in cells],
            yerr=_bars(cells, "p99_us", 1e-3),
            marker="^",
            linestyle=":",
            capsize=3,
            label=f"{target.name} p99",
        )
    if batches:
        _log2_axis(ax, batches)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (images per request)")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title(f"{model}: latency vs batch size (baseline's requests in flight)")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths["latency"] = out_dir / "latency_vs_batch.png"
    fig.savefig(paths["latency"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for target in analysis.targets:
        cells = sorted((c for c in target.cells if c.usable), key=lambda c: c.items_per_s.value)
        if not cells:
            continue
        ax.errorbar(
            [c.items_per_s.value for c in cells],
            [c.p99_us.value / 1000 for c in cells],
            xerr=_bars(cells, "items_per_s"),
            yerr=_bars(cells, "p99_us", 1e-3),
            marker="o",
            capsize=2,
            linestyle="none",
            label=f"{target.name}",
        )
        for c in cells:
            ax.annotate(
                c.where,
                (c.items_per_s.value, c.p99_us.value / 1000),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    if analysis.slo is not None:
        ax.axhline(analysis.slo.max_ms, color="red", linestyle="--", linewidth=1, label=f"SLO {analysis.slo.label()}")
    ax.set_xlabel("throughput (images/s)")
    ax.set_ylabel("p99 latency (ms)")
    ax.set_title(f"{model}: latency-throughput, every point")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths["curve"] = out_dir / "latency_throughput.png"
    fig.savefig(paths["curve"], dpi=110)
    plt.close(fig)

    rows = [(t.name, b, c.point) for t in analysis.targets for b, c in t.best_by_batch.items()]
    views = [
        (name, batch, p.server)
        for name, batch, p in rows
        if p.server is not None and p.server.available and p.server.request_us_mean is not None
    ]
    if views:
        fig, ax = plt.subplots(figsize=(max(7, 0.5 * len(views) + 2), 4.5))
        labels = [f"{name}\nb{batch}" for name, batch, _ in views]
        queue = [(v.queue_us_mean or 0) / 1000 for _, _, v in views]
        compute = [(v.compute_us_mean or 0) / 1000 for _, _, v in views]
        overhead = [(v.overhead_us_mean or 0) / 1000 for _, _, v in views]
        # MLServer times its batching queue and the model together: one bar for both, not a zero queue
        unsplit = [
            (v.runtime_us_mean or 0) / 1000 if v.queue_us_mean is None and v.compute_us_mean is None else 0.0
            for _, _, v in views
        ]
        positions = range(len(views))
        ax.bar(positions, queue, label="queue (batching)")
        ax.bar(positions, compute, bottom=queue, label="compute (TensorFlow)")
        below = [q + c for q, c in zip(queue, compute)]
        if any(unsplit):
            ax.bar(positions, unsplit, bottom=below, label="queue + compute (not split by the server)")
            below = [b + u for b, u in zip(below, unsplit)]
        ax.bar(positions, overhead, bottom=below, label="overhead (parse, serialize)")
        ax.set_xticks(list(positions))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("server time per request (ms)")
        ax.set_title(f"{model}: server-side breakdown")
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths["breakdown"] = out_dir / "server_breakdown.png"
        fig.savefig(paths["breakdown"], dpi=110)
        plt.close(fig)
    return paths
