"""The same SavedModel for other runtimes: each runtime's copy, converted and checked equal.

    exported_models/<directory>/<model>/<version>/<model file>   (the runtime's record says which)
    exported_models/<directory>/<model>/<version>/conversion.json

Each copy is converted from the exported SavedModel's ``serving_default`` signature (float pixels
in, features out, the preprocessing inside) by the runtime's own converter (its record, in
``serve_bench.runtimes``), so it carries the same input and output names. ``serving_bytes`` is not
converted: JPEG decoding is a TensorFlow op that no other format carries, so that payload is served
by TensorFlow only. Converters tried on the catalogue with TensorFlow 2.21: benchmarks/README.md,
"Runtimes".

Each conversion is checked before it is kept: the converted model and TensorFlow answer the
same seeded images, and the largest difference must stay within ``feature_tolerance`` (float32
rounding, worked out from the model's own arithmetic). One that does not is reported, with its
error, and removed.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench.errors import InvalidValue, UserError, first_line
from serve_bench.export._layout import discard_staging, read_metadata
from serve_bench.runtimes import CONVERSION_FILE, CONVERTED_RUNTIMES, RUNTIMES, record

__all__ = [
    "Conversion",
    "convert_saved_model",
    "converted_files",
    "converted_model_path",
    "feature_tolerance",
    "parse_runtimes",
    "relative_difference",
    "require_runtimes",
    "summation_profile",
]

# the unit roundoff of float32: every sum of products is exact to within this, relative, per term
FLOAT32_ROUNDOFF = 2.0**-24
# rounding errors of many terms of either sign add up like a random walk; the largest of a few
# thousand features stays within 4 of its standard deviations
SPREAD = 4.0
CHECK_IMAGES = 4


@dataclass(frozen=True)
class Conversion:
    """One runtime's copy of an exported version: where it went, or why it did not."""

    runtime: str
    path: Path | None
    converter: str
    seconds: float = 0.0
    max_error: float | None = None  # the largest |difference| from TensorFlow, relative to the features' range
    tolerance: float | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.path is not None


def parse_runtimes(text: str) -> tuple[str, ...]:
    """``"tensorflow,onnxruntime"`` -> the runtimes, TensorFlow always first (it is the source)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in RUNTIMES]
    if unknown or not names:
        raise InvalidValue("runtimes", text, f"a comma-separated list of {', '.join(RUNTIMES)}")
    return ("tensorflow", *(name for name in CONVERTED_RUNTIMES if name in names))


def converted_model_path(models_dir: Path, runtime: str, model: str, version: int) -> Path:
    """Where ``runtime``'s copy of ``model`` ``version`` lives under ``models_dir``."""
    return record(runtime).copy_files(models_dir, model, version)[0]


def converted_files(models_dir: Path, runtime: str, model: str, version: int) -> list[Path]:
    """The files of ``model`` ``version``'s copy for ``runtime``, the model file first (OpenVINO's IR is
    an .xml and its .bin); a one-line UserError naming the first one absent and the export that writes it,
    with the weights that version was exported with."""
    if runtime not in CONVERTED_RUNTIMES:
        raise InvalidValue("runtime", runtime, " | ".join(CONVERTED_RUNTIMES))
    files = record(runtime).copy_files(models_dir, model, version)
    absent = next((f for f in files if not f.is_file()), None)
    if absent is not None:
        weights = (read_metadata(models_dir / model / str(version)) or {}).get("weights")
        again = f" --weights {shlex.quote(str(weights))}" if weights else ""
        raise UserError(
            f"{absent} does not exist: {model} version {version} has no {runtime} copy; "
            f"serve-bench export {model}{again} --runtimes {runtime} --version {version} --force "
            "exports that version again with one"
        )
    return files


def summation_profile(keras_model: Any) -> tuple[int, int]:
    """(layers that sum products, the most terms one output sums) in a Keras model.

    Convolutions and dense layers sum kernel-height x kernel-width x input-channels products per
    output (a depthwise convolution only height x width); average pooling sums its window.
    """
    layers = 0
    most = 1
    for layer in keras_model.layers:
        kind = type(layer).__name__
        kernel = (
            getattr(layer, "depthwise_kernel", None) if kind == "DepthwiseConv2D" else getattr(layer, "kernel", None)
        )
        if kernel is not None:
            shape = tuple(int(d) for d in kernel.shape)
            terms = math.prod(shape[:2]) if kind == "DepthwiseConv2D" else math.prod(shape[:-1])
        elif kind == "GlobalAveragePooling2D":
            shape = tuple(int(d) for d in layer.input.shape[1:3])
            terms = math.prod(shape)
        elif kind == "AveragePooling2D":
            terms = math.prod(layer.pool_size)
        else:
            continue
        layers += 1
        most = max(most, terms)
    return layers, most


def feature_tolerance(layers: int, terms: int) -> float:
    """How far two correct float32 runs of the same model may differ, relative to the features' range.

    Each sum of ``terms`` products rounds differently when a runtime orders or tiles it
    differently (blocked GEMM, Winograd, fused bias): about sqrt(terms) roundoffs, of random
    sign. Over ``layers`` such sums the differences add again like a random walk:
    sqrt(layers * terms) * 2**-24, and SPREAD standard deviations for the largest feature.
    InceptionV3 (104 layers: 94 convolutions, 9 average pools and the global one; at most 4,032 terms,
    a 3x3 convolution over 448 channels): 1.5e-4; bfloat16 inference (OpenVINO's default on
    CPUs with AVX512-BF16) moved it by 4e-3, and float16 weights by 5e-4.
    """
    return SPREAD * math.sqrt(max(layers, 1) * max(terms, 1)) * FLOAT32_ROUNDOFF


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _check_images(signature: Any) -> dict[str, np.ndarray]:
    specs = signature.structured_input_signature[1]
    rng = np.random.default_rng(20)
    return {
        name: rng.uniform(0, 255, (CHECK_IMAGES, *(int(d) for d in spec.shape[1:]))).astype(np.float32)
        for name, spec in specs.items()
    }


def relative_difference(reference: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> float:
    """The largest |difference| over every output, relative to that output's largest |value|."""
    worst = 0.0
    for name, expected in reference.items():
        if name not in other:
            raise ValueError(f"it answers {', '.join(sorted(other)) or 'nothing'}, not {name!r}")
        got = np.asarray(other[name], dtype=np.float64)
        scale = float(np.max(np.abs(expected))) or 1.0
        if got.shape != expected.shape:
            return math.inf
        worst = max(worst, float(np.max(np.abs(got - expected))) / scale)
    return worst


def _reason(exc: BaseException) -> str:
    """One line of a converter's exception: TensorFlow's start "in user code:" and end with the cause."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines and lines[0] == "in user code:" else first_line(exc)


def convert_saved_model(
    tf: Any,
    signature: Any,
    saved_model: Path,
    models_dir: Path,
    runtime: str,
    model: str,
    version: int,
    tolerance: float,
    run: Callable[[str, Path, dict[str, np.ndarray]], dict[str, np.ndarray]],
    keras_model: Any = None,
) -> Conversion:
    """Convert ``signature`` (``saved_model``'s serving_default, loaded; its loaded object must be held by
    the caller) for ``runtime``, check it answers as TensorFlow does, and move it into place (staged beside
    it, renamed at the end, as the SavedModel is). A runtime with a record of its own writes its copy from
    ``keras_model`` (the Keras model exported) and answers the check its own way."""
    destination = converted_model_path(models_dir, runtime, model, version)
    directory = destination.parent
    shutil.rmtree(directory, ignore_errors=True)  # an older export's copy of this version must not outlive it
    staging_root = directory.parent / ".staging"
    staging_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{version}-", dir=staging_root))
    started = time.perf_counter()
    kept = record(runtime)
    converter = kept.converter
    try:
        try:
            if kept.write is not None:
                kept.write(keras_model, model, staging, str(saved_model))
            elif kept.convert is not None:
                converter = kept.convert(tf, signature, staging / destination.name)
        except Exception as exc:  # each converter raises its own kinds; the reason is what matters
            reason = _reason(exc)
            return Conversion(runtime, None, converter, time.perf_counter() - started, reason=reason)
        seconds = time.perf_counter() - started
        images = _check_images(signature)
        expected = {name: tensor.numpy() for name, tensor in signature(**images).items()}
        try:
            copy = staging / destination.name
            answered = kept.answer(copy, images) if kept.answer else run(runtime, copy, images)
            error = relative_difference(expected, answered)
        except Exception as exc:  # converted, but it does not load or run in the runtime, or names other outputs
            reason = f"the converted model does not run in {runtime}: {_reason(exc)}"
            return Conversion(runtime, None, converter, seconds, reason=reason)
        if not error <= tolerance:
            return Conversion(
                runtime,
                None,
                converter,
                seconds,
                error,
                tolerance,
                reason=f"its features differ from TensorFlow's by {error:.2g} of their range "
                f"(float32 allows {tolerance:.2g})",
            )
        conversion = Conversion(runtime, destination, converter, seconds, error, tolerance)
        facts = {**asdict(conversion), "path": str(destination), "source": str(saved_model)}
        facts["runtime_version"] = _version(kept.packages[-1])
        written = staging / CONVERSION_FILE  # a copy may keep its own facts there (the jax runtime's model)
        earlier = json.loads(written.read_text()) if written.is_file() else {}
        written.write_text(json.dumps({**earlier, **facts}, indent=2) + "\n")
        os.rename(staging, directory)
        return conversion
    finally:
        discard_staging(staging)


def require_runtimes(runtimes: tuple[str, ...]) -> None:
    """UserError naming the extra when a runtime asked for by name is not installed (TensorFlow, the source,
    is export's own need: it says so when it is imported)."""
    for runtime in runtimes:
        line = record(runtime).missing(converting=True) if runtime in CONVERTED_RUNTIMES else None
        if line:
            raise UserError(line, parameter="runtimes")
