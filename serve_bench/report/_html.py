"""report.html: one self-contained file (plots embedded as data URIs)."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from serve_bench.report._analysis import Analysis
from serve_bench.report._decision import decide
from serve_bench.report._decision_table import decision_html
from serve_bench.report._predicted import predicted_html
from serve_bench.report._tables import CELL_COLUMNS, cell_rows, model_line
from serve_bench.report._tune import tune_html
from serve_bench.stats import Point, TuneAnswer, format_ratio

__all__ = ["write_html"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}tr.baseline td{background:#f4f8ff}
.verdict{font-size:17px;background:#eef6ee;padding:0.5em 1em;border-left:4px solid #3a3}
.decision{background:#f4f7fc;padding:0.5em 1em;border-left:4px solid #36c;margin-bottom:1em}
.warn{color:#a60}img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}code{background:#f6f6f6;padding:1px 4px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _target_table(analysis: Analysis) -> str:
    parts = []
    for t in analysis.targets:
        left = (0, len(CELL_COLUMNS) - 1)  # the point's name and its flags
        head = "".join(f"<th{' class=l' if i in left else ''}>{_e(c)}</th>" for i, c in enumerate(CELL_COLUMNS))
        rows = []
        for row in cell_rows(t):
            css = " class=baseline" if row[1] == "baseline" else ""
            cells = "".join(f"<td{' class=l' if i in left else ''}>{_e(v)}</td>" for i, v in enumerate(row))
            rows.append(f'<tr{css} id="{_e(row[0].split(" ×")[0])}">{cells}</tr>')
        model = f"<p>{_e(model_line(t))}.</p>" if t.model is not None else ""
        parts.append(
            f"<h3>{_e(t.name)} <small>({_e(t.device)}, {_e(t.protocol)}, {_e(t.server_kind)})</small></h3>"
            f"<table><tr>{head}</tr>{''.join(rows)}</table>{model}"
        )
    return "".join(parts)


def _ratios(analysis: Analysis) -> str:
    if not analysis.device_ratios:
        return "<p>No GPU and CPU targets in the same run: nothing to set side by side.</p>"
    rows = "".join(
        f"<tr><td>{r.batch_size}</td><td>{_e(r.gpu.label)}</td><td>{_e(r.gpu.items_per_s.text())}</td>"
        f"<td>{_e(r.cpu.label)}</td><td>{_e(r.cpu.items_per_s.text())}</td><td>{format_ratio(r.items_ratio.value)}</td>"
        f"<td>{r.gpu.p99_us.value / 1000:.1f}</td><td>{r.cpu.p99_us.value / 1000:.1f}</td>"
        f"<td>{format_ratio(r.p99_ratio.value)}</td></tr>"
        for r in analysis.device_ratios
    )
    return (
        "<table><tr><th>batch</th><th>GPU point</th><th>GPU images/s</th><th>CPU point</th><th>CPU images/s</th>"
        f"<th>ratio</th><th>GPU p99 ms</th><th>CPU p99 ms</th><th>p99 ratio</th></tr>{rows}</table>"
    )


def _figures(plots: dict[str, Path]) -> str:
    return "".join(
        f'<figure><img alt="{_e(name)}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        f"</figure>"
        for name, p in plots.items()
    )


def write_html(
    analysis: Analysis,
    points: list[Point],
    plots: dict[str, Path],
    metadata: dict[str, Any],
    path: Path,
    title: str,
    *,
    tune: tuple[Path, TuneAnswer, dict[str, Path]] | None = None,
    predictions: dict[str, Any] | None = None,
) -> Path:
    """``tune``: a tune run's directory, its answer.json and the tune plots: a Tune section comes first.

    ``predictions``: the run's predictions.json; a "Predicted (not measured)" section follows GPU vs CPU.
    """
    images = _figures(plots)
    tune_part = tune_html(tune[1], tune[0], _figures(tune[2])) if tune is not None else ""
    warnings = "".join(f"<li class=warn>{_e(w)}</li>" for w in analysis.warnings) or "<li>none</li>"
    verdict = "".join(f"<li>{_e(line)}</li>" for line in analysis.verdict_lines)
    weights = (metadata.get("model_facts") or {}).get("weights")
    weights_note = (
        "<p class=warn>Model exported with random weights: timing is representative, the features are not.</p>"
        if weights == "random"
        else ""
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{_e(title)}</title><style>{_STYLE}</style></head>
<body><h1>{_e(title)}</h1>
{tune_part}
{decision_html(decide(analysis, points))}
<div class="verdict"><h2>Verdict</h2><ul>{verdict}</ul></div>{weights_note}
<p>Each verdict line names the points (target, batch size, load) its numbers come from; they are rows below.
Ranges in brackets are 95% confidence intervals of one point, or the range of its repeats.</p>
<h2>Per target</h2>{_target_table(analysis)}
<h2>GPU vs CPU</h2>{_ratios(analysis)}{predicted_html(predictions, points)}
<h2>Plots</h2>{images}
<h2>Warnings</h2><ul>{warnings}</ul>
<h2>Run metadata</h2><pre>{_e(json.dumps(metadata, indent=2, sort_keys=True))}</pre>
<p>{len(points)} points. Latency runs from when each request was due until its response was decoded
(open loop: from its scheduled time). Throughput counts images, not requests.</p>
</body></html>"""
    path.write_text(page, encoding="utf-8")
    return path
