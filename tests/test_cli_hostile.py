"""Bad command-line input as a careless or hostile user types it (issue 22, items 4 and 7): each is
refused in one line on stderr with exit status 2, naming the problem and what to do, before the
client allocates or sends anything it cannot use."""

from __future__ import annotations

import pickle
import re
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from serve_bench.cli import main
from serve_bench.client import FakeTransport, fake_client
from serve_bench.client._fake import image_signature
from serve_bench.errors import InvalidValue
from serve_bench.load import (
    MAX_RATE,
    ArrivalSchedule,
    PointPlan,
    PointSettings,
    _generators,
    arrival_offsets,
    largest_batch,
    run_open_loop,
)
from serve_bench.stats import LoadInfo, Target, read_points
from tests._servers import local_server
from tests.conftest import free_port

PROTOBUF_LIMIT = 2**31 - 1  # bytes: protobuf serializes no message past INT_MAX
TINY_ITEM_BYTES = 64 * 64 * 3 * 4  # one float32 64x64 RGB image, the `tiny` model's input


def _one_line_error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "\n" not in err, err
    assert err.startswith(f"serve-bench {command}: error: "), err
    return err


def _sweep_refused(spec: Path, head: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Write ``head`` and one target (a free port) to ``spec``; `sweep` refuses it in one line, exit 2: that line."""
    spec.write_text(head + f'[[targets]]\nname = "t"\nurl = "grpc://127.0.0.1:{free_port()}"\n')
    assert main(["sweep", str(spec), "--run-dir", str(spec.parent / "run"), "--no-progress"]) == 2
    return _one_line_error(capsys, "sweep")


@pytest.fixture(scope="module")
def server(models_dir: Path):
    with local_server(models_dir) as running:
        yield running


# --- a batch too large for one gRPC message --------------------------------------------------


def test_a_batch_past_protobufs_2gb_limit_is_refused_with_the_largest_that_fits(server, tmp_path, capsys) -> None:
    """100000 images of 48 KiB are 4.9 GB, past protobuf's 2 GB message limit: refused before the
    batch is built (it used to be allocated, then serializing it raised EncodeError)."""
    started = time.perf_counter()
    argv = ["bench", server.grpc_url, "--model", "tiny", "--batch-size", "100000", "--warmup", "0", "--duration", "0.5"]
    assert main([*argv, "--run-dir", str(tmp_path / "run"), "--metrics="]) == 2
    assert time.perf_counter() - started < 20  # refused, not built (building it takes most of a minute)
    err = _one_line_error(capsys, "bench")
    assert "--batch-size" in err and "2 GB" in err and "100000" in err
    largest = PROTOBUF_LIMIT // TINY_ITEM_BYTES  # 43690, less a few bytes of message framing
    numbers = {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", err)}
    assert largest in numbers or largest - 1 in numbers, err
    assert read_points(tmp_path / "run") == []


def test_the_largest_batch_named_is_the_largest_that_serializes() -> None:
    """The arithmetic behind the refusal, against a small limit: the batch it names fits, one more does not."""
    transport = FakeTransport(lambda inputs: {}, signatures=image_signature(8, 8, 2))
    client = fake_client(transport)

    def size(n: int) -> int:
        return client.prepare({"images": np.zeros((n, 8, 8, 3), np.float32)}).nbytes

    limit = size(10) + 100  # less than an item (768 bytes) over ten
    most = largest_batch(size(1), size(2), limit)
    assert size(most) <= limit < size(most + 1)


# --- rates no generator reaches; the schedule is not materialised --------------------------------


@pytest.mark.parametrize("rate", ["1e308", "1e9", "2e6"])
def test_a_rate_no_generator_reaches_is_refused_before_connecting(rate: str, tmp_path, capsys) -> None:
    # nothing listens on the port: the refusal comes before any connection, and no run directory is made
    argv = ["bench", f"grpc://127.0.0.1:{free_port()}", "--model", "m", "--rate", rate, "--duration", "1"]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = _one_line_error(capsys, "bench")
    assert "--rate" in err and f"at most {MAX_RATE:g} requests/s" in err
    assert not (tmp_path / "run").exists()


def test_the_schedule_is_generated_lazily_memory_does_not_grow_with_rate_times_duration() -> None:
    """--rate 1e9 used to allocate 7.45 GiB of send times before the first send; at the ceiling, an
    hour's schedule (3.6e9 arrivals, 29 GB as one array) costs one chunk at a time."""
    tracemalloc.start()
    try:
        schedule = ArrivalSchedule(MAX_RATE, 3600.0, "poisson", seed=1, warmup_s=2.0)
        assert schedule.count == round(MAX_RATE * 3602.0) and schedule.scheduled == round(MAX_RATE * 3600.0)
        chunks = schedule.chunks()
        first, second = next(chunks), next(chunks)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak / 2**20:.0f} MiB for two chunks of the schedule"
    assert 0 < len(first) <= 2 * schedule.chunk and first[-1] <= second[0]


@pytest.mark.parametrize("arrival", ["poisson", "constant"])
def test_a_schedule_in_many_chunks_is_the_same_process(arrival: str) -> None:
    """Chunked or not: sorted, exactly rate x span arrivals in each window, exponential gaps for Poisson;
    one chunk gives the very arrays ``arrival_offsets`` always gave for a seed."""
    schedule = ArrivalSchedule(20_000, 10.0, arrival, seed=5, warmup_s=1.0, chunk=4096)
    offsets = np.concatenate(list(schedule.chunks()))
    assert len(offsets) == schedule.count == 220_000
    assert np.all(np.diff(offsets) >= 0) and offsets[0] >= 0 and offsets[-1] < 11.0
    assert np.count_nonzero((offsets >= 1.0) & (offsets < 11.0)) == schedule.scheduled == 200_000
    gaps = np.diff(offsets[offsets >= 1.0])
    if arrival == "poisson":
        assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.02)
    whole = ArrivalSchedule(500, 20.0, arrival, seed=3)
    np.testing.assert_array_equal(np.concatenate(list(whole.chunks())), arrival_offsets(500, 20.0, arrival, seed=3))


@pytest.mark.parametrize("timerfd", [True, False], ids=["timerfd", "thread"])
async def test_the_open_loop_sends_a_lazy_schedule_chunk_by_chunk(monkeypatch, timerfd: bool) -> None:
    monkeypatch.setattr(_generators, "USE_TIMERFD", timerfd)
    transport = FakeTransport(
        lambda inputs: {"features": np.zeros((1, 2), np.float32)}, signatures=image_signature(4, 4, 2)
    )
    client = fake_client(transport)
    prepared = client.prepare({"images": np.zeros((1, 4, 4, 3), np.float32)})
    settings = PointSettings(warmup_s=0.1, min_duration_s=0.5)
    schedule = ArrivalSchedule(1000, 0.5, "poisson", seed=7, warmup_s=0.1, chunk=64)
    run = await run_open_loop(client, prepared, 1000, schedule, settings)
    offsets = np.concatenate(list(schedule.chunks()))
    assert transport.calls == len(run.records) == schedule.count == 600 and run.scheduled == 500
    assert sorted(r.intended for r in run.records) == pytest.approx(sorted(run.window_start - 0.1 + offsets))
    assert all(r.sent >= r.intended for r in run.records)


# --- empty lists in a spec ------------------------------------------------------------------


@pytest.mark.parametrize("key", ["batch_sizes", "payloads"])
def test_a_sweep_spec_with_an_empty_list_is_refused_naming_it_and_the_file(key: str, tmp_path, capsys) -> None:
    values = {"batch_sizes": "[1]", "payloads": '["float"]', key: "[]"}
    spec = tmp_path / "empty.toml"
    err = _sweep_refused(
        spec,
        f'name = "empty"\nmodel = "m"\nbatch_sizes = {values["batch_sizes"]}\npayloads = {values["payloads"]}\n',
        capsys,
    )
    assert str(spec) in err and key in err and "empty" in err
    assert not (tmp_path / "run" / "points.jsonl").exists()


# --- --input-data that holds no image -----------------------------------------------------------


def test_input_data_without_an_image_names_the_file_not_a_python_object(server, tmp_path, capsys) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"this is not a JPEG")
    argv = ["bench", server.grpc_url, "--model", "tiny", "--input-data", str(folder), "--duration", "0.5"]
    assert main([*argv, "--run-dir", str(tmp_path / "run"), "--metrics="]) == 2
    err = _one_line_error(capsys, "bench")
    assert "holiday.jpg" in err and str(folder) in err
    assert "BytesIO" not in err and " at 0x" not in err


# --- one plan, checked once, travelling to the worker processes -------------------------------------


def test_the_plan_checks_its_batch_size_where_it_is_built_and_pickles_whole() -> None:
    target = Target("t", "grpc://127.0.0.1:8500", "cpu", None)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InvalidValue, match="batch_size"):
            PointPlan(target, "m", "serving_default", "float", bad, LoadInfo("closed", concurrency=1))  # type: ignore[arg-type]
    with pytest.raises(InvalidValue, match="rate"):
        PointPlan(target, "m", "serving_default", "float", 1, LoadInfo("open", rate=1e9, arrival="poisson"))
    plan = PointPlan(target, "m", "serving_default", "float", 8, LoadInfo("open", rate=50.0, arrival="poisson"))
    assert pickle.loads(pickle.dumps(plan)) == plan


def test_open_loop_from_two_processes_runs_its_plan(server, tmp_path, capsys) -> None:
    """Each worker process gets the plan as one object and draws its own share of the schedule."""
    argv = ["bench", server.grpc_url, "--model", "tiny", "--rate", "40", "--processes", "2", "--warmup", "0.2"]
    assert main([*argv, "--duration", "1", "--run-dir", str(tmp_path / "run"), "--metrics="]) == 0, capsys.readouterr()
    (point,) = read_points(tmp_path / "run")
    assert point.load.processes == 2 and "load from 2 processes" in point.notes
    assert point.throughput.requests_per_s == pytest.approx(40, rel=0.35)


# --- numbers past what the library can hold, refused before connecting ------------------------------


@pytest.mark.parametrize(
    "flags,flag,words",
    [
        (["--seed", "-1"], "--seed", ">= 0"),  # numpy's generators take no negative seed (was a ValueError)
        (["--timeout", "1e10"], "--timeout", "at most 86400"),  # gRPC's deadline overflowed: all DEADLINE_EXCEEDED
        (["--rate", "5", "--timeout", "1e10"], "--timeout", "at most 86400"),
        (["--windows", "100000000"], "--windows", "at most 1000"),  # gigabytes of windows, then a hang
        (["--max-duration", "1e308"], "--max-duration", "at most"),  # was OverflowError in the memory bound
        (["--warmup", "1e308"], "--warmup", "at most"),  # the warm-up alone: named, not --max-duration
        (["--warmup", "1e12"], "--warmup", "at most"),
    ],
)
def test_numbers_past_what_a_point_can_hold_are_refused_naming_the_flag(flags, flag, words, tmp_path, capsys) -> None:
    argv = ["bench", f"grpc://127.0.0.1:{free_port()}", "--model", "m", "--duration", "1", *flags]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = _one_line_error(capsys, "bench")
    assert err.startswith(f"serve-bench bench: error: {flag} must be") and words in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "durations,key",
    [
        ("seed = -1", "seed"),
        ("[durations]\ntimeout_s = 1e10", "durations.timeout_s"),
        ("[durations]\nwindows = 100000000", "durations.windows"),
    ],
)
def test_a_sweep_spec_past_the_same_bounds_names_its_key(durations: str, key: str, tmp_path, capsys) -> None:
    err = _sweep_refused(tmp_path / "bounds.toml", f'name = "b"\nmodel = "m"\nbatch_sizes = [1]\n{durations}\n', capsys)
    assert f"{key} must be" in err, err


@pytest.mark.parametrize("version", ["0", "-3", str(2**63)])
def test_an_export_version_tf_serving_cannot_read_is_refused(tmp_path, capsys, version):
    """TF Serving reads a version directory's name as an int64 (ParseVersionNumber: absl::SimpleAtoi,
    tensorflow_serving/sources/storage_path/file_system_storage_path_source.cc:87): 2**63 is no version it
    would load, and the local server then answered INVALID_ARGUMENT to every gRPC request. 0 and below are
    none either. One line naming --version, nothing written."""
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(tmp_path), "--version", version]) == 2
    err = _one_line_error(capsys, "export")
    assert "--version" in err and str(2**63 - 1) in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_a_listener_that_never_answers_is_refused_at_the_metadata_call(scheme, tmp_path, capsys):
    """A port that accepts and says nothing (another program's, a wrong protocol's): the metadata call times out
    and bench stops there in one line, exit 2, nothing measured. Before, REST took the silence for a server
    without metadata and ran a whole point of timeouts (72 s for --timeout 3, a point of zero answers)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    try:
        argv = ["bench", f"{scheme}://127.0.0.1:{port}", "--model", "tiny", "--timeout", "1", "--warmup", "0.1"]
        argv += ["--duration", "0.5", "--run-dir", str(tmp_path / "run")]
        assert main(argv) == 2
    finally:
        listener.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no answer to the model's metadata within 5 s" in err, err
    points = tmp_path / "run" / "points.jsonl"
    assert not points.exists() or not points.read_text().strip()  # no point of timeouts


async def test_a_gateway_timeout_at_the_metadata_call_is_an_answer() -> None:
    """HTTP 504 maps to RequestTimeout, but a proxy that answers 504 at once is there: the client connects and sends
    requests unchecked, as to any server without metadata, rather than calling the target silent."""
    import http.server
    import threading

    from serve_bench.client import connect

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(504)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        async with connect(f"http://127.0.0.1:{server.server_address[1]}", "tiny") as client:
            assert client.signatures == {}
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "LONG"],
        ["compare", "LONG", "LONG"],
        ["predict", "tiny", "LONG"],
        ["pipeline", "LONG", "--model", "tiny"],
    ],
    ids=["report", "compare", "predict", "pipeline"],
)
def test_a_path_too_long_to_look_up_is_one_line(tmp_path, capsys, argv):
    """A name past 255 bytes: the OS refuses even to look it up (ENAMETOOLONG from stat), which each command met as
    an OSError traceback; one line, shortened, saying so."""
    long = str(tmp_path / ("r" * 300))
    assert main([long if word == "LONG" else word for word in argv]) == 2
    err = _one_line_error(capsys, argv[0])
    assert "a path too long for this filesystem to look up" in err and "(" + str(len(long)) + " characters)" in err
