"""docker/: what can be checked without a Docker engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from google.protobuf import text_format

from serve_bench.errors import UserError
from serve_bench.server import build_arg_parser, parse_batching_parameters, parse_monitoring_config
from tests.conftest import require

ROOT = Path(__file__).parent.parent
DOCKER = ROOT / "docker"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_services_ports_mounts_profiles(compose):
    services = compose["services"]
    assert set(services) == {
        "tfserving-cpu",
        "tfserving-gpu",
        "triton-cpu",
        "triton-gpu",
        "mlserver",
        "openvino",
        "locust-master",
        "locust-worker",
        "node-exporter",
        "dcgm-exporter",
    }
    cpu, gpu = services["tfserving-cpu"], services["tfserving-gpu"]
    assert cpu["image"].startswith("tensorflow/serving:") and not cpu["image"].endswith("-gpu")
    assert gpu["image"] == cpu["image"] + "-gpu"  # the matching GPU build
    assert cpu["ports"] == ["8500:8500", "8501:8501"]
    assert gpu["ports"] == ["8510:8500", "8511:8501"]
    for service in (cpu, gpu):
        assert "../exported_models:/models:ro" in service["volumes"]
        assert "healthcheck" in service and "AVAILABLE" in " ".join(service["healthcheck"]["test"])
    assert "profiles" not in cpu and gpu["profiles"] == ["gpu"]
    device = gpu["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert services["locust-master"]["profiles"] == ["load"] == services["locust-worker"]["profiles"]
    assert services["locust-master"]["depends_on"]["tfserving-cpu"]["condition"] == "service_healthy"
    assert "--worker" in services["locust-worker"]["command"]
    assert "replicas" not in services["locust-worker"].get("deploy", {})  # scaled with --scale


def test_tfserving_pin_matches_the_serving_api():
    import importlib.metadata

    text = (DOCKER / "compose.yaml").read_text()
    assert f"tensorflow/serving:{importlib.metadata.version('tensorflow-serving-api')}" in text


def _mounted(service: dict, container_path: str) -> Path:
    for volume in service["volumes"]:
        source, target = volume.split(":")[:2]
        if target == container_path:
            return (DOCKER / source).resolve()
    raise AssertionError(f"nothing mounted at {container_path}")


@pytest.mark.parametrize("name", ["tfserving-cpu", "tfserving-gpu"])
def test_every_flag_is_accepted_by_the_local_server(compose, name):
    service = compose["services"][name]
    flags = service["command"]
    assert service["entrypoint"] == ["tensorflow_model_server"]
    args, unknown = build_arg_parser().parse_known_args(flags)
    assert unknown == [], f"flags the local server does not accept: {unknown}"
    assert args.enable_batching is True
    # each config file the flags name parses with TF Serving's protos
    batching = parse_batching_parameters(str(_mounted(service, args.batching_parameters_file)))
    assert batching.max_batch_size >= 1
    assert (
        parse_monitoring_config(str(_mounted(service, args.monitoring_config_file))) == "/monitoring/prometheus/metrics"
    )
    from tensorflow_serving.config import model_server_config_pb2

    config_path = ROOT / "exported_models" / Path(args.model_config_file).name
    text_format.Parse(config_path.read_text(), model_server_config_pb2.ModelServerConfig())


def test_batching_configs_follow_the_guide():
    cpu = parse_batching_parameters(str(DOCKER / "batching" / "cpu.txt"))
    gpu = parse_batching_parameters(str(DOCKER / "batching" / "gpu.txt"))
    assert cpu.batch_timeout_micros == 0  # CPU: never wait for a batch to fill
    assert 0 < gpu.batch_timeout_micros <= 10_000  # GPU: a few ms
    assert gpu.max_batch_size > cpu.max_batch_size
    assert gpu.allowed_batch_sizes[-1] == gpu.max_batch_size


def test_batching_files_parse_with_the_serving_protos():
    # The same text read by TF Serving's own BatchingParameters (declared with its field numbers).
    from serve_bench import _protos

    for name in ("cpu.txt", "gpu.txt"):
        message = text_format.Parse(
            (DOCKER / "batching" / name).read_text(), _protos.message("tensorflow.serving.BatchingParameters")()
        )
        assert message.max_batch_size.value > 0


def test_an_unknown_flag_is_refused():
    _, unknown = build_arg_parser().parse_known_args(["--port=1", "--no_such_flag=1"])
    assert unknown == ["--no_such_flag=1"]


def test_dockerfile_installs_the_locust_extra():
    text = (DOCKER / "Dockerfile.locust").read_text()
    assert "'.[locust]'" in text and "constraints.txt" in text and 'ENTRYPOINT ["locust"]' in text
    assert (ROOT / "loadtests" / "locustfile.py").exists()


def test_missing_batching_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        parse_batching_parameters(str(tmp_path / "nope.txt"))


def test_compose_file_follows_the_compose_specification(compose):
    """The Compose Specification's own JSON schema (vendored by check-jsonschema) accepts the file,
    and refuses a misspelt key (so the check is live)."""
    import json
    from importlib import resources

    import jsonschema

    text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    validator_class = jsonschema.validators.validator_for(json.loads(text))
    validator = validator_class(json.loads(text))
    assert [e.message for e in validator.iter_errors(compose)] == []
    broken = {**compose, "services": {**compose["services"], "node-exporter": {"image": "x", "portz": ["1:1"]}}}
    assert any("portz" in e.message for e in validator.iter_errors(broken))


def test_telemetry_exporters_are_wired_to_the_servers(compose):
    """node-exporter runs beside both servers (started with them), dcgm-exporter with the GPU one.
    dcgm-exporter's flags are from pkg/cmd/app.go (collect-interval "-c", ms, default 30000); its
    image's default counters (etc/default-counters.csv) include DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
    and DCGM_FI_DEV_POWER_USAGE, so no counters file is mounted."""
    services = compose["services"]
    node, dcgm = services["node-exporter"], services["dcgm-exporter"]
    assert "profiles" not in node and dcgm["profiles"] == ["gpu", "triton-gpu"]
    assert node["ports"] == ["9100:9100"] and dcgm["ports"] == ["9400:9400"]
    assert services["tfserving-cpu"]["depends_on"] == {"node-exporter": {"condition": "service_started"}}
    assert services["tfserving-gpu"]["depends_on"] == {
        "node-exporter": {"condition": "service_started"},
        "dcgm-exporter": {"condition": "service_started"},
    }
    assert node["image"] == "quay.io/prometheus/node-exporter:v1.5.0" and node["user"] == "root"
    assert dcgm["image"].startswith("nvcr.io/nvidia/k8s/dcgm-exporter:") and ":latest" not in dcgm["image"]
    assert dcgm["command"] == ["--collect-interval=1000"]
    device = dcgm["deploy"]["resources"]["reservations"]["devices"][0]
    assert device == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}
    text = (DOCKER / "compose.yaml").read_text()
    assert 'telemetry = ["http://localhost:9100/metrics"]' in text
    assert 'telemetry = ["http://localhost:9400/metrics", "http://localhost:9100/metrics"]' in text


def test_node_exporter_runs_with_the_compose_flags(compose):
    """Debian's prometheus-node-exporter (the image's version) runs with exactly the compose
    command, the /host paths mapped back through the service's volumes; it serves the cpu
    family and has only the cpu and rapl collectors."""
    import subprocess
    import urllib.request

    from serve_bench.metrics._exposition import samples as page_samples
    from tests._exporters import NODE_EXPORTER, node_exporter

    service = compose["services"]["node-exporter"]
    mounts = dict(volume.split(":")[1::-1] for volume in service["volumes"])  # container path -> host path
    flags = []
    for flag in service["command"]:
        if flag.startswith("--web.listen-address="):
            assert flag == "--web.listen-address=:9100"
            continue  # the helper listens on a free 127.0.0.1 port instead
        name, _, value = flag.partition("=")
        flags.append(f"{name}={mounts.get(value, value)}" if value else flag)
    assert "--path.procfs=/proc" in flags and "--path.sysfs=/sys" in flags
    # node_exporter() skips where the binary is missing, as the other node-exporter tests do (fails where CI is set)
    with node_exporter(flags) as url:
        samples = list(page_samples(urllib.request.urlopen(url, timeout=5).read().decode()))
    assert NODE_EXPORTER is not None  # it ran
    version = subprocess.run([NODE_EXPORTER, "--version"], capture_output=True, text=True, check=True)
    assert f"version {service['image'].rsplit(':v', 1)[1]} " in version.stdout + version.stderr
    names = {name for name, _, _ in samples}
    assert "node_cpu_seconds_total" in names
    collectors = {labels["collector"] for name, labels, _ in samples if name == "node_scrape_collector_success"}
    assert collectors == {"cpu", "rapl"}


# --- Triton and MLServer -------------------------------------------------------------------------
# Their images are built from docker/Dockerfile.triton (nvcr.io/nvidia/tritonserver:24.10-py3, i.e.
# Triton 2.51.0: server build.py at tag v2.51.0, TRITON_VERSION_MAP) and docker/Dockerfile.mlserver
# (seldonio/mlserver:1.7.1-slim), the versions serve-bench runs locally from .venv-servers.

DATA = ROOT / "tests" / "data"
TRITON_HELP = DATA / "tritonserver_2.51_help.txt"  # `tritonserver --help` of the nvidia-pytriton 0.7.0 binary
MLSERVER_ENV = DATA / "mlserver_1.7.1_settings_env.txt"  # MLSERVER_<field> for every mlserver Settings field
MLSERVER_START_HELP = DATA / "mlserver_1.7.1_start_help.txt"  # `mlserver start --help`
V2_PORTS = {"triton-cpu": 8000, "triton-gpu": 8010, "mlserver": 8080}  # host HTTP port; gRPC +1, metrics +2


def _triton_options() -> dict[str, str]:
    """Option name -> value kind ("boolean", "integer", "string", ... or "" for a switch), from the help."""
    import re

    options = {}
    for line in TRITON_HELP.read_text().splitlines():
        match = re.match(r"^  (--[a-z0-9-]+)(?: <(.+)>)?$", line)
        if match:
            options[match.group(1)] = match.group(2) or ""
    return options


def _constraint(name: str) -> str:
    for line in (ROOT / "servers-constraints.txt").read_text().splitlines():
        if line.startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{name} is not pinned in servers-constraints.txt")


def test_triton_and_mlserver_services(compose):
    """Profiles of their own (plain `up` and `--profile gpu` start what they did; a GPU is never
    shared by tfserving-gpu and triton-gpu), the ports the README names, exported_models read-only,
    and the GPU service reserving a GPU as tfserving-gpu does."""
    services = compose["services"]
    cpu, gpu, mls = services["triton-cpu"], services["triton-gpu"], services["mlserver"]
    assert cpu["profiles"] == ["triton"] and gpu["profiles"] == ["triton-gpu"] and mls["profiles"] == ["mlserver"]
    for name, service in (("triton-cpu", cpu), ("triton-gpu", gpu), ("mlserver", mls)):
        host = V2_PORTS[name]
        container = 8080 if name == "mlserver" else 8000
        assert service["ports"] == [f"{host + i}:{container + i}" for i in range(3)], name
        assert service["volumes"] == ["../exported_models:/models:ro"], name
        assert service["depends_on"]["node-exporter"] == {"condition": "service_started"}, name
        assert (DOCKER / service["build"]["context"] / service["build"]["dockerfile"]).is_file(), name
        assert ":latest" not in service["image"] and service["image"].startswith("serve-bench/"), name
    assert cpu["build"] == {"context": ".", "dockerfile": "Dockerfile.triton"}
    assert gpu["build"] == {**cpu["build"], "args": {"TENSORFLOW_EXTRAS": "[and-cuda]"}}
    assert cpu["image"] != gpu["image"]  # two builds, two tags
    assert gpu["deploy"] == services["tfserving-gpu"]["deploy"]
    assert "deploy" not in cpu and "deploy" not in mls
    assert gpu["depends_on"]["dcgm-exporter"] == {"condition": "service_started"}
    assert "triton-gpu" in services["dcgm-exporter"]["profiles"]  # started with it
    # the Python backend's tensors pass through /dev/shm (python_backend README: docker --shm-size=1g)
    for service in (cpu, gpu):
        assert service["shm_size"] == "1gb" and service["ulimits"] == {"memlock": -1, "stack": 67108864}


def test_every_tritonserver_flag_is_one_the_binary_knows(compose):
    """Each flag in the Triton services is an option of the real 2.51 binary (its recorded --help),
    written --name=value with a value of the kind the help names; ports agree with the published
    container ports and the healthcheck; the repository is under the /models mount."""
    options = _triton_options()
    assert "--model-repository" in options and len(options) > 80  # the recording is the whole help
    for name in ("triton-cpu", "triton-gpu"):
        service = compose["services"][name]
        command = service["command"]
        assert command[0] == "tritonserver" and "entrypoint" not in service  # the image's nvidia_entrypoint.sh runs it
        flags = {}
        for argument in command[1:]:
            flag, equals, value = argument.partition("=")
            assert equals and value, f"{argument}: write --name=value"
            assert flag in options, f"{name}: tritonserver 2.51 has no option {flag}"
            kind = options[flag]
            if kind == "boolean":
                assert value in ("true", "false"), argument
            elif kind == "integer":
                assert value.isdigit(), argument
            flags[flag] = value
        assert flags["--model-repository"] == "/models/triton"
        ports = [int(flags[f"--{api}-port"]) for api in ("http", "grpc", "metrics")]
        assert [int(p.split(":")[1]) for p in service["ports"]] == ports
        assert f"http://127.0.0.1:{ports[0]}/v2/models/inception_v3/ready" in service["healthcheck"]["test"]
    assert compose["services"]["triton-cpu"]["command"][-1] == "--allow-gpu-metrics=false"
    assert "--allow-gpu-metrics=false" not in compose["services"]["triton-gpu"]["command"]


def test_the_recorded_tritonserver_help_is_the_binarys():
    """tests/data/tritonserver_2.51_help.txt is what the servers' environment's binary prints."""
    import subprocess

    from tests.conftest import _servers_env_or_skip

    _servers_env_or_skip()
    from serve_bench.servers import servers_env

    env = servers_env()
    result = subprocess.run(
        [str(env.tritonserver), "--help"],
        capture_output=True,
        text=True,
        env={"LD_LIBRARY_PATH": str(env.triton_libs)},
        timeout=60,
    )
    assert result.stdout + result.stderr == TRITON_HELP.read_text()


def test_mlserver_settings_are_its_own(compose):
    """Every MLSERVER_* variable is a field of MLServer 1.7.1's Settings (env prefix MLSERVER_,
    recorded list), the ports agree with the published ones and the healthcheck, and the command
    is `mlserver start FOLDER` as its CLI takes it, FOLDER under the /models mount."""
    known = {line for line in MLSERVER_ENV.read_text().splitlines() if line and not line.startswith("#")}
    assert {"MLSERVER_HTTP_PORT", "MLSERVER_GRPC_PORT", "MLSERVER_METRICS_PORT", "MLSERVER_HOST"} <= known
    service = compose["services"]["mlserver"]
    environment = service["environment"]
    assert set(environment) <= known, f"not MLServer settings: {set(environment) - known}"
    assert environment["MLSERVER_HOST"] == "0.0.0.0"
    ports = [int(environment[f"MLSERVER_{api}_PORT"]) for api in ("HTTP", "GRPC", "METRICS")]
    assert [int(p.split(":")[1]) for p in service["ports"]] == ports
    assert "Usage: mlserver start [OPTIONS] FOLDER" in MLSERVER_START_HELP.read_text()
    assert service["command"] == ["mlserver", "start", "/models/mlserver"]
    assert f"http://127.0.0.1:{ports[0]}/v2/models/inception_v3/ready" in service["healthcheck"]["test"][-1]


def test_the_recorded_mlserver_settings_are_its_own():
    """The recorded variable list and `start --help` are what the servers' environment's MLServer has."""
    import subprocess

    from tests.conftest import _servers_env_or_skip

    _servers_env_or_skip()
    from serve_bench.servers import servers_env

    env = servers_env()
    script = (
        "from mlserver.settings import Settings; c = Settings.model_config; "
        "assert c['env_prefix'] == 'MLSERVER_' and not c.get('case_sensitive'); "
        "assert not any(f.alias or f.validation_alias for f in Settings.model_fields.values()); "
        "[print('MLSERVER_' + n.upper()) for n in sorted(Settings.model_fields)]"
    )
    printed = subprocess.run([str(env.python), "-c", script], capture_output=True, text=True, check=True, timeout=120)
    recorded = [line for line in MLSERVER_ENV.read_text().splitlines() if not line.startswith("#")]
    assert printed.stdout.splitlines() == recorded
    start = subprocess.run([str(env.mlserver), "start", "--help"], capture_output=True, text=True, timeout=120)
    assert start.stdout == MLSERVER_START_HELP.read_text()


def test_images_pin_the_versions_run_locally():
    """Triton 24.10 (= 2.51.0) and MLServer 1.7.1 as the local servers, and the TensorFlow, numpy and
    protobuf of servers-constraints.txt; TensorFlow's pin has wheels for the images' Python 3.10."""
    import importlib.metadata
    import re

    triton = (DOCKER / "Dockerfile.triton").read_text()
    mlserver = (DOCKER / "Dockerfile.mlserver").read_text()
    assert re.search(r"^FROM nvcr\.io/nvidia/tritonserver:24\.10-py3$", triton, re.M)
    assert re.search(rf"^FROM seldonio/mlserver:{re.escape(_constraint('mlserver'))}-slim$", mlserver, re.M)
    for text in (triton, mlserver):
        for package in ("numpy", "protobuf"):
            assert f'"{package}=={_constraint(package)}"' in text, package
        assert "assert sys.version_info[:2] == (3, 10)" in text  # the build stops if the base image's Python moved
    version = _constraint("tensorflow")
    assert f'"tensorflow${{TENSORFLOW_EXTRAS}}=={version}"' in triton and f'"tensorflow=={version}"' in mlserver
    assert 'ARG TENSORFLOW_EXTRAS=""' in triton  # the CPU build: no CUDA wheels
    assert int(_constraint("numpy").split(".")[0]) < 2  # the 2.51 Python backend stub needs numpy<2
    metadata = importlib.metadata.metadata("tensorflow")
    assert metadata["Version"] == version
    assert "Programming Language :: Python :: 3.10" in metadata.get_all("Classifier")
    assert metadata["Requires-Python"] in (">=3.9", ">=3.10")


def test_the_v2_healthchecks_pass_only_on_a_ready_model(compose, tmp_path):
    """Each healthcheck command, run here against a stand-in for the server's ready endpoint, passes
    on 200 and fails on 400 (what Triton's HandleModelReady and MLServer's model_ready answer while
    the model loads) and when nothing listens."""
    import http.server
    import shutil
    import subprocess
    import sys
    import threading

    from tests.conftest import free_port

    status = {"code": 200}

    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status["code"] if self.path == "/v2/models/inception_v3/ready" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for name in ("triton-cpu", "triton-gpu", "mlserver"):
            test = compose["services"][name]["healthcheck"]["test"]
            assert test[0] == "CMD"
            argv = [
                a.replace("127.0.0.1:8000", "127.0.0.1:{port}").replace("127.0.0.1:8080", "127.0.0.1:{port}")
                for a in test[1:]
            ]
            assert any("{port}" in a for a in argv), name
            if argv[0] == "curl":
                if not shutil.which("curl"):  # the Triton healthcheck's own command, run here
                    require("curl", "apt-get install curl")
            else:
                assert argv[0] == "python"
                argv[0] = sys.executable

            def run(port: int, argv: list[str] = argv) -> int:
                command = [a.replace("{port}", str(port)) for a in argv]
                return subprocess.run(command, capture_output=True, timeout=30).returncode

            status["code"] = 200
            assert run(server.server_port) == 0, name
            status["code"] = 400
            assert run(server.server_port) != 0, name
            assert run(free_port()) != 0, name
    finally:
        server.shutdown()
        server.server_close()


# OpenVINO Model Server's options (openvinotoolkit/model_server src/cli_parser.cpp, CLIParser::parse:
# the general, "multi model" and "single model" groups) that the compose service may use, with the kind
# of value each takes there (cxxopts::value<...>).
OVMS_OPTIONS = {
    "port": int,
    "rest_port": int,
    "grpc_workers": int,
    "rest_workers": int,
    "file_system_poll_wait_seconds": int,
    "metrics_enable": bool,
    "log_level": str,
    "model_name": str,
    "model_path": str,
    "batch_size": str,
    "shape": str,
    "nireq": int,
    "target_device": str,
    "plugin_config": str,
}


def test_the_openvino_model_server_service(compose):
    """OVMS serves the IR export wrote (exported_models/openvino/<model>, its version directories), under
    the name TF Serving's healthcheck asks for, with flags its cli_parser.cpp defines, and the local
    server's OpenVINO defaults (LATENCY, f32) as its plugin_config."""
    service = compose["services"]["openvino"]
    assert service["profiles"] == ["openvino"] and service["image"].startswith("openvino/model_server:2026.4")
    flags = {}
    for item in service["command"]:
        name, _, value = item.removeprefix("--").partition("=")
        assert name in OVMS_OPTIONS, f"{name} is not an option of ovms"
        kind = OVMS_OPTIONS[name]
        if kind is int:
            assert value.isdigit(), item
        if kind is bool:
            assert value in ("true", "false"), item
        flags[name] = value
    assert flags["model_path"] == f"/models/openvino/{flags['model_name']}"
    assert service["ports"] == ["8520:" + flags["port"], "8521:" + flags["rest_port"]] == ["8520:8500", "8521:8501"]
    assert json.loads(flags["plugin_config"]) == {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
    assert f"/v1/models/{flags['model_name']}" in " ".join(service["healthcheck"]["test"])
    assert "../exported_models:/models:ro" in service["volumes"]
    from serve_bench.export import converted_model_path
    from serve_bench.runtimes import RuntimeSettings

    local = RuntimeSettings("openvino")
    assert (local.openvino_hint, local.openvino_precision) == ("LATENCY", "f32")
    path = converted_model_path(Path("/models"), "openvino", flags["model_name"], 1)
    assert str(path.parent.parent) == flags["model_path"] and path.name == "model.xml"
