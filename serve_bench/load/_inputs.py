"""`--input-data`: real images or video frames as request payloads, instead of synthetic ones.

    inputs = load_input_data("photos/", "jpeg", (299, 299))
    prepared = client.prepare({"image_bytes": inputs.batch(0, 8)})

Everything is read, decoded and (for float payloads) resized here, before any timed
region. Float payloads are pixels scaled to the model's size; JPEG payloads are the
files' own bytes, re-encoded only when the model's bytes signature cannot resize
(``fixed_size=True``), and then a note says so. Video frames are scaled by FFmpeg
and, for JPEG payloads, encoded once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from serve_bench.media import (
    DecodeCounters,
    MediaError,
    decode_video,
    encode_jpeg,
    image_files,
    probe_video,
    read_image,
)
from serve_bench.stats import InputSource

__all__ = ["DEFAULT_MAX_ITEMS", "InputSet", "load_input_data"]

DEFAULT_MAX_ITEMS = 256  # float frames at 299x299 are 1 MiB each: keep memory bounded
JPEG_QUALITY = 90


@dataclass(frozen=True)
class InputSet:
    """Loaded payloads, cycled in order by ``batch``; ``source`` goes into the point."""

    payload: str  # float | jpeg
    pixels: np.ndarray | None  # float: float32 [count, H, W, 3], pixel values 0-255
    encoded: tuple[bytes, ...]  # jpeg: the bytes sent per image
    source: InputSource

    @property
    def count(self) -> int:
        return len(self.encoded) if self.payload == "jpeg" else len(self.pixels) if self.pixels is not None else 0

    @property
    def mean_bytes(self) -> float:
        """Mean bytes per image as sent (the tensor's float32 pixels, or the JPEG/PNG bytes)."""
        return self.source.mean_bytes

    def batch(self, start: int, size: int) -> np.ndarray:
        """``size`` items from ``start`` on, wrapping around: float32 [size, H, W, 3] or object [size] of bytes."""
        if size < 1:
            raise ValueError("batch size must be >= 1")
        index = (start + np.arange(size)) % self.count
        if self.payload == "float":
            assert self.pixels is not None
            return self.pixels[index]
        array = np.empty(size, dtype=object)
        array[:] = [self.encoded[i] for i in index]
        return array


def load_input_data(
    path: str | os.PathLike[str],
    payload: str,
    image_size: tuple[int, int],
    *,
    max_items: int = DEFAULT_MAX_ITEMS,
    fixed_size: bool = False,
) -> InputSet:
    """Load a directory of JPEG/PNG images or a video file as payloads for ``payload`` (float | jpeg).

    ``image_size`` is the model's (H, W). Non-image files in a directory and damaged video
    frames are skipped and counted in ``source.skipped``. MediaError (a UserError) when the
    path is missing or unreadable, a directory holds no image, or a video has no decodable frame.
    """
    if payload not in ("float", "jpeg"):
        raise ValueError(f"unknown payload {payload!r}; use float or jpeg")
    if max_items < 1:
        raise ValueError("max_items must be >= 1")
    source = Path(path)
    if not source.exists():
        raise MediaError(f"no such file or directory: {source}")
    if source.is_dir():
        return _from_directory(source, payload, image_size, max_items, fixed_size)
    return _from_video(source, payload, image_size, max_items)


def _from_directory(folder: Path, payload: str, size: tuple[int, int], max_items: int, fixed_size: bool) -> InputSet:
    height, width = size
    images, skipped = image_files(folder)
    if not images:
        why = f" ({len(skipped)} other files skipped, e.g. {skipped[0]})" if skipped else " (it is empty)"
        raise MediaError(f"no JPEG or PNG images in {folder}{why}")
    notes: list[str] = []
    if len(images) > max_items:
        notes.append(f"first {max_items} of {len(images)} images used")
        images = images[:max_items]
    if skipped:
        notes.append(f"{len(skipped)} files skipped (first: {skipped[0]})")
    sizes = {(i.width, i.height) for i in images}
    formats = "+".join(sorted({i.format for i in images}))
    source_w, source_h = next(iter(sizes)) if len(sizes) == 1 else (0, 0)
    if len(sizes) > 1:
        notes.append(f"images have {len(sizes)} different sizes")
    pixels: np.ndarray | None = None
    encoded: tuple[bytes, ...] = ()
    if payload == "float":
        pixels = np.stack([read_image(i.data, width, height) for i in images]).astype(np.float32)
        if sizes != {(width, height)}:
            notes.append(f"decoded and resized to {width}x{height} client-side, before the timed region")
        mean_bytes = float(pixels[0].nbytes)
    else:
        resize = fixed_size and sizes != {(width, height)}
        if resize:
            encoded = tuple(encode_jpeg(read_image(i.data, width, height), JPEG_QUALITY) for i in images)
            notes.append(
                f"re-encoded as JPEG (quality {JPEG_QUALITY}) at {width}x{height}: the model's bytes "
                f"signature does not resize, and the files are {_sizes_text(sizes)}"
            )
        else:
            encoded = tuple(i.data for i in images)
            notes.append("the files' own bytes are sent (the model decodes and resizes them)")
        mean_bytes = float(np.mean([len(e) for e in encoded]))
    info = InputSource(
        "images", str(folder), len(images), mean_bytes, formats, source_w, source_h, 0, len(skipped), tuple(notes)
    )
    return InputSet(payload, pixels, encoded, info)


def _sizes_text(sizes: set[tuple[int, int]]) -> str:
    listed = sorted(sizes)[:3]
    return ", ".join(f"{w}x{h}" for w, h in listed) + (" ..." if len(sizes) > 3 else "")


def _from_video(path: Path, payload: str, size: tuple[int, int], max_items: int) -> InputSet:
    height, width = size
    info = probe_video(path)
    counters = DecodeCounters()
    frames = list(decode_video(path, width, height, counters=counters, max_frames=max_items))
    if not frames:
        why = f" ({counters.skipped} damaged packets skipped: {counters.errors[0]})" if counters.skipped else ""
        raise MediaError(f"{path}: no decodable video frames{why}")
    notes = [f"frames scaled to {width}x{height} by FFmpeg, before the timed region"]
    if counters.skipped:
        notes.append(f"{counters.skipped} damaged packets skipped (first: {counters.errors[0]})")
    if len(frames) == max_items and (info.frames == 0 or info.frames > max_items):
        notes.append(f"first {max_items} frames used")
    pixels: np.ndarray | None = None
    encoded: tuple[bytes, ...] = ()
    if payload == "float":
        pixels = np.stack(frames).astype(np.float32)
        mean_bytes = float(pixels[0].nbytes)
    else:
        encoded = tuple(encode_jpeg(f, JPEG_QUALITY) for f in frames)
        notes.append(f"frames encoded once as JPEG (quality {JPEG_QUALITY})")
        mean_bytes = float(np.mean([len(e) for e in encoded]))
    source = InputSource(
        "video",
        str(path),
        len(frames),
        mean_bytes,
        info.codec,
        info.width,
        info.height,
        info.frames,
        counters.skipped,
        tuple(notes),
    )
    return InputSet(payload, pixels, encoded, source)
