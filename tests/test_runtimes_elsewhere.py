"""Triton's and MLServer's models on ONNX Runtime and OpenVINO (issue 20, item 3), against the real servers,
and the runtime as a knob of `tune`.

The Python backend hands ``initialize`` the model's config as JSON whose ``parameters`` map a key to
``{"string_value": ...}`` (python_backend@f9088ff6 src/stub_launcher.cc: ``StubLauncher::Initialize``
writes ``model_state->ModelConfig()`` to JSON, line 69, and ``ModelInstanceStubProcess`` passes it as
``initialize_map["model_config"]``, line 680; the same field already carries ``intra_op_threads``).
MLServer resolves a relative path in ``parameters.extra.converted`` as it resolves ``uri``: against the
model-settings.json folder (mlserver 1.7.1 ``mlserver/utils.py`` ``to_absolute_path``, lines 47-56 of the
installed package).
Random weights and random pixels: equality of features does not depend on what the weights mean.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from serve_bench import export, runtimes
from serve_bench.client import connect
from serve_bench.errors import UserError
from serve_bench.runtimes import RECORDS
from tests.conftest import _servers_env_or_skip, require_runtime

CONVERTED = tuple(r for r in runtimes.CONVERTED_RUNTIMES if RECORDS[r].runner is not None)  # jax: local server only


def _tolerance(models_dir: Path) -> float:
    facts = export.read_metadata(models_dir / "tiny" / "1")
    return export.feature_tolerance(facts["summing_layers"], facts["max_summed_terms"])


def _server(kind: str, models_dir: Path, runtime: str, tmp_path: Path):
    from serve_bench.servers import MLServerServer, TritonServer

    if kind == "triton":
        batching = export.TritonBatching(max_batch_size=8, max_queue_delay_us=1000)
        return TritonServer(models_dir, "tiny", batching, runtime=runtime, work_dir=tmp_path / kind)
    batching = export.MLServerBatching(max_batch_size=8, max_batch_time_s=0.001)
    return MLServerServer(models_dir, "tiny", batching, runtime=runtime, work_dir=tmp_path / kind)


@pytest.mark.parametrize("runtime", CONVERTED)
@pytest.mark.parametrize(("kind", "protocol"), [("triton", "grpc"), ("mlserver", "rest")])
async def test_triton_and_mlserver_serve_each_runtime_with_tensorflows_answers(
    models_dir, reference, tmp_path, kind, protocol, runtime
):
    """The real server runs the converted copy (its log says which runtime, from the model's own load), and
    answers TensorFlow's features within the float32 tolerance. Triton's version directory holds the
    copy and no SavedModel, so TensorFlow could not have answered there."""
    require_runtime(runtime)
    _servers_env_or_skip()
    images = np.random.default_rng(7).uniform(0, 255, size=(5, 64, 64, 3)).astype(np.float32)
    with _server(kind, models_dir, runtime, tmp_path) as server:
        url = server.grpc_url if protocol == "grpc" else server.http_url
        async with connect(url, "tiny") as client:
            got = await client.predict({"images": images})
        log = server.log_path.read_text()
    assert export.relative_difference({"features": reference(images)}, got) <= _tolerance(models_dir)
    loaded = [line for line in log.splitlines() if "serve-bench: tiny version 1 runs" in line]
    assert len(loaded) == 1 and f" on {runtime} " in loaded[0], loaded
    if kind == "triton":
        files = {p.name for p in (server.repository / "tiny" / "1").iterdir()} - {"__pycache__"}
        expected = {"model.onnx"} if runtime == "onnxruntime" else {"model.xml", "model.bin"}
        assert files == {"model.py", "serve_bench_runners.py", *expected}
        assert (
            'key: "runtime" value: { string_value: "' + runtime + '" }'
            in (server.repository / "tiny" / "config.pbtxt").read_text()
        )


def test_a_repository_for_a_runtime_never_converted_says_how(tmp_path, capsys):
    """No ONNX copy: one line naming the export command, before any server starts, for both servers."""
    from serve_bench.cli import main

    models = tmp_path / "m"
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(models), "--runtimes", "tensorflow"]) == 0
    capsys.readouterr()
    for write in (export.write_triton_model, export.write_mlserver_model):
        with pytest.raises(UserError) as caught:
            write(models, "tiny", tmp_path / "repo", runtime="onnxruntime")
        message = str(caught.value)
        assert "\n" not in message and "model.onnx does not exist" in message
        assert "serve-bench export tiny --weights random --runtimes onnxruntime --version 1 --force" in message
    with pytest.raises(UserError, match="runtime"):
        export.write_triton_model(models, "tiny", tmp_path / "repo", runtime="tensorrt")


def test_mlserver_settings_name_the_copy_relative_to_their_folder(models_dir, tmp_path):
    """Inside a container that mounts exported_models/ the path must hold: relative, as ``uri`` is."""
    require_runtime("openvino")
    folder = export.write_mlserver_model(models_dir, "tiny", tmp_path / "mlserver-ov", runtime="openvino")
    extra = json.loads((folder / "model-settings.json").read_text())["parameters"]["extra"]
    assert extra["runtime"] == "openvino" and not Path(extra["converted"]).is_absolute()
    assert (folder / extra["converted"]).resolve() == export.converted_model_path(models_dir, "openvino", "tiny", 1)


async def test_a_sweep_launches_triton_on_another_runtime_and_records_it(models_dir, tmp_path):
    """Two launched Triton targets that differ only by runtime: each point records the runtime its server
    ran (the log of each says so), so the report can compare them as it compares the local server's."""
    require_runtime("onnxruntime")
    _servers_env_or_skip()
    from serve_bench.stats import read_points
    from serve_bench.sweep import parse_spec, run_sweep

    targets = "".join(
        f'[[targets]]\nname = "{r}"\nlaunch = "triton"\nruntime = "{r}"\nbatching = {{ max_batch_size = 32 }}\n'
        for r in ("tensorflow", "onnxruntime")
    )
    spec = parse_spec(
        f"""
model = "tiny"
models_dir = "{models_dir}"
batch_sizes = [2]
[load]
concurrency = [1]
[durations]
warmup_s = 0.2
min_duration_s = 0.5
until_stable = false
{targets}""",
        "triton-runtimes.toml",
    )
    await run_sweep(spec, tmp_path / "run")
    points = read_points(tmp_path / "run")
    assert sorted(p.target.runtime for p in points) == ["onnxruntime", "tensorflow"]
    for point in points:
        assert point.target.runtime == point.target.name and point.target.server == "triton"
        assert point.error_count == 0 and point.counts.ok > 0
        # the runtime joins the knobs where it is not the SavedModel (older runs' points have no such pair)
        assert (("runtime", "onnxruntime") in point.server_config) == (point.target.runtime == "onnxruntime")
        assert not any(k == "runtime" and v == "tensorflow" for k, v in point.server_config)
    logs = {log.parent.name: log.read_text() for log in tmp_path.rglob("tritonserver.log")}
    assert " on onnxruntime " in logs["onnxruntime"] and " on tensorflow " in logs["tensorflow"]


# ---- tune: the runtime as a knob ----------------------------------------------------------------------


def _tune_spec(models_dir: Path, kind: str = "local", runtimes: str = '["tensorflow", "onnxruntime"]', extra=""):
    return f"""
model = "tiny"
{extra}
[server]
kind = "{kind}"
models_dir = "{models_dir}"
{'flags = ["--port=8500"]' if kind == "compose" else ""}
{'service = "tfserving"' if kind == "compose" else ""}
{'restart = "true"' if kind == "command" else ""}
{'url = "grpc://127.0.0.1:9"' if kind in ("compose", "command") else ""}
[space]
runtime = {runtimes}
max_batch_size = [4]
[load]
concurrency = [2]
[durations]
warmup_s = 0.2
min_duration_s = 0.6
min_requests = 10
windows = 2
[search]
method = "grid"
baselines = []
"""


@pytest.mark.parametrize(
    ("kind", "ids"),
    [("local", ["mbs4", "mbs4-ort"]), ("triton", ["defaults", "ort"]), ("mlserver", ["mbs4-t2ms", "mbs4-t2ms-ort"])],
)
def test_the_runtime_is_a_knob_of_every_server_tune_starts(models_dir, kind, ids):
    require_runtime("onnxruntime")
    if kind != "local":
        _servers_env_or_skip()  # the spec is checked against the servers' environment's packages
    from serve_bench.tune import parse_tune_spec

    text = _tune_spec(models_dir, kind)
    if kind == "mlserver":
        text = text.replace("max_batch_size = [4]", "max_batch_size = [4]\nmax_batch_time = [0.002]")
    spec = parse_tune_spec(text, "t.toml")
    assert [c.id for c in spec.configs] == ids
    assert [dict(c.knobs())["runtime"] for c in spec.configs] == ["tensorflow", "onnxruntime"]


@pytest.mark.parametrize("kind", ["triton", "mlserver"])
def test_tunes_restarters_write_the_runtime_into_the_servers_own_files(models_dir, tmp_path, kind):
    """What tune starts for a configuration runs its runtime: Triton's config.pbtxt names it and the version
    directory holds the copy; MLServer's model-settings.json names it and the copy (read by the real servers
    in test_triton_and_mlserver_serve_each_runtime_with_tensorflows_answers)."""
    require_runtime("openvino")
    _servers_env_or_skip()
    from serve_bench.tune import parse_tune_spec
    from serve_bench.tune._started import MLServerRestarter, TritonRestarter

    text = _tune_spec(models_dir, kind, '["openvino"]')
    if kind == "mlserver":
        text = text.replace("max_batch_size = [4]", "max_batch_size = [4]\nmax_batch_time = [0.002]")
    spec = parse_tune_spec(text, "t.toml")
    (config,) = spec.configs
    restarter = (TritonRestarter if kind == "triton" else MLServerRestarter)(spec.server, "tiny", tmp_path)
    config_file = tmp_path / "configs" / config.id / spec.family.config_file
    config_file.parent.mkdir(parents=True)
    server = restarter.prepare(config, config_file)
    assert server.runtime == "openvino"
    if kind == "triton":
        assert 'key: "runtime" value: { string_value: "openvino" }' in config_file.read_text()
        assert (server.repository / "tiny" / "1" / "model.xml").exists()
    else:
        extra = json.loads(config_file.read_text())["parameters"]["extra"]
        assert extra["runtime"] == "openvino" and extra["converted"].endswith("model.xml")


def test_the_local_servers_flags_carry_the_runtime():
    from serve_bench.tune import TuneConfig

    assert "--runtime=openvino" in TuneConfig(runtime="openvino").server_flags("b.txt")
    assert not any(f.startswith("--runtime") for f in TuneConfig().server_flags("b.txt"))  # TF Serving's own flags


@pytest.mark.parametrize(
    ("kind", "runtimes", "extra", "words"),
    [
        ("compose", '["onnxruntime"]', "", ["TF Serving runs SavedModels only", 'kind = "local"']),
        ("command", '["openvino"]', "", ["TF Serving runs SavedModels only"]),
        ("local", '["onnxruntime"]', 'payload = "jpeg"', ["jpeg", "TensorFlow"]),
        ("local", '["tensorrt"]', "", ["runtime must be one of", "tensorrt"]),
    ],
)
def test_a_runtime_the_tuned_server_cannot_run_is_one_line(models_dir, kind, runtimes, extra, words):
    from serve_bench.tune import parse_tune_spec

    with pytest.raises(UserError) as caught:
        parse_tune_spec(_tune_spec(models_dir, kind, runtimes, extra), "t.toml")
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("kind", ["local", "triton", "mlserver"])
def test_every_runtime_tried_is_its_own_configuration(kind):
    """A configuration's id is how tune tells two apart (and merges equal ones: batching off at several
    sizes). Each runtime but the default adds its record's tag, so [space] runtime listing every runtime
    gives one configuration each; jax, without a tag, was merged into TensorFlow and silently not tried."""
    from serve_bench.tune._kinds import family_of
    from serve_bench.tune._spec import expand_space

    configs = expand_space({"runtime": tuple(RECORDS)}, "t.toml", family_of(kind).config_of)
    assert [c.runtime for c in configs] == list(RECORDS)
    tags = [runtimes.record(r).short for r in RECORDS if r != runtimes.DEFAULT_RUNTIME]
    assert all(tags) and len(set(tags)) == len(tags)


def test_a_tune_whose_configuration_ids_changed_since_is_not_resumed(tmp_path):
    """A run directory written when jax had no tag of its own filed jax's configuration under TensorFlow's id
    (mbs4): resumed now, its points would be TensorFlow's and TensorFlow never measured. One line, naming the
    file and both ids; a configuration whose id has not changed resumes as before."""
    from types import SimpleNamespace

    from serve_bench.tune._config import TuneConfig
    from serve_bench.tune._kinds import family_of
    from serve_bench.tune._run import CONFIGS_FILE, _finished_configs

    spec = SimpleNamespace(family=family_of("local"))
    jax = TuneConfig(max_batch_size=4, runtime="jax")
    tensorflow = TuneConfig(max_batch_size=4)
    assert _finished_configs({tensorflow.id: {"knobs": dataclasses.asdict(tensorflow)}}, spec, tmp_path) == {
        tensorflow.id: tensorflow
    }
    with pytest.raises(UserError) as caught:
        _finished_configs({tensorflow.id: {"knobs": dataclasses.asdict(jax)}}, spec, tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / CONFIGS_FILE}: configuration {tensorflow.id!r} is {jax.id!r} to this serve-bench, so its "
        "points cannot be resumed under either name; tune into a new run directory"
    )


@pytest.mark.parametrize("kind", ["triton", "mlserver"])
def test_tuning_triton_or_mlserver_on_jax_names_jax_first_even_without_the_servers_environment(
    models_dir, kind, monkeypatch, tmp_path
):
    """JAX has no runner inside Triton's or MLServer's models (runtimes.record_in_servers): installing the
    servers' environment would not help, so on a host without one tune says so about jax, as sweep does
    (tests/test_sweep_launch.py), not that the environment is missing."""
    from serve_bench.servers import ENV_VARIABLE
    from serve_bench.tune import parse_tune_spec

    monkeypatch.setenv(ENV_VARIABLE, str(tmp_path / "no-servers-env"))
    text = _tune_spec(models_dir, kind, '["tensorflow", "jax"]')
    if kind == "mlserver":
        text = text.replace("max_batch_size = [4]", "max_batch_size = [4]\nmax_batch_time = [0.002]")
    with pytest.raises(UserError) as caught:
        parse_tune_spec(text, "t.toml")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("t.toml: space.runtime 'jax': ")
    assert "local server only" in message and "environment" not in message


def test_a_runtime_never_converted_is_refused_before_tune_starts(tmp_path, capsys):
    from serve_bench.cli import main
    from serve_bench.tune import parse_tune_spec

    models = tmp_path / "m"
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(models), "--runtimes", "tensorflow"]) == 0
    with pytest.raises(UserError) as caught:
        parse_tune_spec(_tune_spec(models, "local", '["openvino"]'), "t.toml")
    assert "has no openvino copy" in str(caught.value)
    assert "serve-bench export tiny --weights random --runtimes openvino --version 1 --force" in str(caught.value)


def test_an_openvino_copy_without_its_weights_file_is_refused_naming_that_file(tmp_path):
    """OpenVINO's IR is model.xml and model.bin: with the .bin gone, tune and both servers' repositories
    refuse it in one line naming model.bin (not the .xml, which is there)."""
    from serve_bench.cli import main
    from serve_bench.tune import parse_tune_spec

    require_runtime("openvino")
    models = tmp_path / "m"
    assert main(["export", "tiny", "--weights", "random", "--models-dir", str(models), "--runtimes", "openvino"]) == 0
    xml = export.converted_model_path(models, "openvino", "tiny", 1)
    xml.with_suffix(".bin").unlink()
    with pytest.raises(UserError) as caught:
        parse_tune_spec(_tune_spec(models, "local", '["openvino"]'), "t.toml")
    for write in (export.write_triton_model, export.write_mlserver_model):
        with pytest.raises(UserError) as written:
            write(models, "tiny", tmp_path / "repo", runtime="openvino")
        assert "model.bin does not exist" in str(written.value)
    message = str(caught.value)
    assert "\n" not in message and "model.bin does not exist" in message and xml.is_file()


def test_tune_refuses_a_runtime_the_servers_environment_lacks_before_it_starts(tmp_path, monkeypatch):
    """A Triton or MLServer configuration on ONNX Runtime needs onnxruntime in the servers' environment: said
    when the spec is read, not minutes later when the grid reaches that configuration."""
    from serve_bench.servers import ENV_VARIABLE
    from serve_bench.tune import parse_tune_spec

    bare = tmp_path / "venv"
    (bare / "bin").mkdir(parents=True)
    (bare / "bin" / "python").touch()
    (bare / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    monkeypatch.setenv(ENV_VARIABLE, str(bare))
    models = tmp_path / "m"  # never read: the environment is checked first
    for kind in ("triton", "mlserver"):
        text = _tune_spec(models, kind, '["tensorflow", "onnxruntime"]')
        if kind == "mlserver":  # MLServer batches only with both knobs
            text = text.replace("max_batch_size = [4]", "max_batch_size = [4]\nmax_batch_time = [0.002]")
        with pytest.raises(UserError) as caught:
            parse_tune_spec(text, "t.toml")
        message = str(caught.value)
        assert "\n" not in message and "has no onnxruntime" in message and "make servers-env" in message
    assert parse_tune_spec(_tune_spec(models, "triton", '["tensorflow"]'), "t.toml")  # TensorFlow needs nothing more


async def test_tune_measures_each_runtime_on_the_local_server(models_dir, tmp_path):
    """A grid over the runtime: each configuration's server runs what it names (its log says so), each point
    records it, and the answer's knob table compares the runtimes. The defaults baseline is measured on each
    runtime searched, and the winner is set against the defaults on TensorFlow (both levers) and on its own
    runtime (batching alone), never on a runtime it does not run."""
    require_runtime("onnxruntime")
    from serve_bench.stats import read_points
    from serve_bench.tune import parse_tune_spec, run_tune

    text = _tune_spec(models_dir).replace("baselines = []", 'baselines = ["defaults"]')
    spec = parse_tune_spec(text + "[slo]\nmax_ms = 5000\n", "t.toml")
    run_dir = tmp_path / "run"
    await run_tune(spec, run_dir)
    points = read_points(run_dir)
    runtime_of = {p.key.split("|")[0]: p.target.runtime for p in points}
    on_ort = {"ort": "onnxruntime", "mbs4-ort": "onnxruntime"}  # "ort": the defaults on ONNX Runtime
    assert runtime_of == {"defaults": "tensorflow", "mbs4": "tensorflow", **on_ort}
    for point in points:
        assert ("runtime", point.target.runtime) in point.server_config and point.error_count == 0
    ort_log = next((run_dir / "configs" / "mbs4-ort").rglob("*.log")).read_text()
    assert "--runtime=onnxruntime" in ort_log and "serving_default runs on runtime=onnxruntime" in ort_log
    answer = json.loads((run_dir / "answer.json").read_text())
    assert {row["value"] for row in answer["knobs"] if row["knob"] == "runtime"} == {"tensorflow", "onnxruntime"}
    winner = answer["best"]["config"]
    baselines = {gain["baseline"] for gain in answer["gains"]}
    expected = {"defaults", "defaults on onnxruntime"} if winner in on_ort else {"defaults"}
    assert baselines == expected, (winner, baselines)
