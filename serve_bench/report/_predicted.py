"""The report's "Predicted (not measured)" section, from the predictions.json `serve-bench predict --run-dir` wrote.

Predicted figures stay in their own section: they never enter the cells, the verdict or the
decision table. Where the run measured a GPU target that names a predicted device (its name or
device label holds the device's id, e.g. ``triton-t4`` or ``gpu-a100``), the measured images/s
stand beside the predicted ones with their ratio.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError
from serve_bench.runtimes import DEFAULT_RUNTIME
from serve_bench.stats import Point

__all__ = ["PREDICTIONS_FILE", "matching_gpu_target", "predicted_html", "read_predictions"]

PREDICTIONS_FILE = "predictions.json"


def read_predictions(run_dir: Path) -> dict[str, Any] | None:
    """The run's predictions.json, None when it has none; a one-line error when it is not one."""
    path = run_dir / PREDICTIONS_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{path}: not readable JSON ({exc}); write it again with serve-bench predict --run-dir"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("predictions"), list) or not _well_formed(data):
        raise UserError(
            f"{path}: not a serve-bench predictions file; write it again with serve-bench predict --run-dir"
        )
    return data


def _numbers(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)


def _well_formed(data: dict[str, Any]) -> bool:
    """Every row has a device and equally long lists of numbers; cpu, when there, has its two tables."""
    for row in data["predictions"]:
        if not isinstance(row, dict) or not isinstance(row.get("device"), str):
            return False
        lists = [row.get(k) for k in ("batch_sizes", "latency_ms", "images_per_s")]
        if not all(_numbers(v) for v in lists) or len({len(v) for v in lists if isinstance(v, list)}) != 1:
            return False
        if not all(isinstance(row.get(k, {}), dict) for k in ("error", "model_error", "expected_error")):
            return False
    cpu = data.get("cpu")
    if cpu is None:
        return True
    tables = [cpu.get(k) for k in ("measured_images_per_s", "predicted_images_per_s")] if isinstance(cpu, dict) else []
    return len(tables) == 2 and all(
        isinstance(t, dict) and all(isinstance(v, int | float) for v in t.values()) for t in tables
    )


def _tokens(text: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", text.lower())) - {""}


def matching_gpu_target(
    device_id: str, points: list[Point], model: str = "", tables: str = ""
) -> tuple[str, dict[int, float]] | None:
    """The measured GPU target naming ``device_id`` and its images/s by batch at one request in flight
    (float images, ``model``'s points when given; the last of repeats). With ``tables`` (predict --tables: the
    published tables that calibrated the prediction, named for what ran them; a predictions row's ``runtime``)
    only a target run by that runtime stands beside it, or one that names no runtime where the tables are the
    default runtime's."""
    wanted = _tokens(device_id)
    found: dict[str, dict[int, float]] = {}
    accepted = {tables, ""} if tables == DEFAULT_RUNTIME else {tables}
    for p in points:
        t = p.target
        if t.device == "cpu" or not p.is_client_batching or (model and p.model != model):
            continue
        if tables and t.runtime not in accepted:
            continue
        if wanted <= _tokens(t.name) or wanted <= _tokens(t.device):
            found.setdefault(t.name, {})[p.batch_size] = p.items_per_s
    if not found:
        return None
    name = next(iter(found))
    return name, dict(sorted(found[name].items()))


def _e(value: Any) -> str:
    return html.escape(str(value))


def _cpu_table(cpu: dict[str, Any]) -> str:
    measured = cpu.get("measured_images_per_s", {})
    rows = []
    for batch, predicted in cpu.get("predicted_images_per_s", {}).items():
        seen = measured.get(batch)
        if int(batch) == cpu.get("calibrated_on"):
            note = "calibrated on"
        else:
            note = f"{predicted / seen - 1:+.0%}" if seen else ""
        rows.append(
            f"<tr><td>{_e(batch)}</td><td>{'' if seen is None else f'{seen:.1f}'}</td>"
            f"<td>{predicted:.1f}</td><td>{note}</td></tr>"
        )
    return (
        f"<h3>This CPU ({_e(cpu.get('target', ''))}), calibrated on batch {_e(cpu.get('calibrated_on'))}</h3>"
        f"<p>{_e(cpu.get('described', ''))}; {_e(cpu.get('call_ms', 0))} ms per call; fitted speed "
        f"{_e(cpu.get('efficiency'))}x that roofline.</p>"
        "<table><tr><th>batch</th><th>measured images/s</th><th>predicted images/s</th><th>error</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _gpu_table(row: dict[str, Any], points: list[Point], model: str) -> str:
    match = matching_gpu_target(str(row.get("device", "")), points, model, str(row.get("runtime", "")))
    measured_head = f"<th>measured images/s ({_e(match[0])})</th><th>measured / predicted</th>" if match else ""
    rows = []
    for batch, latency, ips in zip(row["batch_sizes"], row["latency_ms"], row["images_per_s"]):
        extra = ""
        if match:
            seen = match[1].get(int(batch))
            extra = f"<td>{seen:.1f}</td><td>{seen / ips:.2f}</td>" if seen else "<td></td><td></td>"
        rows.append(f"<tr><td>{batch}</td><td>{latency:.2f}</td><td>{ips:.0f}</td>{extra}</tr>")
    expected = row.get("expected_error")
    if isinstance(expected, dict):
        errors = _expected_text(expected)
    else:  # a predictions.json written before the per-device error: its pooled medians
        errors = " ".join(
            f"With the {what} left out of the calibration: images/s median {e.get('median', 0):.0%} "
            f"(worst {e.get('worst', 0):.0%}), batching gain {e.get('gain_median', 0):.0%}."
            for what, e in (("device", row.get("error")), ("model", row.get("model_error")))
            if isinstance(e, dict)
        )
    runtime = f", run by {_e(row['runtime'])}" if row.get("runtime") else ""
    tables = row.get("calibrated_on")
    calibrated = f"Calibrated on published tables of {_e(' '.join(map(str, tables)))}. " if tables else ""
    return (
        f"<h3>{_e(row.get('name', row.get('device')))}, {_e(row.get('precision'))}{runtime}</h3>"
        f"<p>{calibrated}{errors} "
        f"Predicted batching gain {_e(row.get('gain'))}x; throughput stops growing at batch "
        f"{_e(row.get('saturating_batch'))}; largest batch that fits: at most "
        f"{_e(row.get('largest_batch_that_fits'))} (an upper bound: weights and the widest op's tensors only).</p>"
        "<table><tr><th>batch</th><th>predicted latency ms</th><th>predicted images/s</th>"
        f"{measured_head}</tr>{''.join(rows)}</table>"
    )


def _interval(value: Any) -> str:
    """``-21% to +24%`` from ``{"p10": -0.21, "p90": 0.24}``; "?" where it is not one."""
    if not isinstance(value, dict) or not all(isinstance(value.get(k), int | float) for k in ("p10", "p90")):
        return "?"
    if value.get("count") == 1:
        return f"{value['p10']:+.0%}"
    return f"{value['p10']:+.0%} to {value['p90']:+.0%}"


def _expected_text(e: dict[str, Any]) -> str:
    """The per-device expected error `serve-bench predict` computed (its ``expected_error``), in sentences."""
    low, high = (e.get("percentiles") or [10, 90])[:2]
    nearest = _e(e.get("nearest_calibrated", "?"))
    if not e.get("covered"):
        nearest += ", the nearest calibrated architecture"
    left_out = " or ".join(map(str, e.get("left_out", [])))
    parts = [
        f"Expected error, predicted/published - 1 ({_e(low)}th-{_e(high)}th percentile of the held-out errors of "
        f"{nearest}: {_e(' '.join(map(str, e.get('held_out', []))))}, {_e(left_out)} left out of the fit): "
        f"images/s {_interval(e.get('images_per_s'))}, batching gain {_interval(e.get('gain'))}."
    ]
    if not e.get("covered"):
        parts.append(f"No table of this architecture ({_e(e.get('architecture', '?'))}): expect more.")
    if "model" not in e.get("left_out", []):
        parts.append(f"No model left out (the {_e(e.get('runtime', ''))} tables have one model): expect more.")
    outside = e.get("out_of_sample")
    if isinstance(outside, dict):
        parts.append(
            f"On tables no fit saw ({_e(', '.join(map(str, outside.get('tables', []))))}: "
            f"{_e(' '.join(map(str, outside.get('devices', []))))}): images/s "
            f"{_interval(outside.get('images_per_s'))}, batching gain {_interval(outside.get('gain'))}."
        )
    copy = e.get("copy")
    if isinstance(copy, dict):
        served = copy.get("served_gbs")
        if isinstance(served, list) and len(served) == 2:
            verdict = "refuted" if copy.get("refuted") else "checked"
            parts.append(
                f"The copy at PCIe's {_e(copy.get('pcie_gbs'))} GB/s: {verdict} by served tables "
                f"({_e(', '.join(map(str, copy.get('tables', []))))}), whose images arrived at "
                f"{_e(served[0])}-{_e(served[1])} GB/s: a served request's transfer costs far more than this copy."
            )
        else:
            parts.append(
                f"The copy at PCIe's {_e(copy.get('pcie_gbs'))} GB/s is unvalidated until a served table validates it."
            )
    return " ".join(parts)


def predicted_html(predictions: dict[str, Any] | None, points: list[Point]) -> str:
    """The section's HTML; "" when the run has no predictions."""
    if not predictions:
        return ""
    parts = [
        "<h2>Predicted (not measured)</h2>",
        "<p class=warn>Figures below come from <code>serve-bench predict</code>: the model's graph, published "
        "device peaks and efficiencies fitted on published tables. None of them was measured in this run, and none "
        "enters the verdict or the decision table above.</p>",
    ]
    if predictions.get("cpu"):
        parts.append(_cpu_table(predictions["cpu"]))
    model = str(predictions.get("model", ""))
    parts += [_gpu_table(row, points, model) for row in predictions["predictions"]]
    return "".join(parts)
