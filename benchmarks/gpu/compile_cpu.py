"""Keras 3 on JAX: model build, XLA compile and one call, per model and batch size, cold and from JAX's cache.

    KERAS_BACKEND=jax PYTHONPATH=/tmp/site .venv-gpu-rehearsal/bin/python benchmarks/gpu/compile_cpu.py

Runs three fresh processes, one after the other, each building the models (weights=None: nothing to
download) and compiling ``model.stateless_call`` under ``jax.jit`` with ``.lower(...).compile()`` at each
batch size: without the persistent compilation cache, then twice with it on in one new folder (the first
fills it, the second is what a later process on the same machine pays). Each process also calls each
compiled function twice and times both calls. Build and compile also record the process's CPU seconds and
how many compilations asked JAX's persistent cache and how many it answered (jax.monitoring events), so a
slow figure from a busy machine is told apart from a miss. Prints a Markdown table (each figure the least
over --repeat rounds, the least disturbed on a shared machine) and writes every figure as JSON.
Whatever device JAX picks is used: the CPU here, the GPU on the GPU machines.

Options: --models InceptionV3,ResNet50,MobileNetV2  --batches 1,8,32,128  --repeat N  --json PATH
--merge JSON...: the table of earlier --json files together (benchmarks/gpu/cpu-rehearsal/ holds the README's).
--worker MODE: one process's measurements, used by the driver.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any

SIZES = {"InceptionV3": 299, "ResNet50": 224, "MobileNetV2": 224}
MODES = ("no cache", "cache, first process", "cache, second process")


def worker(mode: str, cache_dir: str, models: list[str], batches: list[int]) -> dict[str, Any]:
    started = time.perf_counter()
    import jax
    import numpy as np

    if mode != MODES[0]:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import keras

    # JAX counts each compilation that asks the persistent cache, and each hit: a miss in the second process
    # tells a cache that did not help from a machine that was busy.
    events: dict[str, int] = {}

    def count(event: str, **_: Any) -> None:
        events[event] = events.get(event, 0) + 1

    jax.monitoring.register_event_listener(count)

    def cache_use() -> tuple[int, int]:
        return (
            events.get("/jax/compilation_cache/compile_requests_use_cache", 0),
            events.get("/jax/compilation_cache/cache_hits", 0),
        )

    imported = time.perf_counter() - started
    out: dict[str, Any] = {
        "mode": mode,
        "loadavg_start": os.getloadavg()[0],
        "import_s": imported,
        "keras": keras.__version__,
        "jax": jax.__version__,
        "backend": keras.backend.backend(),
        "device": str(jax.devices()[0]),
        "rows": [],
    }
    for name in models:
        size = SIZES[name]
        t0, c0, u0 = time.perf_counter(), time.process_time(), cache_use()
        model = getattr(keras.applications, name)(
            include_top=False, weights=None, pooling="avg", input_shape=(size, size, 3)
        )
        build_s, build_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        build_cache = [b - a for a, b in zip(u0, cache_use())]
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]
        fn = jax.jit(lambda tv, ntv, x, model=model: model.stateless_call(tv, ntv, x, training=False)[0])
        for batch in batches:
            x = jax.device_put(np.random.default_rng(0).random((batch, size, size, 3), dtype=np.float32))
            t0 = time.perf_counter()
            lowered = fn.lower(tv, ntv, x)
            lower_s = time.perf_counter() - t0
            t0, c0, u0 = time.perf_counter(), time.process_time(), cache_use()
            compiled = lowered.compile()
            compile_s, compile_cpu_s = time.perf_counter() - t0, time.process_time() - c0
            compile_cache = [b - a for a, b in zip(u0, cache_use())]
            calls = []
            for _ in range(2):
                t0 = time.perf_counter()
                y = compiled(tv, ntv, x)
                y.block_until_ready()
                calls.append(time.perf_counter() - t0)
            out["rows"].append(
                {
                    "model": name,
                    "input": size,
                    "params": model.count_params(),
                    "build_s": build_s,
                    "build_cpu_s": build_cpu_s,
                    "build_cache_requests_hits": build_cache,
                    "batch": batch,
                    "lower_s": lower_s,
                    "compile_s": compile_s,
                    "compile_cpu_s": compile_cpu_s,
                    "compile_cache_requests_hits": compile_cache,
                    "first_call_s": calls[0],
                    "second_call_s": calls[1],
                    "output": list(y.shape),
                }
            )
            print(json.dumps(out["rows"][-1]), file=sys.stderr, flush=True)
            build_s = build_cpu_s = float("nan")  # counted once per model
    out["loadavg_end"] = os.getloadavg()[0]
    if mode != MODES[0]:
        files = [os.path.join(d, f) for d, _, fs in os.walk(cache_dir) for f in fs]
        out["cache_files"] = len(files)
        out["cache_bytes"] = sum(os.path.getsize(f) for f in files)
    return out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def best(runs: list[dict[str, Any]]) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
    """Per mode and (model, batch), each figure's minimum over the repeats: the least disturbed one."""
    out: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
    for run in runs:
        for r in run["rows"]:
            cell = out.setdefault(run["mode"], {}).setdefault((r["model"], r["batch"]), dict(r))
            for key, value in r.items():
                old = cell.get(key)
                if not key.endswith("_s"):
                    cell.setdefault(key, value)
                elif old is None or old != old or (value == value and value < old):
                    cell[key] = value
    return out


def table(runs: list[dict[str, Any]]) -> str:
    by_mode = best(runs)
    cold, first, second = (by_mode[m] for m in MODES)
    lines = [
        "| model (input) | batch | build s (CPU s): no cache / cache 2nd | lower s"
        " | XLA compile s (CPU s): no cache / cache 1st / cache 2nd"
        " | cache hits / asked, 2nd process: build, compile | call s (1st / 2nd) | images/s |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def seconds(row: dict[str, Any], key: str) -> str:
        """Wall seconds, and the process's CPU seconds in brackets where recorded (NaN: not this row)."""
        value, cpu = row[key], row.get(key.replace("_s", "_cpu_s"))
        if value != value:
            return ""
        return f"{value:.2f}" + ("" if cpu is None or cpu != cpu else f" ({cpu:.2f})")

    def hits(row: dict[str, Any], key: str) -> str:
        return "{1}/{0}".format(*row[key]) if key in row else "?"

    for key, r in cold.items():
        builds = f"{seconds(r, 'build_s')} / {seconds(second[key], 'build_s')}" if r["build_s"] == r["build_s"] else ""
        cache = hits(second[key], "compile_cache_requests_hits")
        if builds:
            cache = f"{hits(second[key], 'build_cache_requests_hits')}, {cache}"
        lines.append(
            f"| {r['model']} ({r['input']}) | {r['batch']} | {builds} | {r['lower_s']:.2f}"
            f" | {seconds(r, 'compile_s')} / {seconds(first[key], 'compile_s')} / {seconds(second[key], 'compile_s')}"
            f" | {cache}"
            f" | {r['first_call_s']:.3f} / {r['second_call_s']:.3f} | {r['batch'] / r['second_call_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(SIZES))
    parser.add_argument("--batches", default="1,8,32,128")
    parser.add_argument("--json", default="")
    parser.add_argument("--merge", nargs="+", metavar="JSON", help="print the table of earlier --json files together")
    parser.add_argument("--repeat", type=int, default=1, help="run the three processes N times; report minima")
    parser.add_argument("--worker", choices=MODES)
    parser.add_argument("--cache-dir", default="")
    args = parser.parse_args()
    models = args.models.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    if args.worker:
        print(json.dumps(worker(args.worker, args.cache_dir, models, batches)))
        return 0

    if args.merge:
        loaded = []
        for path in args.merge:
            with open(path) as f:
                loaded.append(json.load(f))
        runs = [run for result in loaded for run in result["runs"]]
        print(f"{len(runs)} processes from {len(loaded)} files, dates {sorted({r['date'] for r in loaded})}")
        report(loaded[0], runs)
        return 0

    os.environ.setdefault("KERAS_BACKEND", "jax")
    selection = ["--models", args.models, "--batches", args.batches]
    runs = []
    for repeat in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="jax-cache-") as cache_dir:
            for mode in MODES:
                print(f"--- {mode} (repeat {repeat + 1})", file=sys.stderr, flush=True)
                t0 = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, __file__, "--worker", mode, "--cache-dir", cache_dir, *selection],
                    check=True,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                run = json.loads(done.stdout)
                run["process_s"] = time.perf_counter() - t0
                run["repeat"] = repeat + 1
                runs.append(run)
    result = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "runs": runs,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    report(result, runs)
    return 0


def report(result: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    first = runs[0]
    print(
        f"{result['date']}, {result['cpu']}, {result['cores']} cores, Python {result['python']}, "
        f"Keras {first['keras']} on {first['backend']} {first['jax']}, device {first['device']}"
    )
    for run in runs:
        cache = (
            f", cache {run['cache_files']} files {run['cache_bytes'] / 2**20:.1f} MiB" if "cache_files" in run else ""
        )
        load = f", load average {run['loadavg_start']:.1f} -> {run['loadavg_end']:.1f}" if "loadavg_end" in run else ""
        print(
            f"{run.get('repeat', 1)}. {run['mode']}: import {run['import_s']:.1f} s,"
            f" whole process {run['process_s']:.0f} s{load}{cache}"
        )
    print(table(runs))


if __name__ == "__main__":
    sys.exit(main())
