"""What a point was fed with, and what a video-pipeline point measured beyond a load point."""

from __future__ import annotations

from dataclasses import dataclass

from serve_bench.stats._figures import Percentiles

__all__ = ["InputSource", "StreamFigures"]


@dataclass(frozen=True)
class InputSource:
    """The request payloads of a point: synthetic images, a directory of images, or a video."""

    kind: str  # synthetic | images | video
    path: str = ""
    count: int = 0  # images (or decoded frames) used
    mean_bytes: float = 0.0  # mean bytes per image as sent (float32 pixels or the JPEG/PNG bytes)
    codec: str = ""  # video codec (h264, mjpeg, ...) or image formats ("JPEG", "JPEG+PNG")
    width: int = 0  # source size; 0 when the images have mixed sizes
    height: int = 0
    frames: int = 0  # video: frames the container declares (0: it does not say)
    skipped: int = 0  # damaged frames or non-image files left out
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind == "synthetic":
            return "synthetic images"
        size = f"{self.width}x{self.height}" if self.width else "mixed sizes"
        what = (
            f"{self.count} frames of {self.codec} {size} video"
            if self.kind == "video"
            else f"{self.count} {self.codec} images ({size})"
        )
        extra = f", {self.skipped} skipped" if self.skipped else ""
        return f"{what} from {self.path}, {self.mean_bytes / 1024:.1f} KiB per image sent{extra}"


SYNTHETIC = InputSource("synthetic")


@dataclass(frozen=True)
class StreamFigures:
    """A video-pipeline point: frames streamed through predict_stream, measured end to end.

    All times are seconds over the whole stream (decoder start to last features).
    """

    frames: int  # frames whose features came back
    failed_frames: int  # frames in batches that failed
    frames_per_s: float
    max_in_flight: int
    frame_latency: Percentiles  # µs from a frame's decode to its features reaching the caller
    decoder_held_s: float  # the decoder waited for room (back-pressure from the server side)
    server_idle_s: float  # no request in flight: the server waited for frames
    request_bytes: int  # on the wire, client -> server
    response_bytes: int
    encode_s: float  # encoding requests (inside the stream: the pipeline pays it)
    decoder_alone_fps: float | None  # the same frames decoded with nothing else running
    inprocess_fps: float | None  # in process on the served runtime, same frames, same batch size
    limit: str  # decoder | server | network | server or network
    limit_why: str = ""
    payload: str = "float"  # float (pixels to serving_default) | jpeg (bytes to serving_bytes)
    duration_s: float = 0.0  # decoder start to the last features

    @property
    def held_share(self) -> float:
        return self.decoder_held_s / self.duration_s if self.duration_s else 0.0

    @property
    def idle_share(self) -> float:
        return self.server_idle_s / self.duration_s if self.duration_s else 0.0
