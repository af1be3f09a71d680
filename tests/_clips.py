"""Test media written on the spot (no downloads): short clips with PyAV, images with Pillow.

Every frame is different and says its own index (the red channel rises with it), so
a test can check that frames came back complete and in order.
"""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import numpy as np

# (codec, pixel format): libx264 needs 4:4:4 for odd sizes; mjpeg uses full-range "j" formats
PIX_FMT = {"libx264": "yuv444p", "mjpeg": "yuvj444p", "mpeg4": "yuv420p"}


def frame_image(index: int, width: int, height: int) -> np.ndarray:
    """Frame ``index``: red = 8 * index (mod 256), a green top half, a blue square moving right."""
    image = np.zeros((height, width, 3), np.uint8)
    image[..., 0] = (8 * index) % 256
    image[: height // 2, :, 1] = 200
    x = (index * 3) % max(width - 8, 1)
    image[height // 2 : height // 2 + 8, x : x + 8, 2] = 255
    return image


def write_clip(
    path: Path,
    *,
    codec: str = "libx264",
    frames: int = 24,
    size: tuple[int, int] = (97, 61),
    rate: int = 10,
    pts: list[int] | None = None,
) -> Path:
    """A clip of ``frames`` frames; ``pts`` (in 1/1000 s) gives a variable frame rate."""
    import av

    width, height = size
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height = width, height
        stream.pix_fmt = PIX_FMT[codec]
        stream.bit_rate = 8_000_000  # near-lossless, so a frame's colour still says its index
        if pts is not None:
            stream.time_base = Fraction(1, 1000)
            stream.codec_context.time_base = Fraction(1, 1000)
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(frame_image(index, width, height), format="rgb24")
            if pts is not None:
                frame.pts = pts[index]
                frame.time_base = Fraction(1, 1000)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def write_zero_frame_clip(path: Path) -> Path:
    """A valid container (AVI: it keeps the stream header with no packets) with a video stream and
    not one frame."""
    import av

    with av.open(str(path), mode="w", format="avi") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height = 64, 48
        stream.pix_fmt = "yuv420p"
        container.start_encoding()  # writes the header although no frame will follow
    return path


def corrupt_mjpeg_frame(path: Path, index: int) -> None:
    """Overwrite frame ``index`` of an MJPEG clip with zeros, so the decoder rejects that packet."""
    data = bytearray(path.read_bytes())
    starts = [i for i in range(len(data) - 1) if data[i] == 0xFF and data[i + 1] == 0xD8]
    begin, end = starts[index], starts[index + 1] - 8  # stop short of the next chunk's header
    data[begin:end] = bytes(end - begin)
    path.write_bytes(bytes(data))


def write_image(path: Path, image: np.ndarray, fmt: str | None = None, quality: int = 90) -> Path:
    from PIL import Image

    kwargs = {"quality": quality} if (fmt or path.suffix.lstrip(".").upper()) in ("JPG", "JPEG") else {}
    Image.fromarray(image).save(path, format=fmt, **kwargs)
    return path


def png_bytes(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return buffer.getvalue()
