"""The fuzz targets of issue 34, item 3: every parser of untrusted input, each as ``target(data: bytes)``.

A target parses ``data`` and checks the invariants: it returns when the parser answered or refused
with one of its documented errors, and raises ``Violation`` (or lets anything else through) when not:

* no exception but the parser's documented ones (``ALLOWED`` below: ServingError with a documented code,
  CodecError, UserError and its subclasses, ...);
* no answer outside the documented status codes;
* no allocation beyond the stated bound: what a parser returns is at most a fixed multiple of its input
  (each element of a tensor takes at least one byte of the body that declared it).

The same targets run three ways: hypothesis tests feed them structured input (tests/test_fuzz_*.py, in
the default suite), atheris feeds them bytes under coverage guidance (``make fuzz``, tests/fuzz_main.py),
and every crash either found becomes a regression test.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings

from serve_bench.codec import CodecError, from_tensor_proto
from serve_bench.errors import UserError
from serve_bench.server._errors import ServingError, invalid
from serve_bench.server._json_tensor import ParseBudgetExceeded, parse_predict_body
from serve_bench.server._runtime import Signature, TensorSpec

__all__ = ["ALLOWED_CODES", "MAX_ELEMENTS", "TARGETS", "Violation", "fuzz_settings", "json_signature"]


def fuzz_settings(examples: int, deadline_ms: int = 3000) -> settings:
    """The default suite's bounded budget: ``examples`` per test, each within ``deadline_ms`` (generous: the
    machine is shared). SERVE_BENCH_FUZZ_SCALE=N runs N times as many, for a long hunt outside the suite."""
    scale = max(1, int(os.environ.get("SERVE_BENCH_FUZZ_SCALE", "1")))
    return settings(max_examples=examples * scale, deadline=deadline_ms, suppress_health_check=[HealthCheck.too_slow])


class Violation(AssertionError):
    """An invariant broken: a parser answered outside its contract."""


# The codes a REST predict body is refused with (util/json_tensor.cc: InvalidArgument, and
# Unimplemented for a dtype JSON cannot carry); NOT_FOUND comes from resolving the signature.
ALLOWED_CODES = frozenset({"INVALID_ARGUMENT", "UNIMPLEMENTED", "NOT_FOUND"})
MAX_ELEMENTS = 1 << 20  # the element cap a decoder is given (the server's is max_body_bytes / 4)
PARSE_RESERVE = 64 << 20  # what the JSON parser may borrow for Python objects (the server's budget)

_SIGNATURES = {
    "": Signature("serving_default", {"images": TensorSpec("images", 1, (-1, 2, 2, 3))}, {}, None),
    "serving_bytes": Signature("serving_bytes", {"image_bytes": TensorSpec("image_bytes", 7, (-1,))}, {}, None),
    "pair": Signature("pair", {"a": TensorSpec("a", 3, (-1, -1)), "b": TensorSpec("b", 7, (-1,))}, {}, None),
    "any": Signature("any", {"x": TensorSpec("x", 2, None)}, {}, None),  # DT_DOUBLE, unknown rank
    "half": Signature("half", {"h": TensorSpec("h", 19, (-1,))}, {}, None),  # DT_HALF
    "bools": Signature("bools", {"t": TensorSpec("t", 10, (-1,)), "u": TensorSpec("u", 4, (-1,))}, {}, None),
}


def json_signature(name: str) -> Signature:
    """The signatures the JSON target serves: float images, strings, two inputs, unknown rank, half, bool."""
    try:
        return _SIGNATURES[name]
    except KeyError:
        raise invalid(f'Serving signature name: "{name}" not found in signature def') from None


def _elements(arrays: dict[str, np.ndarray]) -> int:
    return sum(int(a.size) for a in arrays.values())


def json_tensor(data: bytes) -> None:
    """The REST predict body parser (server/_json_tensor.py), as the REST front end calls it."""
    try:
        body = parse_predict_body(data, json_signature, lambda n: n <= PARSE_RESERVE)
    except ServingError as exc:
        if exc.code not in ALLOWED_CODES:
            raise Violation(f"refused with {exc.code}: {exc.message[:200]}") from exc
        if not exc.message:
            raise Violation(f"{exc.code} with no message") from exc
        return
    except ParseBudgetExceeded:
        return
    signature = json_signature(body.signature_name)
    if set(body.inputs) != set(signature.inputs):
        raise Violation(f"inputs {sorted(body.inputs)} for a signature taking {sorted(signature.inputs)}")
    if _elements(body.inputs) > max(1, len(data)):
        raise Violation(f"{_elements(body.inputs)} elements from a {len(data)}-byte body")


def tensor_proto(data: bytes) -> None:
    """A PredictRequest's tensors decoded as the server's gRPC front end does (codec.from_tensor_proto,
    with the element cap); only CodecError (and protobuf's DecodeError for bytes that are no message)."""
    from google.protobuf.message import DecodeError

    from serve_bench import _protos

    try:
        request = _protos.message("tensorflow.serving.PredictRequest").FromString(data)
    except DecodeError:
        return
    for tensor in request.inputs.values():
        try:
            array = from_tensor_proto(tensor, max_elements=MAX_ELEMENTS)
        except CodecError:
            continue
        if array.size > MAX_ELEMENTS:
            raise Violation(f"{array.size} elements decoded past the cap of {MAX_ELEMENTS}")


def v2_response(data: bytes) -> None:
    """A KServe v2 /infer response (client/_v2_codec.decode_rest_response) with a binary header length
    taken from the first two bytes (0xffff: none). The REST transport turns ValueError (CodecError,
    orjson's), KeyError and TypeError into ServeBenchError; nothing else may escape, nothing past the
    body may be allocated."""
    from serve_bench.client._v2_codec import decode_rest_response

    length = int.from_bytes(data[:2], "little") if len(data) >= 2 else 0xFFFF
    body = data[2:]
    try:
        outputs = decode_rest_response(body, None if length == 0xFFFF else length)
    except (ValueError, KeyError, TypeError):
        return
    if _elements(outputs) > max(1, len(body)):
        raise Violation(f"{_elements(outputs)} elements from a {len(body)}-byte response")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def sweep_spec(data: bytes) -> None:
    from serve_bench.sweep import parse_spec

    try:
        parse_spec(_text(data), "fuzz.toml")
    except UserError as exc:
        if not str(exc):
            raise Violation("a UserError with no message") from exc


def tune_spec(data: bytes) -> None:
    from serve_bench.tune._spec import parse_tune_spec

    try:
        parse_tune_spec(_text(data), "fuzz.toml")
    except UserError as exc:
        if not str(exc):
            raise Violation("a UserError with no message") from exc


def points(data: bytes) -> None:
    """points.jsonl as report reads it: a point per line, a torn last line skipped and said."""
    from serve_bench.stats import read_points

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "points.jsonl"
        path.write_bytes(data)
        try:
            read_points(Path(directory), on_skip=lambda line: None)
        except UserError as exc:
            if not str(exc):
                raise Violation("a UserError with no message") from exc


def batching_parameters(data: bytes) -> None:
    """batching_parameters.txt as ``serve --batching_parameters_file`` reads it (export/_batching.py's parser)."""
    from serve_bench.server._config import parse_batching_parameters

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "batching_parameters.txt"
        path.write_bytes(data)
        try:
            parse_batching_parameters(str(path))
        except UserError:
            return


def _server_flags(data: bytes, *flags: str) -> None:
    """``serve-bench serve`` reading a config file with ``data`` in it (the parser a server starts with)."""
    from serve_bench.server import build_arg_parser, config_from_args

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "config.txt"
        path.write_bytes(data)
        model = Path(directory) / "models" / "m"
        model.mkdir(parents=True)
        given = [f.replace("{path}", str(path)).replace("{model}", str(model)) for f in flags]
        args = build_arg_parser().parse_args(given)
        try:
            config_from_args(args)
        except UserError:
            return


def models_config(data: bytes) -> None:
    _server_flags(data, "--model_config_file", "{path}", "--port", "1", "--rest_api_port", "2")


def monitoring_config(data: bytes) -> None:
    _server_flags(data, "--model_base_path", "{model}", "--monitoring_config_file", "{path}", "--port", "1")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "json_tensor": json_tensor,
    "tensor_proto": tensor_proto,
    "v2_response": v2_response,
    "sweep_spec": sweep_spec,
    "tune_spec": tune_spec,
    "points": points,
    "batching_parameters": batching_parameters,
    "models_config": models_config,
    "monitoring_config": monitoring_config,
}
