"""report.html: one self-contained file (plots embedded as data URIs)."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from serve_bench.report._analysis import Analysis, format_ratio
from serve_bench.stats import Point

__all__ = ["write_html"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}.verdict{font-size:18px;background:#eef6ee;padding:1em;border-left:4px solid #3a3}
.warn{color:#a60}img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}code{background:#f6f6f6;padding:1px 4px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _batch_mean(point: Point) -> str:
    value = point.server.processed_batch_mean if point.server is not None else None
    return "" if value is None else f"{value:.1f}"


def _target_table(analysis: Analysis) -> str:
    parts = []
    for t in analysis.targets:
        rows = []
        for batch, p in t.best_by_batch.items():
            lat = p.latency
            rows.append(
                f"<tr><td>{batch}</td><td>{_e(p.load.level())}</td><td>{p.items_per_s:.1f}</td>"
                f"<td>{lat.p50 / 1000:.1f}</td><td>{lat.p90 / 1000:.1f}</td><td>{lat.p99 / 1000:.1f}</td>"
                f"<td>{lat.p50 / 1000 / batch:.2f}</td>"
                f"<td>{t.gflops.get(batch, 0):.1f}</td>"
                f"<td>{_batch_mean(p)}</td>"
                f"<td class=l>{_e(', '.join(p.flags()))}</td></tr>")
        model = ""
        if t.model is not None:
            model = (f"<p>Latency model: <code>{t.model.a_us / 1000:.2f} ms + {t.model.b_us / 1000:.3f} ms × batch</code> "
                     f"(R² {t.model.r_squared:.3f}, {t.model.points} batch sizes); gain bound (a+b)/b = "
                     f"{format_ratio(t.model.gain_bound)}; predicted at batch 64: "
                     f"{t.model.items_per_s(64):.1f} images/s.</p>")
        gains = []
        if t.client_gain is not None:
            gains.append(f"client batching {format_ratio(t.client_gain)} (batch {t.client_gain_batch})")
        if t.server_gain is not None:
            gains.append(f"server batching of batch-1 requests {format_ratio(t.server_gain)} "
                         f"(concurrency {t.server_gain_concurrency})")
        if t.slo_gain is not None and analysis.slo is not None:
            gains.append(f"within {_e(analysis.slo.label())}: {format_ratio(t.slo_gain)} (batch {t.slo_gain_batch})")
        best = ""
        if t.best_under_slo is not None and analysis.slo is not None:
            b = t.best_under_slo
            best = (f"<p>Best under {_e(analysis.slo.label())}: batch {b.batch_size}, "
                    f"{_e(b.load.mode)} {_e(b.load.concurrency or b.load.rate)}: "
                    f"{b.items_per_s:.1f} images/s.</p>")
        parts.append(
            f"<h3>{_e(t.name)} <small>({_e(t.device)}, {_e(t.protocol)}, {_e(t.server_kind)})</small></h3>"
            "<table><tr><th>batch</th><th>load</th><th>images/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th>"
            "<th>ms/image</th><th>GFLOP/s</th><th>server batch</th><th class=l>flags</th></tr>"
            + "".join(rows) + "</table>" + model
            + (f"<p>Batching gain: {'; '.join(gains)}.</p>" if gains else "") + best)
    return "".join(parts)


def _ratios(analysis: Analysis) -> str:
    if not analysis.device_ratios:
        return "<p>No GPU and CPU targets in the same run: nothing to set side by side.</p>"
    rows = "".join(
        f"<tr><td>{r['batch_size']}</td><td>{r['gpu_items_per_s']:.1f}</td><td>{r['cpu_items_per_s']:.1f}</td>"
        f"<td>{format_ratio(r['items_ratio'])}</td><td>{r['gpu_p99_us'] / 1000:.1f}</td>"
        f"<td>{r['cpu_p99_us'] / 1000:.1f}</td><td>{format_ratio(r['p99_ratio'])}</td></tr>"
        for r in analysis.device_ratios)
    return ("<table><tr><th>batch</th><th>GPU images/s</th><th>CPU images/s</th><th>ratio</th><th>GPU p99 ms</th>"
            f"<th>CPU p99 ms</th><th>p99 ratio</th></tr>{rows}</table>")


def write_html(analysis: Analysis, points: list[Point], plots: dict[str, Path], metadata: dict[str, Any],
               path: Path, title: str) -> Path:
    images = "".join(
        f'<figure><img alt="{_e(name)}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        f"</figure>" for name, p in plots.items())
    warnings = "".join(f"<li class=warn>{_e(w)}</li>" for w in analysis.warnings) or "<li>none</li>"
    weights = (metadata.get("model_facts") or {}).get("weights")
    weights_note = ("<p class=warn>Model exported with random weights: timing is representative, the features "
                    "are not.</p>" if weights == "random" else "")
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>{_e(title)}</title><style>{_STYLE}</style></head>
<body><h1>{_e(title)}</h1>
<p class="verdict"><b>Verdict.</b> {_e(analysis.verdict)}</p>{weights_note}
<h2>Per target</h2>{_target_table(analysis)}
<h2>GPU vs CPU</h2>{_ratios(analysis)}
<h2>Plots</h2>{images}
<h2>Warnings</h2><ul>{warnings}</ul>
<h2>Run metadata</h2><pre>{_e(json.dumps(metadata, indent=2, sort_keys=True))}</pre>
<p>{len(points)} points. Latency runs from when each request was due until its response was decoded
(open loop: from its scheduled time). Throughput counts images, not requests.</p>
</body></html>"""
    path.write_text(page, encoding="utf-8")
    return path
