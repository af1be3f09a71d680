"""Files a user writes or a killed run leaves, under structured fuzzing (issue 34, item 3): sweep and tune
specs (TOML), points.jsonl, and TF Serving's config files (models.config, batching parameters,
monitoring). Each parser answers or raises UserError (its subclasses: ResultsFileError,
BatchingParametersError) with a message; nothing else may escape. Invariants and targets: tests/_fuzz.py.

The specs start from the shipped ones (loadtests/) and have one to three values replaced by any TOML
value, deleted, or joined by an unknown key, so the fuzzing reaches past the TOML parser into each check.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serve_bench.errors import UserError
from serve_bench.server._config import parse_batching_parameters
from serve_bench.stats import ResultsWriter, read_points
from tests._fuzz import (
    batching_parameters,
    fuzz_settings,
    models_config,
    monitoring_config,
    points,
    sweep_spec,
    tune_spec,
)
from tests._points import make_point

FUZZ = fuzz_settings(100, 3000)
ROOT = Path(__file__).resolve().parent.parent
SWEEPS = sorted((ROOT / "loadtests" / "sweeps").glob("*.toml"))
TUNES = sorted((ROOT / "loadtests" / "tune").glob("*.toml"))

_TOML_SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, -1, 1, 2**31, 10**12, 2**63 - 1]),
    st.floats(),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["", "grpc://127.0.0.1:1", "http://[::1", "v2+http://h:1/x", "local", "poisson", "p99", "..."]),
)
_TOML_VALUES = st.recursive(
    _TOML_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text("abcxyz_", max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def _toml(data: dict[str, Any]) -> str:
    """A small TOML writer: top-level values, then tables, then arrays of tables (enough for the specs)."""
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in data.items() if not _is_table(v) and not _tables(v)]
    for key, value in data.items():
        if _is_table(value):
            lines.append(f"[{json.dumps(key)}]")
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()]
        elif _tables(value):
            for table in value:
                lines.append(f"[[{json.dumps(key)}]]")
                lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _is_table(value: Any) -> bool:
    return isinstance(value, dict)


def _tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


@st.composite
def _mutated_spec(draw: st.DrawFn, files: list[Path]) -> str:
    data = tomllib.loads(draw(st.sampled_from(files)).read_text())
    for _ in range(draw(st.integers(1, 3))):
        tables = (
            [data] + [v for v in data.values() if _is_table(v)] + [t for v in data.values() if _tables(v) for t in v]
        )
        table = draw(st.sampled_from(tables))
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "add" or not table:
            table[draw(st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8))] = draw(_TOML_VALUES)
            continue
        key = draw(st.sampled_from(sorted(table)))
        if action == "delete":
            del table[key]
        else:
            table[key] = draw(_TOML_VALUES)
    return _toml(data)


@FUZZ
@given(text=_mutated_spec(SWEEPS))
def test_mutated_sweep_specs_are_read_or_refused_with_a_user_error(text: str) -> None:
    sweep_spec(text.encode())


@FUZZ
@given(text=_mutated_spec(TUNES))
def test_mutated_tune_specs_are_read_or_refused_with_a_user_error(text: str) -> None:
    tune_spec(text.encode())


@FUZZ
@given(raw=st.binary(max_size=200))
def test_arbitrary_spec_bytes_are_refused_with_a_user_error(raw: bytes) -> None:
    sweep_spec(raw)
    tune_spec(raw)


def test_the_toml_writer_round_trips_the_shipped_specs() -> None:
    for path in SWEEPS + TUNES:
        data = tomllib.loads(path.read_text())
        assert tomllib.loads(_toml(data)) == data, path


# --- points.jsonl ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def points_file(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    run = tmp_path_factory.mktemp("run")
    with ResultsWriter(run) as writer:
        for batch in (1, 2):
            writer.append(make_point("cpu", "cpu", batch, 5_000.0 * batch))
    return (run / "points.jsonl").read_bytes()


@FUZZ
@given(cut=st.integers(0, 100_000), junk=st.binary(max_size=12), replace_at=st.integers(0, 100_000))
def test_damaged_points_files_are_read_or_refused(points_file: bytes, cut: int, junk: bytes, replace_at: int) -> None:
    """A killed run's file cut anywhere, bytes spliced in, a byte replaced: points, or ResultsFileError."""
    cut %= len(points_file) + 1
    points(points_file[:cut])
    points(points_file[:cut] + junk + points_file[cut:])
    at = replace_at % len(points_file)
    points(points_file[:at] + junk[:1] + points_file[at + 1 :])


@FUZZ
@given(
    value=_TOML_VALUES, field=st.sampled_from(["batch_size", "counts", "latency", "load", "target", "schema_version"])
)
def test_points_with_a_field_of_any_value_are_read_or_refused(points_file: bytes, value: Any, field: str) -> None:
    data = json.loads(points_file.splitlines()[0])
    data[field] = value
    points(json.dumps(data).encode() + b"\n")


def test_a_cut_file_keeps_the_whole_lines_before_the_cut(points_file: bytes, tmp_path: Path) -> None:
    first_line_end = points_file.index(b"\n") + 1
    (tmp_path / "points.jsonl").write_bytes(points_file[: first_line_end + 40])
    said: list[str] = []
    assert len(read_points(tmp_path, on_skip=said.append)) == 1 and len(said) == 1


# --- TF Serving's config files ------------------------------------------------------------------------

_FIELDS = ["max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads"]


@st.composite
def _batching_text(draw: st.DrawFn) -> str:
    lines = []
    for name in draw(
        st.lists(
            st.sampled_from(
                [*_FIELDS, "thread_pool_name", "allowed_batch_sizes", "pad_variable_length_inputs", "colour"]
            ),
            max_size=6,
        )
    ):
        value = draw(st.one_of(st.integers(-(2**64), 2**64), st.sampled_from(["x", '"pool"', "true", "1.5", ""])))
        if name in _FIELDS:
            lines.append(f"{name} {{ value: {value} }}")
        elif name == "thread_pool_name":
            lines.append(f'{name} {{ value: "{value}" }}')
        else:
            lines.append(f"{name}: {value}")
    return "\n".join(lines)


@FUZZ
@given(text=_batching_text())
def test_batching_parameters_are_read_or_refused_with_a_user_error(text: str) -> None:
    batching_parameters(text.encode())


@FUZZ
@given(raw=st.binary(max_size=120))
def test_arbitrary_config_bytes_are_refused_with_a_user_error(raw: bytes) -> None:
    batching_parameters(raw)
    models_config(raw)
    monitoring_config(raw)


@FUZZ
@given(
    name=st.text(max_size=6),
    base=st.sampled_from(["/models/m", "", "/nonexistent", "relative"]),
    platform=st.sampled_from(["tensorflow", "", "onnx"]),
    extra=st.sampled_from(["", "model_version_policy { all {} }", 'version_labels { key: "a" value: 1 }', "junk: 1"]),
    enable=st.booleans(),
    path=st.text(max_size=6),
)
def test_model_and_monitoring_configs_are_read_or_refused(
    name: str, base: str, platform: str, extra: str, enable: bool, path: str
) -> None:
    entry = f"name: {json.dumps(name)} base_path: {json.dumps(base)} model_platform: {json.dumps(platform)} {extra}"
    config = f"model_config_list {{ config {{ {entry} }} }}"
    models_config(config.encode())
    monitoring = f"prometheus_config {{ enable: {str(enable).lower()} path: {json.dumps(path)} }}"
    monitoring_config(monitoring.encode())


def test_a_config_file_that_is_not_utf8_is_a_user_error_naming_it(tmp_path: Path) -> None:
    """Found by the fuzzing: a batching, model or monitoring config file with a byte that is not UTF-8
    raised UnicodeDecodeError out of `serve-bench serve` (a traceback); it is refused naming the file and
    the byte, as protobuf's text parser refuses text that is not UTF-8."""
    path = tmp_path / "batching_parameters.txt"
    path.write_bytes(b"max_batch_size { value: 8 }\n# \xe9t\xe9\n")
    with pytest.raises(UserError, match=r"is not UTF-8 text \(byte 0xe9 at offset 30\)"):
        parse_batching_parameters(str(path))
    models_config(b'model_config_list { config { name: "\xff" } }')  # refused as UserError, not raised
    monitoring_config(b"prometheus_config { enable: true path: \x92 }")


def test_a_path_too_long_to_look_up_is_a_user_error(tmp_path: Path) -> None:
    """Found by atheris (make fuzz): a launched target's batching_parameters_file, or a spec's input_data,
    longer than the OS can look up raised OSError (ENAMETOOLONG) out of parse_spec; it is now the spec's
    "no such file" refusal. A tune spec that is not UTF-8 is refused with its line, as a sweep spec is."""
    from serve_bench.sweep import parse_spec
    from serve_bench.tune._spec import load_tune_spec

    long = "x" * 5000
    head = 'model = "tiny"\nbatch_sizes = [1]\n[[targets]]\nname = "a"\n'
    launched = head + f'launch = "local"\nbatching_parameters_file = "{long}"\n'
    with pytest.raises(UserError):
        parse_spec(launched, "spec.toml")
    with pytest.raises(UserError, match="no such file"):
        parse_spec(
            f'model = "tiny"\nbatch_sizes = [1]\ninput_data = "{long}"\n[[targets]]\nname = "a"\nurl = "grpc://h:1"\n'
        )
    spec = tmp_path / "tune.toml"
    spec.write_bytes(b'name = "t"\n# caf\xe9\n')
    with pytest.raises(UserError, match=r"tune.toml:2: not UTF-8 text"):
        load_tune_spec(spec)


def test_a_telemetry_url_urlsplit_refuses_is_a_user_error() -> None:
    """Found by atheris (make fuzz, the 10-minute run): a target's telemetry "http://[localhost:9100/metrics"
    (an unclosed IPv6 bracket) raised urlsplit's ValueError out of parse_spec; it is now the spec's refusal
    naming the key."""
    from serve_bench.sweep import parse_spec

    spec = (
        'model = "tiny"\nbatch_sizes = [1]\n[[targets]]\nname = "a"\nurl = "grpc://h:1"\n'
        'telemetry = ["http://[localhost:9100/metrics"]\n'
    )
    with pytest.raises(UserError, match=r"targets\[0\]\.telemetry\[0\] must be an http:// or https:// URL"):
        parse_spec(spec, "spec.toml")
