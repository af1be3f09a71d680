"""The tune section of report.html: a tune run's answer (answer.json) as tables and plots.

A tune run directory holds the usual points.jsonl plus answer.json (``serve-bench tune``): every
configuration's score, the Pareto front, the table of what each knob did and the gains over the
baselines, and the name of the winner's file (``best_file``: TF Serving's batching parameters, Triton's
config.pbtxt or MLServer's model-settings.json). The report shows them as written; it does not
recompute the answer.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from serve_bench.stats import (
    BEST_BATCHING_FILE,
    TUNE_ANSWER_FILE,
    Estimate,
    KnobRow,
    Point,
    Score,
    TuneAnswer,
)
from serve_bench.stats import read_tune_answer as _read_answer_file

__all__ = ["draw_tune_plots", "read_tune_answer", "tune_html"]


def read_tune_answer(run_dir: Path) -> TuneAnswer | None:
    """answer.json of a tune run, None for a sweep; a damaged file is a one-line error."""
    return _read_answer_file(run_dir / TUNE_ANSWER_FILE)


def _e(value: Any) -> str:
    return html.escape(str(value))


def _number(value: Estimate | float) -> str:
    """A figure with its interval, or a dash where none was measured (inf, NaN)."""
    figure = value if isinstance(value, Estimate) else Estimate(value)
    if not math.isfinite(figure.value):
        return "—"
    return figure.text()


def _score_row(score: Score, percentile: str, best: str) -> str:
    css = " class=baseline" if score.config == best else ""
    if score.failed:
        why = _e(score.failed)
        return f"<tr{css}><td class=l>{_e(score.config)}</td><td class=l colspan=4>did not start: {why}</td></tr>"
    return (
        f"<tr{css}><td class=l>{_e(score.config)}</td>"
        f"<td>{_number(score.items)}</td>"
        f"<td>{_number(score.latency)}</td>"
        f"<td class=l>{_e(score.load)}</td>"
        f"<td class=l>{'meets' if score.feasible else 'misses'} {_e(percentile)}</td></tr>"
    )


def _vs(row: KnobRow) -> str:
    return f"{row.vs_best_pct:+.1f}%" if row.feasible else "misses the SLO"


def _knob_table(answer: TuneAnswer, percentile: str) -> str:
    rows = "".join(
        f"<tr><td class=l>{_e(r.knob)}</td><td class=l>{_e(r.value)}</td><td>{r.configs}</td>"
        f"<td>{_number(r.items_per_s)}</td><td>{_number(r.latency_ms)}</td>"
        f"<td>{_vs(r)}</td>"
        f"<td class=l>{_e(r.best_config)}</td></tr>"
        for r in answer.knobs
    )
    if not rows:
        return "<p>Only one value of each knob was measured: nothing to compare.</p>"
    return (
        "<p>For each value of each knob, the best configuration measured with that value, and how far its "
        "objective is from the overall best. A knob whose values all come close to 0% did not matter here.</p>"
        f"<table><tr><th class=l>knob</th><th class=l>value</th><th>configurations</th><th>items/s</th>"
        f"<th>{_e(percentile)} ms</th><th>vs best</th><th class=l>best configuration with it</th></tr>{rows}</table>"
    )


def tune_html(answer: TuneAnswer, run_dir: Path, figures: str) -> str:
    """The section; ``figures`` is the markup of the tune plots, embedded by the caller."""
    percentile, max_ms = answer.percentile, answer.max_ms
    objective = (
        f"most items/s with {percentile} ≤ {max_ms:g} ms"
        if answer.mode == "throughput"
        else f"lowest {percentile} at the SLO's rate, {percentile} ≤ {max_ms:g} ms"
    )
    best, closest = answer.best, answer.closest
    if best:
        head = (
            f"Best configuration ({_e(objective)}): <b>{_e(best.config)}</b>, "
            f"{_e(best.items.text())} items/s, "
            f"{_e(percentile)} {best.latency_ms:.1f} ms at {_e(best.load)}."
        )
    elif closest and closest.failed:
        head = "No configuration was measured: every server start failed (the reasons are in the table below)."
    elif closest:
        head = f"No configuration meets {_e(percentile)} ≤ {max_ms:g} ms; the closest is <b>{_e(closest.config)}</b>."
    else:
        head = "No configuration was measured."
    gains = "".join(f"<li>vs {_e(g.baseline)}: {_e(g.text)}</li>" for g in answer.gains)
    # the winner's file(s) in the server's own format (answer.json names them; before it did, TF Serving's)
    names = answer.best_files or (BEST_BATCHING_FILE,)
    winner = "".join(
        f"<h3>{_e(name)}</h3><pre>{_e((run_dir / name).read_text())}</pre>"
        for name in names
        if (run_dir / name).is_file()
    )
    evaluated = answer.evaluated
    order = (
        f"<p>{len(evaluated)} configurations evaluated (baselines and any finished before a resume included), "
        f"in this order: {_e(', '.join(evaluated))}.</p>"
        if evaluated
        else ""
    )
    rows = "".join(_score_row(s, percentile, best.config if best else "") for s in answer.scores)
    return (
        f'<div class="decision"><h2>Tune</h2><p>{head}</p><ul>{gains}</ul></div>{winner}{order}'
        f"<h3>What each knob did</h3>{_knob_table(answer, percentile)}{figures}"
        f"<h3>Every configuration, best first</h3><table><tr><th class=l>configuration</th><th>items/s</th>"
        f"<th>{_e(percentile)} ms</th><th class=l>at</th><th class=l>SLO</th></tr>{rows}</table>"
    )


def draw_tune_plots(answer: TuneAnswer, points: list[Point], out_dir: Path) -> dict[str, Path]:
    """Throughput vs latency of every configuration's points with the Pareto front, and per knob the
    objective of every configuration measured with each value."""
    from serve_bench.report._plots import _pyplot

    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    percentile, max_ms = answer.percentile, answer.max_ms
    best = answer.best.config if answer.best else None
    paths: dict[str, Path] = {}

    measured = [p for p in points if not p.needs_remeasure]
    if measured:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        by_config: dict[str, list[Point]] = {}
        for p in measured:
            by_config.setdefault(p.grid_id.target, []).append(p)  # tune names targets after configurations
        for config, group in by_config.items():
            xs = [p.items_per_s for p in group]
            ys = [p.latency.due.ms(percentile) for p in group]
            if config == best:
                ax.plot(xs, ys, "*", color="tab:green", markersize=14, label=f"best: {config}", zorder=3)
            else:
                ax.plot(xs, ys, "o", color="0.6", markersize=4)
        front = answer.pareto
        if front:
            ax.plot(
                [f.items_per_s for f in front],
                [f.latency_ms for f in front],
                "-o",
                color="tab:blue",
                label="Pareto front",
                zorder=2,
            )
        if math.isfinite(max_ms):
            ax.axhline(max_ms, color="tab:red", linestyle="--", label=f"SLO {percentile} {max_ms:g} ms")
        ax.set_yscale("log")
        ax.set_xlabel("items/s")
        ax.set_ylabel(f"{percentile} latency (ms)")
        ax.set_title("every configuration and load: throughput vs latency")
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths["tune_pareto"] = out_dir / "tune_pareto.png"
        fig.savefig(paths["tune_pareto"], dpi=110)
        plt.close(fig)

    knobs: dict[str, list[str]] = {}
    for row in answer.knobs:
        knobs.setdefault(row.knob, []).append(row.value)
    configs = answer.configs
    scores = [s for s in answer.scores if not s.failed and s.config in configs]
    latency_mode = answer.mode == "latency"
    if knobs and scores:
        fig, axes = plt.subplots(1, len(knobs), figsize=(3.2 * len(knobs) + 1, 3.8), sharey=True, squeeze=False)
        for ax, (knob, values) in zip(axes[0], knobs.items()):
            for i, value in enumerate(values):
                mine = [
                    (s.latency_ms if latency_mode else s.items_per_s, s.feasible)
                    for s in scores
                    if configs[s.config].get(knob) == value
                ]
                meets = [figure for figure, feasible in mine if feasible and math.isfinite(figure)]
                misses = [figure for figure, feasible in mine if not feasible and math.isfinite(figure)]
                ax.plot([i] * len(meets), meets, "o", color="tab:blue", alpha=0.6)
                ax.plot([i] * len(misses), misses, "x", color="tab:red")
                if meets:
                    top = min(meets) if latency_mode else max(meets)
                    ax.plot([i - 0.25, i + 0.25], [top] * 2, color="tab:blue")
            ax.set_xticks(range(len(values)))
            ax.set_xticklabels(values, rotation=30, fontsize=8)
            ax.set_title(knob, fontsize=9)
        what = f"{percentile} ms at the SLO's rate" if latency_mode else "items/s"
        axes[0][0].set_ylabel(f"{what} (o meets the SLO, x misses)")
        fig.suptitle("what each knob did: every configuration measured, by the knob's value", fontsize=10)
        fig.tight_layout()
        paths["tune_knobs"] = out_dir / "tune_knobs.png"
        fig.savefig(paths["tune_knobs"], dpi=110)
        plt.close(fig)
    return paths
