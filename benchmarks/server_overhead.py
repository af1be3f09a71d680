"""The local server's fixed cost per request: in process, served, and a bare gRPC server, in alternating rounds.

    .venv/bin/python -m benchmarks.server_overhead --runtime jax --model tiny                     # this CPU
    python -m benchmarks.server_overhead --runtime jax --model inception_v3 --device gpu --precision tf32
                                                                                               # the GPU host
    .venv/bin/python -m benchmarks.server_overhead --stub --model inception_v3   # the server's own cost at
                                                                                 # InceptionV3's message sizes
    .venv/bin/python -m benchmarks.server_overhead --baseline /tmp/before        # a change's before and after
    .venv/bin/python -m benchmarks.server_overhead --stub --triton --perf-analyzer --model inception_v3
                                         # beside a C++ server (real Triton) and a C++ client (perf_analyzer)

Issue 31 item 4: a Python cost per request that TF Serving (C++) does not pay inflates the batching
gain, so the served batch-1 figure must be within 10% of in process. For each batch size (default 1
and 8), each round (default 3) measures in turn:

1. floor: the runtime's runner called in a child process that stays loaded between rounds (no server,
   no network, no encoding; images copied to the device and features back, as
   ``serve_bench.runtimes._floor`` calls it);
2. served: serve-bench's gRPC client at one request in flight against ``serve --runtime R`` unbatched,
   and against a second server with ``--enable_batching`` (``batch_timeout_micros`` 0, so a lone request
   is not held back: what is left is the batching path's own cost);
3. gRPC: the same client against a bare grpc.aio server answering, without parsing, the bytes the
   served answer had: what Python gRPC (server and client) costs at these message sizes.

``--stub`` replaces the runtime's runner in the served processes by one answering zeros at once, so the
figures are the server's own at the model's message sizes, where running the model here would drown
them; ``--baseline DIR`` serves the same from another checkout in the same rounds (the before of a
change: ``git worktree add /tmp/before HEAD~1``). What a C++ server and client pay at the same sizes:
``--triton`` (with ``--stub``) adds real Triton 2.51 answering zeros from a Python-backend model, through
serve-bench's Open Inference Protocol client; ``--perf-analyzer`` runs perf_analyzer 2.51 (C++) against the
local server (and Triton) in each round (``benchmarks/perf_analyzer.py``). Each served figure also prints its
cost around the runtime call (the client's latency less the server's own runtime figure).

Printed per batch size: medians over the rounds with their range, served over in-process, the server's
own split (its request_latency and runtime_latency histograms), CPU per request of each process (from
/proc), and the fixed cost per request: served latency minus floor latency, in µs. Every number comes
from one machine in one run; the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # appended: a --baseline checkout on PYTHONPATH comes first

_PREDICT = "/tensorflow.serving.PredictionService/Predict"
_METADATA = "/tensorflow.serving.PredictionService/GetModelMetadata"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, all its threads, and of its children, theirs (Linux /proc; 0 elsewhere):
    Triton's includes its Python backend's stub process, where the model runs and the tensors are copied."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = {
            int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()
        }
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK + sum(_cpu_seconds(child) for child in children)


def _environment(device: str) -> dict[str, str]:
    env = {**os.environ, "KERAS_BACKEND": "jax", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    if device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


# --- children ------------------------------------------------------------------------------------------------


def _floor_child(args: argparse.Namespace) -> None:
    """Load the runner once; for each stdin line ``SIZE SECONDS`` call it for that long, answer one JSON line."""
    import numpy as np

    runner, shape = _open_runner(args)
    rng = np.random.default_rng(0)
    print("ready", flush=True)
    for line in sys.stdin:
        size, seconds = int(line.split()[0]), float(line.split()[1])
        images = rng.integers(0, 256, (size, *shape)).astype(np.float32)
        for _ in range(3):  # a program's first calls allocate its buffers: untimed
            runner({"images": images})
        calls, cpu, started = 0, time.process_time(), time.perf_counter()
        while calls < 5 or time.perf_counter() - started < seconds:
            runner({"images": images})
            calls += 1
        wall = time.perf_counter() - started
        print(json.dumps({"calls": calls, "seconds": wall, "cpu_s": time.process_time() - cpu}), flush=True)


def _open_runner(args: argparse.Namespace) -> tuple[Any, tuple[int, ...]]:
    """The runner the server would run (the runtime's copy), or TensorFlow's SavedModel signature."""
    from serve_bench.catalogue import get_spec
    from serve_bench.export import converted_files, list_versions
    from serve_bench.runtimes import RuntimeSettings, open_runner, record

    models_dir = Path(args.models_dir)
    # a standalone runtime's copy may stand alone (no SavedModel beside it, as on the GPU host): its versions are
    # its own
    kept, base = record(args.runtime), models_dir / args.model
    if kept.standalone and kept.directory is not None and (not base.is_dir() or not list_versions(base)):
        base = models_dir / kept.directory / args.model
    version = list_versions(base)[-1]
    shape = tuple(get_spec(args.model).input_shape)
    if args.runtime == "tensorflow":
        from serve_bench._tf import import_tensorflow

        tf = import_tensorflow()
        function = tf.saved_model.load(str(models_dir / args.model / str(version))).signatures["serving_default"]
        return (lambda inputs: {k: v.numpy() for k, v in function(images=tf.constant(inputs["images"])).items()}), shape
    settings = RuntimeSettings(args.runtime, device=args.device, precision=args.precision)
    copy = converted_files(models_dir, args.runtime, args.model, version)[0]
    return open_runner(args.runtime, copy, settings), shape


def _grpc_child(args: argparse.Namespace) -> None:
    """A bare grpc.aio server: GetModelMetadata and Predict answer prebuilt bytes; Predict picks its answer by
    the request's length (one per batch size, the nearest), so nothing is parsed or serialized."""
    import grpc
    from grpc import aio

    from serve_bench.server._core import keep_request_buffers
    from serve_bench.server._grpc import SERVER_OPTIONS

    keep_request_buffers()  # the heap policy the local server runs with, so the floor is gRPC's alone
    folder = Path(args.answers)
    metadata = (folder / "metadata.bin").read_bytes()
    answers = {int(p.stem.split("-")[1]): p.read_bytes() for p in folder.glob("predict-*.bin")}

    async def predict(request: bytes, context: Any) -> bytes:
        answer = answers.get(len(request))
        if answer is None:  # the client's request differs by a few header bytes: the nearest batch size's
            answer = answers[len(request)] = answers[min(answers, key=lambda n: abs(n - len(request)))]
        return answer

    async def get_metadata(request: bytes, context: Any) -> bytes:
        return metadata

    async def serve() -> None:
        server = aio.server(options=SERVER_OPTIONS)
        handlers = {
            "Predict": grpc.unary_unary_rpc_method_handler(predict),
            "GetModelMetadata": grpc.unary_unary_rpc_method_handler(get_metadata),
        }
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("tensorflow.serving.PredictionService", handlers),)
        )
        server.add_insecure_port(f"127.0.0.1:{args.port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()

    asyncio.run(serve())


# --- the parent ----------------------------------------------------------------------------------------------


class Floor:
    def __init__(self, args: argparse.Namespace) -> None:
        command = [sys.executable, "-m", "benchmarks.server_overhead", "--child", "floor", "--model", args.model]
        command += ["--runtime", args.runtime, "--device", args.device, "--precision", args.precision]
        command += ["--models-dir", str(args.models_dir)]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=_environment(args.device), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the floor's child did not start")

    def measure(self, size: int, seconds: float) -> dict[str, float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{size} {seconds}\n")
        self.process.stdin.flush()
        line = json.loads(self.process.stdout.readline())
        return {"us": 1e6 * line["seconds"] / line["calls"], "cpu_us": 1e6 * line["cpu_s"] / line["calls"]}

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


class BareGrpc:
    def __init__(self, answers: Path) -> None:
        from serve_bench.servers import free_port

        self.port = free_port()
        command = [sys.executable, "-m", "benchmarks.server_overhead", "--child", "grpc"]
        command += ["--port", str(self.port), "--answers", str(answers)]
        self.process = subprocess.Popen(command, cwd=ROOT, env=_environment("cpu"), stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the bare gRPC server did not start")
        self.grpc_url = f"grpc://127.0.0.1:{self.port}"
        self.metrics_url = ""

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


_TRITON_STUB_MODEL = """
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.input_name, self.output = config["input"][0]["name"], config["output"][0]
        self.device_s = float(config["parameters"]["device_ms"]["string_value"]) / 1e3
        self.answers = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            rows = len(pb_utils.get_input_tensor_by_name(request, self.input_name).as_numpy())
            if rows not in self.answers:
                self.answers[rows] = np.zeros((rows, *self.output["dims"]), np.float32)
            if self.device_s:
                time.sleep(self.device_s)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(self.output["name"], self.answers[rows])]))
        return responses
"""


def triton_stub(model: str, work_dir: Path, max_batch_size: int, device_ms: float = 0.0) -> Any:
    """Real Triton 2.51 (its C++ gRPC front end and core) serving ``model``'s shapes from a Python-backend model
    answering zeros, unbatched (no dynamic batcher): what a C++ server's request path costs at this model's
    message sizes, measured through the same kind of client (serve-bench's, over the Open Inference Protocol).
    The Python backend adds its own hop (the request's tensor copied into shared memory for the stub process,
    python_backend src/python_be.cc), inside Triton's compute figures, so its latency is an upper bound.
    ``device_ms``: each call sleeps that long first, as :class:`StandIn` does; one model instance runs one call
    at a time (instance_group count 1), as a GPU runs one program at a time."""
    from serve_bench.catalogue import get_spec
    from serve_bench.export import TritonBatching, triton_config_text
    from serve_bench.servers import TritonServer

    spec = get_spec(model)

    class TritonStub(TritonServer):
        def write_repository(self, models_dir: Path, intra_op_threads: int) -> None:
            version = self.repository / self.model / "1"
            version.mkdir(parents=True)
            (version / "model.py").write_text(_TRITON_STUB_MODEL)
            parameters = {**self.repository_parameters(0), "device_ms": f"{device_ms:g}"}
            config = triton_config_text(self.model, spec.input_shape, spec.feature_size, self.batching, parameters)
            (self.repository / self.model / "config.pbtxt").write_text(config)

    unbatched = TritonBatching(max_batch_size=max_batch_size, dynamic_batching=False)
    return TritonStub(work_dir / "models", model, unbatched, work_dir=work_dir)


def _record_answers(server: Any, model: str, sizes: tuple[int, ...], folder: Path) -> None:
    """The served metadata answer and one Predict answer per batch size, as bytes, for the bare gRPC server."""
    import grpc

    from serve_bench import _protos
    from serve_bench.client._grpc import encode_predict_request
    from serve_bench.load import make_inputs

    request = _protos.message("tensorflow.serving.GetModelMetadataRequest")()
    request.model_spec.name = model
    request.metadata_field.append("signature_def")
    with grpc.insecure_channel(server.grpc_url.removeprefix("grpc://")) as channel:
        metadata = channel.unary_unary(_METADATA)(request.SerializeToString(), timeout=60)
        (folder / "metadata.bin").write_bytes(metadata)
        for size in sizes:
            inputs = make_inputs("float", size, None, image_size=_image_size(model))
            payload = encode_predict_request(model, None, "", inputs)
            (folder / f"predict-{len(payload)}.bin").write_bytes(channel.unary_unary(_PREDICT)(payload, timeout=300))


def _image_size(model: str) -> tuple[int, int]:
    from serve_bench.catalogue import get_spec

    height, width, _ = get_spec(model).input_shape
    return height, width


async def served_point(
    target: Any, model: str, size: int, seconds: float, pid: int, in_flight: int = 1
) -> dict[str, float]:
    """One point through serve-bench's client (``in_flight`` requests at once, of ``size`` images): latency, items/s
    and CPU per request, and the server's request and runtime figures where it has a metrics page."""
    from serve_bench.client import connect
    from serve_bench.load import PointSettings, make_inputs, run_closed_loop
    from serve_bench.metrics import read_server, read_settled, server_breakdown

    settings = PointSettings(warmup_s=0.5, min_duration_s=seconds, min_requests=5, windows=1, timeout_s=300)
    url, metrics = target.grpc_url, target.metrics_url
    async with connect(url, model, timeout=300) as client:
        prepared = client.prepare(make_inputs("float", size, client.signature_info, image_size=_image_size(model)))
        before = (await read_server(metrics, model, target_url=url))[0] if metrics else None
        server_cpu = _cpu_seconds(pid)
        run = await run_closed_loop(client, prepared, in_flight, settings)
        server_cpu = _cpu_seconds(pid) - server_cpu
        after = None
        if before is not None:  # Triton counts a request after answering it: read until its counters caught up
            after = (await read_settled(metrics, model, before, len(run.records), "GRPC", target_url=url))[0]
    failed = [r.status for r in run.records if r.status != "OK"]
    if failed:
        raise RuntimeError(f"{len(failed)} requests failed ({failed[0]}) at {url}")
    timed = [r for r in run.records if run.window_start <= r.intended < run.window_end]
    figures: dict[str, float] = {
        "us": statistics.fmean((r.done - r.intended) * 1e6 for r in timed),
        "images_per_s": size * len(timed) / (run.window_end - run.window_start),
        # the server's CPU over the whole run (warm-up included), the client's over the timed window
        "server_cpu_us": 1e6 * server_cpu / len(run.records),
        "client_cpu_us": 1e6 * run.process_cpu_seconds / len(timed),
    }
    if before is not None and after is not None:
        view = server_breakdown(before, after, "GRPC")
        figures["request_us"] = view.request_us_mean or 0.0
        figures["runtime_us"] = view.runtime_us_mean or 0.0
    return figures


def _median(values: list[float]) -> str:
    """A median over the rounds with its range: ``812 (790-840)``."""
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def _models_dir(args: argparse.Namespace) -> Path:
    """--models-dir, else a temporary one: the jax runtime's copy built from the catalogue with random weights
    (no TensorFlow needed, as on the GPU host), any other runtime's from an export with random weights."""
    if args.models_dir:
        return Path(args.models_dir)
    folder = Path(tempfile.mkdtemp(prefix="server-overhead-"))
    if args.runtime == "jax":
        from serve_bench.runtimes import write_random_copy

        write_random_copy(folder, args.model, version=1)
    else:
        from serve_bench.export import export_model, write_models_config

        runtimes = () if args.runtime == "tensorflow" else (args.runtime,)
        export_model(args.model, weights="random", out=folder, warmup_batch_sizes=(1,), runtimes=runtimes)
        write_models_config(folder)
    return folder


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """The command line: (its options, the serve arguments after ``--`` that a stub child is given)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server_overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--runtime", default="jax", help="tensorflow, onnxruntime, openvino or jax (default)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="cpu", help="cpu or gpu (the jax runtime)")
    parser.add_argument("--precision", default="fp32", help="fp32, tf32 or bf16 (the jax runtime)")
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="per figure per round")
    parser.add_argument("--models-dir", default="", help="an export holding the model (default: a temporary one)")
    parser.add_argument("--no-batching", action="store_true", help="skip the server with --enable_batching")
    parser.add_argument(
        "--baseline",
        default="",
        help="another checkout of serve-bench (git worktree add /tmp/base HEAD~1) whose servers are measured in "
        "the same rounds: the before of a change",
    )
    parser.add_argument(
        "--stub",
        action="store_true",
        help="serve with the runtime replaced by a stub answering zeros at once: the server's own cost at this "
        "model's message sizes (no floor)",
    )
    parser.add_argument(
        "--triton",
        action="store_true",
        help="with --stub: real Triton 2.51 (C++ front end) in the same rounds, a Python-backend model answering "
        "zeros, through serve-bench's Open Inference Protocol client (make servers-env)",
    )
    parser.add_argument(
        "--perf-analyzer",
        action="store_true",
        help="perf_analyzer 2.51 (C++ client) against the local server (and Triton) in each round, one in flight",
    )
    parser.add_argument("--child", choices=("floor", "grpc", "stub"), help=argparse.SUPPRESS)
    parser.add_argument("--stub-ms", type=float, default=0.0, help=argparse.SUPPRESS)  # benchmarks/in_flight.py
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--answers", default="", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    serve_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: len(argv) - len(serve_args) - (1 if serve_args else 0)])
    if args.triton and not args.stub:
        parser.error("--triton needs --stub: Triton runs a model answering zeros, so the local server must too")
    return args, serve_args


def main(argv: list[str] | None = None) -> int:
    args, serve_args = parse(argv)
    if args.child == "stub":
        return _stub_child(args, serve_args)
    if args.child == "floor":
        _floor_child(args)
        return 0
    if args.child == "grpc":
        _grpc_child(args)
        return 0
    # SIGTERM (run.py's step stopped) ends through compare's finally, which stops the servers and the floor: each
    # runs in a session of its own, and Python's default on SIGTERM left them running
    signal.signal(signal.SIGTERM, _terminated)
    compare(args)
    return 0


def _terminated(*_: object) -> None:
    raise SystemExit(143)


def compare(args: argparse.Namespace) -> dict[tuple[int, str], list[dict[str, float]]]:
    """Every figure, printed as the rounds end and returned: ``{(batch size, name): [one dict per round]}``, names
    ``floor``, ``grpc``, ``served``, ``batching``, ``triton``, ``perf_analyzer served``, ``perf_analyzer triton``."""
    from benchmarks import perf_analyzer
    from serve_bench.export import BatchingParams, parse_batch_sizes
    from serve_bench.servers import LocalServerProcess, ServerProcess

    sizes = parse_batch_sizes(args.batch_sizes, "batch_sizes")
    args.models_dir = _models_dir(args)
    scratch = Path(tempfile.mkdtemp(prefix="server-overhead-run-"))
    flags = (f"--runtime={args.runtime}", f"--compile_batch_sizes={','.join(map(str, sizes))}")
    if args.runtime == "jax":
        flags += (f"--device={args.device}", f"--precision={args.precision}")
    # the floor and both servers compile the same programs: once, through JAX's persistent cache (a GPU host's
    # minutes are few)
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(scratch / "xla-cache"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    batching = scratch / "batching.txt"
    params = BatchingParams(
        max_batch_size=max(sizes), batch_timeout_micros=0, max_enqueued_batches=1000, num_batch_threads=1
    )
    batching.write_text(params.to_text())

    class Server(LocalServerProcess):
        """``serve`` from this checkout, or from ``source`` (another checkout: the before of a change); with
        ``--stub`` through this script, which replaces the runtime's runner before serving."""

        def __init__(self, name: str, source: str, **kwargs: Any) -> None:
            super().__init__(args.models_dir, args.model, work_dir=scratch / name, **kwargs)
            self.source = source

        def command(self) -> list[str]:
            command = super().command()
            return stub_command(command, args.model) if args.stub else command

        def environment(self) -> dict[str, str]:
            env = _environment(args.device)
            if self.source:
                env["PYTHONPATH"] = os.pathsep.join((self.source, env["PYTHONPATH"]))
            return env

    print(
        f"server overhead: {args.model} on {args.runtime} ({args.device}, {args.precision})"
        f"{', the runtime stubbed' if args.stub else ''}, {os.cpu_count()} CPUs, {args.rounds} rounds x "
        f"{args.seconds:g} s per figure; load average {_load()} before",
        flush=True,
    )
    started: list[Any] = []
    floor: Floor | None = None
    try:
        floor = None if args.stub else Floor(args)
        targets: dict[str, Any] = {}
        for suffix, source in (("", ""), (" (baseline)", args.baseline)) if args.baseline else (("", ""),):
            targets["served" + suffix] = Server("served" + suffix.strip(" ()"), source, extra_flags=flags)
            if not args.no_batching:
                targets["batching" + suffix] = Server(
                    "batching" + suffix.strip(" ()"), source, batching_file=batching, extra_flags=flags
                )
        if args.triton:
            targets["triton"] = triton_stub(args.model, scratch / "triton", max(sizes))
        for server in targets.values():
            started.append(server)  # first: a server stopped while it starts is stopped too
            server.start()
        answers = scratch / "answers"
        answers.mkdir()
        _record_answers(targets["served"], args.model, sizes, answers)
        bare = BareGrpc(answers)
        started.append(bare)
        targets["grpc"] = bare
        results: dict[tuple[int, str], list[dict[str, float]]] = {}
        for round_number in range(args.rounds):
            for size in sizes:
                floor_figures = floor.measure(size, args.seconds) if floor else {"us": 0.0, "cpu_us": 0.0}
                results.setdefault((size, "floor"), []).append(floor_figures)
                for name, target in targets.items():
                    pid = target.process.pid if name == "grpc" else target.pid
                    figures = asyncio.run(served_point(target, args.model, size, args.seconds, pid))
                    results.setdefault((size, name), []).append(figures)
                for name in [n for n in ("served", "triton") if n in targets] if args.perf_analyzer else []:
                    results.setdefault((size, "perf_analyzer " + name), []).append(
                        _perf_analyzer_figures(perf_analyzer, targets[name].grpc_url, args.model, size)
                    )
            print(f"  round {round_number + 1} of {args.rounds} done; load average {_load()}", flush=True)
    finally:
        for server in started:  # all told at once, then each waited for: a slow one holds back none of the others
            if isinstance(server, ServerProcess) and server.process is not None:  # Triton's too
                try:
                    os.killpg(server.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for server in reversed(started):
            server.stop()
        if floor is not None:
            floor.stop()
    _print(results, sizes, [name for name in targets if name != "grpc"])
    if args.perf_analyzer:
        _print_perf_analyzer(results, sizes)
    print(f"load average {_load()} after", flush=True)
    return results


class StandIn:
    """A runner answering zeros of ``model``'s output shape: at once, or (``device_ms``) as a device would, one call
    at a time (a lock: a GPU runs one program at a time) after ``device_ms`` of sleep with the GIL released (a host
    thread waiting for a GPU's kernels uses no CPU that gRPC needs)."""

    def __init__(self, model: str, device_ms: float = 0.0) -> None:
        import threading

        from serve_bench.catalogue import get_spec

        self.features = get_spec(model).feature_size
        self.device_s = device_ms / 1e3
        self.device = threading.Lock()
        self.answers: dict[int, dict[str, Any]] = {}
        self.input_names = ["images"]
        self.in_effect = {"runtime": "stub", "device": "none (benchmarks.server_overhead --stub)"}
        if device_ms:
            self.in_effect["device"] = f"a stand-in taking {device_ms:g} ms a call, one at a time"

    def compile(self, batch_size: int) -> float:
        return 0.0

    def __call__(self, inputs: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        size = len(inputs["images"])
        if size not in self.answers:
            self.answers[size] = {"features": np.zeros((size, self.features), np.float32)}
        if self.device_s:
            with self.device:
                time.sleep(self.device_s)
        return self.answers[size]


def stub_command(serve: list[str], model: str, device_ms: float = 0.0) -> list[str]:
    """``python -m serve_bench serve ARGS`` (a LocalServerProcess's command) as this script's stub child:
    ``python server_overhead.py --child stub --model M [--stub-ms D] -- ARGS``, the same server with a StandIn."""
    stub = [serve[0], str(Path(__file__).resolve()), "--child", "stub", "--model", model]
    stub += ["--stub-ms", f"{device_ms:g}"] if device_ms else []
    return [*stub, "--", *serve[4:]]


def _stub_child(args: argparse.Namespace, serve_args: list[str]) -> int:
    """``serve`` with the runtime's runner replaced by a StandIn answering zeros of the model's output shape at once
    (or after ``--stub-ms``): the server's own cost per request at this model's message sizes, with no model run
    to drown it."""

    import serve_bench.server._runtime as runtime_module
    from serve_bench.cli import main as cli_main

    runtime_module.open_runner = lambda runtime, path, settings: StandIn(args.model, args.stub_ms)
    return cli_main(["serve", *serve_args])


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _print(results: dict[tuple[int, str], list[dict[str, float]]], sizes: tuple[int, ...], served: list[str]) -> None:
    def values(size: int, name: str, key: str) -> list[float]:
        return [r[key] for r in results.get((size, name), []) if key in r]

    for size in sizes:
        floor = values(size, "floor", "us")
        print(f"batch {size}: µs per request, median over the rounds (range)")
        print(f"  in process (floor)       {_median(floor):>18}   its CPU {_median(values(size, 'floor', 'cpu_us'))}")
        cpu = _median(values(size, "grpc", "server_cpu_us")), _median(values(size, "grpc", "client_cpu_us"))
        bare = _median(values(size, "grpc", "us"))
        print(f"  bare gRPC server         {bare:>18}   server CPU {cpu[0]}, client CPU {cpu[1]}")
        for name in served:
            latency = values(size, name, "us")
            fixed = [s - f for f, s in zip(floor, latency)]
            ratio = ""
            if all(floor):  # items/s served over in process, per round (none with the runtime stubbed)
                ratios = [f / s for f, s in zip(floor, latency)]
                ratio = f"served/in-process {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); "
            print(f"  {name:23s}  {_median(latency):>18}   {ratio}fixed cost {_median(fixed)} µs")
            request, runtime = values(size, name, "request_us"), values(size, name, "runtime_us")
            cpu = _median(values(size, name, "server_cpu_us")), _median(values(size, name, "client_cpu_us"))
            print(
                f"  {'':23s}  server: request_latency {_median(request)} = runtime_latency {_median(runtime)}"
                f" + the rest {_median([q - r for q, r in zip(request, runtime)])}; server CPU {cpu[0]}, "
                f"client CPU {cpu[1]}"
            )
            print(
                f"  {'':23s}  around the runtime call (served - runtime_latency): {_median(_around(latency, runtime))}"
            )
        around = {name: _around(values(size, name, "us"), values(size, name, "runtime_us")) for name in served}
        if around.get("triton") and around.get("served"):  # per round: the C++ front end's over the local server's
            ratios = [t / s for t, s in zip(around["triton"], around["served"])]
            print(
                f"  Triton's cost around the call over the local server's: {statistics.median(ratios):.2f} "
                f"({min(ratios):.2f}-{max(ratios):.2f})"
            )


def _perf_analyzer_figures(perf_analyzer: Any, url: str, model: str, size: int) -> dict[str, float | str]:
    """One perf_analyzer run's latency, request building and (Triton) the server's queue + compute, as
    ``triton_breakdown`` counts Triton's runtime, from Triton's statistics as perf_analyzer reads them (TF
    Serving has none); a run that failed is kept as its reason, and the rounds go on."""
    try:
        figures = perf_analyzer.measure(url, model, batch_size=size)
    except perf_analyzer.PerfAnalyzerFailed as exc:
        print(f"  {exc}", flush=True)
        return {"error": str(exc)}
    split = ("Server Queue", "Server Compute Input", "Server Compute Infer", "Server Compute Output")
    return {
        "us": figures["Avg latency"],
        "send_us": figures["Client Send"],
        "runtime_us": sum(figures.get(part, 0.0) for part in split),
    }


def _print_perf_analyzer(results: dict[tuple[int, str], list[dict[str, float]]], sizes: tuple[int, ...]) -> None:
    """perf_analyzer's own figures, the same rounds: a C++ client against the local server and against Triton."""
    for size in sizes:
        print(f"batch {size}: perf_analyzer (C++ client), one in flight, its Avg latency, µs, median over the rounds")
        for name in ("served", "triton"):
            runs = results.get((size, "perf_analyzer " + name), [])
            figures = [f for f in runs if "error" not in f]
            if len(figures) < len(runs):
                print(f"  perf_analyzer -> {name:8s}  failed in {len(runs) - len(figures)} of {len(runs)} rounds")
            if not figures:
                continue
            latency, send = [f["us"] for f in figures], [f["send_us"] for f in figures]
            around = ""
            if any(f["runtime_us"] for f in figures):
                runtime = [f["runtime_us"] for f in figures]
                around = (
                    f"; Triton's queue + compute {_median(runtime)}, around it {_median(_around(latency, runtime))}"
                )
            print(
                f"  perf_analyzer -> {name:8s}  {_median(latency):>18}   of which building the request "
                f"{_median(send)}{around}"
            )


def _around(latency: list[float], runtime: list[float]) -> list[float]:
    """Per round: the client's latency less the server's runtime call, what the request path costs around it."""
    return [served - call for served, call in zip(latency, runtime)]


if __name__ == "__main__":
    sys.exit(main())
