"""BatchingParameters files and server flags as tensorflow_model_server reads and checks them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from serve_bench.errors import UserError
from serve_bench.export import BatchingParametersError, BatchingParams
from serve_bench.server import build_arg_parser, config_from_args, parse_batching_parameters

SPLITTING = """
max_batch_size { value: 64 }
batch_timeout_micros { value: 2000 }
max_enqueued_batches { value: 100 }
num_batch_threads { value: 4 }
thread_pool_name { value: "gpu_pool" }
enable_large_batch_splitting { value: true }
max_execution_batch_size { value: 16 }
allowed_batch_sizes: 8
allowed_batch_sizes: 16
allowed_batch_sizes: 64
pad_variable_length_inputs: false
"""


def test_fields_8_and_9_are_accepted(tmp_path):
    """session_bundle_config.proto:181 enable_large_batch_splitting = 8, :190 max_execution_batch_size = 9."""
    path = tmp_path / "batching_parameters.txt"
    path.write_text(SPLITTING)
    params = parse_batching_parameters(str(path))
    assert params == BatchingParams(
        max_batch_size=64,
        batch_timeout_micros=2000,
        max_enqueued_batches=100,
        num_batch_threads=4,
        thread_pool_name="gpu_pool",
        allowed_batch_sizes=(8, 16, 64),
        enable_large_batch_splitting=True,
        max_execution_batch_size=16,
    )
    assert params.execution_batch_size == 16


def test_to_text_round_trips_with_tf_servings_field_numbers():
    """to_text() writes what TF Serving's text parser reads; the wire tags are the .proto's numbers
    (session_bundle_config.proto:149-203)."""
    from google.protobuf import text_format

    from serve_bench import _protos

    params = BatchingParams.from_text(SPLITTING)
    assert BatchingParams.from_text(params.to_text()) == params
    proto = text_format.Parse(params.to_text(), _protos.message("tensorflow.serving.BatchingParameters")())
    wire = proto.SerializeToString()
    assert bytes([8 << 3 | 2, 2, 8, 1]) in wire  # field 8: BoolValue{value: true}
    assert bytes([9 << 3 | 2, 2, 8, 16]) in wire  # field 9: Int64Value{value: 16}
    assert bytes([1 << 3 | 2, 2, 8, 64]) in wire  # field 1: max_batch_size 64
    defaults = BatchingParams()
    assert BatchingParams.from_text(defaults.to_text()) == defaults


def test_unset_fields_keep_tf_servings_defaults():
    """SharedBatchScheduler's QueueOptions/Options defaults (shared_batch_scheduler.h): max_batch_size 1000,
    timeout 0, 10 enqueued batches, pool "batch_threads"; unset max_execution_batch_size with splitting
    means max_batch_size (bundle_factory_util.h:123-134)."""
    params = BatchingParams.from_text("enable_large_batch_splitting { value: true }")
    assert (params.max_batch_size, params.batch_timeout_micros, params.max_enqueued_batches) == (1000, 0, 10)
    assert params.thread_pool_name == "batch_threads" and params.execution_batch_size == 1000


@pytest.mark.parametrize(
    "text, message",
    [
        ("batch_timeout_micros { value: -1 }", "batch_timeout_micros must be non-negative; was -1"),
        ("num_batch_threads { value: 0 }", "num_batch_threads must be positive; was 0"),
        ("max_batch_size { value: 0 }", "input_batch_size_limit (max_batch_size) must be positive; was 0"),
        (
            "max_batch_size { value: 8 } allowed_batch_sizes: 2 allowed_batch_sizes: 4",
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 4; expected 8",
        ),
        (
            "max_batch_size { value: 8 } allowed_batch_sizes: 4 allowed_batch_sizes: 2 allowed_batch_sizes: 8",
            "allowed_batch_sizes entries must be monotonically increasing",
        ),
        (
            "max_batch_size { value: 64 } enable_large_batch_splitting { value: true }"
            " max_execution_batch_size { value: 16 } allowed_batch_sizes: 8 allowed_batch_sizes: 16",
            "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 16; expected 64",
        ),
        (
            "max_batch_size { value: 8 } enable_large_batch_splitting { value: true }"
            " max_execution_batch_size { value: 16 }",
            "When enable_large_batch_splitting is true, input_batch_size_limit must be greater than or equal to "
            "max_execution_batch_size.",
        ),
        (
            "enable_large_batch_splitting { value: true } max_enqueued_batches { value: 0 }",
            "max_enqueued_batches must be positive; was 0",
        ),
    ],
)
def test_refused_as_tf_serving_refuses(text, message):
    """Wording from shared_batch_scheduler.h (SharedBatchScheduler::Create, AddQueueAfterRewritingOptions),
    bundle_factory_util.cc:113-125 (the model server checks the last allowed size against max_batch_size,
    splitting or not) and batching_session.cc:1019-1020 (monotonic sizes)."""
    with pytest.raises(BatchingParametersError) as info:
        BatchingParams.from_text(text, "batching parameters file b.txt")
    assert str(info.value).startswith("batching parameters file b.txt: ")
    assert message in str(info.value)
    assert isinstance(info.value, UserError)


def test_zero_enqueued_batches_is_accepted_without_splitting():
    """SharedBatchScheduler::AddQueue (called from servables/tensorflow/bundle_factory_util.cc:151)
    turns max_enqueued_batches 0 into 1 when splitting is off."""
    params = BatchingParams.from_text("max_enqueued_batches { value: 0 }")
    assert params.max_enqueued_batches == 0 and params.queue_capacity_batches == 1


def test_unknown_field_and_bad_text_name_the_line(tmp_path):
    """TF Serving refuses a file that is not BatchingParameters text (model_servers/server.cc:233,
    ParseProtoTextFile); serve-bench names the file and the line instead of a protobuf dump."""
    path = tmp_path / "b.txt"
    path.write_text("max_batch_size { value: 8 }\nmax_batch { value: 8 }\n")
    with pytest.raises(UserError, match=r"b.txt does not parse at line 2: .*max_batch"):
        parse_batching_parameters(str(path))


def test_suspicious_but_valid_settings_are_warned():
    padded_up = BatchingParams.from_text(
        "max_batch_size { value: 64 } enable_large_batch_splitting { value: true }"
        " max_execution_batch_size { value: 16 } allowed_batch_sizes: 8"
        " allowed_batch_sizes: 64"
    )
    assert any("a batch of 16 becomes 64" in w for w in padded_up.warnings())
    ignored = BatchingParams.from_text("max_execution_batch_size { value: 16 }")
    assert any("ignored unless enable_large_batch_splitting" in w for w in ignored.warnings())


def _args(*argv: str):
    return build_arg_parser().parse_args(["--model_name", "m", "--model_base_path", ".", *argv])


def test_parallelism_flags_combine_as_server_cc():
    """model_servers/server.cc:256-279: intra/inter given -> both used; else session_parallelism for both;
    all three -> refused."""
    assert config_from_args(_args("--tensorflow_intra_op_parallelism", "3")).intra_op_threads == 3
    config = config_from_args(_args("--tensorflow_intra_op_parallelism", "3", "--tensorflow_inter_op_parallelism", "2"))
    assert (config.intra_op_threads, config.inter_op_threads) == (3, 2)
    config = config_from_args(_args("--tensorflow_session_parallelism", "5"))
    assert (config.intra_op_threads, config.inter_op_threads) == (5, 5)
    with pytest.raises(UserError, match="You cannot configure all"):
        config_from_args(
            _args(
                "--tensorflow_intra_op_parallelism",
                "1",
                "--tensorflow_inter_op_parallelism",
                "1",
                "--tensorflow_session_parallelism",
                "1",
            )
        )
    with pytest.raises(UserError, match="must be 0"):
        config_from_args(_args("--tensorflow_inter_op_parallelism", "-2"))
    # not TF Serving's (it takes any int32): a pool of 100000 threads grew the local server ~70 MB/s until memory
    # ran out, and it never served. 1024 is taken; one more is refused, naming the flag.
    assert config_from_args(_args("--tensorflow_session_parallelism", "1024")).intra_op_threads == 1024
    for flag in ("--tensorflow_intra_op_parallelism", "--tensorflow_session_parallelism"):
        with pytest.raises(UserError, match=f"^{flag} 1025: at most 1024 threads"):
            config_from_args(_args(flag, "1025"))


def test_main_cc_flags_are_accepted_boolean_ones_bare():
    """Every flag of model_servers/main.cc:87-317 parses (the ones the local server does not act on are
    announced as ignored), boolean ones also without a value."""
    config = config_from_args(
        _args(
            "--enable_profiler",
            "--rest_api_enable_cors_support=true",
            "--grpc_max_threads",
            "8",
            "--enable_serialization_as_tensor_content",
        )
    )
    assert {
        "enable_profiler",
        "rest_api_enable_cors_support",
        "grpc_max_threads",
        "enable_serialization_as_tensor_content",
    } <= set(config.ignored_flags)


def test_parallelism_flags_reach_tensorflow(models_dir: Path):
    """--tensorflow_intra_op_parallelism/--tensorflow_inter_op_parallelism set TensorFlow's thread pools
    before the model loads (server.cc:264-271 puts them in the session config). A fresh process: TensorFlow
    refuses to change them once it has run anything."""
    script = textwrap.dedent(f"""
        from serve_bench.server import LocalServer, build_arg_parser, config_from_args
        args = build_arg_parser().parse_args(["--model_name", "tiny", "--model_base_path", {str(models_dir / "tiny")!r},
            "--tensorflow_intra_op_parallelism", "3", "--tensorflow_inter_op_parallelism", "2",
            "--enable_model_warmup", "false"])
        LocalServer(config_from_args(args)).load()
        import tensorflow as tf
        print(tf.config.threading.get_intra_op_parallelism_threads(),
              tf.config.threading.get_inter_op_parallelism_threads())
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["3", "2"]


def test_enable_batching_without_a_file_uses_defaults_and_the_servers_pool_name():
    """model_servers/server.cc:226-242: --enable_batching alone names the pool "model_server_batch_threads"
    and keeps every other default; a parameters file without --enable_batching is refused."""
    config = config_from_args(_args("--enable_batching"))
    assert config.batching == BatchingParams(thread_pool_name="model_server_batch_threads")
    with pytest.raises(UserError, match="needs --enable_batching"):
        config_from_args(_args("--batching_parameters_file", "b.txt"))


def test_server_with_refused_parameters_does_not_start(tmp_path):
    """tensorflow_model_server fails to load the model when WrapSessionForBatching refuses the parameters
    (bundle_factory_util.cc:113-125); the local server's core refuses them when it builds its batch threads."""
    from serve_bench.server import ModelEntry, ServerConfig
    from serve_bench.server._core import ServingCore
    from serve_bench.server._metrics import Metrics

    config = ServerConfig(
        models=(ModelEntry("tiny", tmp_path),),
        port=0,
        rest_api_port=0,
        batching=BatchingParams(max_batch_size=8, allowed_batch_sizes=(4,)),
    )
    with pytest.raises(BatchingParametersError, match="Last entry in allowed_batch_sizes must match"):
        ServingCore(config, registry=None, metrics=Metrics())  # type: ignore[arg-type]
