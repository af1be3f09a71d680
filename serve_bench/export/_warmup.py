"""Warm-up records: what TF Serving replays at load so the first real request is not slow."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench import _protos
from serve_bench.catalogue import ModelSpec

__all__ = ["read_warmup_records", "warmup_requests", "write_warmup_records"]

DT_FLOAT = 1


def _images(batch_size: int, spec: ModelSpec) -> np.ndarray:
    # A deterministic gradient, not zeros: some kernels take fast paths on zeros. 0..255 repeated, drawn once at
    # its float32 size (an arange of uint32, its remainder and the float32 copy held three times it at once).
    shape = (batch_size, spec.height, spec.width, 3)
    return np.resize(np.arange(256, dtype=np.float32), shape)


def warmup_requests(spec: ModelSpec, batch_sizes: Iterable[int]) -> Iterator[Any]:
    """One PredictionLog (a PredictLog holding a PredictRequest) per batch size."""
    prediction_log = _protos.message("tensorflow.serving.PredictionLog")
    for size in batch_sizes:
        log = prediction_log()
        request = log.predict_log.request
        request.model_spec.name = spec.name
        request.model_spec.signature_name = "serving_default"
        tensor = request.inputs["images"]
        tensor.dtype = DT_FLOAT
        for dim in (size, spec.height, spec.width, 3):
            tensor.tensor_shape.dim.add(size=dim)
        tensor.tensor_content = _images(size, spec).tobytes()
        yield log


def write_warmup_records(path: Path, spec: ModelSpec, batch_sizes: Iterable[int]) -> None:
    from serve_bench._tf import import_tensorflow

    tf = import_tensorflow()
    with tf.io.TFRecordWriter(str(path)) as writer:
        for log in warmup_requests(spec, batch_sizes):
            writer.write(log.SerializeToString())


def read_warmup_records(path: Path) -> list[Any]:
    """Parse a warm-up file as PredictionLog messages (TFRecord framing, CRCs not checked)."""
    prediction_log = _protos.message("tensorflow.serving.PredictionLog")
    records = []
    with open(path, "rb") as f:
        while True:
            header = f.read(12)  # uint64 length + uint32 masked crc
            if not header:
                break
            if len(header) < 12:
                raise ValueError(f"{path}: truncated TFRecord header")
            length = int.from_bytes(header[:8], "little")
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                raise ValueError(f"{path}: truncated TFRecord")
            records.append(prediction_log.FromString(data))
    if len(records) > 1000:
        raise ValueError(f"{path}: {len(records)} warm-up records; TF Serving replays at most 1000")
    return records
