"""A bound for every number a user types for a point, from the memory it implies (issue 34, item 1).

The arithmetic is tested against a fixed amount of memory; the CLI runs in a child process under an
address-space limit (RLIMIT_AS, ``ulimit -v``), where the refusal must come before the allocation: the
same command with the bound switched off dies of MemoryError under the same limit, and the refused one
never grew past what its imports take. The table of bounds and reasons: docs/bounds.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from serve_bench.cli import main
from serve_bench.client._rest import declared_limits
from serve_bench.errors import InvalidValue
from serve_bench.export import BatchingParams
from serve_bench.load import (
    Declared,
    Memory,
    PointPlan,
    PointSettings,
    RequestCost,
    check_batch,
    check_request,
    check_schedule,
    memory_available,
    point_memory,
)
from serve_bench.load._bounds import MEMORY_SHARE, RECORD_BYTES
from serve_bench.load._schedule import ArrivalSchedule
from serve_bench.stats import LoadInfo, Target
from tests._servers import ServerThread, local_server

ROOT = Path(__file__).resolve().parent.parent
ITEM = 64 * 64 * 3 * 4  # one float32 64x64 RGB image, the `tiny` model's input
GRPC_COST = RequestCost(one=ITEM + 60, two=2 * ITEM + 60, drawn_per_item=ITEM, synthetic_float=True)
REST_COST = RequestCost(one=76_860, two=153_660, drawn_per_item=ITEM, synthetic_float=True)  # JSON text
SETTINGS = PointSettings(warmup_s=0, min_duration_s=1, max_duration_s=5)
GIB = 1 << 30


def _plan(url: str, batch: int = 1, load: LoadInfo | None = None) -> PointPlan:
    return PointPlan(Target("t", url, "cpu", ""), "tiny", "serving_default", "float", batch, load or _closed(1))


def _closed(concurrency: int, processes: int = 1) -> LoadInfo:
    return LoadInfo("closed", concurrency=concurrency, processes=processes)


def _refused(call, *args, **kwargs) -> InvalidValue:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidValue) as caught:
        call(*args, **kwargs)
    return caught.value


# --- the arithmetic, against a fixed amount of memory ---------------------------------------------------


@pytest.mark.parametrize(("url", "cost"), [("grpc://h:1", GRPC_COST), ("http://h:1", REST_COST)])
def test_the_largest_batch_named_fits_and_one_more_does_not(url: str, cost: RequestCost) -> None:
    memory = Memory(2 * GIB, "a test's")
    refusal = _refused(check_request, _plan(url, 40_000), SETTINGS, cost, memory=memory)  # under gRPC's 2 GB
    assert refusal.name == "batch_size" and refusal.value == 40_000
    most = int(refusal.requirement.split()[2].rstrip(":"))
    assert (
        point_memory(_plan(url, most), SETTINGS, cost)
        <= memory.usable
        < point_memory(_plan(url, most + 1), SETTINGS, cost)
    )
    check_request(_plan(url, most), SETTINGS, cost, memory=memory)  # the batch it names is accepted
    assert "may be used" in refusal.requirement and "a test's" in refusal.requirement


def test_a_rest_body_is_counted_at_several_times_its_size() -> None:
    """The same images over REST need more memory than over gRPC: a JSON body ~1.6x the pixels, built
    at ~7x its size (benchmarks/client_memory.py measured 5.8-7.1x), against the protobuf's 3x."""
    rest = point_memory(_plan("http://h:1", 2000), SETTINGS, REST_COST)
    grpc = point_memory(_plan("grpc://h:1", 2000), SETTINGS, GRPC_COST)
    assert rest > 2.5 * grpc
    assert rest > 7 * REST_COST.body(2000)


def test_a_batch_that_fits_alone_names_the_concurrency_or_the_processes() -> None:
    """Batch 40 over gRPC fits; 10000 of them in flight (a body copied into each call) do not: the
    refusal names --concurrency with the most that fit, and --processes where those are the excess."""
    memory = Memory(4 * GIB, "a test's")
    refusal = _refused(check_request, _plan("grpc://h:1", 40, _closed(10_000)), SETTINGS, GRPC_COST, memory=memory)
    assert refusal.name == "concurrency"
    most = int(refusal.requirement.split()[2])
    fits = point_memory(_plan("grpc://h:1", 40, _closed(most)), SETTINGS, GRPC_COST)
    assert fits <= memory.usable < point_memory(_plan("grpc://h:1", 40, _closed(most + 1)), SETTINGS, GRPC_COST)
    many = _plan("grpc://h:1", 4000, _closed(1, processes=16))
    assert _refused(check_request, many, SETTINGS, GRPC_COST, memory=memory).name == "processes"


def test_the_schedule_is_bounded_before_connecting() -> None:
    """What the load keeps whatever the model: a record per scheduled request (rate x seconds), the
    closed loop's records up to the generator's ceiling, each request's call state, each process."""
    memory = Memory(GIB, "a test's")
    open_loop = LoadInfo("open", rate=500_000.0, arrival="constant")
    long = PointSettings(warmup_s=0, min_duration_s=100, max_duration_s=100)
    refusal = _refused(check_schedule, _plan("grpc://h:1", 1, open_loop), long, memory)
    assert refusal.name == "rate" and "100 s schedule" in refusal.requirement
    most = float(refusal.requirement.split()[2])
    assert most * 100 * RECORD_BYTES <= memory.usable * 1.001
    check_schedule(_plan("grpc://h:1", 1, LoadInfo("open", rate=most * 0.99, arrival="constant")), long, memory)
    hours = PointSettings(warmup_s=0, min_duration_s=5, max_duration_s=36_000)
    assert _refused(check_schedule, _plan("grpc://h:1"), hours, memory).name == "max_duration_s"
    assert _refused(check_schedule, _plan("grpc://h:1", 1, _closed(100_000)), SETTINGS, memory).name == "concurrency"
    assert _refused(check_schedule, _plan("grpc://h:1", 1, _closed(1, 64)), SETTINGS, memory).name == "processes"
    check_schedule(_plan("grpc://h:1", 1, _closed(64)), PointSettings(), memory)  # the defaults fit easily
    # and from below: an open loop whose window holds no scheduled request measures nothing ("0 of 0 requests
    # answered" blamed the server)
    second = PointSettings(warmup_s=0, min_duration_s=1, max_duration_s=10)
    refusal = _refused(check_schedule, _plan("grpc://h:1", 1, LoadInfo("open", rate=0.01, arrival="poisson")), second)
    assert refusal.name == "rate" and "more than 0.5 requests/s for a 1 s window" in refusal.requirement
    check_schedule(_plan("grpc://h:1", 1, LoadInfo("open", rate=0.7, arrival="poisson")), second, memory)  # 1 due
    # each process schedules its share: 2/s over 4 processes is 0.5/s each, none in a 1 s window
    split = LoadInfo("open", rate=2.0, arrival="poisson", processes=4)
    refusal = _refused(check_schedule, _plan("grpc://h:1", 1, split), second)
    assert "more than 2 requests/s over 4 processes" in refusal.requirement
    assert ArrivalSchedule(0.5, 1.0).scheduled == 0 < ArrivalSchedule(0.7, 1.0).scheduled  # the schedule's rule


def test_a_count_of_four_hundred_digits_is_refused_like_any_other() -> None:
    """Past float's range (about 1e308) the arithmetic raised OverflowError, a traceback, where a typo of a
    concurrency or processes of 400 digits should get the same refusal as 100,000 (2026-11-27)."""
    memory = Memory(GIB, "a test's")
    huge = int("9" * 400)
    typed = PointSettings(warmup_s=2.0, min_duration_s=5.0, max_duration_s=60.0)  # floats, as the CLI's
    refusal = _refused(check_schedule, _plan("grpc://h:1", 1, _closed(huge)), typed, memory)
    assert refusal.name == "concurrency" and "over 1e9 TB in all" in refusal.requirement
    refusal = _refused(check_schedule, _plan("grpc://h:1", 1, _closed(1, huge)), typed, memory)
    assert refusal.name == "processes" and "over 1e9 TB in all" in refusal.requirement
    # and what the batch itself costs (Locust's users, the pipeline and bench all ask check_batch)
    for protocol, cost in (("grpc", GRPC_COST), ("rest", REST_COST)):
        for batch, load in ((huge, _closed(1)), (1, LoadInfo("locust", concurrency=huge)), (1, _closed(1, huge))):
            _refused(check_batch, protocol, "tiny", batch, load, typed, cost, memory=memory)


def test_a_warm_up_record_past_this_processs_memory_is_refused_before_it_is_drawn() -> None:
    """export builds each warm-up record at WARMUP_BUILD times its size (measured below); the largest size that
    fits is taken, one more refused naming --warmup-batch-sizes (43690 tiny images, within protobuf's 2 GiB,
    died of MemoryError under a 4 GB ulimit, a traceback)."""
    from serve_bench.catalogue import get_spec
    from serve_bench.export import check_warmup_batch_sizes
    from serve_bench.export._export import WARMUP_BUILD

    spec, memory = get_spec("tiny"), Memory(GIB, "a test's")
    fits = memory.usable // (ITEM * WARMUP_BUILD)
    check_warmup_batch_sizes(spec, (1, fits), memory)
    refusal = _refused(check_warmup_batch_sizes, spec, (1, fits + 1), memory)
    check_warmup_batch_sizes(spec, (1, fits + 1))  # no memory given (export_model's own call): protobuf's limit alone
    assert refusal.name == "warmup_batch_sizes" and f"at most {fits} for tiny here" in refusal.requirement
    # the factor: a record of 4000 tiny images (197 MB) grows a fresh process's peak by WARMUP_BUILD times it (the
    # peak is a high-water mark: measured in a child by its own VmHWM; ru_maxrss survives the exec from pytest's)
    code = textwrap.dedent(
        """
        from pathlib import Path
        from serve_bench.catalogue import get_spec
        from serve_bench.export._warmup import warmup_requests
        def peak():
            line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
            return int(line.split()[1]) * 1024
        before = peak()
        for log in warmup_requests(get_spec("tiny"), [4000]):
            log.SerializeToString()
        print(peak() - before)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    grown = int(done.stdout.strip())
    assert WARMUP_BUILD - 0.5 <= grown / (4000 * ITEM) <= WARMUP_BUILD * 1.05, grown / (4000 * ITEM)


def test_what_the_server_declared_is_refused_first() -> None:
    memory = Memory(64 * GIB, "a test's")
    too_many = _refused(
        check_request, _plan("grpc://h:1", 65), SETTINGS, GRPC_COST, Declared(max_batch_size=64), memory
    )
    assert too_many.name == "batch_size" and "max_batch_size 64" in too_many.requirement
    limit = 256 << 20
    too_big = _refused(
        check_request, _plan("http://h:1", 6000), SETTINGS, REST_COST, Declared(max_body_bytes=limit), memory
    )
    most = int(too_big.requirement.split()[2])
    assert REST_COST.body(most) <= limit < REST_COST.body(most + 1)
    assert "--max_body_bytes" in too_big.requirement


def test_declared_limits_are_read_from_the_local_servers_header_only() -> None:
    assert declared_limits("max_body_bytes=268435456; max_batch_size=32") == {
        "max_body_bytes": 268435456,
        "max_batch_size": 32,
    }
    assert declared_limits("") == {} and declared_limits("max_body_bytes=lots; colour=3") == {}


def test_the_local_server_declares_its_limits_over_rest(models_dir: Path) -> None:
    """`--max_body_bytes` always, the batcher's max_batch_size when batching is on (TF Serving sends none)."""
    with local_server(models_dir, batching=BatchingParams(max_batch_size=16), max_body_bytes=1 << 20) as server:
        with urllib.request.urlopen(f"{server.rest_url}/v1/models/tiny", timeout=30) as response:
            said = response.headers["X-Serve-Bench-Limits"]
    assert declared_limits(said) == {"max_body_bytes": 1 << 20, "max_batch_size": 16}


def test_memory_available_reads_the_address_space_limit() -> None:
    code = textwrap.dedent(
        """
        import resource, json
        from serve_bench.load import memory_available
        statm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (statm + (512 << 20), resource.RLIM_INFINITY))
        m = memory_available()
        print(json.dumps([m.available, m.limited_by]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    available, limited_by = json.loads(out.stdout)
    assert "ulimit -v" in limited_by and 256 << 20 < available <= 512 << 20
    assert memory_available().available > 0


# --- the CLI under an address-space limit -------------------------------------------------------------

# The child imports what a bench run needs, then limits its address space to what it uses now plus
# HEADROOM, and runs the CLI; it prints its exit status and peak RSS. "--unbounded" switches the bounds off.
HEADROOM = 2 * GIB
_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    from serve_bench.cli import main
    import serve_bench._cli_commands, serve_bench.sweep, serve_bench.client._grpc, serve_bench.client._rest
    from serve_bench.load import _bounds
    argv = sys.argv[1:]
    if argv[0] == "--unbounded":
        argv = argv[1:]
        _bounds.memory_available = lambda: _bounds.Memory(1 << 60, "switched off")
    headroom = int(argv.pop(0))
    used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + headroom, resource.RLIM_INFINITY))
    try:
        rc = main(argv)
    except MemoryError:
        print("MemoryError", file=sys.stderr)
        rc = 99
    # VmHWM, not ru_maxrss: after fork and exec, ru_maxrss still holds the parent's (pytest's) peak
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"rc": rc, "peak_mb": int(hwm.split()[1]) / 1024}))
    """
)


def _cli_under_limit(*argv: str, unbounded: bool = False) -> tuple[int, float, str]:
    """(exit status, peak RSS MB, stderr) of the CLI in a child under the address-space limit."""
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, "-c", _CHILD, *(["--unbounded"] if unbounded else []), str(HEADROOM), *argv]
    out = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    lines = out.stdout.strip().splitlines()
    if not lines:
        return out.returncode, 0.0, out.stderr
    result = json.loads(lines[-1])
    return int(result["rc"]), float(result["peak_mb"]), out.stderr


@pytest.fixture(scope="module")
def roomy(models_dir: Path) -> Iterator[ServerThread]:
    """A server whose REST body limit (4 GiB) is not what stops the client first."""
    with local_server(models_dir, max_body_bytes=4 * GIB) as running:
        yield running


def _bench(url: str, run_dir: Path, *flags: str) -> list[str]:
    return ["bench", url, "--model", "tiny", "--warmup", "0", "--duration", "0.5", "--max-duration", "5",
            "--run-dir", str(run_dir), "--metrics=", *flags]  # fmt: skip


def _error_line(stderr: str, command: str = "bench") -> str:
    lines = [line for line in stderr.splitlines() if line.startswith(f"serve-bench {command}: error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def test_a_rest_batch_past_the_clients_memory_is_refused_before_it_is_built(roomy: ServerThread, tmp_path) -> None:
    """8000 tiny images over REST: 393 MB of pixels, a 614 MB JSON body that takes ~4.6 GB to build. Under
    a 2 GiB address-space limit it is refused in one line (exit 2) naming --batch-size, the most that fits
    and ulimit -v, and the child never grew by the batch; with the bound off, the same command dies under
    the limit, of MemoryError or of orjson's abort (it used to: the issue's 100000 grew to 23.9 GB and was
    OOM-killed). Without the limit the same point peaks at 4.6 GB, as the bound's arithmetic says."""
    argv = _bench(roomy.rest_url, tmp_path / "run", "--batch-size", "8000")
    rc, peak_mb, stderr = _cli_under_limit(*argv)
    line = _error_line(stderr)
    assert rc == 2 and "--batch-size must be at most" in line and "ulimit -v" in line and "grpc://" in line
    assert peak_mb < 400, peak_mb  # the batch alone is 393 MB of pixels, drawn through 1.2 GB
    rc, _, stderr = _cli_under_limit(*argv, unbounded=True)
    # MemoryError from numpy, or killed by a signal: orjson (Rust) aborts when an allocation fails (SIGILL)
    assert (rc == 99 and "MemoryError" in stderr) or rc < 0, (rc, stderr[-2000:])


def test_export_refuses_a_warm_up_record_past_its_memory_before_tensorflow_loads(tmp_path) -> None:
    """`serve-bench export --warmup-batch-sizes 43690` (tiny: the largest one record may hold, 2.1 GB built at 3x)
    under this test's 2 GiB limit: one line naming the flag, before TensorFlow or the record is touched."""
    argv = ["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--warmup-batch-sizes", "43690"]
    rc, peak_mb, stderr = _cli_under_limit(*argv)
    line = _error_line(stderr, "export")
    assert rc == 2 and "--warmup-batch-sizes must be at most" in line and "ulimit -v" in line, stderr[-2000:]
    assert peak_mb < 400, peak_mb
    assert not list(tmp_path.iterdir())


def test_concurrency_past_the_clients_memory_is_refused_under_the_limit(roomy: ServerThread, tmp_path) -> None:
    """100000 gRPC requests in flight, each with its own copy of a 49 kB body and ~30 kB of call state:
    ~8 GB, refused under the 2 GiB limit naming --concurrency (it used to pass 3 GB silently)."""
    argv = _bench(roomy.grpc_url, tmp_path / "run", "--concurrency", "100000")
    rc, peak_mb, stderr = _cli_under_limit(*argv)
    line = _error_line(stderr)
    assert rc == 2 and "--concurrency must be at most" in line and "ulimit -v" in line
    assert peak_mb < 400, peak_mb


def test_a_rest_batch_past_the_servers_body_limit_is_refused_naming_it(models_dir: Path, tmp_path, capsys) -> None:
    """The local server declares its --max_body_bytes (256 MiB by default): a batch of 6000 tiny images is
    a 460 MB body it would answer 413 to, request after request; refused before it is built."""
    with local_server(models_dir) as server:
        assert main(_bench(server.rest_url, tmp_path / "run", "--batch-size", "6000")) == 2
    line = _error_line(capsys.readouterr().err)
    assert "--batch-size must be at most 3498" in line and "--max_body_bytes" in line


def test_a_sweep_refuses_a_point_before_measuring_any(roomy: ServerThread, tmp_path) -> None:
    """A sweep whose last batch size the client cannot hold is refused before its first point, naming the
    spec's key (batch_sizes), not an hour into the grid."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        textwrap.dedent(
            f"""
            name = "too-big"
            model = "tiny"
            batch_sizes = [1, 8000]
            [durations]
            warmup_s = 0
            min_duration_s = 0.5
            max_duration_s = 5
            [[targets]]
            name = "local"
            url = "{roomy.rest_url}"
            metrics = ""
            """
        )
    )
    rc, _, stderr = _cli_under_limit("sweep", str(spec), "--run-dir", str(tmp_path / "run"), "--no-progress")
    line = _error_line(stderr, "sweep")
    assert rc == 2 and "batch_sizes must be at most" in line and "b8000" in line.replace(" ", "")
    assert not (tmp_path / "run" / "points.jsonl").exists() or not (tmp_path / "run" / "points.jsonl").read_text()


def test_memory_share_leaves_room() -> None:
    assert 0.5 <= MEMORY_SHARE < 1


def test_locust_refuses_users_payloads_it_cannot_hold() -> None:
    """Each Locust user builds and keeps its own request (loadtests/locustfile.py on_start): 50 users of
    100000 tiny images over REST would need hundreds of GB. Refused before any user starts, one line, exit 2;
    the same users of 1 image run as before (tests/test_locust.py)."""
    flags = "--headless -u 50 -r 50 -t 2s --host http://127.0.0.1:1 --protocol rest --model tiny --batch-size 100000"
    command = [sys.executable, "-m", "locust", "-f", "loadtests/locustfile.py", *flags.split(), "--only-summary"]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    errors = [line for line in out.stderr.splitlines() if line.startswith("locust: error: ")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert "--batch-size must be at most" in errors[0] and "50 users each keeping its own" in errors[0]
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ("--steps 0,2", "--steps must be user counts >= 1"),  # a step of 0 users
        ("--steps -3", "--steps must be user counts >= 1"),  # Locust's own ValueError traceback
        ("--step-seconds 0", "--step-seconds must be a finite number > 0"),  # ZeroDivisionError in tick()
        ("--step-seconds -1", "--step-seconds must be a finite number > 0"),  # a negative index: steps backwards
        ("--batch-size -1", "--batch-size must be a whole number >= 1"),  # every user's on_start: a traceback
        ("--request-timeout nan", "--request-timeout must be a finite number > 0"),  # every request failed
        # the step shape spawns its largest step's users: 1,000,000 of them ran to MemoryError tracebacks
        ("--steps 1,1000000 --batch-size 1000", "--steps (its largest) must be at most"),
    ],
)
def test_locust_refuses_steps_and_batch_sizes_that_make_no_load(flags: str, says: str) -> None:
    """loadtests/step_shape.py's --steps and --step-seconds and the locustfile's --batch-size are checked at init,
    before any user starts: one line, exit 2, where each used to end in tracebacks (or, for a million users, in
    MemoryError) once the run started."""
    common = "--headless -t 2s --host http://127.0.0.1:1 --protocol rest --model tiny --only-summary"
    files = "loadtests/locustfile.py,loadtests/step_shape.py"
    command = [sys.executable, "-m", "locust", "-f", files, *common.split(), *flags.split()]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    errors = [line for line in out.stderr.splitlines() if line.startswith("locust: error: ")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert says in errors[0] and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--batch-sizes", "1,30000", "--max-in-flight", "1"], "--batch-sizes"),
     (["--batch-sizes", "2000", "--max-in-flight", "1,64"], "--max-in-flight")],
)  # fmt: skip
def test_the_pipeline_refuses_batches_it_cannot_hold_before_decoding(
    roomy: ServerThread, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch, flags, named
) -> None:
    """`serve-bench pipeline`: frames per batch x batches in flight x the frame, over REST at ~7x the body,
    within 4 GiB (this test's): refused in one line naming the flag, before a frame is decoded (it used to
    decode, then build the 100000-frame batch)."""
    from tests._clips import write_clip

    monkeypatch.setattr("serve_bench.load._bounds.memory_available", lambda: Memory(4 * GIB, "a test's"))
    clip = write_clip(tmp_path / "clip.mkv", codec="mjpeg", frames=4, size=(64, 48))
    argv = ["pipeline", str(clip), "--url", roomy.rest_url, "--model", "tiny", *flags, "--no-inprocess"]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    line = _error_line(capsys.readouterr().err, "pipeline")
    assert f"{named} must be at most" in line and "a test's" in line


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -0.001])
def test_mlservers_batch_time_is_a_finite_number_of_seconds(seconds: float) -> None:
    """A sweep's launched MLServer took max_batch_time = nan (`< 0` is false for nan) into model-settings.json, and
    a tune [space] collapsed nan and -1 into "nobatch" silently. One check, in MLServerBatching, for both (the tune
    cases: tests/test_tune_spec.py)."""
    from serve_bench.export import MLServerBatching

    refusal = _refused(MLServerBatching, max_batch_size=8, max_batch_time_s=seconds)
    assert refusal.name == "max_batch_time" and "finite number of seconds" in refusal.requirement
    assert MLServerBatching(max_batch_size=8, max_batch_time_s=0.0).knobs()["max_batch_time"] == "0"
