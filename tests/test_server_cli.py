"""`serve-bench serve` as a process: start-up errors, and draining on SIGTERM."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import urllib.request

import numpy as np
import pytest

from serve_bench.cli import main
from tests._servers import ServeProcess
from tests.conftest import free_port


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_missing_model_directory_exits_2(tmp_path, capsys):
    code = main(["serve", "--model_name", "x", "--model_base_path", str(tmp_path / "nowhere")])
    assert code == 2
    err = _one_line(capsys)
    assert "nowhere" in err and "does not exist" in err


@pytest.mark.parametrize("damage", ["empty", "corrupt"])
def test_empty_or_corrupt_version_directory_exits_2(tmp_path, capsys, damage):
    """An empty version directory, or one whose saved_model.pb is not a SavedModel, fails that
    model's load (TF Serving's loader, core/loader_harness.cc, reports the path and stops
    the server at start-up); serve-bench says so in one line naming the directory, exit 2."""
    version = tmp_path / "m" / "3"
    version.mkdir(parents=True)
    if damage == "corrupt":
        (version / "saved_model.pb").write_bytes(b"\x00\xffnot a protobuf" * 10)
    code = main(
        [
            "serve",
            "--model_name",
            "m",
            "--model_base_path",
            str(tmp_path / "m"),
            "--port",
            str(free_port()),
            "--rest_api_port",
            str(free_port()),
        ]
    )
    assert code == 2
    err = _one_line(capsys)
    assert str(version) in err and "'m'" in err


def test_a_grpc_port_in_use_is_one_line_not_grpcs_runtime_error(models_dir, capsys):
    """grpcio raises RuntimeError ("Failed to bind") for a port another process holds, where older
    versions returned 0: either way one line naming the address and the flag, exit 2 (a second
    `serve` beside a running one, or TF Serving already on 8500)."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        argv = ["serve", "--model_name", "tiny", "--model_base_path", str(models_dir / "tiny")]
        code = main([*argv, "--port", str(port), "--rest_api_port", "0"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the server's start-up log lines
    assert err.startswith("serve-bench serve: error: cannot bind gRPC") and f":{port}" in err and "--port" in err


def test_models_config_resolves_container_paths(models_dir, capsys):
    # /models/tiny does not exist here; it resolves under --models_dir. A bad
    # batching file then stops the start-up with the line it fails on.
    bad = models_dir.parent / "bad_batching.txt"
    bad.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 0 }\nmax_batch_sise { value: 3 }\n")
    code = main(
        [
            "serve",
            "--model_config_file",
            str(models_dir / "models.config"),
            "--models_dir",
            str(models_dir),
            "--enable_batching",
            "--batching_parameters_file",
            str(bad),
        ]
    )
    assert code == 2
    err = _one_line(capsys)
    assert "line 3" in err and "max_batch_sise" in err


def test_bad_monitoring_config(models_dir, tmp_path, capsys):
    bad = tmp_path / "monitoring.config"
    bad.write_text("prometheus_config { enable: maybe }\n")
    code = main(
        [
            "serve",
            "--model_name",
            "tiny",
            "--model_base_path",
            str(models_dir / "tiny"),
            "--monitoring_config_file",
            str(bad),
        ]
    )
    assert code == 2
    assert "line 1" in _one_line(capsys)


def test_allowed_batch_sizes_must_end_at_max(tmp_path, models_dir, capsys):
    params = tmp_path / "batching.txt"
    params.write_text("max_batch_size { value: 8 }\nallowed_batch_sizes: 2\nallowed_batch_sizes: 4\n")
    code = main(
        [
            "serve",
            "--model_name",
            "tiny",
            "--model_base_path",
            str(models_dir / "tiny"),
            "--enable_batching=true",
            "--batching_parameters_file",
            str(params),
        ]
    )
    assert code == 2
    assert "max_batch_size" in _one_line(capsys)


def _queued_tasks(rest_port: int) -> int:
    """Requests the server's batching queues have taken: BatchingSession's input_batch_size count (one input)."""
    url = f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        page = response.read().decode()
    match = re.search(r"^:tensorflow:serving:batching_session:input_batch_size_count\{\} (\d+)$", page, re.M)
    return int(match.group(1)) if match else 0


def test_sigterm_finishes_in_flight_requests_and_exits_0(models_dir, tmp_path):
    # A 5 s batch timeout holds the request in the queue while SIGTERM arrives; the server's own metric
    # says when it is queued. (The queue is drained only after the REST runner's cleanup, which waits for
    # the handler: the answer comes when the batch times out, not at once.)
    params = tmp_path / "batching.txt"
    params.write_text(
        "max_batch_size { value: 8 }\nbatch_timeout_micros { value: 5000000 }\nnum_batch_threads { value: 1 }\n"
    )
    monitoring = tmp_path / "monitoring.txt"
    monitoring.write_text('prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n')
    server = ServeProcess(
        models_dir,
        "--enable_batching",
        "--batching_parameters_file",
        str(params),
        "--monitoring_config_file",
        str(monitoring),
    )
    process, rest_port = server.process, server.rest_port
    try:
        before = _queued_tasks(rest_port)  # warmup requests may have gone through the queue already
        result: dict = {}

        def send() -> None:
            body = json.dumps({"instances": np.zeros((1, 64, 64, 3)).tolist()}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{rest_port}/v1/models/tiny:predict", data=body)
            with urllib.request.urlopen(request, timeout=30) as response:
                result["status"] = response.status
                result["body"] = json.loads(response.read())

        sender = threading.Thread(target=send)
        sender.start()
        deadline = time.monotonic() + 30
        while _queued_tasks(rest_port) == before and time.monotonic() < deadline:
            time.sleep(0.01)  # between polls of the metrics page
        assert _queued_tasks(rest_port) == before + 1, "the request never reached the batch queue"
        assert not result, "answered before SIGTERM: the test would not see an in-flight request"
        process.send_signal(signal.SIGTERM)
        sender.join(timeout=30)
        assert result.get("status") == 200
        assert len(result["body"]["predictions"][0]) == 32
        assert process.wait(timeout=30) == 0
        output = process.stdout.read()
        assert "shutting down" in output
    finally:
        if process.poll() is None:
            process.kill()


def test_version_policy_is_reported_not_silently_ignored(models_dir, tmp_path):
    from serve_bench.server import build_arg_parser, config_from_args

    config = tmp_path / "models.config"
    config.write_text(
        'model_config_list { config { name: "tiny" base_path: "/models/tiny" model_platform: '
        '"tensorflow" model_version_policy { all {} } } }\n'
    )
    args = build_arg_parser().parse_args(["--model_config_file", str(config), "--models_dir", str(models_dir)])
    server_config = config_from_args(args)
    assert any("model_version_policy" in n for n in server_config.notices)


def test_openvino_flags_without_the_openvino_runtime_are_named_in_a_notice(models_dir):
    """serve's --openvino_* flags act on the OpenVINO copy only; given beside --runtime tensorflow (the
    default) they would be silently inert, so the server names them when it starts."""
    from serve_bench.server import build_arg_parser, config_from_args

    base = ["--model_name", "tiny", "--model_base_path", str(models_dir / "tiny")]
    parse = build_arg_parser().parse_args
    quiet = config_from_args(parse(base)).notices
    assert not any("OpenVINO" in n for n in quiet)
    loud = config_from_args(parse([*base, "--openvino_num_streams", "2", "--openvino_performance_hint", "THROUGHPUT"]))
    (notice,) = [n for n in loud.notices if "OpenVINO" in n]
    assert "--openvino_performance_hint, --openvino_num_streams" in notice and "--runtime openvino" in notice


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_body_limit_of_no_bytes_is_refused_at_start(models_dir, value):
    """--max_body_bytes 0 or less started a server that answered every REST request 413, however small (the
    local server's own flag: TF Serving has none); refused in one line before anything is loaded."""
    from serve_bench.errors import UserError
    from serve_bench.server import build_arg_parser, config_from_args

    base = ["--model_name", "tiny", "--model_base_path", str(models_dir / "tiny"), "--max_body_bytes", value]
    with pytest.raises(UserError, match=f"--max_body_bytes must be a whole number of bytes >= 1, got {value}"):
        config_from_args(build_arg_parser().parse_args(base))
    assert config_from_args(build_arg_parser().parse_args([*base[:-1], "1"])).max_body_bytes == 1


def test_one_port_for_grpc_and_rest_serves_grpc_alone_and_says_so_as_tf_serving_does(models_dir, tmp_path):
    """``--port P --rest_api_port P``: TF Serving logs "server_options.http_port cannot be same as grpc_port..." and
    serves without REST (tensorflow/serving 9d981c5, tensorflow_serving/model_servers/server.cc:455-459). The local
    server bound both, after loading every model, and ended with "address already in use"; it now does as TF
    Serving does, and says TF Serving's line among its notices when it starts."""
    from serve_bench.errors import UserError
    from serve_bench.server import build_arg_parser, config_from_args

    base = ["--model_name", "tiny", "--model_base_path", str(models_dir / "tiny")]
    parse = build_arg_parser().parse_args
    same = config_from_args(parse([*base, "--port", "8600", "--rest_api_port", "8600"]))
    assert (same.port, same.rest_api_port) == (8600, 0)
    assert same.notices == (
        "server_options.http_port cannot be same as grpc_port. Please use a different port for HTTP/REST API. "
        "Skipped exporting HTTP/REST API.",
    )
    apart = config_from_args(parse([*base, "--port", "8600", "--rest_api_port", "8601"]))
    assert (apart.port, apart.rest_api_port, apart.notices) == (8600, 8601, ())
    # the monitoring config is read inside TF Serving's HTTP branch (server.cc:437-444): no REST, no metrics page
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text('prometheus_config { enable: true, path: "/metrics" }\n')
    watched = [*base, "--port", "8600", "--monitoring_config_file", str(monitoring)]
    assert config_from_args(parse([*watched, "--rest_api_port", "8601"])).metrics_path == "/metrics"
    assert config_from_args(parse([*watched, "--rest_api_port", "8600"])).metrics_path is None
    monitoring.write_text("not a MonitoringConfig {")  # unread there, so not refused either
    assert config_from_args(parse([*watched, "--rest_api_port", "8600"])).metrics_path is None
    with pytest.raises(UserError, match="monitoring config file"):
        config_from_args(parse([*watched, "--rest_api_port", "8601"]))
