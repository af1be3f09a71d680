"""Loaded models: SavedModel signatures run with TensorFlow, validated as TF Serving does."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench import _protos
from serve_bench.codec import DT_STRING, DTYPE_TO_NUMPY, dtype_name
from serve_bench.export._layout import WARMUP_FILE, list_versions
from serve_bench.server._config import ModelEntry
from serve_bench.server._errors import ServingError, invalid, not_found

__all__ = ["Signature", "Servable", "Model", "ModelRegistry"]

log = logging.getLogger("serve_bench.server")
DEFAULT_SIGNATURE = "serving_default"


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

    def validate(self, inputs: dict[str, np.ndarray]) -> int:
        """Check names, dtypes and shapes; return the batch size (first dimension)."""
        sent, wanted = set(inputs), set(self.inputs)
        if sent != wanted:
            raise invalid(
                f"input size does not match signature: {len(sent)}!={len(wanted)} "
                f"len({{{','.join(sorted(sent))}}}) != len({{{','.join(sorted(wanted))}}}). "
                f"Sent extra: {{{','.join(sorted(sent - wanted))}}}. "
                f"Missing but required: {{{','.join(sorted(wanted - sent))}}}."
            )
        batch: int | None = None
        for alias, array in inputs.items():
            spec = self.inputs[alias]
            expected = DTYPE_TO_NUMPY.get(spec.dtype)
            if spec.dtype == DT_STRING:
                ok = array.dtype == object or array.dtype.kind == "S"
            else:
                ok = array.dtype == expected
            if not ok:
                got = "string" if array.dtype == object else str(array.dtype)
                raise invalid(f"Expects arg '{alias}' to be {dtype_name(spec.dtype)} but {got} is provided")
            if spec.shape is not None:
                compatible = len(spec.shape) == array.ndim and all(
                    want in (-1, got) for want, got in zip(spec.shape, array.shape)
                )
                if not compatible:
                    raise invalid(
                        f"input '{alias}' has shape {list(array.shape)}, incompatible with the signature's "
                        f"{['?' if d == -1 else d for d in spec.shape]}"
                    )
            if array.ndim == 0:
                raise invalid(f"input '{alias}' is a scalar; a batched input needs a first (batch) dimension")
            if batch is None:
                batch = array.shape[0]
            elif array.shape[0] != batch:
                raise invalid(f"inputs disagree on the batch size: {batch} and {array.shape[0]} ('{alias}')")
        return batch or 0

    def output_names(self, output_filter: list[str]) -> list[str]:
        if not output_filter:
            return list(self.outputs)
        for alias in output_filter:
            if alias not in self.outputs:
                raise invalid(f"output tensor alias not found in signature: {alias} Outputs expected to be in the "
                              f"set {{{','.join(sorted(self.outputs))}}}.")
        return list(output_filter)


class Servable:
    """One loaded version of one model."""

    def __init__(self, name: str, version: int, path: Path, tf: Any) -> None:
        self.name = name
        self.version = version
        self.path = path
        self._tf = tf
        self.signature_defs = _read_signature_defs(path)
        self.warmup_replayed = 0
        loaded = tf.saved_model.load(str(path))
        self._loaded = loaded  # keeps the variables alive
        self.signatures: dict[str, Signature] = {}
        for key, sig_def in self.signature_defs.items():
            if key not in loaded.signatures:
                continue
            self.signatures[key] = Signature(
                name=key,
                inputs={alias: _spec(alias, info) for alias, info in sig_def.inputs.items()},
                outputs={alias: _spec(alias, info) for alias, info in sig_def.outputs.items()},
                function=loaded.signatures[key],
            )

    def signature(self, name: str) -> Signature:
        key = name or DEFAULT_SIGNATURE
        try:
            return self.signatures[key]
        except KeyError:
            raise ServingError("FAILED_PRECONDITION", f'Serving signature key "{key}" not found.') from None

    def run(self, signature: Signature, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Call TensorFlow (blocking; call from a worker thread, never the event loop)."""
        tf = self._tf
        tensors = {alias: tf.constant(array) for alias, array in inputs.items()}
        try:
            result = signature.function(**tensors)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as exc:
            raise invalid(str(exc).splitlines()[0]) from exc
        except tf.errors.OpError as exc:
            raise ServingError("INTERNAL", str(exc).splitlines()[0]) from exc
        return {alias: tensor.numpy() for alias, tensor in result.items()}

    def warm_up(self) -> int:
        """Replay assets.extra/tf_serving_warmup_requests as TF Serving does at load."""
        path = self.path / "assets.extra" / WARMUP_FILE
        if not path.exists():
            return 0
        from serve_bench.codec import from_tensor_proto
        from serve_bench.export._warmup import read_warmup_records

        count = 0
        for record in read_warmup_records(path):
            request = record.predict_log.request
            signature = self.signature(request.model_spec.signature_name)
            inputs = {alias: from_tensor_proto(t) for alias, t in request.inputs.items()}
            signature.validate(inputs)
            self.run(signature, inputs)
            count += 1
        self.warmup_replayed = count
        return count


def _spec(alias: str, info: Any) -> TensorSpec:
    if info.tensor_shape.unknown_rank:
        return TensorSpec(alias, info.dtype, None)
    return TensorSpec(alias, info.dtype, tuple(int(d.size) for d in info.tensor_shape.dim))


def _read_signature_defs(path: Path) -> dict[str, Any]:
    saved_model = _protos.message("tensorflow.SavedModel").FromString((path / "saved_model.pb").read_bytes())
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return {k: v for k, v in meta_graph.signature_def.items() if not k.startswith("__")}
    raise ServingError("NOT_FOUND", f"{path} has no MetaGraph tagged 'serve'")


class Model:
    """A model name with its loaded versions (TF Serving's latest-version policy: the highest)."""

    def __init__(self, entry: ModelEntry, tf: Any) -> None:
        self.name = entry.name
        self.entry = entry
        versions = list_versions(entry.base_path)
        if not versions:
            raise ServingError("NOT_FOUND", f"model {entry.name!r}: no version directories under {entry.base_path}")
        latest = versions[-1]
        started = time.perf_counter()
        self.servables = {latest: Servable(entry.name, latest, entry.base_path / str(latest), tf)}
        log.info("loaded %s version %d in %.1fs", entry.name, latest, time.perf_counter() - started)

    def get(self, version: int | None = None, label: str | None = None) -> Servable:
        if label:
            if label not in self.entry.version_labels:
                raise not_found(f"Unrecognized servable version label: {label}")
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
        try:
            model = self.models[name]
        except KeyError:
            what = f"Specific({name}, {version})" if version is not None else f"Latest({name})"
            raise not_found(f"Servable not found for request: {what}") from None
        return model.get(version, label)
