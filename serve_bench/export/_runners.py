"""Run a converted model in this process: ONNX Runtime and OpenVINO behind one call.

``open_runner(runtime, path, settings)`` returns a callable taking and returning the
signature's tensors by name (numpy arrays), safe to call from several threads at once (the
local server's batch threads do). Every thread setting is passed explicitly and the values the
runtime then reports are kept in ``runner.in_effect``, so a result can say what ran.
"""

from __future__ import annotations

import importlib.metadata
import os
import queue
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from serve_bench.errors import InvalidValue, UserError
from serve_bench.export._convert import RUNTIMES, missing_runtime
from serve_bench.runtimes import RECORDS, record

__all__ = ["OPENVINO_HINTS", "OPENVINO_PRECISIONS", "CompilingRunner", "Runner", "RuntimeSettings", "open_runner"]

OPENVINO_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")
OPENVINO_PRECISIONS = ("f32", "bf16", "f16")


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
    # where and in what precision a runtime with a record of its own runs (serve --device / --precision);
    # the others run on the CPU in float32 (OpenVINO's precision is openvino_precision)
    device: str = "cpu"
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise InvalidValue("runtime", self.runtime, " | ".join(RUNTIMES))
        kept = record(self.runtime)
        if kept is not None:
            kept.check_device(self.device)
            kept.check_precision(self.precision)
        elif (self.device, self.precision) != ("cpu", "fp32"):
            with_record = ", ".join(RECORDS)
            raise UserError(
                f"device and precision are chosen for the {with_record} runtime; {self.runtime} runs on the CPU "
                "in float32 here (leave --device and --precision out)"
            )
        for name in ("intra_op_threads", "inter_op_threads", "openvino_streams"):
            if getattr(self, name) < 0:
                raise InvalidValue(name, getattr(self, name), "0 (the runtime decides) or a number of threads")
        if self.openvino_hint not in OPENVINO_HINTS:
            raise InvalidValue("openvino_hint", self.openvino_hint, " | ".join(OPENVINO_HINTS))
        if self.openvino_precision not in OPENVINO_PRECISIONS:
            raise InvalidValue("openvino_precision", self.openvino_precision, " | ".join(OPENVINO_PRECISIONS))


class Runner(Protocol):
    in_effect: dict[str, str]
    input_names: list[str]

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


class CompilingRunner(Runner, Protocol):
    """A runner that builds one program per batch size (XLA): ``compile`` builds one ahead of its first call."""

    compile_seconds: dict[int, float]

    def compile(self, batch_size: int) -> float: ...


class _OnnxRunner:
    def __init__(self, path: Path, settings: RuntimeSettings) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = settings.intra_op_threads
        options.inter_op_num_threads = settings.inter_op_threads
        options.log_severity_level = 3  # errors only: its warnings are about unused initializers
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._outputs = [output.name for output in self._session.get_outputs()]
        self.input_names = [tensor.name for tensor in self._session.get_inputs()]
        self.in_effect = {
            "runtime": f"onnxruntime {onnxruntime.__version__}",
            "provider": self._session.get_providers()[0],
            "intra_op_threads": _onnx_intra_op(settings.intra_op_threads),
            # ORT runs a graph's nodes one after another unless execution_mode is ORT_PARALLEL, which is not set
            "inter_op_threads": str(settings.inter_op_threads or "0 (nodes run in sequence: no inter-op pool)"),
        }

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self._outputs, self._session.run(self._outputs, inputs)))


def _onnx_intra_op(asked: int) -> str:
    """The intra-op pool ORT makes: ``asked`` threads, or for 0 its default, which ORT does not report.

    With 0, ORT sizes the pool from Env::GetNumPhysicalCpuCores() (onnxruntime/core/platform/posix/env.cc:
    cpuinfo's core count, else hardware_concurrency() / 2): the physical cores, counted here the same way.
    """
    if asked:
        return str(asked)
    import psutil

    cores = psutil.cpu_count(logical=False) or max(1, (os.cpu_count() or 2) // 2)
    return f"{cores} (0 asked: ORT's default, one per physical core)"


class _OpenVinoRunner:
    def __init__(self, path: Path, settings: RuntimeSettings) -> None:
        import openvino

        config: dict[str, Any] = {
            "PERFORMANCE_HINT": settings.openvino_hint,
            "INFERENCE_PRECISION_HINT": settings.openvino_precision,
        }
        if settings.openvino_streams:
            config["NUM_STREAMS"] = settings.openvino_streams
        if settings.intra_op_threads:
            config["INFERENCE_NUM_THREADS"] = settings.intra_op_threads
        core = openvino.Core()
        self._compiled = core.compile_model(str(path), "CPU", config)
        self._outputs = [output.get_any_name() for output in self._compiled.outputs]
        self.input_names = [tensor.get_any_name() for tensor in self._compiled.inputs]
        # an infer request runs one inference at a time: one per concurrent caller, reused
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.in_effect = {"runtime": f"openvino {importlib.metadata.version('openvino')}"}
        for name in ("PERFORMANCE_HINT", "INFERENCE_PRECISION_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS"):
            value = self._compiled.get_property(name)
            # a precision is an openvino.Type ("<Type: 'float32'>" as str): its short name, as the hint takes it
            self.in_effect[name] = value.to_string() if hasattr(value, "to_string") else str(value)

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            request = self._idle.get_nowait()
        except queue.Empty:
            request = self._compiled.create_infer_request()
        try:
            results = request.infer(inputs)
            return {name: np.array(results[name]) for name in self._outputs}  # copies: the request is reused
        finally:
            self._idle.put(request)


def open_runner(runtime: str, path: Path, settings: RuntimeSettings) -> Runner:
    """Load ``path`` (a model.onnx or model.xml) into ``runtime``; UserError when it is not installed."""
    line = missing_runtime(runtime)
    if line:
        raise UserError(line)
    if runtime == "onnxruntime":
        return _OnnxRunner(path, settings)
    if runtime == "openvino":
        return _OpenVinoRunner(path, settings)
    if runtime == "jax":
        from serve_bench.runtimes import JaxRunner

        return JaxRunner(path, settings.device, settings.precision)
    raise InvalidValue("runtime", runtime, " | ".join(RUNTIMES[1:]) + " (TensorFlow runs the SavedModel itself)")
