"""A frozen prediction beside what a GPU run measured: images/s and the batching gain, batch by batch.

Given a measured run directory (points.jsonl) and one prediction file that `serve-bench predict
--predictions` wrote before the measurement (benchmarks/results/predicted-*/), prints per batch
size the predicted and measured images/s and the error (predicted / measured - 1: positive means the
prediction was too fast), then the batching gain (best images/s over batch 1's) of each, over the
batch sizes both have.

Measured points are the GPU target's client-batching points of the prediction's model (closed loop,
one request in flight, float images, no errors: B images per request and nothing queued beside them,
which is what a prediction describes); repeats of a batch size count by their median. The precision a
point ran at is read from its server knobs or its notes ("precision tf32"); where the points do not say,
give --precision.

    .venv/bin/python benchmarks/predict_vs_measured.py RUN_DIR \\
        benchmarks/results/predicted-2026-11-26/inception_v3-tensorrt-tf32.json --device h100

Given a GPU floor's file instead (benchmarks/gpu/run.py's floor/MODEL-gpu-PRECISION.jsonl), the measured
side is the runtime in process, the way the published tables a prediction is fitted on were measured.

A whole visit at once: every GPU floor of its run folders against every frozen prediction of the same model and
precision, one report each, then a table per calibration (median |error| in images/s and in the gain, over the
sizes each was not fitted on):

    .venv/bin/python benchmarks/predict_vs_measured.py --visit RESULTS/visit-* \\
        --frozen benchmarks/results/predicted-2026-11-26 benchmarks/results/predicted-2026-11-28-xla --device h200 \\
        --reference benchmarks/results/h100-2026-11-2*/visit-* --reference-device h100

With --reference, the device alone: per model and precision, the visit's images/s over the reference device's
(its floors' median where several visits measured a size) at the largest batch both measured up to 256, beside
each calibration's predicted ratio. The host's CPU and a fit's per-kernel cost cancel from it more than from any
one figure, so it is the test of what a form says about a device it was not fitted on.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serve_bench.errors import UserError
from serve_bench.stats import Interval, Point, read_points

# the words a runtime may use for a precision, in predict's vocabulary
_PRECISION_WORDS = {
    "fp32": "fp32",
    "f32": "fp32",
    "float32": "fp32",
    "highest": "fp32",
    "tf32": "tf32",
    "tensorfloat32": "tf32",
    "mixed": "mixed",
    "fp16": "mixed",
    "f16": "mixed",
    "float16": "mixed",
    "bf16": "mixed",
    "bfloat16": "mixed",
}
_IN_NOTES = re.compile(r"\bprecision\b[\s=:]+([A-Za-z0-9_]+)", re.IGNORECASE)


def point_precision(point: Point) -> str | None:
    """The precision a point's runtime ran at, in predict's words, from its knobs or notes; None if unsaid."""
    said = [v for k, v in point.server_config if "precision" in k.lower()]
    said += [m.group(1) for note in point.notes for m in _IN_NOTES.finditer(note)]
    for word in said:
        if word.lower() in _PRECISION_WORDS:
            return _PRECISION_WORDS[word.lower()]
    return None


@dataclass(frozen=True)
class Measured:
    """A target's images/s by batch size (median of repeats), with the interval of a batch measured once."""

    target: str
    precision_from: str  # "its points" or "--precision"
    images_per_s: dict[int, float]
    intervals: dict[int, Interval]
    gpu: str = ""  # the GPU's name where the measurement recorded it (a floor's header)


def measured(
    points: Sequence[Point], model: str, precision: str, target: str | None = None, given: bool = False
) -> Measured:
    """The GPU target's client-batching images/s of ``model`` at ``precision`` (``given``: the user said the
    points ran at it, where they do not say). Raises UserError naming what is missing or ambiguous."""
    candidates = [
        p
        for p in points
        if p.model == model and p.target.device != "cpu" and p.is_client_batching and p.items_per_s > 0
    ]
    if target is not None:
        candidates = [p for p in candidates if p.target.name == target]
    names = sorted({p.target.name for p in candidates})
    if not names:
        where = f"target {target!r}" if target else "a GPU target"
        raise UserError(f"no client-batching points of {model} on {where} (closed loop, one request in flight)")
    if len(names) > 1:
        raise UserError(f"points of {model} on several GPU targets ({', '.join(names)}); choose one with --target")
    unsaid = [p for p in candidates if point_precision(p) is None]
    if unsaid and not given:
        raise UserError(
            f"the points of {names[0]} do not say their precision (knobs or notes); give --precision {precision} "
            "if they ran at it"
        )
    chosen = [p for p in candidates if point_precision(p) in (precision, None)]
    if not chosen:
        seen = sorted({str(point_precision(p)) for p in candidates})
        raise UserError(f"{names[0]} measured {model} at {', '.join(seen)}, not at {precision}")
    by_batch: dict[int, list[Point]] = {}
    for p in chosen:
        by_batch.setdefault(p.batch_size, []).append(p)
    intervals = {
        b: ps[0].throughput.items_per_s_ci
        for b, ps in by_batch.items()
        if len(ps) == 1 and ps[0].throughput.items_per_s_ci is not None
    }
    return Measured(
        names[0],
        "--precision" if given and unsaid else "its points",
        {b: statistics.median(p.items_per_s for p in ps) for b, ps in sorted(by_batch.items())},
        {b: i for b, i in intervals.items() if i is not None},
    )


def floor_model(header: dict[str, Any]) -> str:
    """The model a floor measured, from its header; floors before 2026-11-27 did not name it, their copy did
    (MODELS/jax/<model>/<version>/conversion.json). "" where neither says."""
    return str(header.get("model") or Path(str(header.get("copy", ""))).parent.parent.name)


def measured_in_process(path: Path, model: str, precision: str) -> Measured:
    """A GPU floor's images/s by batch size (``python -m serve_bench.runtimes._floor``'s lines: a header, then
    one line per size): the runtime called in process, which is what the published tables a prediction is
    fitted on measured, with no server or network in the way. A floor measures each size once, for about a
    second, with its 95% interval (floors before 2026-11-27 recorded none). Raises UserError naming what does
    not match."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    header = lines[0] if lines else {}
    if "in_effect" not in header or "precision" not in header:
        raise UserError(f"{path}: not a floor's output (its first line names no runtime in effect and precision)")
    said = floor_model(header)
    if said != model:
        raise UserError(f"{path}: a floor of {said or 'an unnamed model'}, not of {model}")
    if header.get("device") != "gpu":
        raise UserError(f"{path}: a floor on {header.get('device')!r}, not on a GPU")
    if header["precision"] != precision:
        raise UserError(f"{path}: a floor at {header['precision']}, not at {precision}")
    measured_lines = [x for x in lines[1:] if "images_per_s" in x]
    if not measured_lines:
        raise UserError(f"{path}: the floor measured no batch size")
    sizes = {int(x["batch_size"]): float(x["images_per_s"]) for x in measured_lines}
    intervals = {
        int(x["batch_size"]): Interval(float(x["images_per_s_ci"][0]), float(x["images_per_s_ci"][1]))
        for x in measured_lines
        if x.get("images_per_s_ci")
    }
    gpu = str(header["in_effect"].get("device", "")) if isinstance(header["in_effect"], dict) else ""
    return Measured(f"in process ({path.name})", "the floor's header", dict(sorted(sizes.items())), intervals, gpu)


def check_gpu(row: dict[str, Any], seen: Measured) -> None:
    """Refuse a measurement on another GPU than the prediction's: each part of the predicted device's id (``h200``;
    ``h100``, ``pcie``) must be in the GPU name the measurement recorded ("gpu:0 NVIDIA H100 80GB HBM3"). A
    measurement that recorded no name is taken as the user gives it."""
    name = seen.gpu.lower().replace(" ", "")
    if name and not all(part in name for part in str(row["device"]).lower().split("-")):
        raise UserError(f"the measurement ran on {seen.gpu!r}, not on {row['device']!r}; give --device for that GPU")


def prediction_row(record: dict[str, Any], device: str | None) -> dict[str, Any]:
    """The row of a predictions file for ``device`` (the only row where there is one)."""
    rows = record.get("predictions")
    if not isinstance(rows, list) or not rows:
        raise UserError("not a serve-bench predictions file (no predictions in it)")
    if device is None:
        if len(rows) > 1:
            raise UserError(f"the file predicts {', '.join(r['device'] for r in rows)}; choose one with --device")
        return dict(rows[0])
    for row in rows:
        if row["device"] == device:
            return dict(row)
    raise UserError(f"the file has no prediction for {device!r}: {', '.join(r['device'] for r in rows)}")


@dataclass(frozen=True)
class Row:
    batch: int
    predicted: float | None
    measured: float | None
    interval: Interval | None

    @property
    def error(self) -> float | None:
        """predicted / measured - 1 (positive: the prediction was too fast)."""
        return None if self.predicted is None or not self.measured else self.predicted / self.measured - 1


@dataclass(frozen=True)
class Gain:
    """Best images/s over batch 1's, over the batch sizes both sides have."""

    predicted: float
    predicted_at: int
    measured: float
    measured_at: int

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def compare(row: dict[str, Any], seen: Measured) -> tuple[list[Row], Gain | None]:
    """Per batch size (every one either side has) predicted and measured images/s; the two gains."""
    predicted = dict(zip((int(b) for b in row["batch_sizes"]), (float(v) for v in row["images_per_s"])))
    rows = [
        Row(b, predicted.get(b), seen.images_per_s.get(b), seen.intervals.get(b))
        for b in sorted({*predicted, *seen.images_per_s})
    ]
    both = [r for r in rows if r.predicted is not None and r.measured is not None]
    if not both or both[0].batch != 1:
        return rows, None
    best_p = max(both, key=lambda r: r.predicted or 0.0)
    best_m = max(both, key=lambda r: r.measured or 0.0)
    first = both[0]
    assert first.predicted is not None and first.measured is not None
    assert best_p.predicted is not None and best_m.measured is not None
    return rows, Gain(best_p.predicted / first.predicted, best_p.batch, best_m.measured / first.measured, best_m.batch)


def fitted_sizes(row: dict[str, Any]) -> set[int]:
    """The batch sizes a prediction was fitted on (a fit on its own device's measurements lists them)."""
    return {int(b) for b in row.get("fitted_batch_sizes") or ()}


def unseen_errors(rows: Sequence[Row], fitted: set[int]) -> list[float]:
    """|error| at every size both sides have that the prediction was not fitted on: what scores it."""
    return [abs(r.error) for r in rows if r.error is not None and r.batch not in fitted]


def report(record: dict[str, Any], row: dict[str, Any], seen: Measured) -> str:
    """The text this script prints."""
    rows, gain = compare(row, seen)
    fit = row.get("fit") or {}
    fit_text = f"fit {fit.get('version', '?')}, sha256 {str(fit.get('sha256', '?'))[:12]}" if fit else "fit unrecorded"
    lines = [
        f"{record.get('model', '?')} on {row.get('name', row['device'])} ({row['device']}), {row['precision']}, "
        f"predicted by {row.get('runtime', 'tensorflow')} ({fit_text})",
        f"measured: {seen.target}, precision from {seen.precision_from}, one call at a time",
        f"{'batch':>5} {'predicted':>10} {'measured':>10} {'95% CI':>20} {'error':>8}",
    ]
    fitted = fitted_sizes(row)
    for r in rows:
        lines.append(
            f"{r.batch:>5} {'-' if r.predicted is None else f'{r.predicted:.1f}':>10} "
            f"{'-' if r.measured is None else f'{r.measured:.1f}':>10} "
            f"{r.interval.describe() if r.interval else '':>20} "
            f"{'' if r.error is None else f'{r.error:+.1%}':>8}"
            + ("  fitted" if r.batch in fitted and r.error is not None else "")
        )
    if "fitted_batch_sizes" in row:  # a prediction fitted on measurements of its own device says which
        unseen = unseen_errors(rows, fitted)
        lines.append(
            "fitted: a size the prediction was fitted on (no test of it); the sizes it was not fitted on: "
            + (f"median |error| {statistics.median(unseen):.1%} over {len(unseen)}" if unseen else "none measured")
        )
    if gain is None:
        lines.append("batching gain: not compared (batch 1 is not on both sides)")
    else:
        lines.append(
            f"batching gain (best / batch 1, batch sizes on both sides): predicted {gain.predicted:.2f}x "
            f"(at {gain.predicted_at}), measured {gain.measured:.2f}x (at {gain.measured_at}), "
            f"error {gain.error:+.1%}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class Scored:
    """One prediction file against one floor: its label, the errors at the sizes it was not fitted on, the gain's."""

    label: str
    errors: tuple[float, ...]
    gain_error: float | None


RATIO_AT_MOST = 256  # the device ratio's batch: the largest both devices measured up to this


def gpu_floors(runs: Sequence[Path]) -> list[Path]:
    return sorted(f for run in runs for f in run.glob("floor/*-gpu-*.jsonl"))


def reference_rates(runs: Sequence[Path], device: str) -> dict[tuple[str, str], dict[int, float]]:
    """The reference device's images/s by (model, precision) and batch size, the median where several of its
    floors measured a size (two visits' H100s: their mean); empty floors left out, a floor on another GPU refused."""
    found: dict[tuple[str, str], dict[int, list[float]]] = {}
    for floor in gpu_floors(runs):
        if not floor.read_text(encoding="utf-8").strip():
            continue
        model, _, precision = floor.stem.partition("-gpu-")
        seen = measured_in_process(floor, model, precision)
        check_gpu({"device": device}, seen)
        for batch, rate in seen.images_per_s.items():
            found.setdefault((model, precision), {}).setdefault(batch, []).append(rate)
    return {key: {b: statistics.median(v) for b, v in sizes.items()} for key, sizes in found.items()}


@dataclass(frozen=True)
class DeviceRatio:
    """A model's images/s on the visit's device over the reference device's, at one batch size: measured, and as
    one calibration predicted it (``predicted`` None where its file has no row for one of the two devices)."""

    model: str
    precision: str
    batch: int
    measured: float
    label: str
    predicted: float | None

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.measured - 1


def device_ratio(
    record: dict[str, Any], label: str, seen: Measured, reference: dict[int, float], device: str, reference_device: str
) -> DeviceRatio | None:
    """The ratio at the largest batch both devices measured up to RATIO_AT_MOST (None where they share none)."""
    both = [b for b in seen.images_per_s if b in reference and b <= RATIO_AT_MOST]
    if not both:
        return None
    batch = max(both)
    rows = {str(r["device"]): r for r in record.get("predictions", [])}
    predicted = None
    if device in rows and reference_device in rows:
        at = {d: dict(zip((int(b) for b in rows[d]["batch_sizes"]), rows[d]["images_per_s"])) for d in rows}
        if batch in at[device] and batch in at[reference_device]:
            predicted = float(at[device][batch]) / float(at[reference_device][batch])
    measured = seen.images_per_s[batch] / reference[batch]
    return DeviceRatio(str(record.get("model")), str(rows[device]["precision"]), batch, measured, label, predicted)


def score_visit(
    runs: Sequence[Path],
    frozen: Sequence[Path],
    device: str,
    reference: Sequence[Path] = (),
    reference_device: str | None = None,
) -> str:
    """Every GPU floor of a visit's run folders against every frozen prediction of its model and precision for
    ``device``: each report, then per calibration the median |error| in images/s over the sizes it was not fitted
    on and the median |error| of the batching gain; with ``reference`` (another device's visits) the device alone,
    each floor's images/s over the reference's, measured and predicted. The scoring is fixed before the measurement
    as the prediction is. Raises UserError where there is nothing to score."""
    if bool(reference) != (reference_device is not None):
        raise UserError("--reference and --reference-device go together: the other device's visits, and its id")
    others = reference_rates(reference, reference_device) if reference_device is not None else {}
    if reference and not others:
        raise UserError(f"no measured GPU floor in the reference {', '.join(map(str, reference))}")
    ratios: list[DeviceRatio] = []
    floors = gpu_floors(runs)
    predictions = sorted(f for folder in frozen for f in folder.glob("*.json") if f.name != "fit.json")
    if not floors:
        raise UserError(f"no GPU floor (floor/*-gpu-*.jsonl) in {', '.join(map(str, runs))}")
    sections: list[str] = []
    scored: list[Scored] = []
    empty = [f for f in floors if not f.read_text(encoding="utf-8").strip()]
    if len(empty) == len(floors):
        raise UserError(f"every GPU floor in {', '.join(map(str, runs))} is empty: it stopped before measuring")
    for floor in floors:
        if floor in empty:  # a floor that stopped before its header (the first H100 visit's, say)
            continue
        model, _, precision = floor.stem.partition("-gpu-")
        for path in predictions:
            record = json.loads(path.read_text(encoding="utf-8"))
            if record.get("model") != model or not path.stem.endswith(f"-{precision}"):
                continue
            row = prediction_row(record, device)
            seen = measured_in_process(floor, model, precision)
            check_gpu(row, seen)
            rows, gain = compare(row, seen)
            fitted = fitted_sizes(row)
            fit = row.get("fit") or {}
            label = f"{row.get('runtime', 'tensorflow')} (fit {fit.get('version', '?')})"
            unseen = tuple(unseen_errors(rows, fitted))
            in_sample_gain = 1 in fitted or (gain is not None and gain.measured_at in fitted)
            scored.append(Scored(label, unseen, None if gain is None or in_sample_gain else abs(gain.error)))
            if (model, precision) in others and reference_device is not None:
                ratio = device_ratio(record, label, seen, others[(model, precision)], device, reference_device)
                if ratio is not None:
                    ratios.append(ratio)
            where = f"{floor.parent.parent.name}/{floor.name}"
            sections.append(f"## {model} {precision}, {label}, against {where}\n```\n{report(record, row, seen)}\n```")
    if not scored:
        raise UserError(f"no frozen prediction in {', '.join(map(str, frozen))} of the floors' models and precisions")
    lines = [
        f"## Summary: {device}, {len(floors) - len(empty)} floors"
        + (
            f" ({len(empty)} more empty, left out: {', '.join(f.parent.parent.name + '/' + f.name for f in empty)})"
            if empty
            else ""
        ),
        "",
        "| predicted by | floors | sizes scored | median abs error, images/s | median abs error, gain |",
        "|---|---|---|---|---|",
    ]
    for label in sorted({s.label for s in scored}):
        mine = [s for s in scored if s.label == label]
        errors = [e for s in mine for e in s.errors]
        gains = [s.gain_error for s in mine if s.gain_error is not None]
        images = f"{statistics.median(errors):.1%}" if errors else "–"
        gain = f"{statistics.median(gains):.1%}" if gains else "–"
        lines.append(f"| {label} | {len(mine)} | {len(errors)} | {images} | {gain} |")
    lines.append("")
    lines.append("Sizes a prediction was fitted on are left out of its errors, and its gain where batch 1 or the")
    lines.append("measured best was fitted on.")
    if reference_device is not None:
        lines += ["", *ratio_table(ratios, device, reference_device)]
    return "\n\n".join(sections) + "\n\n" + "\n".join(lines)


def ratio_table(ratios: Sequence[DeviceRatio], device: str, reference_device: str) -> list[str]:
    """The device alone, per model and precision: measured, then each calibration's prediction and error."""
    labels = sorted({r.label for r in ratios})
    lines = [
        f"## The device alone: {device} over {reference_device}, images/s in process at the largest batch both "
        f"measured up to {RATIO_AT_MOST}",
        "",
        "| model | precision | batch | measured | " + " | ".join(f"{label}, error" for label in labels) + " |",
        "|---|---|---|---|" + "---|" * len(labels),
    ]
    keys = sorted({(r.model, r.precision, r.batch, r.measured) for r in ratios})
    for model, precision, batch, measured_ratio in keys:
        cells = []
        for label in labels:
            key = (model, precision, batch, measured_ratio, label)
            mine = next((r for r in ratios if (r.model, r.precision, r.batch, r.measured, r.label) == key), None)
            error = None if mine is None else mine.error
            cells.append(
                "–"
                if mine is None or mine.predicted is None or error is None
                else f"{mine.predicted:.2f}, {error:+.0%}"
            )
        lines.append(f"| {model} | {precision} | {batch} | {measured_ratio:.2f} | " + " | ".join(cells) + " |")
    if not keys:
        lines.append("| no model and precision measured on both devices | | | |" + " |" * len(labels))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--visit":
        return _main_visit(argv[1:])
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog="--visit RUN... --frozen DIR... --device D: a whole visit at once"
    )
    parser.add_argument(
        "run", type=Path, help="a measured run directory (points.jsonl), or a GPU floor's .jsonl (in process)"
    )
    parser.add_argument("predictions", type=Path, help="a predictions file `serve-bench predict` wrote")
    parser.add_argument("--device", default=None, help="the predicted device's id, where the file has several")
    parser.add_argument("--target", default=None, help="the measured GPU target's name, where the run has several")
    parser.add_argument("--precision", default=None, help="the precision the points ran at, where they do not say")
    args = parser.parse_args(argv)
    try:
        record = json.loads(args.predictions.read_text(encoding="utf-8"))
        row = prediction_row(record, args.device)
        if args.precision is not None and args.precision != row["precision"]:
            raise UserError(f"--precision {args.precision}: the prediction is of {row['precision']}")
        if args.run.is_file():
            seen = measured_in_process(args.run, record["model"], row["precision"])
            check_gpu(row, seen)
        else:
            seen = measured(
                read_points(args.run), record["model"], row["precision"], args.target, args.precision is not None
            )
    except (UserError, OSError, json.JSONDecodeError, KeyError) as exc:
        print(f"predict_vs_measured: {exc}", file=sys.stderr)
        return 2
    print(report(record, row, seen))
    return 0


def _main_visit(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="predict_vs_measured.py --visit", description=score_visit.__doc__)
    parser.add_argument("runs", type=Path, nargs="+", help="a visit's run folders (each with floor/)")
    parser.add_argument("--frozen", type=Path, nargs="+", required=True, help="folders of frozen predictions")
    parser.add_argument("--device", required=True, help="the predicted device's id: h100, h200")
    parser.add_argument(
        "--reference", type=Path, nargs="+", default=[], help="another device's visits' run folders (each with floor/)"
    )
    parser.add_argument("--reference-device", default=None, help="that device's id (h100): the device ratio")
    args = parser.parse_args(argv)
    try:
        print(score_visit(args.runs, args.frozen, args.device, args.reference, args.reference_device))
    except (UserError, OSError, json.JSONDecodeError, KeyError) as exc:
        print(f"predict_vs_measured: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
