"""docker/: what can be checked without a Docker engine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from google.protobuf import text_format

from serve_bench.errors import UserError
from serve_bench.server import build_arg_parser, parse_batching_parameters, parse_monitoring_config

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
    assert "profiles" not in node and dcgm["profiles"] == ["gpu"]
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

    from serve_bench.metrics._energy_sources import parse_exposition
    from tests._exporters import NODE_EXPORTER, node_exporter

    service = compose["services"]["node-exporter"]
    assert NODE_EXPORTER is not None, "apt-get install prometheus-node-exporter (.ci/run installs it)"
    version = subprocess.run([NODE_EXPORTER, "--version"], capture_output=True, text=True, check=True)
    assert f"version {service['image'].rsplit(':v', 1)[1]} " in version.stdout + version.stderr
    mounts = dict(volume.split(":")[1::-1] for volume in service["volumes"])  # container path -> host path
    flags = []
    for flag in service["command"]:
        if flag.startswith("--web.listen-address="):
            assert flag == "--web.listen-address=:9100"
            continue  # the helper listens on a free 127.0.0.1 port instead
        name, _, value = flag.partition("=")
        flags.append(f"{name}={mounts.get(value, value)}" if value else flag)
    assert "--path.procfs=/proc" in flags and "--path.sysfs=/sys" in flags
    with node_exporter(flags) as url:
        samples = parse_exposition(urllib.request.urlopen(url, timeout=5).read().decode())
    names = {name for name, _, _ in samples}
    assert "node_cpu_seconds_total" in names
    collectors = {labels["collector"] for name, labels, _ in samples if name == "node_scrape_collector_success"}
    assert collectors == {"cpu", "rapl"}
