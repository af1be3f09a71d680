"""PNG plots: throughput and latency vs batch size, latency-throughput curves, server breakdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from serve_bench.report._analysis import Analysis

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


def draw_plots(analysis: Analysis, out_dir: Path, model: str) -> dict[str, Path]:
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    batches = sorted({b for t in analysis.targets for b in t.best_by_batch})
    if not batches:
        return paths

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for target in analysis.targets:
        xs = list(target.best_by_batch)
        ax.plot(xs, [p.items_per_s for p in target.best_by_batch.values()], marker="o",
                label=f"{target.name} ({target.device}, {target.protocol})")
    _log2_axis(ax, batches)
    ax.set_xlabel("batch size (images per request)")
    ax.set_ylabel("throughput (images/s)")
    ax.set_title(f"{model}: throughput vs batch size")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    paths["throughput"] = out_dir / "throughput_vs_batch.png"
    fig.savefig(paths["throughput"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"p50": "-", "p90": "--", "p99": ":"}
    for target in analysis.targets:
        if not target.batch_curve:
            continue
        xs = list(target.batch_curve)
        for key, style in styles.items():
            ax.plot(xs, [p.latency.get(key) / 1000 for p in target.batch_curve.values()], style, marker="o",
                    label=f"{target.name} {key}")
    _log2_axis(ax, batches)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (images per request)")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title(f"{model}: latency percentiles vs batch size (lowest concurrency)")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths["latency"] = out_dir / "latency_vs_batch.png"
    fig.savefig(paths["latency"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for target in analysis.targets:
        points = sorted(target.best_by_batch.values(), key=lambda p: p.items_per_s)
        ax.plot([p.items_per_s for p in points], [p.latency.p99 / 1000 for p in points],
                marker="o", label=f"{target.name}")
        for p in points:
            ax.annotate(f"b{p.batch_size}", (p.items_per_s, p.latency.p99 / 1000),
                        fontsize=7, xytext=(3, 3), textcoords="offset points")
    if analysis.slo is not None:
        ax.axhline(analysis.slo.max_ms, color="red", linestyle="--", linewidth=1, label=f"SLO {analysis.slo.label()}")
    ax.set_xlabel("throughput (images/s)")
    ax.set_ylabel("p99 latency (ms)")
    ax.set_title(f"{model}: latency-throughput curve")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths["curve"] = out_dir / "latency_throughput.png"
    fig.savefig(paths["curve"], dpi=110)
    plt.close(fig)

    rows = [(t.name, b, p) for t in analysis.targets for b, p in t.best_by_batch.items()
            if p.server is not None and p.server.request_us_mean is not None]
    if rows:
        fig, ax = plt.subplots(figsize=(max(7, 0.5 * len(rows) + 2), 4.5))
        labels = [f"{name}\nb{batch}" for name, batch, _ in rows]
        queue = [(p.server.queue_us_mean or 0) / 1000 for _, _, p in rows if p.server]
        compute = [(p.server.compute_us_mean or 0) / 1000 for _, _, p in rows if p.server]
        overhead = [(p.server.overhead_us_mean or 0) / 1000 for _, _, p in rows if p.server]
        positions = range(len(rows))
        ax.bar(positions, queue, label="queue (batching)")
        ax.bar(positions, compute, bottom=queue, label="compute (TensorFlow)")
        ax.bar(positions, overhead, bottom=[q + c for q, c in zip(queue, compute)], label="overhead (parse, serialize)")
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
