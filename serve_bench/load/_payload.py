"""Request payloads: float32 pixel batches or JPEG bytes, sized from the model's signature."""

from __future__ import annotations

import io

import numpy as np

from serve_bench.client import SignatureInfo
from serve_bench.stats import PAYLOAD_KINDS

__all__ = ["PAYLOADS", "PROTOBUF_LIMIT", "image_size_of", "largest_batch", "make_inputs", "signature_for_payload"]

PAYLOADS = PAYLOAD_KINDS  # the payload kinds a point may hold (the schema declares them, in stats)

# Protobuf serializes no message past INT_MAX bytes, and a gRPC request is one message: one batch.
PROTOBUF_LIMIT = 2**31 - 1
# What a message's length prefixes may grow by between a one-item request and one near the limit
# (a varint grows by a byte per 7 bits; a tensor's bytes sit inside two or three nested messages).
_PREFIX_GROWTH = 16


def largest_batch(one_item_bytes: int, two_items_bytes: int, limit: int = PROTOBUF_LIMIT) -> int:
    """The most items one request can hold within ``limit`` bytes, from the encoded sizes of a
    request of one item and of two (what the second adds is what each item adds)."""
    per_item = max(1, two_items_bytes - one_item_bytes)
    fixed = one_item_bytes - per_item + _PREFIX_GROWTH
    return max(0, (limit - fixed) // per_item)


def signature_for_payload(payload: str, signature: str | None) -> str:
    if signature:
        return signature
    return "serving_bytes" if payload == "jpeg" else "serving_default"


def image_size_of(info: SignatureInfo | None, fallback: tuple[int, int] = (299, 299)) -> tuple[int, int]:
    """(H, W) of the first [-1, H, W, C] input of a signature, else ``fallback``."""
    if info is not None:
        for spec in info.inputs.values():
            if spec.shape is not None and len(spec.shape) == 4 and spec.shape[1] > 0 and spec.shape[2] > 0:
                return spec.shape[1], spec.shape[2]
    return fallback


def make_inputs(
    payload: str,
    batch_size: int,
    info: SignatureInfo | None,
    *,
    seed: int = 0,
    image_size: tuple[int, int] = (299, 299),
) -> dict[str, np.ndarray]:
    """A batch of synthetic images; natural-looking (smooth + noise) so JPEG sizes are realistic."""
    if payload not in PAYLOADS:
        raise ValueError(f"unknown payload {payload!r}; use one of {PAYLOADS}")
    rng = np.random.default_rng(seed)
    name = next(iter(info.inputs)) if info is not None and len(info.inputs) == 1 else None
    if payload == "float":
        spec = next(iter(info.inputs.values())) if info is not None and len(info.inputs) == 1 else None
        if spec is not None and spec.shape is not None and len(spec.shape) >= 1 and all(d > 0 for d in spec.shape[1:]):
            shape = (batch_size, *spec.shape[1:])
        else:
            height, width = image_size_of(info, image_size)
            shape = (batch_size, height, width, 3)
        # pixel values 0..255, as the serving_default contract expects
        return {name or "images": rng.integers(0, 256, size=shape).astype(np.float32)}
    from PIL import Image

    height, width = image_size
    y, x = np.mgrid[0:height, 0:width]
    encoded = []
    for i in range(batch_size):
        base = np.stack([x * 255 / width, y * 255 / height, np.full_like(x, (i * 37) % 256)], axis=-1)
        noisy = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(noisy).save(buffer, format="JPEG", quality=90)
        encoded.append(buffer.getvalue())
    array = np.empty(batch_size, dtype=object)
    array[:] = encoded
    return {name or "image_bytes": array}
