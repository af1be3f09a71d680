"""Export a catalogue model as a SavedModel in TF Serving's layout.

Everything is written into a staging directory beside the destination and
renamed into place at the end, so an interrupted or failed export never leaves
a half-written version where TF Serving (or the local server) would load it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from serve_bench._tf import import_tensorflow
from serve_bench.catalogue import ModelSpec, get_spec
from serve_bench.errors import InvalidValue, UserError
from serve_bench.export._config import write_models_config
from serve_bench.export._convert import (
    Conversion,
    convert_saved_model,
    converted_model_path,
    feature_tolerance,
    require_runtimes,
    summation_profile,
)
from serve_bench.export._layout import METADATA_FILE, WARMUP_FILE, discard_staging, list_versions
from serve_bench.runtimes import (
    CONVERTED_RUNTIMES,
    RuntimeSettings,
    check_runtime,
    open_runner,
    record,
)

__all__ = [
    "ExportResult",
    "ModelFacts",
    "export_model",
    "export_without_tensorflow",
    "model_facts",
    "parse_batch_sizes",
]

DEFAULT_WARMUP_BATCH_SIZES = (1, 8, 32)


@dataclass(frozen=True)
class ModelFacts:
    """What later stages need to know about an exported model, counted from its graph."""

    model: str
    input_shape: tuple[int, int, int]
    feature_size: int
    parameters: int
    flops_per_image: int
    weights: str
    tensorflow_version: str
    warmup_batch_sizes: tuple[int, ...] = ()
    # the float32 arithmetic other runtimes' answers are checked against (export/_convert.py)
    summing_layers: int = 0
    max_summed_terms: int = 0


@dataclass(frozen=True)
class ExportResult:
    path: Path
    version: int
    facts: ModelFacts
    models_config: Path
    # Triton's and MLServer's model directories for the same SavedModel (exported_models/triton|mlserver/<model>)
    repositories: tuple[Path, ...] = ()
    # the same version for ONNX Runtime and OpenVINO (exported_models/onnx|openvino/<model>/<version>)
    conversions: tuple[Conversion, ...] = ()
    notices: tuple[str, ...] = ()


def parse_batch_sizes(text: str, what: str = "warmup_batch_sizes") -> tuple[int, ...]:
    """``"1,8,32"`` -> (1, 8, 32); InvalidValue naming ``what`` otherwise."""
    wanted = "positive whole numbers separated by commas, e.g. 1,8,32"
    sizes: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            value = 0
        if value <= 0 or str(value) != part.lstrip("+"):
            raise InvalidValue(what, text, wanted)
        sizes.append(value)
    if not sizes:
        raise InvalidValue(what, text, wanted)
    if len(sizes) > 1000:
        raise InvalidValue(what, f"{len(sizes)} sizes", "at most 1000 sizes (TF Serving's limit)")
    return tuple(sizes)


def _build_keras(tf: Any, spec: ModelSpec, weights: str) -> Any:
    if weights == "random":
        return spec.build(tf.keras, None)
    if weights == "imagenet":
        if not spec.has_imagenet_weights:
            raise UserError(f"model {spec.name!r} has no ImageNet weights; use random weights", parameter="weights")
        try:
            return spec.build(tf.keras, "imagenet")
        except Exception as exc:  # urllib/HTTP/OS errors from keras' downloader
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UserError(
                f"could not download ImageNet weights for {spec.name} ({reason}); "
                "without network access use random weights (timing does not depend on weight values)",
                parameter="weights",
            ) from exc
    path = Path(weights)
    if not path.is_file():
        raise InvalidValue("weights", weights, "imagenet, random or the path of a Keras weights file (no such file)")
    model = spec.build(tf.keras, None)
    try:
        model.load_weights(str(path))
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(
            f"weights {weights}: not a usable Keras weights file for {spec.name} ({reason}); "
            "give a .weights.h5 saved from this architecture",
            parameter="weights",
        ) from exc
    return model


def _make_servable(tf: Any, spec: ModelSpec, keras_model: Any) -> Any:
    height, width = spec.height, spec.width

    class Servable(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = keras_model

        @tf.function(input_signature=[tf.TensorSpec([None, height, width, 3], tf.float32, name="images")])
        def serve(self, images: Any) -> dict[str, Any]:
            features = self.model(spec.preprocess(images), training=False)
            return {"features": tf.cast(features, tf.float32)}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")])
        def serve_bytes(self, image_bytes: Any) -> dict[str, Any]:
            def decode(data: Any) -> Any:
                image = tf.io.decode_image(data, channels=3, expand_animations=False, dtype=tf.uint8)
                image.set_shape([None, None, 3])
                return tf.image.resize(tf.cast(image, tf.float32), [height, width])

            images = tf.map_fn(decode, image_bytes, fn_output_signature=tf.TensorSpec([height, width, 3], tf.float32))
            outputs: dict[str, Any] = self.serve(images)  # tf.function: untyped
            return outputs

    return Servable()


def count_flops_per_image(tf: Any, keras_model: Any, spec: ModelSpec) -> int:
    """Float operations for one image, counted by TensorFlow's profiler on the frozen graph.

    Traced at batch 1 (not through ``serve``, whose batch dimension is None:
    the profiler skips ops whose shapes are not fully known).
    """
    import contextlib
    import io

    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2_as_graph,
    )

    forward = tf.function(lambda images: keras_model(spec.preprocess(images), training=False))
    concrete = forward.get_concrete_function(tf.TensorSpec([1, spec.height, spec.width, 3], tf.float32))
    _, graph_def = convert_variables_to_constants_v2_as_graph(concrete)
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        noise = io.StringIO()  # the v1 profiler prints deprecation chatter
        with contextlib.redirect_stdout(noise), contextlib.redirect_stderr(noise):
            profile = tf.compat.v1.profiler.profile(
                graph=graph, run_meta=tf.compat.v1.RunMetadata(), cmd="op", options=options
            )
    return int(profile.total_float_ops)


def model_facts(name: str, weights: str = "random") -> ModelFacts:
    """Build the model in memory and count its parameters and FLOPs (for ``export --list``)."""
    tf = import_tensorflow()
    spec = get_spec(name)
    keras_model = _build_keras(tf, spec, weights)
    return ModelFacts(
        model=spec.name,
        input_shape=spec.input_shape,
        feature_size=spec.feature_size,
        parameters=int(keras_model.count_params()),
        flops_per_image=count_flops_per_image(tf, keras_model, spec),
        weights=weights,
        tensorflow_version=tf.__version__,
    )


# TF Serving reads a version directory's name as an int64 (absl::SimpleAtoi in ParseVersionNumber,
# tensorflow_serving/sources/storage_path/file_system_storage_path_source.cc:87): a larger one is no version
MAX_VERSION = 2**63 - 1


def check_version(version: int | None) -> None:
    """A version export may write: None (the next free one), or a whole number from 1 to 2**63 - 1."""
    if version is not None and not 1 <= version <= MAX_VERSION:
        raise InvalidValue(
            "version", version, f"a whole number from 1 to {MAX_VERSION} (TF Serving reads a version as an int64)"
        )


def export_without_tensorflow(
    name: str, runtimes: tuple[str, ...], *, weights: str, out: str | os.PathLike[str], version: int | None
) -> list[Path]:
    """What a host without TensorFlow can export: for each runtime that builds the catalogue model itself
    (the jax runtime), a copy with random weights; UserError naming the extra for anything else."""
    get_spec(name)
    copies = [record(r) for r in runtimes if record(r).converted]
    if any(kept.write_random is None for kept in copies) or weights != "random" or not copies:
        import_tensorflow()  # the one-line error naming the extra
    check_version(version)
    _check_writable(Path(out))
    written = []
    for kept in copies:
        if kept.write_random is not None:
            existing = list_versions(converted_model_path(Path(out), kept.name, name, 1).parent.parent)
            written.append(kept.write_random(Path(out), name, version or ((existing[-1] + 1) if existing else 1)))
    return written


def _check_writable(out: Path) -> None:
    """A file can be made in ``out``, or, where it is not there yet, in the nearest folder above it that is:
    checked before the model is built, making nothing (an export refused before the build leaves no folder)."""
    try:
        existing = out
        while not existing.exists() and existing != existing.parent:  # exists() raises where it may not look
            existing = existing.parent
        if not existing.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(existing))
        probe = tempfile.NamedTemporaryFile(dir=existing, prefix=".write-test-", delete=True)
        probe.close()
    except OSError as exc:
        raise UserError(
            f"cannot write to output directory {str(out)!r} ({exc.strerror or exc}); choose another one",
            parameter="out",
        ) from exc


def _first_missing(out: Path) -> Path | None:
    """The topmost folder of ``out`` (itself included) that is not there yet; None where ``out`` is."""
    missing = None
    for folder in (out, *out.parents):
        if folder.exists():
            break
        missing = folder
    return missing


def _remove_empty(out: Path, top: Path) -> None:
    """Remove ``out`` and the folders above it up to ``top`` while they are empty (an export that failed after
    it made them leaves no folder, as one refused before the build)."""
    for folder in (out, *out.parents):
        try:
            folder.rmdir()
        except OSError:
            return
        if folder == top:
            return


# A warm-up record's peak memory while built: the images, their bytes and the serialized record, each its size
# (3.00x measured for tiny at 5,000 images, 2026-11-27); 43,690 tiny images, the largest a record may hold, died
# of MemoryError under a 4 GB ulimit, a traceback
WARMUP_BUILD = 3
_MESSAGE_LIMIT = 2**31 - 1  # protobuf's limit on one serialized message, which a warm-up record is
_RECORD_OVERHEAD = 1024  # the request's names, shape and framing around its tensor_content (~100 bytes)


def _image_bytes(spec: ModelSpec) -> int:
    return spec.height * spec.width * 3 * 4


def _largest_warmup_batch(spec: ModelSpec) -> int:
    """The largest batch one warm-up record can hold (InceptionV3: 2,001 images)."""
    return (_MESSAGE_LIMIT - _RECORD_OVERHEAD) // _image_bytes(spec)


def check_warmup_batch_sizes(spec: ModelSpec, sizes: tuple[int, ...], memory: Any = None) -> None:
    """Each a positive integer whose record one protobuf message can hold, and, given ``memory`` (serve_bench.load's
    Memory: the CLI passes what memory_available() finds; export sits below load), that this process can build: a
    record is built at WARMUP_BUILD times its size (the images, their bytes, the serialized record), one at a time."""
    largest = _largest_warmup_batch(spec)
    for size in sizes:
        if not isinstance(size, int) or size <= 0:
            raise UserError(f"warm-up batch size {size!r} is not a positive integer")
        if size > largest:
            raise InvalidValue(
                "warmup_batch_sizes",
                size,
                f"at most {largest} for {spec.name}: a warm-up record is one protobuf message, which holds at most "
                f"2 GiB, and {spec.name}'s float32 images are {_image_bytes(spec):,} bytes each",
            )
    biggest = max(sizes, default=0)
    if memory is not None and biggest and biggest * _image_bytes(spec) * WARMUP_BUILD > memory.usable:
        fits = memory.usable // (_image_bytes(spec) * WARMUP_BUILD)
        raise InvalidValue(
            "warmup_batch_sizes",
            biggest,
            f"at most {fits} for {spec.name} here: a warm-up record of {biggest} images is built at {WARMUP_BUILD}x "
            f"its {biggest * _image_bytes(spec) / 1e9:.3g} GB, and {memory.describe()}; warm up the sizes served",
        )


def export_model(
    name: str,
    *,
    weights: str = "random",
    version: int | None = None,
    out: str | os.PathLike[str] = "exported_models",
    warmup_batch_sizes: tuple[int, ...] = DEFAULT_WARMUP_BATCH_SIZES,
    force: bool = False,
    runtimes: tuple[str, ...] | None = None,
) -> ExportResult:
    """Export ``name`` as a SavedModel, then convert it for ``runtimes`` (None: every runtime installed;
    a runtime named here and not installed is an error, one not named is a notice)."""
    spec = get_spec(name)
    if runtimes is not None:
        for runtime in runtimes:
            check_runtime(runtime, name="runtimes")
        require_runtimes(runtimes)
    check_version(version)
    check_warmup_batch_sizes(spec, warmup_batch_sizes)
    out = Path(out)
    _check_writable(out)
    model_dir = out / spec.name
    existing = list_versions(model_dir)
    if version is None:
        version = (max(existing) + 1) if existing else 1
    destination = model_dir / str(version)
    if destination.exists() and not force:
        raise UserError(
            f"{destination} already exists; replace it (force) or leave the version out to use the next free one",
            parameter="force",
        )

    tf = import_tensorflow()
    keras_model = _build_keras(tf, spec, weights)
    servable = _make_servable(tf, spec, keras_model)

    staging_root = out / ".staging"
    made = _first_missing(out)  # the top of the folders this export makes, taken away again if it fails
    placed = False
    try:
        staging_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # out was checked before the build; this is what changed since
        raise UserError(f"cannot write to output directory {str(out)!r} ({exc.strerror or exc})") from exc
    staging = Path(tempfile.mkdtemp(prefix=f"{spec.name}-{version}-", dir=staging_root))
    try:
        tf.saved_model.save(
            servable,
            str(staging),
            signatures={
                "serving_default": servable.serve.get_concrete_function(),
                "serving_bytes": servable.serve_bytes.get_concrete_function(),
            },
        )
        facts = ModelFacts(
            model=spec.name,
            input_shape=spec.input_shape,
            feature_size=spec.feature_size,
            parameters=int(keras_model.count_params()),
            flops_per_image=count_flops_per_image(tf, keras_model, spec),
            weights=weights if weights in ("random", "imagenet") else f"file:{Path(weights).resolve()}",
            tensorflow_version=tf.__version__,
            warmup_batch_sizes=tuple(warmup_batch_sizes),
            **dict(zip(("summing_layers", "max_summed_terms"), summation_profile(keras_model))),
        )
        extra = staging / "assets.extra"
        extra.mkdir(exist_ok=True)
        from serve_bench.export._warmup import write_warmup_records

        write_warmup_records(extra / WARMUP_FILE, spec, warmup_batch_sizes)
        (extra / METADATA_FILE).write_text(json.dumps(asdict(facts), indent=2) + "\n")

        model_dir.mkdir(parents=True, exist_ok=True)
        for runtime in CONVERTED_RUNTIMES:  # copies of the version replaced: gone before the new one is in place
            shutil.rmtree(converted_model_path(out, runtime, spec.name, version).parent, ignore_errors=True)
        if destination.exists():  # --force: swap the old version out, then delete it
            retired = staging_root / f"retired-{spec.name}-{version}-{os.getpid()}"
            os.rename(destination, retired)
            os.rename(staging, destination)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.rename(staging, destination)
        placed = True
    except OSError as exc:  # a disk that fills while it is written: nothing of this version is kept
        raise UserError(
            f"cannot write {spec.name} version {version} to {str(out)!r} ({exc.strerror or exc}); nothing of it was"
            " kept: free space there, or choose another one",
            parameter="out",
        ) from exc
    finally:
        discard_staging(staging)
        if not placed and made is not None:
            _remove_empty(out, made)
    config_path = write_models_config(out)
    from serve_bench.export._repos import write_mlserver_model, write_triton_model

    latest = list_versions(model_dir)[-1]
    repositories = (
        write_triton_model(out, spec.name, out / "triton", version=latest),
        write_mlserver_model(out, spec.name, out / "mlserver", version=latest),
    )
    conversions, notices = _convert(tf, destination, out, spec.name, version, facts, runtimes, keras_model)
    return ExportResult(
        path=destination,
        version=version,
        facts=facts,
        models_config=config_path,
        repositories=repositories,
        conversions=conversions,
        notices=notices,
    )


def _by_default(runtime: str) -> bool:
    return record(runtime).converted_by_default


def _convert(
    tf: Any,
    saved_model: Path,
    out: Path,
    model: str,
    version: int,
    facts: ModelFacts,
    runtimes: tuple[str, ...] | None,
    keras_model: Any,
) -> tuple[tuple[Conversion, ...], tuple[str, ...]]:
    def run(runtime: str, path: Path, inputs: dict[str, Any]) -> dict[str, Any]:
        return open_runner(runtime, path, RuntimeSettings(runtime)).__call__(inputs)

    tolerance = feature_tolerance(facts.summing_layers, facts.max_summed_terms)
    # (every older copy of this version was removed before the new SavedModel went into place)
    defaults = [r for r in CONVERTED_RUNTIMES if _by_default(r)]
    wanted = [r for r in CONVERTED_RUNTIMES if (r in runtimes if runtimes is not None else r in defaults)]
    if runtimes is None:
        wanted = [r for r in wanted if not record(r).missing(converting=True)]
    left = [r for r in defaults if runtimes is None and r not in wanted]
    notices = [f"not converted for {record(r).missing(converting=True)}" for r in left]
    if not wanted:
        return (), tuple(notices)
    loaded = tf.saved_model.load(str(saved_model))  # loaded once for every runtime; held: the signature needs it
    signature = loaded.signatures["serving_default"]
    conversions = tuple(
        convert_saved_model(tf, signature, saved_model, out, r, model, version, tolerance, run, keras_model)
        for r in wanted
    )
    return conversions, tuple(notices)
