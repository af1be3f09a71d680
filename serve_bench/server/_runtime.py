"""Loaded models: SavedModel signatures run with TensorFlow, validated as TF Serving does."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench import _protos
from serve_bench.codec import DT_STRING, DTYPE_TO_NUMPY, NUMPY_TO_DTYPE, dtype_name
from serve_bench.errors import UserError, first_line
from serve_bench.export import (
    WARMUP_FILE,
    converted_files,
    converted_model_path,
    list_versions,
    read_warmup_records,
)
from serve_bench.runtimes import CompilingRunner, Runner, RuntimeSettings, open_runner, record
from serve_bench.server._config import ModelEntry
from serve_bench.server._errors import CODE_NAMES, ServingError, invalid, not_found

__all__ = ["Model", "ModelRegistry", "Servable", "Signature"]

log = logging.getLogger("serve_bench.server")
DEFAULT_SIGNATURE = "serving_default"
# TensorShape::kMaxDimensions (tensorflow/core/framework/tensor_shape.h): FromProto refuses more.
MAX_RANK = 254

# DataTypeString (tensorflow/core/framework/types.cc): the names TF's own messages use.
_TF_TYPE_NAMES = {
    1: "float",
    2: "double",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    9: "int64",
    10: "bool",
    17: "uint16",
    19: "half",
    22: "uint32",
    23: "uint64",
}


def tf_type_name(dtype: int) -> str:
    """A DataType number as TensorFlow's messages spell it ("float", "string", ...)."""
    return _TF_TYPE_NAMES.get(dtype, dtype_name(dtype))


def tf_error_cause(message: str) -> str:
    """The cause inside a TensorFlow error, without the eager wrapper's noise.

    TF2 functions raise "Graph execution error:" followed by "Detected at node ..." and a
    stack; TF Serving, running the graph in a Session, reports the op's own message (e.g.
    "Unknown image file format. ..." with its ``[[{{node ...}}]]`` line). Keep that part.
    """
    kept: list[str] = []
    in_stack = False
    for line in message.splitlines():
        stripped = line.strip()
        if not stripped or stripped == "Graph execution error:":
            continue
        if stripped.startswith("Detected at node") or stripped.startswith("Detected unsupported operations"):
            in_stack = True
            continue
        if in_stack and (stripped == "<stack traces unavailable>" or line.startswith("  ")):
            continue
        in_stack = False
        kept.append(line.split(" [Op:__inference")[0].rstrip())
    return "\n".join(kept) or message.strip() or "TensorFlow error"


@dataclass(frozen=True)
class TensorSpec:
    alias: str
    dtype: int
    shape: tuple[int, ...] | None  # None: unknown rank; -1: unknown dimension


@dataclass
class Signature:
    name: str
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    function: Any  # the concrete function to call with keyword tensors
    feed_names: dict[str, str] = field(default_factory=dict)  # alias -> TensorInfo.name, for messages
    runner: Runner | None = None  # another runtime's copy of this signature (ONNX Runtime, OpenVINO)

    def check_names(self, sent: set[str]) -> None:
        """Input names as TF Serving checks them: VerifyRequestInputsSize
        (servables/tensorflow/predict_util.cc:51-74) when the counts differ, then GetInputValues
        (tensorflow/cc/saved_model/util.cc) for a missing alias when they do not."""
        wanted = set(self.inputs)
        if len(sent) != len(wanted):
            raise invalid(
                f"input size does not match signature: {len(sent)}!={len(wanted)} "
                f"len({{{','.join(sorted(sent))}}}) != len({{{','.join(sorted(wanted))}}}). "
                f"Sent extra: {{{','.join(sorted(sent - wanted))}}}. "
                f"Missing but required: {{{','.join(sorted(wanted - sent))}}}."
            )
        for alias in sorted(wanted - sent):
            raise invalid(
                f"Signature input alias: {alias}(feed name: {self.feed_names.get(alias, alias)}) not found in request "
                f"and no default value provided. Inputs expected to be in the request {{{','.join(sorted(sent))}}}, "
                "or default input alias set: "
            )

    def check_shape(self, alias: str, shape: tuple[int, ...]) -> None:
        """A declared shape against the signature, before any value is read or allocated."""
        if len(shape) > MAX_RANK:
            raise invalid(f"tensor parsing error: {alias}")
        spec = self.inputs[alias].shape
        if spec is not None:
            compatible = len(spec) == len(shape) and all(want in (-1, got) for want, got in zip(spec, shape))
            if not compatible:
                raise invalid(
                    f"input '{alias}' has shape {list(shape)}, incompatible with the signature's "
                    f"{['?' if d == -1 else d for d in spec]}"
                )
        if not shape:
            raise invalid(f"input '{alias}' is a scalar; a batched input needs a first (batch) dimension")

    def validate(self, inputs: dict[str, np.ndarray]) -> int:
        """Check names, dtypes and shapes; return the batch size (first dimension)."""
        self.check_names(set(inputs))
        batch: int | None = None
        for position, alias in enumerate(sorted(inputs)):
            array = inputs[alias]
            spec = self.inputs[alias]
            expected = DTYPE_TO_NUMPY.get(spec.dtype)
            if spec.dtype == DT_STRING:
                ok = array.dtype == object or array.dtype.kind == "S"
            else:
                ok = array.dtype == expected
            if not ok:
                got = "string" if array.dtype == object or array.dtype.kind == "S" else _numpy_type_name(array.dtype)
                # DirectSession's feed check, as TF Serving reports it (its Session::Run does the check)
                raise invalid(f"Expects arg[{position}] to be {tf_type_name(spec.dtype)} but {got} is provided")
            self.check_shape(alias, tuple(array.shape))
            if batch is None:
                batch = array.shape[0]
            elif array.shape[0] != batch:
                raise invalid(f"inputs disagree on the batch size: {batch} and {array.shape[0]} ('{alias}')")
        return batch or 0

    def output_names(self, output_filter: list[str]) -> list[str]:
        if not output_filter:
            return list(self.outputs)
        seen: set[str] = set()
        for alias in output_filter:  # servables/tensorflow/predict_util.cc:135-153
            if alias not in self.outputs:
                raise invalid(
                    f"output tensor alias not found in signature: {alias} Outputs expected to be in the "
                    f"set {{{','.join(sorted(self.outputs))}}}."
                )
            if alias in seen:
                raise invalid(f"duplicate output tensor alias: {alias}")
            seen.add(alias)
        return list(output_filter)


class Servable:
    """One loaded version of one model."""

    def __init__(self, name: str, version: int, path: Path, tf: Any, runtime: RuntimeSettings | None = None) -> None:
        """``tf`` None: TensorFlow is not loaded (a runtime with a record of its own runs serving_default, and
        serving_bytes, which decodes JPEGs in the graph, is not served); a standalone runtime's version then
        needs no SavedModel: its signature is the catalogue's (DESIGN's signature contract)."""
        self.name = name
        self.version = version
        self.path = path
        self.runtime = runtime or RuntimeSettings()
        kept = record(self.runtime.runtime)
        # no version directory at all (a host without TensorFlow has the runtime's copy alone); an empty or unfinished
        # one fails as TF Serving's loader fails it
        standalone = kept.standalone and not path.exists()
        self.signature_defs = _catalogue_signature_defs(path.parent.name) if standalone else _read_signature_defs(path)
        tf = None if standalone else tf  # no SavedModel to load: serving_default runs on the runtime's copy alone
        self._tf = tf
        self.warmup_replayed = 0
        self.signatures: dict[str, Signature] = {}
        loaded_signatures: dict[str, Any] = {}
        if tf is not None:
            try:
                loaded = tf.saved_model.load(str(path))
            except Exception as exc:  # TF raises many kinds for a damaged SavedModel; all mean "cannot load"
                cause = tf_error_cause(getattr(exc, "message", "") or str(exc)).splitlines()[0]
                raise ServingError("FAILED_PRECONDITION", f"{path} is not a loadable SavedModel: {cause}") from None
            self._loaded = loaded  # keeps the variables alive
            loaded_signatures = dict(loaded.signatures)
        for key, sig_def in self.signature_defs.items():
            if key not in loaded_signatures and not (tf is None and key == DEFAULT_SIGNATURE):
                continue
            self.signatures[key] = Signature(
                name=key,
                inputs={alias: _spec(alias, info) for alias, info in sig_def.inputs.items()},
                outputs={alias: _spec(alias, info) for alias, info in sig_def.outputs.items()},
                function=loaded_signatures.get(key),
                feed_names={alias: info.name for alias, info in sig_def.inputs.items()},
            )
        if kept.open is not None:  # TensorFlow is run by this server itself, every signature
            self._open_runner(self.runtime)

    def _open_runner(self, runtime: RuntimeSettings) -> None:
        """serving_default on ``runtime``: the copy export converted from this version (the SavedModel's
        signature still describes and validates it; serving_bytes stays on TensorFlow)."""
        try:
            model_dir = self.path.parent
            converted, *_ = converted_files(model_dir.parent, runtime.runtime, model_dir.name, self.version)
        except UserError as exc:
            raise ServingError("NOT_FOUND", str(exc)) from None
        try:
            runner = open_runner(runtime.runtime, converted, runtime)
        except UserError as exc:
            raise ServingError("FAILED_PRECONDITION", str(exc)) from None
        except Exception as exc:  # the runtime's own kinds for a damaged or unloadable file
            reason = first_line(exc)
            raise ServingError(
                "FAILED_PRECONDITION", f"{converted} does not load in {runtime.runtime}: {reason}"
            ) from None
        if DEFAULT_SIGNATURE not in self.signatures:
            raise ServingError("FAILED_PRECONDITION", f"{self.path} has no {DEFAULT_SIGNATURE} signature to run there")
        self.signatures[DEFAULT_SIGNATURE].runner = runner
        log.info(
            "%s version %d: %s runs on %s",
            self.name,
            self.version,
            DEFAULT_SIGNATURE,
            ", ".join(f"{k}={v}" for k, v in runner.in_effect.items()),
        )

    def signature(self, name: str) -> Signature:
        key = name or DEFAULT_SIGNATURE
        try:
            return self.signatures[key]
        except KeyError:
            if key in self.signature_defs and self._tf is None:
                raise ServingError(
                    "FAILED_PRECONDITION",
                    f'Serving signature key "{key}" runs on TensorFlow, which this server does not load: it runs '
                    f"{DEFAULT_SIGNATURE} on {self.runtime.runtime}",
                ) from None
            raise ServingError("FAILED_PRECONDITION", f'Serving signature key "{key}" not found.') from None

    def compile(self, batch_sizes: tuple[int, ...]) -> dict[int, tuple[float, float | None]]:
        """Build the programs of a runtime that compiles per shape (XLA) for ``batch_sizes`` (on a GPU, running each
        once) before the model is AVAILABLE, as TF Serving's warm-up runs its records first; a size whose first run
        fails fails the load, as a warm-up record does there. {size: (seconds compiling, seconds of the first run
        or None)} for the sizes built now ({} for other runtimes)."""
        runner = self.signatures[DEFAULT_SIGNATURE].runner if DEFAULT_SIGNATURE in self.signatures else None
        if not isinstance(runner, CompilingRunner):
            return {}
        built = [size for size in batch_sizes if runner.compile(size)]
        return {size: (runner.compile_seconds[size], runner.first_run_seconds.get(size)) for size in built}

    def run(self, signature: Signature, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Call TensorFlow, or the signature's other runtime (blocking; from a worker thread, never the event loop)."""
        if signature.runner is not None:
            return self._run_elsewhere(signature.runner, inputs)
        tf = self._tf
        tensors = {alias: _to_tensor(tf, array) for alias, array in inputs.items()}
        try:
            result = signature.function(**tensors)
        except tf.errors.OpError as exc:
            # the op's own code and message, as a Session run in TF Serving reports them
            code = CODE_NAMES.get(exc.error_code, "INTERNAL")
            message = tf_error_cause(exc.message)
            del exc  # keep no traceback (and with it the request's tensors) alive
            raise ServingError(code, message) from None
        except (ValueError, TypeError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            del exc
            raise invalid(message) from None
        return {alias: tensor.numpy() for alias, tensor in result.items()}

    def _run_elsewhere(self, runner: Runner, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # contiguous copies: a value broadcast to a shape (zero strides) is a view the runtimes cannot read
        arrays = {alias: np.ascontiguousarray(array) for alias, array in inputs.items()}
        try:
            return runner(arrays)
        except Exception as exc:  # inputs were validated against the signature: what is left is the runtime's
            message = first_line(exc)
            del exc
            raise ServingError("INTERNAL", f"{self.runtime.runtime}: {message}") from None

    def warm_up(self) -> int:
        """Replay assets.extra/tf_serving_warmup_requests as TF Serving does at load."""
        path = self.path / "assets.extra" / WARMUP_FILE
        if not path.exists():
            return 0
        from serve_bench.codec import from_tensor_proto

        count = 0
        for logged in read_warmup_records(path):
            request = logged.predict_log.request
            signature = self.signature(request.model_spec.signature_name)
            inputs = {alias: from_tensor_proto(t) for alias, t in request.inputs.items()}
            signature.validate(inputs)
            self.run(signature, inputs)
            count += 1
        self.warmup_replayed = count
        return count


def _to_tensor(tf: Any, array: np.ndarray) -> Any:
    """A TensorFlow tensor of ``array``; one value broadcast to a shape (a zero-strides view, as the
    gRPC front end decodes a tensor given by a single value) is filled by TensorFlow at once, with no
    numpy copy first (tf.constant would make one of the whole shape)."""
    if array.size > 1 and array.dtype != object and not any(array.strides):
        return tf.fill(array.shape, tf.constant(array[(0,) * array.ndim]))
    return tf.constant(array)


def _numpy_type_name(dtype: np.dtype[Any]) -> str:
    number = NUMPY_TO_DTYPE.get(dtype)
    return tf_type_name(number) if number is not None else str(dtype)


def _spec(alias: str, info: Any) -> TensorSpec:
    if info.tensor_shape.unknown_rank:
        return TensorSpec(alias, info.dtype, None)
    return TensorSpec(alias, info.dtype, tuple(int(d.size) for d in info.tensor_shape.dim))


def _catalogue_signature_defs(model: str) -> dict[str, Any]:
    """serving_default as export writes it for catalogue ``model`` (images float32 [-1, H, W, 3] -> features
    float32 [-1, D]), for a standalone runtime's version that has no SavedModel beside it."""
    from serve_bench.catalogue import get_spec

    try:
        spec = get_spec(model)
    except UserError as exc:
        raise ServingError("NOT_FOUND", str(exc)) from None
    signature = _protos.message("tensorflow.SignatureDef")(method_name="tensorflow/serving/predict")
    for info, alias, shape in (
        (signature.inputs["images"], "serving_default_images:0", (-1, *spec.input_shape)),
        (signature.outputs["features"], "StatefulPartitionedCall:0", (-1, spec.feature_size)),
    ):
        info.name = alias
        info.dtype = 1  # DT_FLOAT
        for size in shape:
            info.tensor_shape.dim.add(size=size)
    return {DEFAULT_SIGNATURE: signature}


def _read_signature_defs(path: Path) -> dict[str, Any]:
    """The 'serve' MetaGraph's signatures; ServingError naming the directory when it holds no
    readable saved_model.pb (TF Serving's loader fails that version the same way)."""
    from google.protobuf.message import DecodeError

    pb = path / "saved_model.pb"
    if not pb.is_file():
        raise ServingError("NOT_FOUND", f"{path} holds no saved_model.pb (an empty or unfinished version directory)")
    try:
        saved_model = _protos.message("tensorflow.SavedModel").FromString(pb.read_bytes())
    except (OSError, DecodeError) as exc:
        raise ServingError("DATA_LOSS", f"{pb} cannot be read as a SavedModel ({exc})") from None
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            # every key, "__saved_model_init_op" too: GetModelMetadata answers the whole map
            # (servables/tensorflow/get_model_metadata_impl.cc:56-60)
            return dict(meta_graph.signature_def.items())
    raise ServingError("NOT_FOUND", f"{path} has no MetaGraph tagged 'serve'")


class Model:
    """A model name with its loaded versions (TF Serving's latest-version policy: the highest)."""

    def __init__(self, entry: ModelEntry, tf: Any, runtime: RuntimeSettings | None = None) -> None:
        self.name = entry.name
        self.entry = entry
        versions = list_versions(entry.base_path)
        kept = record((runtime or RuntimeSettings()).runtime)
        base_path = entry.base_path
        if not versions and kept.standalone:
            # no SavedModel here (a host without TensorFlow): the versions of the runtime's own copy
            copies = converted_model_path(entry.base_path.parent, kept.name, entry.base_path.name, 1).parent.parent
            versions = list_versions(copies)
        if not versions:
            raise ServingError("NOT_FOUND", f"model {entry.name!r}: no version directories under {entry.base_path}")
        latest = versions[-1]
        started = time.perf_counter()
        self.servables = {latest: Servable(entry.name, latest, base_path / str(latest), tf, runtime)}
        log.info("loaded %s version %d in %.1fs", entry.name, latest, time.perf_counter() - started)

    def get(self, version: int | None = None, label: str | None = None) -> Servable:
        if label:
            if label not in self.entry.version_labels:  # model_servers/server_core.cc:890
                raise invalid(f"Unrecognized servable version label: {label}")
            version = self.entry.version_labels[label]
        if version is None:
            return self.servables[max(self.servables)]
        try:
            return self.servables[version]
        except KeyError:
            raise not_found(f"Servable not found for request: Specific({self.name}, {version})") from None


class ModelRegistry:
    def __init__(self, models: dict[str, Model]) -> None:
        self.models = models

    def get(self, name: str, version: int | None = None, label: str | None = None) -> Servable:
        """ServerCore::GetServableHandle: a label is resolved first (INVALID_ARGUMENT when no
        such label, server_core.cc:873-891), then the servable (NOT_FOUND, basic_manager.cc:139)."""
        if label and name not in self.models:
            raise invalid(f"Unrecognized servable version label: {label}")
        try:
            model = self.models[name]
        except KeyError:
            what = f"Specific({name}, {version})" if version is not None else f"Latest({name})"
            raise not_found(f"Servable not found for request: {what}") from None
        return model.get(version, label)
