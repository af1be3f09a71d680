"""Video frames and image files as model inputs: probing, decoding, reading, JPEG encoding.

A leaf module (numpy, PyAV, Pillow; imported lazily) shared by ``serve_bench.pipeline``
(the video benchmark) and ``serve_bench.load`` (``--input-data``), which must not import
each other. Resizing and colour conversion of video frames are done by FFmpeg's scaler
(``VideoFrame.reformat``), never in Python.

Bad input raises ``MediaError`` (a ``UserError``: one line naming the file and the problem).
Damaged frames or files that are not images are skipped and counted, not fatal.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench.errors import UserError

__all__ = [
    "IMAGE_SUFFIXES",
    "DecodeCounters",
    "ImageFile",
    "MediaError",
    "VideoInfo",
    "decode_video",
    "encode_jpeg",
    "image_files",
    "probe_video",
    "read_image",
]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
_KEEP_ERRORS = 5  # first few decode errors are kept verbatim for the report


class MediaError(UserError):
    """A video or image input that cannot be used; the message names the file."""


def _av() -> Any:
    try:
        import av
    except ImportError:  # pragma: no cover - PyAV is a core dependency
        raise MediaError("PyAV is needed to read videos: pip install 'av'") from None
    return av


@dataclass(frozen=True)
class VideoInfo:
    path: str
    codec: str  # FFmpeg decoder name: h264, mjpeg, mpeg4, ...
    width: int
    height: int
    frames: int  # as the container declares it; 0 when it does not say
    average_fps: float | None
    duration_s: float | None


@dataclass
class DecodeCounters:
    """Filled while decoding: frames given out and damaged packets skipped."""

    decoded: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)

    def skip(self, why: str) -> None:
        self.skipped += 1
        if len(self.errors) < _KEEP_ERRORS:
            self.errors.append(why)


def _check_readable(path: Path, what: str) -> None:
    try:
        path.stat()
    except FileNotFoundError:
        raise MediaError(f"no such {what}: {path}") from None
    except PermissionError:
        raise MediaError(f"cannot read {path} (permission denied on a directory above it)") from None
    if path.is_dir():
        raise MediaError(f"{path} is a directory, not a {what} file")
    if not os.access(path, os.R_OK):
        raise MediaError(f"cannot read {path} (permission denied)")


def probe_video(path: str | os.PathLike[str]) -> VideoInfo:
    """Codec, size and declared frame count of the first video stream; MediaError if there is none."""
    av = _av()
    source = Path(path)
    _check_readable(source, "video")
    try:
        with av.open(str(source)) as container:
            if not container.streams.video:
                raise MediaError(f"{source} holds no video stream (is it an audio file?)")
            stream = container.streams.video[0]
            context = stream.codec_context
            rate = stream.average_rate
            duration = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else None
            return VideoInfo(
                str(source),
                context.name,
                int(context.width),
                int(context.height),
                int(stream.frames or 0),
                float(rate) if rate else None,
                duration,
            )
    except av.error.FFmpegError as exc:
        raise MediaError(f"{source} is not a video FFmpeg can read ({exc.strerror or exc})") from None


def decode_video(
    path: str | os.PathLike[str],
    width: int,
    height: int,
    *,
    counters: DecodeCounters | None = None,
    max_frames: int | None = None,
) -> Iterator[np.ndarray]:
    """RGB uint8 frames [height, width, 3], in presentation order, scaled by FFmpeg.

    Decoding is threaded (frame and slice threads). A packet the decoder rejects is
    skipped and counted in ``counters``; the rest of the file is still decoded.
    """
    av = _av()
    counters = counters if counters is not None else DecodeCounters()
    source = Path(path)
    _check_readable(source, "video")
    try:
        container = av.open(str(source))
    except av.error.FFmpegError as exc:
        raise MediaError(f"{source} is not a video FFmpeg can read ({exc.strerror or exc})") from None
    with container:
        if not container.streams.video:
            raise MediaError(f"{source} holds no video stream (is it an audio file?)")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        packets = container.demux(stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                return
            except av.error.FFmpegError as exc:  # a damaged container: keep what was read
                counters.skip(f"demux: {exc.strerror or exc}")
                return
            try:
                frames = stream.decode(packet)
            except av.error.FFmpegError as exc:
                counters.skip(f"packet at pts {packet.pts}: {exc.strerror or exc}")
                continue
            for frame in frames:
                image = frame.reformat(width=width, height=height, format="rgb24").to_ndarray()
                counters.decoded += 1
                yield image
                if max_frames is not None and counters.decoded >= max_frames:
                    return


@dataclass(frozen=True)
class ImageFile:
    path: Path
    data: bytes  # the file's bytes as read
    width: int
    height: int
    format: str  # JPEG | PNG


def image_files(directory: str | os.PathLike[str]) -> tuple[list[ImageFile], list[str]]:
    """The JPEG/PNG images of a directory in name order, and the names skipped (with why).

    Files that are not images, or are images Pillow cannot open, are skipped, not fatal.
    """
    from PIL import Image, UnidentifiedImageError

    folder = Path(directory)
    if not folder.exists():
        raise MediaError(f"no such directory: {folder}")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise MediaError(f"cannot read directory {folder} (permission denied)")
    images: list[ImageFile] = []
    skipped: list[str] = []
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            skipped.append(f"{path.name}: not a .jpg/.jpeg/.png file")
            continue
        try:
            data = path.read_bytes()
            with Image.open(io.BytesIO(data)) as image:
                image.verify()  # reads the whole structure; a truncated file fails here
            with Image.open(io.BytesIO(data)) as image:
                images.append(ImageFile(path, data, image.width, image.height, str(image.format)))
        except UnidentifiedImageError:  # its message names the in-memory buffer, not the file
            skipped.append(f"{path.name}: not a readable image (not a JPEG or PNG Pillow recognises)")
        except (OSError, SyntaxError, ValueError) as exc:
            skipped.append(f"{path.name}: not a readable image ({exc})")
    return images, skipped


def read_image(data: bytes, width: int, height: int) -> np.ndarray:
    """Decode image bytes to RGB uint8 [height, width, 3] (bilinear resize when the size differs)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        rgb = image.convert("RGB")
        if rgb.size != (width, height):
            rgb = rgb.resize((width, height), Image.Resampling.BILINEAR)
        return np.asarray(rgb, dtype=np.uint8)


def encode_jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    """RGB uint8 [H, W, 3] -> JPEG bytes (Pillow, libjpeg-turbo)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()
