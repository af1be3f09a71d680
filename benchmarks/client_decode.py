"""Client decode of a Predict response: typed ``float_val`` (what TF Serving sends) vs ``tensor_content``.

    .venv/bin/python -m benchmarks.client_decode [--repeats 7]

Real TF Serving answers Predict with the typed value fields (``AsProtoField`` in
tensorflow_serving/servables/tensorflow/predict_util.cc), so a client meets ``float_val``, not
``tensor_content``. For InceptionV3 features ([B, 2048] float32) this prints µs per response for
the serialized PredictResponse -> numpy arrays, as the gRPC client decodes it
(``serve_bench.client._grpc.decode_predict_response``), beside:
  tensor_content      the same response with the array bytes in tensor_content
  float_val list()    the per-value path the codec used before (one Python float per value)
  float_val fromiter  np.fromiter over the repeated field (still one Python float per value)
and the server side: encoding the response with typed fields (``to_tensor_proto(typed_fields=True)``,
a packed-wire memcpy) vs ``float_val.extend(array.tolist())``. Best of --repeats runs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from google.protobuf import __version__ as protobuf_version
from google.protobuf.internal import api_implementation

from serve_bench import _protos
from serve_bench.client._grpc import decode_predict_response
from serve_bench.codec import to_tensor_proto

SHAPES = ((1, 2048), (32, 2048))


def _best_us(fn: Callable[[], Any], repeats: int, budget_s: float = 0.2) -> float:
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    loops = max(1, int(budget_s / once))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter() - start) / loops)
    return best * 1e6


def _response(array: np.ndarray, typed: bool) -> bytes:
    response = _protos.message("tensorflow.serving.PredictResponse")()
    to_tensor_proto(array, response.outputs["features"], typed_fields=typed)
    return bytes(response.SerializeToString())


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _row(shape: tuple[int, int], repeats: int) -> list[float]:
    """µs per response: ours, tensor_content, list(), fromiter, encode typed, encode extend."""
    response_type = _protos.message("tensorflow.serving.PredictResponse")
    array = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    typed, content = _response(array, True), _response(array, False)
    assert np.array_equal(decode_predict_response(typed)["features"], array)
    assert np.array_equal(decode_predict_response(content)["features"], array)

    def old_list() -> np.ndarray:
        tensor = response_type.FromString(typed).outputs["features"]
        return np.asarray(list(tensor.float_val), dtype=np.float32).reshape(shape)

    def fromiter() -> np.ndarray:
        field = response_type.FromString(typed).outputs["features"].float_val
        return np.fromiter(field, np.float32, len(field)).reshape(shape)

    def encode_extend() -> bytes:
        response = response_type()
        tensor = response.outputs["features"]
        tensor.dtype = 1
        tensor.tensor_shape.dim.add(size=shape[0])
        tensor.tensor_shape.dim.add(size=shape[1])
        tensor.float_val.extend(array.reshape(-1).tolist())
        return bytes(response.SerializeToString())

    assert encode_extend() == typed  # same bytes as the typed encoder
    return [
        _best_us(lambda: decode_predict_response(typed), repeats),
        _best_us(lambda: decode_predict_response(content), repeats),
        _best_us(old_list, repeats),
        _best_us(fromiter, repeats),
        _best_us(lambda: _response(array, True), repeats),
        _best_us(encode_extend, repeats),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(
        f"{datetime.date.today()} | {_cpu_name()}, {os.cpu_count()} cores | Python {platform.python_version()} | "
        f"protobuf {protobuf_version} ({api_implementation.Type()}) | numpy {np.__version__}"
    )
    print(
        "| shape | float_val (serve-bench) | tensor_content | ratio | float_val list() | float_val fromiter "
        "| encode typed (serve-bench) | encode extend(tolist) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        row = _row(shape, args.repeats)
        print(
            f"| [{shape[0]}, {shape[1]}] | {row[0]:.1f} µs | {row[1]:.1f} µs | **{row[0] / row[1]:.2f}×** | "
            f"{row[2]:.0f} µs | {row[3]:.0f} µs | {row[4]:.1f} µs | {row[5]:.0f} µs |"
        )


if __name__ == "__main__":
    main()
