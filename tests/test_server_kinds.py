"""The server kinds' registry (servers.KINDS, servers.kind): one record per kind with its knobs at the server's
own defaults, one validation, one name; sweep and tune read the same defaults through it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from serve_bench import servers
from serve_bench.cli import main
from serve_bench.errors import InvalidValue, UserError
from serve_bench.export import MLServerBatching, TritonBatching
from serve_bench.sweep import parse_spec
from serve_bench.tune._v2config import MLServerConfig, TritonConfig


def test_the_kinds_have_one_name_each():
    assert tuple(servers.KINDS) == ("local", "tfserving", "triton", "mlserver")
    assert servers.LAUNCHABLE == ("local", "triton", "mlserver")  # TF Serving is restarted by compose or a command
    for name, kind in servers.KINDS.items():
        assert kind.name == name and servers.kind(name) is kind
        assert all(knob.cited for knob in kind.knobs), name  # every default says where the server writes it


def test_each_kind_s_defaults_are_the_server_s_own():
    # Triton core r24.10 backend_model.cc:481 (default-max-batch-size 4), dynamic_batching { } without a delay,
    # one instance for the Python backend (model_config_utils.cc:991-1008)
    assert servers.kind("triton").defaults() == {
        "dynamic_batching": True,
        "max_batch_size": 4,
        "max_queue_delay_microseconds": 0,
        "preferred_batch_size": (),
        "instance_count": 1,
        "instance_kind": "KIND_CPU",
    }
    # MLServer 1.7.1 ModelSettings (settings.py:457-462): no adaptive batching; one worker (settings.py:37)
    assert servers.kind("mlserver").defaults() == {"max_batch_size": 0, "max_batch_time": 0.0, "parallel_workers": 1}
    assert servers.kind("local").defaults() == {"batching_parameters_file": ""}  # no file: batching off
    tfs = servers.kind("tfserving").defaults()
    assert (tfs["max_batch_size"], tfs["batch_timeout_micros"], tfs["max_enqueued_batches"]) == (1000, 0, 10)


def test_a_kind_s_configuration_is_checked_once_with_one_line():
    triton, mlserver = servers.kind("triton"), servers.kind("mlserver")
    assert triton.config({"max_batch_size": 8}) == TritonBatching(max_batch_size=8)
    assert mlserver.config({}) == MLServerBatching()
    for kind, values, words in [
        (triton, {"max_batch_size": 0}, "max_batch_size must be a whole number >= 1, got 0"),
        (triton, {"preferred_batch_size": [8]}, "preferred_batch_size must be between 1 and max_batch_size (4)"),
        (triton, {"instance_kind": "KIND_TPU"}, "instance_kind must be KIND_CPU or KIND_GPU"),
        (triton, {"max_batch_size": "8"}, "max_batch_size must be a int (not str)"),
        (triton, {"dynamic_batching": 1}, "dynamic_batching must be a bool (not int)"),
        (mlserver, {"max_batch_time": -1}, "max_batch_time must be a finite number of seconds, 0 or more"),
        (mlserver, {"max_batch_time": True}, "max_batch_time must be a number (not bool)"),
    ]:
        with pytest.raises(InvalidValue) as caught:
            kind.config(values)
        assert words in str(caught.value) and "\n" not in str(caught.value), str(caught.value)


def test_an_unknown_kind_and_another_kind_s_knob_are_one_line_each():
    with pytest.raises(servers.UnknownKind) as caught:
        servers.kind("tensorflow-serving")
    assert (
        str(caught.value)
        == "unknown server kind 'tensorflow-serving'; the kinds are local, tfserving, triton, mlserver"
    )
    with pytest.raises(UserError) as caught:
        servers.kind_knob(servers.kind("triton"), "batch_timeout_micros")
    assert str(caught.value).startswith("batch_timeout_micros is not a triton knob (it is tfserving's); triton takes ")
    with pytest.raises(UserError) as caught:
        servers.kind_knob(servers.kind("mlserver"), "instance_count")
    assert "(it is triton's)" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("name", "tune_config"), [("triton", TritonConfig()), ("mlserver", MLServerConfig())])
def test_sweep_and_tune_launch_the_same_defaults(monkeypatch, tmp_path, name, tune_config):
    """A launched target that names no knob and tune's ``defaults`` baseline start the same server: the server's
    own defaults (a sweep's Triton had max_batch_size 32 while tune's had 4; MLServer batched 32 / 2 ms in a sweep
    and not in tune)."""
    from serve_bench.sweep._launch import Launch, _process
    from serve_bench.tune._spec import ServerSpec
    from serve_bench.tune._started import STARTED_HERE

    made: list[Any] = []
    written = tmp_path / "written.txt"
    written.write_text("the server's file")

    class Recorded:
        """Stands in for the kind's server: records its configuration, starts nothing."""

        def config_files(self) -> tuple[Path, ...]:
            return (written,)

    def start(serve: servers.Serve) -> Any:
        made.append(serve.config)
        return Recorded()

    monkeypatch.setitem(servers.KINDS, name, dataclasses.replace(servers.kind(name), start=start))
    _process(Launch(name), tmp_path, "tiny", tmp_path / "sweep")
    kept = tmp_path / "kept.txt"
    STARTED_HERE[name](ServerSpec(kind=name), "tiny", tmp_path).prepare(tune_config, kept)
    assert kept.read_text() == "the server's file"
    swept, tuned = made
    assert swept == tuned == servers.kind(name).config({})


_SPEC = """
model = "tiny"
batch_sizes = [1, 8]
[[targets]]
name = "triton"
launch = "triton"
"""


def test_a_spec_whose_batches_exceed_the_launched_triton_s_max_batch_size_is_refused(tmp_path: Path):
    with pytest.raises(UserError) as caught:
        parse_spec(_SPEC, "spec.toml")
    assert str(caught.value) == (
        "spec.toml: targets[0]: batch_sizes go up to 8 but targets[0].batching.max_batch_size is 4, Triton's default, "
        "and Triton refuses a larger request; raise it: batching = { max_batch_size = 8 }"
    )
    with pytest.raises(UserError, match="max_batch_size is 4, and Triton refuses"):
        parse_spec(_SPEC + "batching = { max_batch_size = 4 }\n", "spec.toml")
    assert parse_spec(_SPEC + "batching = { max_batch_size = 8 }\n", "spec.toml").launches["triton"]
    # MLServer's max_batch_size counts requests, not images: any batch size is served
    assert parse_spec(_SPEC.replace('launch = "triton"', 'launch = "mlserver"'), "spec.toml").launches["triton"]
    spec = tmp_path / "spec.toml"
    spec.write_text(_SPEC)
    assert main(["sweep", str(spec)]) == 2


DATA = Path(__file__).parent / "data"


def test_the_kinds_names_are_the_results_names():
    """The results' migration reads every kind's one name as itself, and no old spelling is a kind's name."""
    from serve_bench.stats import server_kind_name
    from serve_bench.stats._schema import OLD_SERVER_KINDS

    assert all(server_kind_name(name) == name for name in servers.KINDS)
    assert set(OLD_SERVER_KINDS.values()) <= set(servers.KINDS) and not set(OLD_SERVER_KINDS) & set(servers.KINDS)


def test_old_spellings_of_a_kind_read_as_its_one_name():
    """Points written before one name per kind said serve-bench-local and tensorflow-serving: the reader's
    migration gives the kind's name, so the committed demo runs and a new run group and report alike."""
    from serve_bench.stats import read_points, server_kind_name

    for said, name in [
        ("serve-bench-local", "local"),
        ("tensorflow-serving", "tfserving"),
        ("TF-Serving", "tfserving"),
        ("local", "local"),
        ("triton", "triton"),
        ("unknown", "unknown"),
    ]:
        assert server_kind_name(said) == name, said
    demo = DATA / "demo_2core_20261125" / "inception_v3" / "points.jsonl"
    assert '"server":"serve-bench-local"' in demo.read_text()  # as committed
    points = read_points(demo)
    assert points and {p.target.server for p in points} == {"local"}
    old = read_points(DATA / "points_v2_tf_serving_view.jsonl")
    assert {p.target.server for p in old} == {"tfserving"}  # it says tensorflow-serving


def test_the_metrics_reader_takes_an_old_spelling_as_its_kind():
    from serve_bench.metrics._reader import _reader_kind

    assert [_reader_kind(k) for k in ("tensorflow-serving", "serve-bench-local", "local", "tfserving")] == [
        "tfserving"
    ] * 4
    assert (_reader_kind("triton"), _reader_kind("MLServer"), _reader_kind("nginx")) == ("triton", "mlserver", "")
