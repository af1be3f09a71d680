"""Predict the GPU runtime serve-bench runs (Keras 3 on JAX, XLA) from the H100's own floors, frozen before a visit.

The shipped calibrations were fitted on other runtimes' tables (``tensorflow``: TensorFlow 1 op by op;
``tensorrt``: Paddle-TRT) and missed the H100's XLA floors by a median 54% in images/s
(benchmarks/results/h100-2026-11-27/predicted-vs-measured.md). This fits predict's own form
(serve_bench/predict/_model.py, unchanged: per-op roofline, a dispatch cost per op, a PCIe copy per
batch) on XLA's figures instead: the GPU floors of the two H100 visits (``FITTED_ON``), with the
graph costs frozen on 2026-11-26 (``COSTS``). Three choices, made before fitting and not tuned on
the errors it prints:

- the graph as XLA runs it: point-wise ops fused into the kernels that wrote their inputs
  (``fuse_pointwise``, as the ``tensorrt`` calibration runs its graph);
- fp32 and tf32 fitted together, one precision class, as ``predict`` fits them;
- the images copied in each call (the floor copies them, nothing overlaps).

It then predicts the H200, which serve-bench has never measured (the same GH100 die at the same
clocks, 4.8 TB/s of memory against 3.35), and the H100 at every size (its floors left out InceptionV3's
and MobileNetV2's 2 to 128: those are unseen as well), and writes them as ``serve-bench predict
--predictions`` files, so that ``benchmarks/predict_vs_measured.py FLOOR FILE --device h200`` scores
them against the next visit's floors. Each H100 row lists the sizes it was fitted on.

    .venv/bin/python benchmarks/predict_xla.py                      # the fit and its errors, printed
    .venv/bin/python benchmarks/predict_xla.py --write DIR          # freeze (refuses a folder that has them)
    .venv/bin/python benchmarks/predict_xla.py --check DIR          # the frozen files are what this computes

The fit has seen one device: its held-out error is each model left out in turn, on the H100. How far a
device it has not seen is off, only the H200's visit says.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.predict_vs_measured import measured_in_process  # noqa: E402
from serve_bench.predict import (  # noqa: E402
    GraphCost,
    Observation,
    content_hash,
    device_table,
    fit,
    fuse_pointwise,
    time_per_batch,
)
from serve_bench.predict._freeze import FORM, text_digest  # noqa: E402
from serve_bench.predict._predict import SATURATION, _parameters  # noqa: E402
from serve_bench.predict._published import leave_one_model_out  # noqa: E402

VERSION = "xla-h100-2026-11-28"
RESULTS = ROOT / "benchmarks" / "results"
# The floors the fit is made of: both H100 visits, every GPU floor in them. Fixed here, so that a later
# visit's floors cannot enter the fit that is to be scored on them.
FITTED_ON = ("h100-2026-11-26", "h100-2026-11-27")
COSTS = RESULTS / "predicted-2026-11-26" / "graph_costs"
MODELS = ("inception_v3", "resnet50", "mobilenet_v2")
PRECISIONS = ("fp32", "tf32")
DEVICES = ("h100", "h200")
BATCH_SIZES = tuple(2**i for i in range(11))  # 1 to 1024, the floor's sizes and its doublings
RUNTIME = "xla"


def floor_files() -> list[Path]:
    return sorted(p for visit in FITTED_ON for p in (RESULTS / visit).glob("visit-*/floor/*-gpu-*.jsonl"))


def observations() -> tuple[list[Observation], dict[str, list[str]]]:
    """Each (model, precision, batch) the H100 floors measured, the median of its repeats across the visits, and
    the files by key. Two repeats are two H100s (their median is their mean: batch 1 moved by 24-31% between them);
    a size one visit measured alone takes that H100's level, so a curve's shape carries that spread too. A floor
    whose header names another GPU than an H100 stops the fit in one line."""
    figures: dict[tuple[str, str, int], list[float]] = {}
    sources: dict[str, list[str]] = {}
    for path in floor_files():
        if not path.read_text(encoding="utf-8").strip():  # a floor stopped before its header (the first visit's)
            continue
        model, _, precision = path.stem.partition("-gpu-")
        seen = measured_in_process(path, model, precision)
        if "H100" not in seen.gpu:
            raise ValueError(f"{path}: a floor on {seen.gpu!r}, not on an H100; the fit is the H100's alone")
        for batch, rate in seen.images_per_s.items():
            key = (model, precision, batch)
            figures.setdefault(key, []).append(rate)
            sources.setdefault("/".join(map(str, key)), []).append(str(path.relative_to(RESULTS)))
    found = [
        Observation("h100", precision, batch, statistics.median(values), model)
        for (model, precision, batch), values in sorted(figures.items())
    ]
    return found, sources


def costs() -> dict[str, GraphCost]:
    return {m: fuse_pointwise(GraphCost.from_json(json.loads((COSTS / f"{m}.json").read_text()))) for m in MODELS}


def freeze() -> dict[str, Any]:
    """Everything the frozen files say, computed: the fit's record (``fit.json``) and one file per model and
    precision."""
    seen, sources = observations()
    graphs = costs()
    devices = device_table()
    efficiency = fit(graphs, seen, devices)
    held = leave_one_model_out(graphs, seen, devices)
    in_sample = [
        o.batch_size
        / time_per_batch(graphs[o.model], devices["h100"], o.precision, o.batch_size, efficiency)
        / o.images_per_s
        - 1
        for o in seen
    ]
    figures = ("fp32_tflops", "tf32_tflops", "mem_bw_gbs", "mem_gb", "pcie_gen", "pcie_lanes")
    inputs = {
        "form": FORM,
        "graph": "fuse_pointwise",
        "observations": [[o.model, o.device, o.precision, o.batch_size, o.images_per_s] for o in seen],
        "costs": {m: text_digest((COSTS / f"{m}.json").read_text(encoding="utf-8")) for m in MODELS},
        "devices": {d: {f: getattr(devices[d], f) for f in figures} for d in DEVICES},
        "fitted": _parameters(efficiency),
    }
    version = {"version": VERSION, "sha256": content_hash(inputs), "form": FORM, "fitted": _parameters(efficiency)}
    record = {
        **version,
        "fitted_on": list(FITTED_ON),
        "sources": sources,
        "inputs": inputs,
        "in_sample": {"median": statistics.median(abs(e) for e in in_sample), "worst": max(abs(e) for e in in_sample)},
        "model_left_out": {
            "median": held.median,
            "worst": held.worst,
            "gain_median": held.gain_median,
            "gain_worst": held.gain_worst,
            "by_model": {h.model: {"median": h.median, "gain_error": h.gain_error} for h in held.held},
        },
    }
    files: dict[str, Any] = {"fit.json": record}
    by_model = {h.model: h for h in held.held}
    for model in MODELS:
        rows = []
        for precision in PRECISIONS:
            for device in DEVICES:
                times = [time_per_batch(graphs[model], devices[device], precision, b, efficiency) for b in BATCH_SIZES]
                rate = [b / t for b, t in zip(BATCH_SIZES, times)]
                top = max(rate)
                fitted = [o.batch_size for o in seen if (o.model, o.precision, o.device) == (model, precision, device)]
                rows.append(
                    {
                        "device": device,
                        "name": devices[device].name,
                        "precision": precision,
                        "runtime": RUNTIME,
                        "batch_sizes": list(BATCH_SIZES),
                        "latency_ms": [round(t * 1e3, 3) for t in times],
                        "images_per_s": [round(r, 1) for r in rate],
                        "gain": round(top / rate[0], 2),
                        # as predict says it: the first size within 5% of the largest images/s
                        "saturating_batch": next(b for b, r in zip(BATCH_SIZES, rate) if r >= SATURATION * top),
                        "fitted_batch_sizes": fitted,
                        "error": {"model_left_out_median": by_model[model].median},
                        "calibrated_on": ["h100"],
                        "fit": version,
                        "predicted": True,
                    }
                )
        for precision in PRECISIONS:
            files[f"{model}-{RUNTIME}-{precision}.json"] = {
                "model": model,
                "predictions": [r for r in rows if r["precision"] == precision],
                "cpu": None,
            }
    return files


def _same(a: Any, b: Any) -> bool:
    """Equal, floats within 1e-3 relative, everything else exactly. The files hold figures rounded to 0.1 images/s
    and 1 µs, and the fit's optimiser stops within about 1e-5 of a parameter: another machine's last bits may land
    a figure on the other side of a rounding (1e-4 of 1,000 images/s); a refit or another form moves them by
    percents."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and math.isclose(a, b, rel_tol=1e-3)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def check(folder: Path) -> list[str]:
    """The frozen files that differ from what this computes now, or are missing; nothing when all hold."""
    wrong = []
    for name, content in freeze().items():
        path = folder / name
        if not path.exists() or not _same(json.loads(path.read_text(encoding="utf-8")), content):
            wrong.append(name)
    return wrong


def describe(files: dict[str, Any]) -> str:
    record = files["fit.json"]
    p = record["fitted"]
    lines = [
        f"fit {record['version']}, sha256 {record['sha256'][:12]}: on {len(record['inputs']['observations'])} H100 "
        f"figures ({', '.join(record['fitted_on'])}), compute {p['compute']:.3f} of peak, memory "
        f"{p['memory']:.3f} of bandwidth, {p['per_op_s'] * 1e6:.1f} µs a kernel",
        f"error in images/s: in sample median {record['in_sample']['median']:.0%} (worst "
        f"{record['in_sample']['worst']:.0%}); each model left out median {record['model_left_out']['median']:.0%} "
        f"(worst {record['model_left_out']['worst']:.0%}), batching gain {record['model_left_out']['gain_median']:.0%}",
        f"{'model':<13}{'precision':<10}{'device':<7}" + "".join(f"{b:>7}" for b in BATCH_SIZES) + "   gain",
    ]
    for name, content in files.items():
        if name == "fit.json":
            continue
        for row in content["predictions"]:
            lines.append(
                f"{content['model']:<13}{row['precision']:<10}{row['device']:<7}"
                + "".join(f"{v:>7.0f}" for v in row["images_per_s"])
                + f"  {row['gain']:5.1f}x"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, help="freeze the predictions into this new folder")
    group.add_argument("--check", type=Path, help="say whether a frozen folder still holds what this computes")
    args = parser.parse_args(argv)
    if args.check is not None:
        wrong = check(args.check)
        print(f"{args.check}: " + ("holds" if not wrong else f"differs in {', '.join(wrong)}"))
        return 1 if wrong else 0
    files = freeze()
    print(describe(files))
    if args.write is not None:
        if any(args.write.glob("*.json")):
            print(
                f"predict_xla: {args.write} already holds frozen predictions; a new fit takes a new folder",
                file=sys.stderr,
            )
            return 2
        args.write.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (args.write / name).write_text(json.dumps(content, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {len(files)} files to {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
