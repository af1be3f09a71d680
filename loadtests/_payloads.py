"""Payloads for the Locust users, built with serve-bench's encoders (no TensorFlow import)."""

from __future__ import annotations

from typing import Any

import numpy as np

from serve_bench.client._base import SignatureInfo, TensorInfo
from serve_bench.client._grpc import encode_predict_request
from serve_bench.client._rest import encode_rest_body
from serve_bench.client._v2_codec import encode_rest_request
from serve_bench.client._v2_grpc import encode_infer_request
from serve_bench.load import make_inputs, signature_for_payload

# Input sizes of the catalogue, so a user needs no metadata round trip to build its payload.
_INPUT_SIZE = {"inception_v3": (299, 299), "resnet50": (224, 224), "mobilenet_v2": (224, 224), "tiny": (64, 64)}


def request_name(options: Any) -> str:
    return f"predict {options.model} b{options.batch_size}"


def _inputs(options: Any) -> tuple[str, dict[str, np.ndarray]]:
    signature = signature_for_payload(options.payload, options.signature)
    height, width = _INPUT_SIZE.get(options.model, (299, 299))
    if options.payload == "float":
        info = SignatureInfo(signature, {"images": TensorInfo(1, (-1, height, width, 3))}, {})
    else:
        info = SignatureInfo(signature, {"image_bytes": TensorInfo(7, (-1,))}, {})
    return signature, make_inputs(options.payload, options.batch_size, info, image_size=(height, width))


def build_grpc_request(options: Any) -> tuple[bytes, int]:
    signature, inputs = _inputs(options)
    return encode_predict_request(options.model, None, signature, inputs), options.batch_size


def build_rest_body(options: Any) -> tuple[bytes, int]:
    signature, inputs = _inputs(options)
    return encode_rest_body(inputs, signature), options.batch_size


def is_v2(host: str | None) -> bool:
    """``v2+grpc://`` / ``v2+http(s)://``: the Open Inference Protocol (Triton, MLServer), as everywhere else."""
    return (host or "").lower().startswith("v2+")


def build_v2_grpc_request(options: Any) -> tuple[bytes, int]:
    """A ModelInferRequest (tensors in raw_input_contents). v2 models have one signature: float pixels."""
    _, inputs = _inputs(options)
    return encode_infer_request(options.model, None, inputs), options.batch_size


def build_v2_rest_body(options: Any) -> tuple[bytes, dict[str, str], int]:
    """A /v2/models/<m>/infer body, JSON tensors (every v2 server reads them: MLServer has no binary extension)."""
    _, inputs = _inputs(options)
    body = encode_rest_request(inputs, binary=False)
    return body.body, {"Content-Type": "application/json"}, options.batch_size


# the flag a Locust user typed for each parameter a bound names
_LOCUST_FLAGS = {"batch_size": "--batch-size", "concurrency": "-u/--users", "step_seconds": "--step-seconds"}


def parse_steps(text: str) -> list[int]:
    """step_shape.py's ``--steps 1,2,4,8``: user counts >= 1, in order (InvalidValue naming steps otherwise)."""
    from serve_bench.errors import InvalidValue

    try:
        steps = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        steps = []
    if not steps or min(steps) < 1:
        raise InvalidValue("--steps", text, "user counts >= 1 separated by commas, e.g. 1,2,4,8")
    return steps


def memory_refusal(options: Any, host: str | None) -> str:
    """ "" when the users' payloads fit in this process's memory, else the refusal, one line (docs/bounds.md).

    Each Locust user builds its own request in on_start and keeps it for the run: users x the body, each
    built at the protocol's cost, and the server's 2 GB protobuf limit over gRPC. Read from a request of
    one image and one of two, built before anything of the asked size exists."""
    import argparse

    from serve_bench.errors import InvalidValue
    from serve_bench.load import (
        PointSettings,
        RequestCost,
        check_batch,
        check_batch_size,
        check_timeout,
        positive_number,
    )
    from serve_bench.stats import LoadInfo

    flags = dict(_LOCUST_FLAGS)
    users = int(getattr(options, "num_users", None) or 1)
    try:
        check_batch_size(options.batch_size)  # -1 was a traceback in every user's on_start
        check_timeout("--request-timeout", options.request_timeout)  # nan, -1, 1e308: every request failed
        if getattr(options, "steps", None) is not None:  # step_shape.py's users: its largest step, at once
            users = max(parse_steps(options.steps))
            flags["concurrency"] = "--steps (its largest)"
            positive_number("step_seconds", options.step_seconds)  # 0 divided by zero, nan and -1 broke tick()
    except InvalidValue as exc:
        return str(exc.named(flags.get(exc.name, exc.name)))
    v2 = is_v2(host)
    build = {
        ("grpc", False): build_grpc_request,
        ("rest", False): build_rest_body,
        ("grpc", True): build_v2_grpc_request,
        ("rest", True): build_v2_rest_body,
    }[(options.protocol, v2)]
    bodies, drawn = [], []
    for n in (1, 2):
        small = argparse.Namespace(**{**vars(options), "batch_size": n})
        bodies.append(len(build(small)[0]))
        drawn.append(
            sum(a.nbytes + sum(len(x) for x in a.ravel() if isinstance(x, bytes)) for a in _inputs(small)[1].values())
        )
    cost = RequestCost(bodies[0], bodies[1], max(1, drawn[1] - drawn[0]), synthetic_float=options.payload == "float")
    protocol = ("v2-" if v2 else "") + options.protocol
    try:
        check_batch(
            protocol, options.model, options.batch_size, LoadInfo("locust", concurrency=users), PointSettings(), cost
        )
    except InvalidValue as exc:
        return str(exc.named(flags.get(exc.name, exc.name)))
    return ""
