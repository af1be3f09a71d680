"""The answer from a GPU run's folder (benchmarks/gpu/run.py): one table per model, in Markdown.

    python benchmarks/gpu/summarize.py RESULTS/gpu-run-... [--gpu-price-per-hour 2.99 --cpu-price-per-hour 0.68]
    python benchmarks/gpu/summarize.py RUN/visit-1 RUN/visit-2 RUN/visit-3 ...   # a visit's calls, as one answer

Per device and precision, from the run's own report analysis (no figure computed twice): images/s at batch 1
and at the best batch with their 95% intervals, the batching gain with its interval, the batch where
throughput stops growing (the smallest within 5% of the best), served over in-process (the floor, same
batch) at batch 1 and at the best batch, the server's own split of a batch-1 request (its metrics:
runtime vs everything else), and the cost per million images at the given hourly price. A served figure
under 0.9 of in-process at batch 1 is flagged: there the local server's fixed cost per request inflates
the gain, and the in-process gain beside it is the one a C++ server would come nearer to.

Several folders (the calls of one visit: a GPU call, then the CPU's floor in one call and its served sweep in
another) make one answer: a served target's share of in process reads its floor from whichever folder holds it.
A floor, or a served target, found in two of them is ambiguous (two visits, or a call run twice) and stops the
summary in one line naming both folders.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.gpu.run import IN_FLIGHT_RUN, SERVER_BATCHING_RUN  # noqa: E402
from benchmarks.predict_vs_measured import floor_model  # noqa: E402
from serve_bench.errors import UserError  # noqa: E402
from serve_bench.report import analyze_run  # noqa: E402
from serve_bench.stats import Interval, read_points  # noqa: E402
from serve_bench.stats._estimate import Estimate, ratio, ratio_text  # noqa: E402

PLATEAU = 0.95  # throughput "stops growing" at the smallest batch within 5% of the best
DISTORTION = 0.9  # served under this share of in-process at batch 1: the server's fixed cost shows


def stops_growing(rates: dict[int, float]) -> str:
    """Where throughput stops growing (the smallest batch within 5% of the best), as far as the measured sizes
    say: "by B" where a size below B was left out (it stopped somewhere up to B), "past P" where the best is the
    largest size measured and the one below it, P, is less than half of it (still growing after P, by how much
    further unknown), "B or later" where the best is the largest measured and its half was measured too."""
    sizes = sorted(rates)
    top = max(rates.values())
    stop = min(b for b in sizes if rates[b] >= PLATEAU * top)
    below = [b for b in sizes if b < stop]
    gap = bool(below) and below[-1] * 2 < stop
    if stop == sizes[-1]:
        return f"past {below[-1]}" if gap else f"{stop} or later"
    return f"by {stop}" if gap else str(stop)


def _in_process(line: dict[str, Any]) -> Estimate:
    """A floor line's images/s with its 95% interval (floors before 2026-11-27 recorded none)."""
    ci = line.get("images_per_s_ci")
    return Estimate.of(line["images_per_s"], Interval(ci[0], ci[1]) if ci else None)


def _floor(path: Path | None) -> dict[int, dict[str, Any]]:
    """A floor's measured sizes by batch size ({} where no folder holds that floor)."""
    if path is None:
        return {}
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {x["batch_size"]: x for x in lines if "images_per_s" in x}


def _witness(path: Path) -> str:
    """The floor's precision witness: its convolutions' largest error against float64 (about 1e-6 in float32,
    1e-3 with TF32 inputs), the precision measured rather than asked for ("" without one)."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    witness = next((x["precision_witness"] for x in lines if "precision_witness" in x), None)
    if not witness:
        return ""
    return f"; convolutions {max(witness.values()):.1e} off float64"


def _money(dollars: float, places: int) -> str:
    """Dollars to ``places`` decimals, or to two significant digits where those would read 0 (a cheap CPU's
    million images at a fraction of a cent)."""
    text = f"{dollars:.{places}f}"
    return f"{dollars:.2g}" if dollars > 0 and float(text) == 0 else text


def _cost(price_per_hour: float | None, images_per_s: float) -> str:
    """What a million images cost at the best batch's rate, at the device's hourly price ("" without a price)."""
    if not price_per_hour:
        return ""
    return f"; ${_money(price_per_hour / (3600 * images_per_s) * 1e6, 2)} per million images at its best"


def _first_runs(floor: dict[int, dict[str, Any]]) -> str:
    """The programs' first executions, apart from their compiles (a GPU's, and ONNX Runtime's first run of a size;
    none for XLA:CPU, "" then)."""
    runs = [x["first_run_s"] for x in floor.values() if x.get("first_run_s") is not None]
    return f", first runs {sum(runs):.1f} s (the longest {max(runs):.2f})" if runs else ""


def _as_served(line: dict[str, Any]) -> str:
    """The smallest size's median call on the fresh array, on the server's view of a request's bytes and after the
    device sat idle as between served requests, beside the server's runtime call in the row above ("" for floors
    before 2026-11-27, which timed no view; no idle figure before 2026-11-28)."""
    if "as_served_p50_ms" not in line:
        return ""
    idle = f", {line['gapped_p50_ms']:.2f} ms after {line['gap_ms']:g} ms idle" if "gapped_p50_ms" in line else ""
    return (
        f"; a batch-{line['batch_size']} call {line['p50_ms']:.2f} ms median, {line['as_served_p50_ms']:.2f} ms"
        f" on a view as the server passes it{idle}"
    )


def _in_flight(points: list[Any], floor: dict[int, dict[str, Any]]) -> str:
    """Batch-1 requests at several in flight to an unbatched server (run.py's in-flight step): images/s with its
    interval, over in process at batch 1 where the floor measured it, and the server's mean runtime call. Whether
    requests in flight at once hide the request path's fixed cost behind the device's call ("" without the step)."""
    if not points:
        return ""
    floor_one = floor.get(1, {}).get("images_per_s")
    cells = []
    for point in sorted(points, key=lambda p: p.load.in_flight):
        share = f", {point.items_per_s / floor_one:.2f} of in process" if floor_one else ""
        runtime = point.server.runtime_us_mean if point.server is not None else None
        call = f", runtime call {runtime / 1e3:.2f} ms" if runtime else ""
        rate = Estimate.of(point.items_per_s, point.throughput.items_per_s_ci)
        cells.append(f"{point.load.in_flight} in flight {_interval(rate)} img/s{share}{call}")
    return f"Batch 1 unbatched on {points[0].target.name}: " + "; ".join(cells) + "."


def _interval(estimate: Estimate) -> str:
    if estimate.low is None or estimate.high is None:
        return f"{estimate.value:,.0f}"
    return f"{estimate.value:,.0f} [{estimate.low:,.0f}–{estimate.high:,.0f}]"


def _floor_files(folders: list[Path]) -> dict[str, Path]:
    """Every floor's file by its name's stem, <model>-<label> as run.py names them (the label: device-precision, and
    the runtime where it is not jax), in whichever folder holds it; a floor two folders hold stops the summary."""
    found: dict[str, Path] = {}
    for folder in folders:
        for path in sorted((folder / "floor").glob("*.jsonl")):
            if not path.read_text().strip():  # a call stopped before the floor's header: measured again elsewhere
                continue
            if path.stem in found:
                raise UserError(
                    f"the floor {path.name} is in both {found[path.stem].parent.parent} and {folder};"
                    " summarize them apart, or give one of them"
                )
            found[path.stem] = path
    return found


def _floor_labels(files: dict[str, Path]) -> dict[str, list[str]]:
    """Each model's floors by their label, the model read from the file's first line (predict_vs_measured's
    floor_model: before 2026-11-27 a floor named it only in its copy's path)."""
    found: dict[str, list[str]] = {}
    for stem, path in files.items():
        first = path.read_text().splitlines()[:1]
        model = floor_model(json.loads(first[0])) if first else None
        if model and stem.startswith(f"{model}-"):
            found.setdefault(model, []).append(stem[len(model) + 1 :])
    return found


def _served_points(folders: list[Path]) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Each model's served sweeps (one table, GPU and CPU) and its batch-1 requests at several in flight, from every
    folder's runs (the server-batching runs apart); a target two folders served stops the summary."""
    by_model: dict[str, list[Any]] = {}
    in_flight: dict[str, list[Any]] = {}
    seen: dict[tuple[str, str, str], Path] = {}  # (kind, model, target) -> the folder that served it
    for folder in folders:
        for run_dir in sorted(p for p in (folder / "runs").glob("*") if (p / "points.jsonl").exists()):
            if run_dir.name.endswith(SERVER_BATCHING_RUN):
                continue
            flying = run_dir.name.endswith(IN_FLIGHT_RUN)
            into = in_flight if flying else by_model
            for point in read_points(run_dir):  # a run killed before its first point has none: nothing to add
                key = ("in flight" if flying else "served", point.model, point.target.name)
                if seen.setdefault(key, folder) != folder:
                    raise UserError(
                        f"{point.model} {key[0]} on {point.target.name} is in both {seen[key]} and {folder};"
                        " summarize them apart, or give one of them"
                    )
                into.setdefault(point.model, []).append(point)
    return by_model, in_flight


def summarize(folders: Path | list[Path], prices: dict[str, float]) -> str:
    given = [folders] if isinstance(folders, Path) else list(folders)
    folders = list({folder.resolve(): folder for folder in given}.values())  # a folder given twice counts once
    lines: list[str] = []
    files = _floor_files(folders)
    floors = _floor_labels(files)
    by_model, in_flight = _served_points(folders)
    for model in [*in_flight, *floors]:  # a visit that ran the in-flight step or a floor alone still says it
        by_model.setdefault(model, [])
    for model, points in by_model.items():
        lines += [f"### {model}", ""]
        if points:  # (none where a visit ran only the in-flight step)
            lines += [
                "| target | batch 1 img/s | best img/s (batch) | gain | stops growing at "
                "| served / in-process, b1 · best | server's split of b1 (runtime + rest) | $ per M images |",
                "|---|---|---|---|---|---|---|---|",
            ]
        for target in analyze_run(points).targets:
            base, best = target.baseline, target.best
            if base is None or best is None:
                lines.append(f"| {target.name} | not measured | | | | | | |")
                continue
            curve = target.client_curve
            plateau = stops_growing({b: c.items_per_s.value for b, c in curve.items()})
            device = target.name.partition("-")[0]
            floor = _floor(files.get(f"{model}-{target.name}"))
            shares: list[float | None] = []
            for cell in (base, best):
                measured = floor.get(cell.batch_size)
                shares.append(cell.items_per_s.value / measured["images_per_s"] if measured else None)
            flag = " ⚠" if shares[0] is not None and shares[0] < DISTORTION else ""
            shown = [f"{share:.2f}" if share is not None else "–" for share in shares]
            server = base.point.server
            split = (
                f"{server.request_us_mean / 1e3:.2f} ms = {server.runtime_us_mean / 1e3:.2f} + "
                f"{(server.request_us_mean - server.runtime_us_mean) / 1e3:.2f}"
                if server is not None and server.request_us_mean and server.runtime_us_mean
                else "–"
            )
            price = prices.get(device)
            cost = _money(price / (3600 * best.items_per_s.value) * 1e6, 3) if price else "–"
            gain = ratio(best.items_per_s, base.items_per_s)
            lines.append(
                f"| {target.name} | {_interval(base.items_per_s)} | {_interval(best.items_per_s)} ({best.batch_size})"
                f" | {ratio_text(gain)} | {plateau} | {shown[0]} · {shown[1]}{flag} | {split} | {cost} |"
            )
        lines.append("")
        # every floor of the model: those beside a served target in the table's order, then any measured alone
        served = [target.name for target in analyze_run(points).targets]
        labels = [x for x in served if x in floors.get(model, [])]
        labels += [x for x in floors.get(model, []) if x not in served]
        for label in labels:
            device = label.partition("-")[0]
            path = files[f"{model}-{label}"]
            floor = _floor(path)
            if len(floor) > 1:
                one = _in_process(floor[min(floor)])
                best_batch = max(floor, key=lambda b: floor[b]["images_per_s"])
                top = _in_process(floor[best_batch])
                lines.append(
                    f"In process on {label}: {_interval(one)} img/s at batch 1, {_interval(top)}"
                    f" at {best_batch} ({ratio_text(ratio(top, one))}), stops growing "
                    f"{stops_growing({b: x['images_per_s'] for b, x in floor.items()})}; largest measured "
                    f"{max(floor)}, compile {sum(x['compile_s'] for x in floor.values()):.0f} s in all"
                    f"{_first_runs(floor)}{_as_served(floor[min(floor)])}{_witness(path)}"
                    f"{_cost(prices.get(device), top.value)}."
                )
        flying = in_flight.get(model, [])
        if flying:
            lines += [_in_flight(flying, _floor(files.get(f"{model}-{flying[0].target.name}"))), ""]
        lines.append("")
    return "\n".join(lines)


def _price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive price in dollars an hour, such as 7.912")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", type=Path, nargs="+", help="a run's folder, or a visit's calls' folders")
    parser.add_argument("--gpu-price-per-hour", type=_price, default=None, help="dollars an hour, for the cost")
    parser.add_argument("--cpu-price-per-hour", type=_price, default=None, help="dollars an hour, for the cost")
    args = parser.parse_args(argv)
    prices = {k: v for k, v in (("gpu", args.gpu_price_per_hour), ("cpu", args.cpu_price_per_hour)) if v}
    missing = [str(folder) for folder in args.folders if not folder.is_dir()]
    try:
        if missing:
            raise UserError(f"no such folder: {', '.join(missing)}; give a GPU run's folder (its --out)")
        if not any((folder / "floor").is_dir() or (folder / "runs").is_dir() for folder in args.folders):
            raise UserError(
                f"no floor/ or runs/ in {', '.join(map(str, args.folders))}: give a GPU run's folder (run.py's --out,"
                " or a visit's visit-N)"
            )
        print(summarize(args.folders, prices))
    except UserError as exc:
        print(f"summarize.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
