"""Keras 3 on JAX: the catalogue's own Keras models, compiled whole by XLA, on a CPU or a GPU.

Why this runtime: the catalogue's models are Keras applications, and Keras 3 runs the same
layer code on JAX with the same weights, so its features equal TensorFlow's within float32
rounding; XLA compiles the whole graph once per batch shape, as TensorFlow's own jit does, so
a call costs its kernels and little else. It is the runtime of a GPU host that has JAX but no
TensorFlow. (PyTorch, the other candidate there, would need the models rewritten or ported
layer by layer, and its eager mode pays Python per op unless torch.compile is used.)

Its copy of an exported version is ``exported_models/jax/<model>/<version>/``:

* ``conversion.json``: which catalogue model, its weights file (or ``"weights": "random"``),
  the check against TensorFlow's features;
* ``model.weights.npz``: the Keras model's weights in ``model.weights`` order, written by
  ``serve-bench export`` from the model it exported (absent where weights could not travel:
  the model is then built with random weights where it runs, and the record says so).

Keras picks its backend once per process, when it is first imported: a process that serves
or runs this runtime sets ``KERAS_BACKEND=jax`` before anything imports Keras (``serve
--runtime jax`` does), and one that has loaded Keras on TensorFlow (export) checks a copy in a
child process.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from serve_bench.errors import UserError, first_line
from serve_bench.runtimes._record import CONVERSION_FILE, RuntimeRecord

if TYPE_CHECKING:  # the registry's RuntimeSettings validates against the records: no import at run time
    from serve_bench.runtimes._settings import Runner, RuntimeSettings

log = logging.getLogger("serve_bench.runtimes")

__all__ = [
    "JAX",
    "JaxRunner",
    "features_in_child",
    "keras_on_jax",
    "write_copy",
    "write_random_copy",
]

DIRECTORY = "jax"  # its copies: exported_models/jax/<model>/<version>/
WEIGHTS_FILE = "model.weights.npz"
RANDOM_SEED = 1234  # numpy's seed for the random weights of a copy without a weights file
# XLA's precision for float32 dots and convolutions (jax.default_matmul_precision), by --precision:
# HIGHEST computes in float32; "tensorfloat32" lets a GPU with tensor cores take TF32 inputs (10-bit
# mantissa), what TensorFlow does by default on Ampere and later (PyTorch for convolutions); bf16 runs the model in
# Keras' mixed_bfloat16 policy (bfloat16 compute, float32 weights) and leaves dots at the default.
_MATMUL = {"fp32": "highest", "tf32": "tensorfloat32", "bf16": "default"}
_PRECISION_WORDS = {
    "fp32": "fp32 (XLA dots and convolutions at HIGHEST: float32 throughout)",
    "tf32": "tf32 (XLA dots and convolutions take TF32 inputs on GPUs with tensor cores; a CPU computes float32)",
    "bf16": "bf16 (Keras mixed_bfloat16: bfloat16 compute, float32 weights and features)",
}


def keras_on_jax() -> Any:
    """The keras module on the JAX backend; UserError when it cannot be (absent, or loaded on another backend)."""
    JAX.require()
    os.environ.setdefault("KERAS_BACKEND", "jax")
    # jax logs a warning for every platform it probes and lacks (TPU, CUDA on a CPU host): noise in a server log
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.ERROR)
    import keras

    backend = keras.backend.backend()
    if backend != "jax":
        raise UserError(
            f"the jax runtime needs Keras on JAX, but this process loaded Keras on {backend} "
            "(KERAS_BACKEND is read once, at Keras' first import): run it in a process of its own "
            "with KERAS_BACKEND=jax"
        )
    if "tensorflow" not in sys.modules:
        # keras.utils.set_random_seed (tiny's builder, random copies) also seeds TensorFlow when it can import
        # it: 10 s and hundreds of MB in a process that runs JAX only. Tell Keras' lazy handle it is absent.
        from keras.src.utils import module_utils

        if hasattr(module_utils.tensorflow, "_available"):
            module_utils.tensorflow._available = False
    return keras


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _device(jax: Any, wanted: str) -> Any:
    try:
        devices = jax.devices(wanted)
    except RuntimeError as exc:
        raise UserError(
            f"--device {wanted}: JAX finds no {wanted} here ({first_line(exc)}); "
            "install JAX with its CUDA plugin on a GPU host, or use --device cpu"
        ) from None
    return devices[0]


class JaxRunner:
    """serving_default of a catalogue model on Keras/JAX: ``{"images": float32 [n, H, W, 3]}`` ->
    ``{"features": float32 [n, D]}``. One XLA program per batch size, compiled on first use or ahead of
    it with :meth:`compile` (the server's warm-up); calls from several threads at once are safe."""

    def __init__(self, copy: Path, device: str = "cpu", precision: str = "fp32", first_run: bool | None = None) -> None:
        self.input_names = ["images"]
        JAX.check_device(device)
        JAX.check_precision(precision)
        try:
            facts = json.loads(copy.read_text())
            model_name = str(facts["model"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{copy} is not a jax copy's conversion.json ({first_line(exc)})") from None
        from serve_bench.catalogue import get_spec

        # only the platform asked for: probing the others costs seconds (a TPU probe waits on a cloud metadata
        # server), and a CPU measurement on a GPU host must leave the GPU alone
        os.environ.setdefault("JAX_PLATFORMS", "cpu" if device == "cpu" else "cuda,cpu")
        keras = keras_on_jax()
        import jax

        self.spec = get_spec(model_name)
        self._jax = jax
        self._device = _device(jax, device)
        # on a GPU, :meth:`compile` runs each program once too (see there); on a CPU that is one inference more
        # per size, a batching server's 1..64 (2,080 InceptionV3 images, minutes on 2 cores) for little
        self._first_run = self._device.platform != "cpu" if first_run is None else first_run
        self._matmul = _MATMUL[precision]
        self._precision = precision
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy("mixed_bfloat16" if precision == "bf16" else "float32")
        weights_file = facts.get("weights_file")
        try:
            with _numpy_initializers():
                model = self.spec.build(keras, None)
            if weights_file:
                _load_weights(model, copy.parent / str(weights_file))
        finally:
            keras.config.set_dtype_policy(previous)
        self._model = model
        variables = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables])
        self._variables = jax.device_put(variables, self._device)
        preprocess = self.spec.preprocess

        def forward(variables: Any, images: Any) -> Any:
            trainable, non_trainable = variables
            outputs, _ = model.stateless_call(trainable, non_trainable, preprocess(images), training=False)
            return outputs.astype("float32")

        self._forward = jax.jit(forward)
        self._compiled: dict[int, Any] = {}
        self._lock = threading.Lock()
        self.compile_seconds: dict[int, float] = {}
        self.first_run_seconds: dict[int, float] = {}
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        self.in_effect = {
            "runtime": f"keras {_version('keras')} on jax {_version('jax')} (jaxlib {_version('jaxlib')}, XLA)",
            "device": f"{self._device.platform}:{self._device.id} {self._device.device_kind}",
            "precision": _PRECISION_WORDS[precision],
            "weights": f"file {weights_file}" if weights_file else f"random (no weights file; seed {RANDOM_SEED})",
        }
        if self._device.platform == "cpu":
            self.in_effect["threads"] = f"{cpus} (XLA:CPU's pool: the CPUs this process may run on)"

    def compile(self, batch_size: int) -> float:
        """Make ``batch_size`` ready unless it is: compile its program and, on a GPU, run it once (on mid-grey
        pixels, not zeros: some kernels take fast paths on zeros), as the floor's untimed first call does. On the
        H100, MobileNetV2's first request after a compile-only warm-up took 4.2 s (2.8 at fp32) against 4.7 ms
        after: a program's first execution pays what compiling did not (loading kernels and libraries,
        allocating; ``first_run_seconds`` records how much). The seconds both took (0 if it was ready); apart in
        ``compile_seconds`` and ``first_run_seconds`` (sizes run only). A size first met in a request is compiled
        there and not run first: that request's own call is its first run."""
        return self._ready(batch_size, self._first_run)

    def _ready(self, batch_size: int, run_first: bool) -> float:
        with self._lock:
            if batch_size in self._compiled:
                return 0.0
            jax = self._jax
            started = time.perf_counter()
            shape = (batch_size, *self.spec.input_shape)
            abstract = jax.ShapeDtypeStruct(shape, np.float32, sharding=jax.sharding.SingleDeviceSharding(self._device))
            with jax.default_matmul_precision(self._matmul):
                program = self._forward.lower(self._variables, abstract).compile()
            compiled = time.perf_counter()
            if run_first:  # from the host, as a request's images come: that copy has first-use costs too
                grey = np.full(shape, 127.5, np.float32)
                np.asarray(program(self._variables, jax.device_put(grey, self._device)))
            ran = time.perf_counter()
            self._compiled[batch_size] = program
            self.compile_seconds[batch_size] = compiled - started
            if run_first:
                self.first_run_seconds[batch_size] = ran - compiled
            return ran - started

    def precision_witness(self) -> dict[str, float]:
        """The precision this runner's convolutions actually ran at (``_floor.precision_witness``): computed as the
        model's are (this device, this matmul precision, bfloat16 inputs under bf16). A GPU whose "tf32" shows
        1e-6 did not take TF32, and one whose "fp32" shows 1e-3 did."""
        from serve_bench.runtimes._floor import precision_witness

        jax = self._jax
        dtype = jax.numpy.bfloat16 if self._precision == "bf16" else jax.numpy.float32

        def conv(x: Any, k: Any) -> Any:
            return jax.lax.conv_general_dilated(
                x.astype(dtype), k.astype(dtype), (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
            ).astype(jax.numpy.float32)

        def convolve(images: np.ndarray, kernel: np.ndarray) -> Any:
            with jax.default_matmul_precision(self._matmul):
                return jax.jit(conv)(*jax.device_put((images, kernel), self._device))

        return precision_witness(convolve, RANDOM_SEED)

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        images = inputs["images"]
        size = int(images.shape[0])
        program = self._compiled.get(size)
        if program is None:  # a size not compiled ahead: seconds inside this request (on a GPU, autotuning too)
            seconds = self._ready(size, run_first=False)  # this request's own call is the program's first run
            if seconds:
                log.warning(
                    "compiled batch size %d inside a request: %.2f s (compile it ahead to keep it out)", size, seconds
                )
            program = self._compiled[size]
        outputs = program(self._variables, self._jax.device_put(images, self._device))
        return {"features": np.asarray(outputs)}  # waits for the device and copies to the host


@contextlib.contextmanager
def _numpy_initializers() -> Iterator[None]:
    """Keras' random initializers drawn by numpy (seeded) while a model is built.

    On JAX each initializer is an XLA program compiled for its shape: building InceptionV3 compiled 53 of
    them, 23 s on a 2-core CPU, paid again at every server start, for values a weights file then replaces
    or that only need to be random. numpy draws the same distributions at once."""
    from keras.src.backend import random as backend_random

    rng = np.random.default_rng(RANDOM_SEED)

    def uniform(shape: Any, minval: float = 0.0, maxval: float = 1.0, dtype: Any = None, seed: Any = None) -> Any:
        return rng.uniform(minval, maxval, tuple(shape)).astype(np.dtype(dtype or "float32"))

    def normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = None, seed: Any = None) -> Any:
        return rng.normal(mean, stddev, tuple(shape)).astype(np.dtype(dtype or "float32"))

    def truncated_normal(
        shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = None, seed: Any = None
    ) -> Any:
        values = rng.normal(0.0, 1.0, tuple(shape))
        while (outside := np.abs(values) > 2.0).any():  # redrawn past two standard deviations, as Keras does
            values[outside] = rng.normal(0.0, 1.0, int(outside.sum()))
        return (mean + stddev * values).astype(np.dtype(dtype or "float32"))

    saved = {name: getattr(backend_random, name) for name in ("uniform", "normal", "truncated_normal")}
    backend_random.uniform, backend_random.normal, backend_random.truncated_normal = (
        uniform,
        normal,
        truncated_normal,
    )
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(backend_random, name, function)


def _load_weights(model: Any, path: Path) -> None:
    try:
        with np.load(path) as stored:
            arrays = [stored[f"w{i}"] for i in range(len(stored.files))]
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"{path} is not a jax copy's weights file ({first_line(exc)})") from None
    expected = [tuple(v.shape) for v in model.weights]
    if [a.shape for a in arrays] != expected:
        raise UserError(
            f"{path} holds {len(arrays)} arrays that do not fit {model.name}'s {len(expected)} weights; "
            "export the model again for the jax runtime"
        )
    model.set_weights(arrays)


def write_copy(keras_model: Any, model: str, directory: Path, source: str) -> Path:
    """Write the jax copy of an exported Keras model into ``directory`` (made); its conversion.json path."""
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {f"w{i}": np.asarray(w) for i, w in enumerate(keras_model.get_weights())}
    np.savez(directory / WEIGHTS_FILE, **arrays)  # type: ignore[arg-type]
    conversion = directory / JAX.model_file
    conversion.write_text(
        json.dumps({"runtime": JAX.name, "model": model, "weights_file": WEIGHTS_FILE, "source": source}, indent=2)
        + "\n"
    )
    return conversion


def write_random_copy(models_dir: Path, model: str, version: int) -> Path:
    """A jax copy of ``model`` ``version`` with no weights file, for a host without TensorFlow (weights over what
    can travel): the runner builds ``model`` with random weights (timing does not depend on weight values)."""
    from serve_bench.catalogue import get_spec

    get_spec(model)
    directory = models_dir / DIRECTORY / model / str(version)
    directory.mkdir(parents=True, exist_ok=True)
    conversion = directory / JAX.model_file
    record = {
        "runtime": JAX.name,
        "model": model,
        "weights": "random",
        "converter": "none: built from the catalogue where it runs, random weights",
        "path": str(conversion),
    }
    conversion.write_text(json.dumps(record, indent=2) + "\n")
    return conversion


def features_in_child(copy: Path, images: np.ndarray, precision: str = "fp32", timeout_s: float = 600.0) -> np.ndarray:
    """The copy's features for ``images``, computed on the CPU in ``precision`` in a child process with Keras on
    JAX (this process may hold Keras on TensorFlow). RuntimeError with the child's last line if it fails."""
    with tempfile.TemporaryDirectory(prefix="serve-bench-jax-") as scratch:
        given, answered = Path(scratch) / "images.npy", Path(scratch) / "features.npy"
        np.save(given, images)
        env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
        done = subprocess.run(
            [sys.executable, "-m", "serve_bench.runtimes._jax_child", str(copy), str(given), str(answered), precision],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            raise RuntimeError(lines[-1] if lines else f"exit status {done.returncode}")
        features: np.ndarray = np.load(answered)
        return features


def _answer(copy: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"features": features_in_child(copy, inputs["images"])}


def _open(copy: Path, settings: RuntimeSettings) -> Runner:
    return JaxRunner(copy, settings.device, settings.precision)


JAX = RuntimeRecord(
    name="jax",
    display="Keras on JAX (XLA)",
    directory=DIRECTORY,
    model_file=CONVERSION_FILE,
    packages=("keras", "jax"),
    extra="pip install 'serve-bench[jax]'",
    converter="the Keras model's weights, in model.weights order",
    short="jax",
    devices=("cpu", "gpu"),
    precisions=("fp32", "tf32", "bf16"),
    compiles_per_shape=True,
    standalone=True,
    beside_tensorflow=False,
    converted_by_default=False,  # its check needs a child process with Keras on JAX: asked for by name only
    write=lambda keras_model, model, directory, source: write_copy(keras_model, model, directory, source),
    answer=_answer,
    write_random=lambda models_dir, model, version: write_random_copy(models_dir, model, version),
    open=_open,  # behind the local server only: no runner for Triton's and MLServer's models
    floor=lambda copy, device, precision: JaxRunner(copy, device, precision),
)
