"""`serve-bench report RUN` and `serve-bench compare RUN_A RUN_B`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError
from serve_bench.export import latest_metadata
from serve_bench.report._analysis import Analysis, analyze_run
from serve_bench.report._decision import cost_energy_ratios
from serve_bench.report._predicted import read_predictions
from serve_bench.report._tune import draw_tune_plots, read_tune_answer
from serve_bench.stats import Point, PointId, Slo, TuneAnswer, read_points, read_run

__all__ = ["Comparison", "ReportOutput", "build_report", "compare_runs", "find_model_facts", "load_run_metadata"]


@dataclass
class ReportOutput:
    analysis: Analysis
    points: list[Point]
    html: Path
    csv: Path
    plots: dict[str, Path]


def load_run_metadata(run_dir: Path) -> dict[str, Any]:
    """run.json of a run (any known version), {} when there is none."""
    return read_run(run_dir) if run_dir.is_dir() else {}


def find_model_facts(model: str, models_dir: Path) -> dict[str, Any] | None:
    return latest_metadata(models_dir, model)


def build_report(
    run_dir: Path,
    *,
    slo: Slo | None = None,
    models_dir: Path = Path("exported_models"),
    plots: bool = True,
    on_skip: Callable[[str], None] | None = None,
) -> ReportOutput:
    """Analyse a run and write its report; ``on_skip`` hears, in one line, of a points.jsonl line left out
    (a torn last line, ``stats.read_points``)."""
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a results directory; give results/<run>")
    points = read_points(run_dir, on_skip=on_skip)
    if not points:
        raise UserError(f"{run_dir} holds no measured points yet")
    metadata = load_run_metadata(run_dir)
    if slo is None and metadata.get("slo"):
        slo = Slo(metadata["slo"].get("percentile", "p99"), float(metadata["slo"].get("max_ms", 100)))
    facts = metadata.get("model_facts") or find_model_facts(points[0].model, models_dir)
    if facts:
        metadata["model_facts"] = facts
    flops = float(facts["flops_per_image"]) if facts and facts.get("flops_per_image") else None
    analysis = analyze_run(points, slo, flops)
    tune = read_tune_answer(run_dir)
    try:
        return _write_report(run_dir, analysis, points, metadata, tune, plots)
    except OSError as exc:  # a colleague's read-only results, a disk that filled
        where = f"{exc.filename}: " if exc.filename else ""
        raise UserError(
            f"cannot write the report of {run_dir} ({where}{exc.strerror or exc}); copy the run somewhere writable"
            " and report that"
        ) from exc


def _write_report(
    run_dir: Path,
    analysis: Analysis,
    points: list[Point],
    metadata: dict[str, Any],
    tune: TuneAnswer | None,
    plots: bool,
) -> ReportOutput:
    from serve_bench.report._html import write_html
    from serve_bench.report._tables import write_summary_csv

    drawn: dict[str, Path] = {}
    tune_drawn: dict[str, Path] = {}
    if plots:
        from serve_bench.report._plots import draw_plots

        drawn = draw_plots(analysis, run_dir / "plots", points[0].model)
        if tune is not None:
            tune_drawn = draw_tune_plots(tune, points, run_dir / "plots")
    csv_path = write_summary_csv(points, run_dir / "summary.csv")
    title = f"serve-bench: {points[0].model} — {run_dir.name}"
    tune_part = (run_dir, tune, tune_drawn) if tune is not None else None
    html_path = write_html(
        analysis,
        points,
        drawn,
        metadata,
        run_dir / "report.html",
        title,
        tune=tune_part,
        predictions=read_predictions(run_dir),
    )
    drawn.update(tune_drawn)
    return ReportOutput(analysis, points, html_path, csv_path, drawn)


@dataclass
class Comparison:
    rows: list[dict[str, Any]]
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)


def _config_key(point: Point) -> PointId:
    """The same grid point in another run: its targets' names may differ, their protocols not."""
    return replace(point.grid_id, target=point.target.protocol)


_COMPARED_SETTINGS = ("warmup_s", "min_duration_s", "min_requests", "windows", "tolerance", "timeout_s")


def compare_runs(
    run_a: Path, run_b: Path, *, allow_mismatch: bool = False, on_skip: Callable[[str], None] | None = None
) -> Comparison:
    """Ratio B/A per matching point. Points match by configuration (protocol, model, payload,
    batch, load), not by target name, so TF Serving can be set beside the local server.
    ``on_skip``: as build_report's."""
    points_a, points_b = read_points(run_a, on_skip=on_skip), read_points(run_b, on_skip=on_skip)
    for run, points in ((run_a, points_a), (run_b, points_b)):
        if not points:  # not "measured differently" (its models are none), nor "no points match"
            raise UserError(f"{run} holds no measured points yet; compare two runs that do")
    meta_a, meta_b = load_run_metadata(run_a), load_run_metadata(run_b)
    differences = []
    settings_a, settings_b = meta_a.get("settings", {}), meta_b.get("settings", {})
    for setting in _COMPARED_SETTINGS:
        if setting in settings_a and setting in settings_b and settings_a[setting] != settings_b[setting]:
            differences.append(f"{setting}: {settings_a[setting]} vs {settings_b[setting]}")
    models = {p.model for p in points_a} ^ {p.model for p in points_b}
    if models:
        differences.append(f"models differ: {sorted(models)}")
    if differences and not allow_mismatch:
        raise UserError(
            "the runs were measured differently ("
            + "; ".join(differences)
            + "); pass --allow-mismatch to compare them anyway"
        )

    def index(points: list[Point]) -> dict[PointId, list[Point]]:
        table: dict[PointId, list[Point]] = {}
        for point in points:
            table.setdefault(_config_key(point), []).append(point)
        return table

    a_index, b_index = index(points_a), index(points_b)
    # where the runs sent more than one payload, a row names its own (float pixels and JPEG bytes are two workloads)
    several = len({p.payload for p in (*points_a, *points_b)}) > 1
    rows, only_a, only_b = [], [], []
    for key, a_group in a_index.items():
        b_group = b_index.get(key, [])
        if len(a_group) == 1 and len(b_group) == 1:
            pairs = [(a_group[0], b_group[0])]
        else:  # several targets share a configuration: pair by target name
            b_by_name = {p.target.name: p for p in b_group}
            pairs = [(a, b_by_name[a.target.name]) for a in a_group if a.target.name in b_by_name]
        matched_a = {id(a) for a, _ in pairs}
        matched_b = {id(b) for _, b in pairs}
        only_a += [p.key for p in a_group if id(p) not in matched_a]
        only_b += [p.key for p in b_group if id(p) not in matched_b]
        for a, b in pairs:
            ia, ib = a.items_per_s, b.items_per_s
            rows.append(
                {
                    "config": f"{a.target.protocol}{f' {a.payload}' if several else ''} b{a.batch_size} "
                    f"{a.load.describe()}",
                    "a": a,
                    "b": b,
                    "items_ratio": ib / ia if ia else None,
                    "p99_ratio": b.latency.p99 / a.latency.p99 if a.latency.p99 else None,
                    **cost_energy_ratios(a, b),
                }
            )
    for key, b_group in b_index.items():
        if key not in a_index:
            only_b += [p.key for p in b_group]
    if not rows:
        raise UserError(
            f"no points of {run_a} match a point of {run_b} (same protocol, model, payload, batch size and load)"
        )
    return Comparison(rows, only_a, only_b, differences)
