"""What a runner is to its callers, and the settings the local server runs one with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from serve_bench.errors import InvalidValue, UserError

__all__ = ["OPENVINO_HINTS", "OPENVINO_PRECISIONS", "CompilingRunner", "Runner", "RuntimeSettings"]

OPENVINO_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")  # PERFORMANCE_HINT
OPENVINO_PRECISIONS = ("f32", "bf16", "f16")  # INFERENCE_PRECISION_HINT


class Runner(Protocol):
    """serving_default of one runtime's copy: numpy arrays by input name in, by output name out."""

    in_effect: dict[str, str]
    input_names: list[str]

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


@runtime_checkable
class CompilingRunner(Runner, Protocol):
    """A runner that builds one program per batch size (XLA): ``compile`` builds one and runs it once, ahead of
    the first request of that size."""

    compile_seconds: dict[int, float]
    first_run_seconds: dict[int, float]

    def compile(self, batch_size: int) -> float: ...


@dataclass(frozen=True)
class RuntimeSettings:
    """Which runtime runs the model, and its threads. 0 / "" leave a choice to the runtime (recorded as made)."""

    runtime: str = "tensorflow"
    intra_op_threads: int = 0  # TensorFlow's and ONNX Runtime's intra-op pool; OpenVINO's INFERENCE_NUM_THREADS
    inter_op_threads: int = 0  # TensorFlow's and ONNX Runtime's inter-op pool (OpenVINO has streams instead)
    openvino_hint: str = "LATENCY"  # PERFORMANCE_HINT: the local server batches, so one stream by default
    openvino_streams: int = 0  # NUM_STREAMS; 0: as the hint decides
    # INFERENCE_PRECISION_HINT; f32 by default, because OpenVINO's own default is bf16 on CPUs
    # with AVX512-BF16 (this AMD EPYC), which moved InceptionV3's features by 4e-3 of their range
    openvino_precision: str = "f32"
    # where and in what precision the runtime runs (serve --device / --precision), as its record accepts
    device: str = "cpu"
    precision: str = "fp32"

    def __post_init__(self) -> None:
        from serve_bench.runtimes._registry import RECORDS, record

        kept = record(self.runtime)
        if (
            (self.device, self.precision) != ("cpu", "fp32")
            and kept.devices == ("cpu",)
            and kept.precisions == ("fp32",)
        ):
            choosing = ", ".join(r.name for r in RECORDS.values() if len(r.devices) > 1 or len(r.precisions) > 1)
            raise UserError(
                f"device and precision are chosen for the {choosing} runtime; {self.runtime} runs on the CPU "
                "in float32 here (leave --device and --precision out)"
            )
        kept.check_device(self.device)
        kept.check_precision(self.precision)
        for name in ("intra_op_threads", "inter_op_threads", "openvino_streams"):
            if getattr(self, name) < 0:
                raise InvalidValue(name, getattr(self, name), "0 (the runtime decides) or a number of threads")
        if self.openvino_hint not in OPENVINO_HINTS:
            raise InvalidValue("openvino_hint", self.openvino_hint, " | ".join(OPENVINO_HINTS))
        if self.openvino_precision not in OPENVINO_PRECISIONS:
            raise InvalidValue("openvino_precision", self.openvino_precision, " | ".join(OPENVINO_PRECISIONS))
