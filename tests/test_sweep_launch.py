"""Sweep targets that serve-bench starts itself (launch = local | triton | mlserver): the spec's keys."""

from __future__ import annotations

import pytest

from serve_bench.errors import UserError
from serve_bench.sweep import parse_spec

BASE = """
model = "tiny"
batch_sizes = [1]
"""


def _spec(targets: str):
    return parse_spec(BASE + targets, "spec.toml")


def test_launched_targets_take_their_server_s_own_knobs():
    spec = _spec(
        """
[[targets]]
name = "local"
launch = "local"
batching = { batching_parameters_file = "docker/batching/cpu.txt" }
[[targets]]
name = "triton"
launch = "triton"
protocol = "rest"
batching = { max_batch_size = 16, max_queue_delay_microseconds = 2000, preferred_batch_size = [4, 8] }
[[targets]]
name = "mlserver"
launch = "mlserver"
batching = { max_batch_size = 8, max_batch_time = 0.005 }
"""
    )
    assert set(spec.launches) == {"local", "triton", "mlserver"}
    triton = spec.launches["triton"]
    assert triton.kind == "triton" and triton.protocol == "rest"
    assert dict(triton.knob_pairs()) == {
        "max_batch_size": "16",
        "max_queue_delay_microseconds": "2000",
        "preferred_batch_size": "4,8",
    }
    assert spec.models_dir == "exported_models"


def test_a_launched_server_s_configuration_names_its_runtime():
    """The local server always records its runtime (serve --runtime); Triton and MLServer record it when
    their model runs anything but the SavedModel, so older runs' TensorFlow points keep their configuration
    key (resume and tune match points on it)."""
    from serve_bench.sweep._launch import Launch

    assert Launch("local", knobs=(("max_batch_size", 8),)).knob_pairs() == (
        ("runtime", "tensorflow"),
        ("max_batch_size", "8"),
    )
    for kind in ("triton", "mlserver"):
        knobs = (("max_batch_size", 8),)
        assert Launch(kind, knobs=knobs).knob_pairs() == (("max_batch_size", "8"),)
        assert Launch(kind, knobs=knobs, runtime="onnxruntime").knob_pairs() == (
            ("runtime", "onnxruntime"),
            ("max_batch_size", "8"),
        )


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ('launch = "tfserving"', ["launch must be one of local, triton, mlserver"]),
        ('launch = "triton"\nbatching = { batch_timeout_micros = 5 }', ["batch_timeout_micros", "not a triton knob"]),
        ('launch = "mlserver"\nbatching = { max_queue_delay_microseconds = 5 }', ["not a mlserver knob"]),
        # MLServer batches only with both (hooks.py:82-86, 1.7.1): one alone would quietly serve unbatched
        (
            'launch = "mlserver"\nbatching = { max_batch_size = 32 }',
            ["targets[0].batching: gives max_batch_size but not max_batch_time", "so give both"],
        ),
        ('launch = "mlserver"\nbatching = { max_batch_time = 0.002 }', ["gives max_batch_time but not max_batch_size"]),
        ('launch = "triton"\nbatching = { preferred_batch_size = [64] }', ["preferred_batch_size", "max_batch_size"]),
        ('launch = "triton"\nprotocol = "http"', ["protocol must be grpc or rest"]),
        ('launch = "triton"\nurl = "grpc://x:1"', ["both url and launch"]),
        ('url = "grpc://x:1"\nbatching = { max_batch_size = 4 }', ["for launched targets"]),
        ('launch = "local"\nbatching = { batching_parameters_file = "nope.txt" }', ["no such file"]),
        ('url = "ftp://x:1"', ["targets[0].url: unknown scheme", "v2+grpc://"]),
        ('url = "grpc://:8500"', ["targets[0].url: target 'grpc://:8500' has no host"]),
    ],
)
def test_bad_launch_keys_are_one_line_errors(target, words):
    with pytest.raises(UserError) as caught:
        _spec(f'[[targets]]\nname = "t"\n{target}\n')
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_v2_urls_are_targets():
    spec = _spec('[[targets]]\nname = "t"\nurl = "v2+grpc://localhost:8001"\nserver = "triton"\n')
    assert spec.targets[0].url == "v2+grpc://localhost:8001"


@pytest.mark.parametrize("kind", ["triton", "mlserver"])
def test_a_launched_triton_or_mlserver_on_a_runtime_without_their_runner_is_refused_as_the_spec_is_read(kind):
    """JAX runs behind the local server only (runtimes.record_in_servers: no runner inside Triton's and MLServer's
    models): a sweep launching Triton or MLServer on it is refused in one line when its spec is read, before any
    server starts; the local server takes it."""
    with pytest.raises(UserError) as caught:
        _spec(f'[[targets]]\nname = "t"\nlaunch = "{kind}"\nruntime = "jax"\n')
    message = str(caught.value)
    assert (
        "\n" not in message and message.startswith("spec.toml: targets[0].runtime: ") and "local server only" in message
    )
    assert _spec('[[targets]]\nname = "t"\nlaunch = "local"\nruntime = "jax"\n').targets[0].runtime == "jax"
