"""Real Locust processes against the local server: gRPC, REST, step shape, master + 2 workers."""

from __future__ import annotations

import csv
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from serve_bench.cli import main
from serve_bench.export import BatchingParams
from serve_bench.stats import read_points
from tests._servers import local_server
from tests.conftest import free_port

ROOT = Path(__file__).parent.parent
LOCUST = [sys.executable, "-m", "locust"]


@pytest.fixture(scope="module")
def server(models_dir):
    with local_server(models_dir, batching=BatchingParams(max_batch_size=8, num_batch_threads=1)) as running:
        yield running


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(LOCUST + args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _stats(prefix: Path) -> dict[str, dict[str, str]]:
    with open(f"{prefix}_stats.csv", newline="") as f:
        return {row["Name"]: row for row in csv.DictReader(f)}


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_headless_run_has_requests_and_no_failures(server, tmp_path, protocol):
    host = server.grpc_url if protocol == "grpc" else server.rest_url
    prefix = tmp_path / protocol
    result = _run(
        [
            "-f",
            "loadtests/locustfile.py",
            "--headless",
            "-u",
            "2",
            "-r",
            "2",
            "-t",
            "4s",
            "--host",
            host,
            "--protocol",
            protocol,
            "--model",
            "tiny",
            "--batch-size",
            "2",
            "--csv",
            str(prefix),
            "--only-summary",
            "--stop-timeout",
            "5",
        ]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = _stats(prefix)
    row = rows["predict tiny b2"]
    assert int(row["Request Count"]) > 10
    assert int(row["Failure Count"]) == 0
    assert row["Type"] == ("grpc" if protocol == "grpc" else "POST")


def test_jpeg_payload(server, tmp_path):
    prefix = tmp_path / "jpeg"
    result = _run(
        [
            "-f",
            "loadtests/locustfile.py",
            "--headless",
            "-u",
            "1",
            "-r",
            "1",
            "-t",
            "3s",
            "--host",
            server.grpc_url,
            "--model",
            "tiny",
            "--payload",
            "jpeg",
            "--csv",
            str(prefix),
            "--only-summary",
        ]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    row = _stats(prefix)["predict tiny b1"]
    assert int(row["Request Count"]) > 0 and int(row["Failure Count"]) == 0


def test_step_shape_becomes_one_point_per_step(server, tmp_path):
    prefix = tmp_path / "steps"
    result = _run(
        [
            "-f",
            "loadtests/locustfile.py,loadtests/step_shape.py",
            "--headless",
            "--host",
            server.grpc_url,
            "--model",
            "tiny",
            "--steps",
            "1,3",
            "--step-seconds",
            "4",
            "--csv",
            str(prefix),
            "--only-summary",
        ],
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = tmp_path / "imported"
    assert main(["import-locust", str(prefix), "--run-dir", str(out), "--url", server.grpc_url]) == 0
    points = read_points(out)
    assert [p.load.concurrency for p in points] == [1, 3]
    assert all(p.load.mode == "locust" and p.counts.ok > 0 and p.batch_size == 1 for p in points)
    assert "Locust" in points[0].notes[0]
    assert main(["report", str(out), "--no-plots"]) == 0


def _server_requests(server) -> float:
    with urllib.request.urlopen(f"{server.rest_url}/monitoring/prometheus/metrics", timeout=10) as response:
        text = response.read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name.startswith(":tensorflow:serving:request_count")
                and sample.labels.get("model_name") == "tiny"
            ):
                total += sample.value
    return total


def _wait_listening(process: subprocess.Popen, port: int, timeout: float = 60) -> None:
    """Until ``process`` accepts TCP connections on ``port`` (it has bound it), or fail with its output."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None:
                output = process.stdout.read() if process.stdout else ""
                raise AssertionError(f"exited before listening on {port}: {output[-3000:]}") from None
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on {port} after {timeout} s") from None
            time.sleep(0.05)  # between polls of the port


def test_distributed_master_and_two_workers(server, tmp_path):
    port = free_port()
    prefix = tmp_path / "distributed"
    common = ["-f", "loadtests/locustfile.py", "--host", server.grpc_url, "--model", "tiny", "--batch-size", "1"]
    before = _server_requests(server)
    master = subprocess.Popen(
        LOCUST
        + common
        + [
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--headless",
            "--expect-workers",
            "2",
            "--expect-workers-max-wait",
            "60",
            "-u",
            "4",
            "-r",
            "4",
            "-t",
            "6s",
            "--csv",
            str(prefix),
            "--only-summary",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    _wait_listening(master, port)  # the master has bound its port: the workers' first hello reaches it
    workers = [
        subprocess.Popen(
            LOCUST + common + ["--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    try:
        output, _ = master.communicate(timeout=150)
        assert master.returncode == 0, output[-3000:]
        for worker in workers:
            worker.wait(timeout=30)
    finally:
        for process in [master, *workers]:
            if process.poll() is None:
                process.kill()
    assert "2 workers" in output or "workers connected: 2" in output.lower() or "(2 total)" in output, output[-2000:]
    row = _stats(prefix)["predict tiny b1"]
    locust_count = int(row["Request Count"])
    assert locust_count > 20 and int(row["Failure Count"]) == 0
    served = _server_requests(server) - before
    # every request Locust counted reached the server; at most the requests in flight at the stop are extra
    assert locust_count <= served <= locust_count + 8


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_v2_hosts_drive_real_triton(triton, tmp_path, protocol):
    """--host v2+grpc:// sends inference.GRPCInferenceService/ModelInfer, --host v2+http:// POSTs
    /v2/models/<m>/infer (Triton's server src/grpc/infer_handler.cc, src/http_server.cc), and Triton's
    own success counter agrees with what Locust counts.

    Locust's end-of-run JSON (--json-file, written by main.py's shutdown() after runner.quit(), locust
    2.47.0 main.py lines 656-661) holds every request; its CSV does not: StatsCSVFileWriter.stats_writer
    rewrites the rows once per CSV_STATS_INTERVAL_SEC (stats.py lines 107, 1166-1191) and shutdown()
    only closes the files (main.py line 670), so the last second of a run can be missing from the CSV
    (seen: 1093 in the CSV against 1467 served, a 3 s gRPC run). So: Triton served what the JSON counts
    (the two users' requests in flight at the stop finish and are counted, stop-timeout), and the CSV
    counts no more than the JSON."""
    host = triton.grpc_url if protocol == "grpc" else triton.http_url

    def successes() -> int:
        with urllib.request.urlopen(triton.stats_url, timeout=10) as response:
            return int(json.loads(response.read())["model_stats"][0]["inference_stats"]["success"]["count"])

    before = successes()
    prefix = tmp_path / f"v2-{protocol}"
    result = _run(
        [
            "-f",
            "loadtests/locustfile.py",
            "--headless",
            "-u",
            "2",
            "-r",
            "2",
            "-t",
            "3s",
            "--host",
            host,
            "--protocol",
            protocol,
            "--model",
            "tiny",
            "--csv",
            str(prefix),
            "--json-file",
            str(prefix),
            "--only-summary",
            "--stop-timeout",
            "5",
        ]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (entry,) = [e for e in json.loads(Path(f"{prefix}.json").read_text()) if e["name"] == "predict tiny b1"]
    assert entry["num_failures"] == 0 and entry["num_requests"] > 10
    served = successes() - before
    assert served == entry["num_requests"]
    row = _stats(prefix)["predict tiny b1"]
    assert int(row["Failure Count"]) == 0 and 0 < int(row["Request Count"]) <= entry["num_requests"]


def test_import_locust_writes_a_kind_in_its_one_name(tmp_path):
    """``import-locust --server tensorflow-serving`` (the old spelling its help once gave) writes the kind's one
    name, tfserving, as every other point does: points are not left for the migration to read."""
    from serve_bench.load import import_locust

    (tmp_path / "l_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Requests/s,Average Response Time,Max Response Time,"
        "50%,90%,95%,99%,99.9%,100%\n"
        "grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
        ",Aggregated,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
    )
    for given, written in (("tensorflow-serving", "tfserving"), ("serve-bench-local", "local"), ("triton", "triton")):
        (point,) = import_locust(str(tmp_path / "l"), server=given)
        assert point.target.server == written


@pytest.mark.parametrize(
    ("row", "options", "says"),
    [
        ("grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60", {"batch_size": -5}, "--batch-size"),
        ("grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60", {"batch_size": 0}, "--batch-size"),
        # past a tensor dimension's int64; 400 digits were an OverflowError traceback
        ("grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60", {"batch_size": 2**63}, "1 to 2**63 - 1"),
        ("grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60", {"batch_size": int("9" * 400)}, "--batch-size"),
        ("grpc,predict tiny b0,200,0,40.0,24.1,60,23,30,33,41,60,60", {}, "'predict tiny b0'"),  # report divided by 0
        ("grpc,predict tiny b1,200,500,40.0,24.1,60,23,30,33,41,60,60", {}, "500 failures of 200"),  # < 0 images/s
        ("grpc,predict tiny b1,inf,0,40.0,24.1,60,23,30,33,41,60,60", {}, "Request Count 'inf'"),  # OverflowError
        ("grpc,predict tiny b1,200,0,40.0,24.1,60,nan,30,33,41,60,60", {}, "50% 'nan'"),  # ValueError
    ],
)
def test_import_locust_refuses_rows_and_batch_sizes_that_make_no_point(tmp_path, row, options, says):
    """Each used to be written as a point (negative images/s, batch 0 that `report` then divided by) or to
    end in a traceback; now one UserError naming the value."""
    from serve_bench.errors import UserError
    from serve_bench.load import import_locust

    (tmp_path / "l_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Requests/s,Average Response Time,Max Response Time,"
        f"50%,90%,95%,99%,99.9%,100%\n{row}\n"
    )
    with pytest.raises(UserError, match=re.escape(says)):
        import_locust(str(tmp_path / "l"), **options)


def test_a_request_name_that_does_not_say_the_model_and_batch_size_needs_the_flags(tmp_path):
    """A Locust file of one's own names its requests as it likes ("my request"): the row was imported as model
    "unknown" at batch 1, so a run at batch 8 read an eighth of its images/s. It is refused naming the flags still
    needed; with both given, the row is that model at that batch size."""
    from serve_bench.errors import UserError
    from serve_bench.load import import_locust

    (tmp_path / "l_stats.csv").write_text(_HEADER + "POST,my request,200,0,40.0,24.1,60,23,30,33,41,60,60\n")
    prefix = str(tmp_path / "l")
    said = "the request name 'my request' does not say the model and batch size (serve-bench's Locust users name "
    for options, needed in (({}, "--model and --batch-size"), ({"model": "tiny"}, "--batch-size")):
        with pytest.raises(UserError) as refused:
            import_locust(prefix, **options)
        assert str(refused.value) == said + f"theirs 'predict MODEL bBATCH'); pass {needed}"
    with pytest.raises(UserError, match=r"pass --model$"):
        import_locust(prefix, batch_size=8)
    (point,) = import_locust(prefix, model="tiny", batch_size=8)
    assert (point.model, point.batch_size, point.throughput.items_per_s) == ("tiny", 8, pytest.approx(40.0 * 8))


def test_rows_beside_serve_bench_s_that_say_no_model_are_left_out_and_said(tmp_path, capsys):
    """A locustfile that also sends its own requests (a health check named "/healthz") beside serve-bench's: the
    import was refused whole (no flags), or the rows collapsed into one key (with them). serve-bench's rows are
    imported and the others left out, said in one warning line naming them."""
    (tmp_path / "l_stats.csv").write_text(
        _HEADER
        + "grpc,predict tiny b8,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
        + "GET,/healthz,50,0,10.0,1.0,2,1,1,1,2,2,2\n"
        + "GET,/ready,50,0,10.0,1.0,2,1,1,1,2,2,2\n"
    )
    run = tmp_path / "run"
    assert main(["import-locust", str(tmp_path / "l"), "--run-dir", str(run)]) == 0
    assert capsys.readouterr().err == (
        f"serve-bench import-locust: warning: {tmp_path / 'l'}_stats.csv: left out 2 rows whose name says no model "
        "and batch size ('/healthz', '/ready'); serve-bench's requests are named 'predict MODEL bBATCH'\n"
    )
    (point,) = read_points(run)
    assert (point.model, point.batch_size) == ("tiny", 8)
    # --model and --batch-size say them for every row: none is left out, and the two GET rows, one key, are refused
    flags = ["--model", "tiny", "--batch-size", "8", "--run-dir", str(tmp_path / "flags")]
    assert main(["import-locust", str(tmp_path / "l"), *flags]) == 2
    assert "rows '/healthz' and '/ready' both become point locust-rest|tiny|" in capsys.readouterr().err


def test_a_step_load_with_rows_left_out_is_refused_as_its_totals_count_them(tmp_path):
    """A step load is read from the history's Aggregated rows, Locust's totals over every request: with a health
    check beside serve-bench's row, its requests were counted as the predict row's (800 health checks read as
    batch-8 predictions, found by a review). Refused in one line naming the row; the same history with serve-bench's
    row alone gives a point per step."""
    from serve_bench.errors import UserError
    from serve_bench.load import import_locust

    history = "Timestamp,User Count,Type,Name,50%,90%,95%,99%,99.9%,100%,Total Request Count,Total Failure Count,"
    history += "Total Max Response Time,Total Average Response Time\n"
    for t, users, total in ((100, 1, 0), (104, 1, 400), (105, 2, 420), (109, 2, 1000)):
        history += f"{t},{users},,Aggregated,23,30,33,41,60,60,{total},0,60,24.1\n"
    (tmp_path / "l_stats_history.csv").write_text(history)
    predict = "grpc,predict tiny b8,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
    (tmp_path / "l_stats.csv").write_text(_HEADER + predict + "GET,/healthz,800,0,160.0,1.0,2,1,1,1,2,2,2\n")
    with pytest.raises(UserError) as refused:
        import_locust(str(tmp_path / "l"), on_skip=lambda said: None)
    assert str(refused.value) == (
        f"{tmp_path / 'l'}_stats_history.csv: a step load is read from Locust's totals over every request, "
        "'/healthz' included; run the step load with serve-bench's requests alone"
    )
    (tmp_path / "l_stats.csv").write_text(_HEADER + predict)
    assert [p.load.concurrency for p in import_locust(str(tmp_path / "l"))] == [1, 2]


def test_import_locust_of_a_file_that_is_not_text_is_one_line(tmp_path):
    from serve_bench.errors import UserError
    from serve_bench.load import import_locust

    (tmp_path / "l_stats.csv").write_bytes(b"garbage\x00\xff\n")
    with pytest.raises(UserError, match="is not a CSV file Locust wrote"):
        import_locust(str(tmp_path / "l"))


def test_import_locust_of_a_csv_without_locust_s_columns_is_one_line(tmp_path):
    """Another tool's CSV (no Name column, which each of Locust's rows has): one line, not a KeyError."""
    from serve_bench.errors import UserError
    from serve_bench.load import import_locust

    (tmp_path / "l_stats.csv").write_text("Type,Request Count,Requests/s\nGET,10,2.0\n")
    with pytest.raises(UserError, match=r"l_stats\.csv has no Name column"):
        import_locust(str(tmp_path / "l"))


_HEADER = (
    "Type,Name,Request Count,Failure Count,Requests/s,Average Response Time,Max Response Time,"
    "50%,90%,95%,99%,99.9%,100%\n"
)


def test_a_run_of_grpc_and_rest_users_imports_a_point_per_protocol(tmp_path):
    """The locustfile's two users name their requests alike ("predict tiny b1"), the gRPC one with request_type
    "grpc", the REST one with its method: one run of both became two points with one key, which report showed as
    "x2" repeats of one measurement (a median of 30 images/s from 40 and 20). Each protocol is a target of its own."""
    from serve_bench.load import import_locust

    (tmp_path / "l_stats.csv").write_text(
        _HEADER
        + "grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
        + "POST,predict tiny b1,100,0,20.0,48.0,90,47,60,66,82,90,90\n"
    )
    points = import_locust(str(tmp_path / "l"))
    assert [(p.target.name, p.target.protocol) for p in points] == [("locust-grpc", "grpc"), ("locust-rest", "rest")]
    assert len({p.key for p in points}) == 2
    only_grpc = tmp_path / "g_stats.csv"
    only_grpc.write_text(_HEADER + "grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60\n")
    assert [p.target.name for p in import_locust(str(tmp_path / "g"))] == ["locust"]  # one protocol: as before


def test_rows_that_become_one_point_are_refused(tmp_path):
    """--batch-size given for rows of two batch sizes makes one key of both: refused, naming the rows."""
    from serve_bench.errors import UserError
    from serve_bench.load import import_locust

    (tmp_path / "l_stats.csv").write_text(
        _HEADER
        + "grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
        + "grpc,predict tiny b8,100,0,20.0,48.0,90,47,60,66,82,90,90\n"
    )
    with pytest.raises(UserError, match="rows 'predict tiny b1' and 'predict tiny b8' both become point"):
        import_locust(str(tmp_path / "l"), batch_size=4)


def test_the_same_csv_imported_twice_into_one_run_is_refused(tmp_path, capsys):
    """A second import of one Locust CSV into the same run read as two repeats of each measurement (report: "x2",
    a range of zero width); it is refused in one line, the run left as it was, and another run takes it."""
    (tmp_path / "l_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Requests/s,Average Response Time,Max Response Time,"
        "50%,90%,95%,99%,99.9%,100%\n"
        "grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
        ",Aggregated,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
    )
    run = tmp_path / "run"
    assert main(["import-locust", str(tmp_path / "l"), "--run-dir", str(run)]) == 0
    before = (run / "points.jsonl").read_text()
    assert main(["import-locust", str(tmp_path / "l"), "--run-dir", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already holds" in err and "import into another --run-dir" in err
    assert (run / "points.jsonl").read_text() == before
    assert main(["import-locust", str(tmp_path / "l"), "--run-dir", str(tmp_path / "other")]) == 0
