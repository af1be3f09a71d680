"""The prepared GPU run (issue 31): batching measured on one GPU and on its host's CPU, in one command.

    python benchmarks/gpu/run.py --out DIR [--archive FILE]                    # the GPU host (make gpu)
    python benchmarks/gpu/run.py --out DIR --models tiny --devices cpu ...     # this CPU, in CI (seconds)

For each model in turn (InceptionV3, then MobileNetV2: the README's headline; then ResNet-50), with the
jax runtime (Keras 3 on JAX; the host has no TensorFlow, so each model is built from the catalogue with
random weights: timing does not depend on their values, and every record says so):

1. the floor: the model called in process (``serve_bench.runtimes._floor``) on the GPU in each precision
   (then doubling the batch past the last size while throughput grows: where it stops growing, and the
   largest that fits);
2. served: one local server per device and precision (``serve --runtime jax --device D --precision P``),
   all of them measured by one sweep through serve-bench's own gRPC client at one request in flight, so
   the run's report compares devices and precisions with no special casing;
3. batch 1 at rising concurrency without batching (``--in-flight``, default 1, 2 and 4) on the first device:
   whether requests in flight at once hide the request path's fixed cost, as they would a C++ server's (with
   it as slow as the GPU's call, batch 1 served can come near in process only so);
4. the server's own batching filled: a GPU server batching requests of one image at rising concurrency
   (its allowed batch sizes those the floor compiled, so it compiles nothing cold);
5. the floor on the CPU;

and, after the first model's steps, where its served time goes on the first served target
(``benchmarks/server_overhead.py``: in process, served, and a bare grpc.aio server answering the same
bytes, in alternating rounds, at batch 1 and 16): part of that model's answer, so it comes before the next
model's steps (last, it was past the budget of a visit that measures three models at longer points).

A model's steps all run before the next model's, so that a visit whose compiles are slow brings back whole
answers for the models it reached rather than halves of all three. A step that would start past the time
budget is skipped and listed. Every program is compiled and run once in a warm-up (the floor makes each size
ready before timing it; a server makes its sizes ready before it is AVAILABLE), never inside a measured
window, and compiled programs are shared between processes through JAX's persistent cache. Results are
ordinary run directories (points.jsonl, run.json with the GPU's NVML facts, report.html) plus
``floor/*.jsonl``; after each step the whole result folder (without models or caches) is packed again into
``--archive``, so a visit cut short still brings back every step that finished.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import perf_analyzer  # noqa: E402
from serve_bench.errors import UserError  # noqa: E402
from serve_bench.export import parse_batch_sizes  # noqa: E402
from serve_bench.runtimes import JAX, RECORDS, record, write_random_copy  # noqa: E402

GPU_SIZES = "1,2,4,8,16,32,64,128,256"
# the servers' --max_body_bytes: the default 256 MiB caps a gRPC input at 64 Mi floats (a quarter of it), under
# InceptionV3's batch 256 (256 x 299 x 299 x 3 = 65.5 Mi)
BODY_BYTES = 1 << 30
CPU_SIZES = "1,8,64"
GPU_MEMORY_FRACTION = "0.9"  # of the GPU's memory a floor may take (JAX's default limit is 0.75)
# what may measure the host's CPU: a runtime that runs there without TensorFlow, draws its own copy of a catalogue
# model and has a floor runner (XLA:CPU, the GPU's own runtime, first; ONNX Runtime from a carried skeleton)
CPU_RUNTIMES = (
    JAX.name,
    *(r.name for r in RECORDS.values() if r is not JAX and r.standalone and r.write_random and r.floor),
)


def label(device: str, precision: str, runtime: str = JAX.name) -> str:
    """A served target's name and its floor file's tail: device-precision, then the runtime where it is not jax's
    (summarize.py reads the device before the first '-', and finds the floor by the whole label)."""
    return f"{device}-{precision}" + ("" if runtime == JAX.name else f"-{runtime}")


STEP_KINDS = ("gpu-floor", "served", "in-flight", "batching", "cpu-floor", "overhead")
# the runs of the in-flight and batching steps are named <model> and these (summarize.py keeps them apart)
IN_FLIGHT_RUN = "-batch1-in-flight"
SERVER_BATCHING_RUN = "-server-batching"
OVERHEAD_SIZES = "1,16"  # the served path's fixed cost, and a size where the bytes cost more than the call


@dataclass
class Step:
    name: str
    run: Callable[[], dict[str, Any]]
    kind: str = "served"


@dataclass
class Plan:
    out: Path
    budget_s: float
    archive: Path | None
    started: float = field(default_factory=time.monotonic)
    done: list[dict[str, Any]] = field(default_factory=list)
    jax_gpus: list[str] = field(default_factory=list)  # as JAX lists them (checked before any step)
    _packing: bool = False
    _terminated: bool = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def progress(self, record: dict[str, Any]) -> None:
        record = {"elapsed_s": round(self.elapsed(), 1), **record}
        self.done.append(record)
        with (self.out / "progress.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(json.dumps(record), flush=True)
        self.pack()

    def pack(self) -> None:
        if self.archive is None:
            return
        partial = self.archive.with_name(self.archive.name + ".part")
        self._packing = True
        try:
            with tarfile.open(partial, "w:gz") as tar:
                for path in sorted(self.out.rglob("*")):
                    relative = path.relative_to(self.out)
                    if path.is_file() and relative.parts[0] not in ("models", "xla-cache"):
                        tar.add(path, arcname=str(Path(self.out.name) / relative))
            os.replace(partial, self.archive)
        finally:
            self._packing = False
        if self._terminated:  # SIGTERM came while packing: this pack was let finish, now exit
            raise SystemExit(143)

    def terminate(self, *_: object) -> None:
        """SIGTERM (visit.sh's hard limit): pack at once what the folder holds, so the step under way keeps what
        it measured so far (a sweep's points, a floor's sizes), then exit through the finally blocks (which stop
        the servers a step started: each in a session of its own, out of the limit's reach). Packing comes
        first because stopping servers can outlast the limit's grace before SIGKILL."""
        self._terminated = True
        if self._packing:
            return  # the pack under way finishes, then exits
        self.pack()
        raise SystemExit(143)


def _environment(out: Path) -> dict[str, str]:
    """Children share compiled programs (JAX's persistent cache), grow GPU memory as needed instead of taking
    75% of it at start (a floor and a server, or two servers, on one GPU), and run Keras on JAX."""
    return {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "JAX_COMPILATION_CACHE_DIR": str(out / "xla-cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }


def _floor(
    plan: Plan,
    copy: Path,
    model: str,
    device: str,
    precision: str,
    sizes: str,
    beyond: int,
    max_seconds: float | None = None,
    runtime: str = JAX.name,
) -> dict[str, Any]:
    out = plan.out / "floor" / f"{model}-{label(device, precision, runtime)}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "serve_bench.runtimes._floor", str(copy), "--device", device]
    command += ["--runtime", runtime]
    command += ["--precision", precision, "--batch-sizes", sizes, "--beyond", str(beyond), "--min-seconds", "1"]
    if max_seconds is not None:
        command += ["--max-seconds", f"{max_seconds:.0f}"]
    env = _environment(plan.out)
    if device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"  # leave the GPU alone while the CPU is measured
    else:  # JAX's allocator stops at 75% of GPU memory even when it grows as needed: the largest that fits is
        # the GPU's, not that default's (a floor runs alone on the GPU; 10% left for XLA's workspace)
        # (jaxlib 0.11 refuses the CUDA plugin if the deprecated XLA_PYTHON_CLIENT_MEM_FRACTION is set beside it:
        # the first H100 visit's six GPU floors failed so, 2026-11-26)
        env.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
        env["XLA_CLIENT_MEM_FRACTION"] = GPU_MEMORY_FRACTION
    # its stderr comes back whole (XLA's warnings, a traceback), not only the last line the progress record keeps
    errors = out.with_name(out.stem + ".stderr.txt")
    with out.open("w") as sink, errors.open("w") as stderr:
        # a floor past three times its allowance is stuck; not less than 150 s, which lets a GPU whose compiles take
        # a minute measure both ends of the curve (batch 1 and the largest) before it is stopped
        limit = max(150.0, (max_seconds or 300.0) * 3)
        try:
            done = subprocess.run(command, env=env, stdout=sink, stderr=stderr, text=True, timeout=limit)
            done.stderr = errors.read_text(errors="replace")
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess(command, 124, "", f"the floor ran past {limit:.0f} s and was stopped")
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    measured = sorted((x for x in lines if "images_per_s" in x), key=lambda x: x["batch_size"])
    result: dict[str, Any] = {"file": str(out.relative_to(plan.out)), "sizes": [x["batch_size"] for x in measured]}
    left = [x for x in lines if "left_out" in x]
    if left:
        result["left_out"] = left[0]["left_out"]
    if done.returncode != 0:
        result["error"] = (done.stderr.strip().splitlines() or ["?"])[-1]
    if measured:
        best = max(measured, key=lambda x: x["images_per_s"])
        result |= {"batch1_images_per_s": measured[0]["images_per_s"], "best": best["batch_size"]}
        result["best_images_per_s"] = best["images_per_s"]
        result["compile_s"] = round(sum(x["compile_s"] for x in measured), 1)
    return result


OVERHEAD_STOP_S = 8.0  # seconds server_overhead has to stop its servers: inside visit.sh's 10 s before SIGKILL


def _overhead(
    plan: Plan, model: str, device: str, precision: str, runtime: str = JAX.name, limit: float = 240.0
) -> dict[str, Any]:
    """benchmarks/server_overhead.py on this host, in alternating rounds: the runtime in process, served by the
    local server, and a bare grpc.aio server answering the same bytes: how much of the served figure is Python
    gRPC's, how much serve-bench's own, how much the runtime's. Past ``limit`` (or when this run is stopped) it is
    sent SIGTERM and stops the servers and the floor it started, each in a session of its own; SIGKILL after
    ``OVERHEAD_STOP_S`` (it was SIGKILL at once, and its servers outlived the visit's step)."""
    out = plan.out / f"overhead-{model}-{label(device, precision, runtime)}.txt"
    command = [sys.executable, "-m", "benchmarks.server_overhead", "--runtime", runtime, "--model", model]
    command += ["--device", device, "--precision", precision, "--batch-sizes", OVERHEAD_SIZES, "--rounds", "3"]
    command += ["--seconds", "1", "--no-batching", "--models-dir", str(plan.out / "models")]
    if perf_analyzer.locate() is not None:  # carried (wheels.sh): a C++ client against the same server, each round
        command += ["--perf-analyzer"]
    env = _environment(plan.out)
    if device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    result: dict[str, Any] = {"file": str(out.relative_to(plan.out))}
    with out.open("w") as sink:
        child = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            code = None
            result["error"] = f"ran past {limit:.0f} s and was stopped"
        finally:
            if child.poll() is None:  # past the limit, or visit.sh's hard limit here: its finally stops its servers
                os.killpg(child.pid, signal.SIGTERM)  # (each in a session of its own, out of this group's reach)
                try:
                    child.wait(timeout=OVERHEAD_STOP_S)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
    if code:
        lines = out.read_text(errors="replace").strip().splitlines()
        result["error"] = lines[-1] if lines else f"exit status {code}"
    return result


def _batching_file(path: Path, sizes: tuple[int, ...]) -> Path:
    from serve_bench.export import BatchingParams

    params = BatchingParams(
        max_batch_size=max(sizes),
        batch_timeout_micros=1000,
        max_enqueued_batches=1000,
        num_batch_threads=1,  # one device: one batch at a time, as TF Serving's GPU guide advises
        allowed_batch_sizes=sizes,
    )
    path.write_text(params.to_text())
    return path


def _servers(
    plan: Plan, model: str, targets: list[tuple[str, str, str, str]], sizes: str, batching: Path | None
) -> list[Any]:
    from serve_bench.servers import LocalServerProcess

    class _Server(LocalServerProcess):  # the run's environment: shared compile cache, growing GPU memory
        def environment(self) -> dict[str, str]:
            env = _environment(plan.out)
            if "--device=cpu" in self.extra_flags:
                env["JAX_PLATFORMS"] = "cpu"
            return env

    started = []
    for name, device, precision, runtime in targets:
        # 1 GiB bodies: the default 256 MiB caps a gRPC input at 64 Mi floats, under InceptionV3's batch 256 (65.6 Mi)
        flags = (
            f"--runtime={runtime}",
            f"--device={device}",
            f"--precision={precision}",
            f"--max_body_bytes={BODY_BYTES}",
        )
        compiles = record(runtime).compiles_per_shape
        flags += (f"--compile_batch_sizes={sizes}",) if batching is None and compiles else ()
        server = _Server(
            plan.out / "models",
            model,
            batching_file=batching,
            extra_flags=flags,
            work_dir=plan.out / "servers" / f"{model}-{name}",
            startup_timeout_s=540,
        )
        server.launch()  # every server loads and compiles at once (a CPU server's compiles take longest)
        started.append(server)
    try:
        for server in started:
            server.wait_ready()
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started


def _served(
    plan: Plan,
    model: str,
    targets: list[tuple[str, str, str, str]],
    sizes: str,
    concurrency: tuple[int, ...],
    run_name: str,
    prices: dict[str, float],
    durations: dict[str, float],
    batching: Path | None = None,
) -> dict[str, Any]:
    from serve_bench.report import build_report
    from serve_bench.sweep import parse_spec, run_sweep

    servers = _servers(plan, model, targets, sizes, batching)
    try:
        toml = [
            f'name = "{run_name}"',
            f'model = "{model}"',
            f'models_dir = "{plan.out / "models"}"',
            f"batch_sizes = [{sizes}]" if batching is None else "batch_sizes = [1]",
            'payloads = ["float"]',
            'currency = "USD"',
            "[load]",
            f"concurrency = [{', '.join(map(str, concurrency))}]",
            "[durations]",
            f"warmup_s = {durations['warmup_s']}",
            f"min_duration_s = {durations['min_duration_s']}",
            "min_requests = 3",
            "windows = 2",
            "until_stable = false",
        ]
        for (name, device, _, runtime), server in zip(targets, servers):
            toml += ["[[targets]]", f'name = "{name}"', f'url = "{server.grpc_url}"', f'device = "{device}"']
            toml += [f'metrics = "{server.metrics_url}"', f'runtime = "{runtime}"']
            if device in prices:
                toml.append(f"price_per_hour = {prices[device]}")
        spec = parse_spec("\n".join(toml) + "\n", f"{run_name}.toml")
        run_dir = plan.out / "runs" / run_name
        outcome = asyncio.run(run_sweep(spec, run_dir, models_dir=plan.out / "models"))
        report = build_report(run_dir, models_dir=plan.out / "models", plots=True)
        result: dict[str, Any] = {"run": str(run_dir.relative_to(plan.out)), "points": len(outcome.measured)}
        if outcome.failed_targets:
            result["failed_targets"] = outcome.failed_targets
        return result | {"report": str(report.html.relative_to(plan.out))}
    finally:
        for server in reversed(servers):
            server.stop()


def _jax_gpus(plan: Plan) -> list[str]:
    """The GPUs JAX sees in a process like the runs' own (their environment, the carried wheels), asked once before
    any step: the witness that counts, since NVML can see a GPU that JAX cannot use (a CUDA plugin that does not
    load), and NVML may be unreadable where JAX runs. None: UserError, one line, before the visit spends a step."""
    # Keras too: every step imports it, and a wheel of it that does not import should stop the visit here, once
    code = "import keras, jax\nfor d in jax.devices('gpu'): print(f'{d.platform}:{d.id} {d.device_kind}')"
    env = _environment(plan.out)
    env.setdefault("JAX_PLATFORMS", "cuda,cpu")  # as the jax runtime asks for a GPU
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        raise UserError("--devices gpu: JAX did not list its GPUs within 180 s") from None
    seen = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not seen:
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()] or ["it lists none"]
        raise UserError(
            f"--devices gpu: Keras on JAX sees no GPU here ({said[-1][:300]}); pass --devices cpu to rehearse"
        )
    return seen


def _gpu_facts(plan: Plan) -> dict[str, Any]:
    from serve_bench.stats._metadata import gpu_details

    facts = {"gpus": gpu_details(), "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    if plan.jax_gpus:
        facts["jax_gpus"] = plan.jax_gpus
    (plan.out / "host.json").write_text(json.dumps(facts, indent=2) + "\n")
    return facts


def build_steps(plan: Plan, args: argparse.Namespace) -> list[Step]:
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    kinds = _step_kinds(args.steps)
    for device in devices:
        JAX.check_device(device)
    if "gpu" in devices:
        plan.jax_gpus = _jax_gpus(plan)
    for precision in precisions:
        JAX.check_precision(precision)
    parse_batch_sizes(args.batch_sizes, "batch_sizes")
    parse_batch_sizes(args.cpu_batch_sizes, "cpu_batch_sizes")
    fill = parse_batch_sizes(args.fill, "--fill")
    in_flight = parse_batch_sizes(args.in_flight, "--in-flight")
    prices = {k: v for k, v in (("gpu", args.gpu_price_per_hour), ("cpu", args.cpu_price_per_hour)) if v is not None}
    durations = {"warmup_s": args.warmup_s, "min_duration_s": args.min_duration_s}
    copies = {m: write_random_copy(plan.out / "models", m, version=1) for m in models}
    if not models or not devices or ("gpu" in devices and not precisions):
        raise UserError("--models, --devices and (with gpu) --precisions each need at least one value")
    cpu = args.cpu_runtime
    if cpu not in CPU_RUNTIMES:
        raise UserError(f"--cpu-runtime {cpu!r}: one of {', '.join(CPU_RUNTIMES)}")
    on_gpu = [(label("gpu", p), "gpu", p, JAX.name) for p in precisions if "gpu" in devices]
    # the CPU is served in a sweep of its own, at its own sizes: XLA:CPU at the GPU's largest batches would
    # take minutes of the visit for the least informative points
    on_cpu = [(label("cpu", "fp32", cpu), "cpu", "fp32", cpu)] if "cpu" in devices else []
    served = on_gpu + on_cpu
    # the CPU's copies: jax's own, or another runtime's drawn here (from the skeletons carried, for ONNX Runtime),
    # only where a step that runs the CPU is asked for; a missing skeleton stops the run in one line, before any step
    cpu_copies = copies
    cpu_steps = {"served", "cpu-floor"} | ({"in-flight", "batching", "overhead"} if served[0][1] == "cpu" else set())
    if on_cpu and cpu != JAX.name and kinds & cpu_steps:
        draw = record(cpu).write_random
        assert draw is not None  # CPU_RUNTIMES holds only runtimes that draw a copy of their own
        cpu_copies = {m: draw(plan.out / "models", m, 1) for m in models}
    # The GPU's first floor of a model picks its batch sizes within a share of the time left (compiling is the
    # unknown: seconds per size and precision on a GPU), widest coverage first; its other precision and the
    # served sweep then run the sizes it reached, which the shared compile cache already holds.
    reached: dict[str, str] = {}

    def allowance(model: str, share: float) -> float:
        left = len(models) - models.index(model)
        return max(30.0, (plan.budget_s - plan.elapsed()) * share / left)

    def first_floor(model: str, precision: str) -> dict[str, Any]:
        seconds = allowance(model, args.floor_share)
        result = _floor(plan, copies[model], model, "gpu", precision, args.batch_sizes, args.beyond, seconds)
        within = [b for b in result["sizes"] if b <= max(parse_batch_sizes(args.batch_sizes, "batch_sizes"))]
        if within:
            reached[model] = ",".join(map(str, within))
        return result

    def other_floor(model: str, precision: str) -> dict[str, Any]:
        seconds = allowance(model, args.floor_share / 2)
        result = _floor(plan, copies[model], model, "gpu", precision, reached.get(model, args.batch_sizes), 0, seconds)
        if model not in reached and result["sizes"]:  # the first measured none: the served sweep takes these
            reached[model] = ",".join(map(str, result["sizes"]))
        return result

    def served_sizes(model: str) -> str:
        """The sizes a GPU floor measured (so compiled: the cache holds them), else the smallest alone: servers
        compiling every size cold, two precisions at once, could spend the rest of the visit before AVAILABLE."""
        return reached.get(model) or str(min(parse_batch_sizes(args.batch_sizes, "batch_sizes")))

    def batching_sizes(model: str) -> tuple[int, ...]:
        """The batcher's allowed_batch_sizes, every one of which its server compiles before AVAILABLE: those a
        GPU floor measured up to the largest fill (the compile cache holds them), so the step compiles nothing
        cold on a GPU whose compiles are slow; every power of two up to it where the floors measured them all
        (or on the CPU, which compiles in a second). At least one size past 1 (the largest fill), so it batches."""
        powers = {1, *fill, *(1 << i for i in range(max(fill).bit_length()))}
        every = tuple(sorted(s for s in powers if s <= max(fill)))
        if served[0][1] != "gpu":
            return every
        compiled = {int(s) for s in reached.get(model, "").split(",") if s}
        allowed = tuple(s for s in every if s in compiled)
        return allowed if any(s > 1 for s in allowed) else (1, max(fill))

    steps: list[Step] = []
    for model in models:  # model by model, in the order given: each one's answer whole before the next
        for i, precision in enumerate(precisions if "gpu" in devices else []):
            floor = first_floor if i == 0 else other_floor
            steps.append(
                Step(f"floor {model} gpu {precision}", lambda m=model, p=precision, f=floor: f(m, p), "gpu-floor")
            )
        if on_gpu:
            steps.append(
                Step(
                    f"served {model} " + " ".join(name for name, *_ in on_gpu),
                    lambda m=model: _served(plan, m, on_gpu, served_sizes(m), (1,), m, prices, durations),
                )
            )
        if on_cpu:
            steps.append(
                Step(
                    f"served {model} {on_cpu[0][0]}",
                    lambda m=model: _served(
                        plan, m, on_cpu, args.cpu_batch_sizes, (1,), f"{m}-cpu" if on_gpu else m, prices, durations
                    ),
                )
            )
        name, device, precision, runtime = served[0]
        # then batch 1 at several requests in flight, unbatched, on the first device: the fixed cost hidden or not
        steps.append(
            Step(
                f"in flight {model} {name} batch 1 at {args.in_flight}",
                lambda m=model: _served(plan, m, served[:1], "1", in_flight, m + IN_FLIGHT_RUN, prices, durations),
                "in-flight",
            )
        )
        # then the server's own batching filled, on the first device

        def batched(
            m: str = model, n: str = name, d: str = device, p: str = precision, r: str = runtime
        ) -> dict[str, Any]:
            batching = _batching_file(plan.out / f"batching-{m}.txt", batching_sizes(m))
            target = [(f"{n}-batching", d, p, r)]
            return _served(plan, m, target, "", fill, m + SERVER_BATCHING_RUN, prices, durations, batching)

        steps.append(Step(f"server batching {model} {name} concurrency {args.fill}", batched, "batching"))
        if on_cpu:  # and the CPU's floor, after its served figures
            steps.append(
                Step(
                    f"floor {model} cpu fp32" + ("" if cpu == JAX.name else f" {cpu}"),
                    lambda m=model: _floor(plan, cpu_copies[m], m, "cpu", "fp32", args.cpu_batch_sizes, 0, None, cpu),
                    "cpu-floor",
                )
            )
        if model == models[0]:  # then where its served time goes, on the first served target (the headline's)
            split = Step(
                f"overhead {model} {name}",
                lambda m=model, d=device, p=precision, r=runtime: _overhead(plan, m, d, p, r),
                "overhead",
            )
            steps.append(split)
    return [step for step in steps if step.kind in kinds]


def _step_kinds(text: str) -> set[str]:
    kinds = {k.strip() for k in text.split(",") if k.strip()}
    unknown = sorted(kinds - set(STEP_KINDS))
    if unknown or not kinds:
        raise UserError(
            f"--steps {text!r}: give some of {','.join(STEP_KINDS)} (a second visit runs what the first lacked)"
        )
    return kinds


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / f"gpu-run-{stamp}")
    parser.add_argument("--archive", type=Path, default=None, help="pack the results here after every step")
    # the README's headline models first (InceptionV3, MobileNetV2), each one's answer whole before the next
    parser.add_argument("--models", default="inception_v3,mobilenet_v2,resnet50")
    parser.add_argument("--devices", default="gpu,cpu")
    parser.add_argument(
        "--cpu-runtime",
        default=CPU_RUNTIMES[0],
        help=f"what measures the CPU: {' or '.join(CPU_RUNTIMES)} (onnxruntime: copies drawn from the skeletons "
        "carried in .whl/onnx; on the 2-core VM XLA:CPU ran these convnets 2-28x slower than ONNX Runtime)",
    )
    parser.add_argument("--precisions", default="tf32,fp32", help="the GPU's, first the headline's")
    parser.add_argument("--batch-sizes", default=GPU_SIZES)
    parser.add_argument("--cpu-batch-sizes", default=CPU_SIZES, help="the CPU's floor (and sizes with no GPU)")
    parser.add_argument("--beyond", type=int, default=4, help="doublings past the last size, in process")
    parser.add_argument("--fill", default="8,32,128", help="concurrency of batch-1 requests, server batching")
    parser.add_argument(
        "--in-flight", default="1,2,4", help="concurrency of batch-1 requests to an unbatched server, first device"
    )
    parser.add_argument("--budget-s", type=float, default=420, help="start no step past this many seconds")
    parser.add_argument(
        "--floor-share", type=float, default=0.25, help="of the time left per model, for its first GPU floor"
    )
    parser.add_argument(
        "--steps", default=",".join(STEP_KINDS), help="which kinds of step run (a second visit: what the first lacked)"
    )
    parser.add_argument("--warmup-s", type=float, default=0.3)
    parser.add_argument("--min-duration-s", type=float, default=1.0)
    parser.add_argument("--gpu-price-per-hour", type=float, default=None)
    parser.add_argument("--cpu-price-per-hour", type=float, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    plan = Plan(args.out, args.budget_s, args.archive)
    # visit.sh's hard limit sends SIGTERM: pack, then exit through the finally blocks, so the servers a step
    # started are stopped, not left holding the GPU
    signal.signal(signal.SIGTERM, plan.terminate)
    try:
        JAX.require()
        steps = build_steps(plan, args)
    except UserError as exc:
        print(f"benchmarks/gpu/run.py: error: {exc}", file=sys.stderr)
        return 2
    plan.progress({"step": "host", **_gpu_facts(plan)})
    failed = 0
    for step in steps:
        if plan.elapsed() > plan.budget_s:
            plan.progress({"step": step.name, "skipped": f"past the {plan.budget_s:.0f} s budget"})
            continue
        began = time.monotonic()
        try:
            result = step.run()
        except Exception as exc:  # one step's failure (a server that does not start) must not lose the others
            failed += 1
            result = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"}
        except BaseException as exc:  # SIGTERM (the hard limit) or Ctrl-C: say which step was cut short, pack again
            cut = {"step": step.name, "seconds": round(time.monotonic() - began, 1)}
            plan.progress(cut | {"interrupted": f"{type(exc).__name__} {exc}".strip()})
            raise
        plan.progress({"step": step.name, "seconds": round(time.monotonic() - began, 1), **result})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
