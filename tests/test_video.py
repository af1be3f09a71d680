"""serve_bench.media: probing and decoding generated clips (H.264, MJPEG, odd sizes, variable frame rate)
and every kind of bad video input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from serve_bench import media
from serve_bench.media import DecodeCounters, MediaError, decode_video, probe_video
from tests._clips import corrupt_mjpeg_frame, frame_image, write_clip, write_zero_frame_clip

ROOT = Path(__file__).parent.parent


def _reds(frames: list[np.ndarray]) -> list[int]:
    return [round(float(f[..., 0].mean())) for f in frames]


@pytest.mark.parametrize("codec,size", [("libx264", (97, 61)), ("mjpeg", (65, 47)), ("mpeg4", (96, 80))])
def test_decodes_every_frame_in_order_scaled_by_ffmpeg(tmp_path, codec, size):
    clip = write_clip(tmp_path / f"clip.{'avi' if codec == 'mjpeg' else 'mp4'}", codec=codec, frames=12, size=size)
    info = probe_video(clip)
    assert (info.codec, info.width, info.height) == ({"libx264": "h264"}.get(codec, codec), *size)
    assert info.frames == 12
    counters = DecodeCounters()
    frames = list(decode_video(clip, 64, 32, counters=counters))
    assert counters.decoded == 12 and counters.skipped == 0
    assert all(f.shape == (32, 64, 3) and f.dtype == np.uint8 for f in frames)
    # the red channel says the frame's index: all there, in order (lossy codecs: within a few levels)
    assert np.allclose(_reds(frames), [8 * i for i in range(12)], atol=4)


def test_scaling_keeps_the_picture(tmp_path):
    """At the source size the decoded frame is the frame written (lossy: within a few levels)."""
    clip = write_clip(tmp_path / "clip.mp4", codec="libx264", frames=3, size=(96, 64))
    frames = list(decode_video(clip, 96, 64))
    error = np.abs(frames[2].astype(int) - frame_image(2, 96, 64).astype(int))
    assert float(error.mean()) < 3


def test_variable_frame_rate_is_decoded_in_presentation_order(tmp_path):
    pts = [0, 40, 50, 200, 210, 600, 610, 615, 1000, 1400]  # ms: bursts and gaps
    clip = write_clip(tmp_path / "vfr.mkv", codec="mjpeg", frames=len(pts), size=(64, 48), pts=pts)
    frames = list(decode_video(clip, 32, 32))
    assert np.allclose(_reds(frames), [8 * i for i in range(len(pts))], atol=4)
    info = probe_video(clip)
    assert info.codec == "mjpeg" and info.width == 64


def test_max_frames_stops_early(tmp_path):
    clip = write_clip(tmp_path / "clip.mp4", frames=20, size=(64, 48))
    counters = DecodeCounters()
    assert len(list(decode_video(clip, 32, 32, counters=counters, max_frames=5))) == 5
    assert counters.decoded == 5


def test_a_corrupt_frame_mid_file_is_skipped_and_counted(tmp_path):
    clip = write_clip(tmp_path / "clip.avi", codec="mjpeg", frames=8, size=(64, 48))
    corrupt_mjpeg_frame(clip, 3)
    counters = DecodeCounters()
    frames = list(decode_video(clip, 64, 48, counters=counters))
    assert counters.skipped == 1 and counters.decoded == 7 and len(counters.errors) == 1
    assert np.allclose(_reds(frames), [8 * i for i in range(8) if i != 3], atol=4)


def test_zero_frame_file_probes_but_yields_nothing(tmp_path):
    clip = write_zero_frame_clip(tmp_path / "empty.avi")
    assert probe_video(clip).frames == 0
    counters = DecodeCounters()
    assert list(decode_video(clip, 32, 32, counters=counters)) == []
    assert counters.decoded == 0


def test_missing_file(tmp_path):
    with pytest.raises(MediaError, match=r"no such video: .*nope\.mp4"):
        probe_video(tmp_path / "nope.mp4")
    with pytest.raises(MediaError, match="no such video"):
        next(decode_video(tmp_path / "nope.mp4", 8, 8))


def test_a_directory_is_not_a_video(tmp_path):
    with pytest.raises(MediaError, match="is a directory"):
        probe_video(tmp_path)


def test_not_a_video(tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("these are not frames\n" * 50)
    with pytest.raises(MediaError, match="not a video FFmpeg can read"):
        probe_video(text)
    with pytest.raises(MediaError, match="not a video FFmpeg can read"):
        next(decode_video(text, 8, 8))


def test_audio_only_file_has_no_video_stream(tmp_path):
    import av

    path = tmp_path / "tone.wav"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        samples = (np.sin(np.arange(800) / 5) * 1000).astype(np.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    with pytest.raises(MediaError, match="no video stream"):
        probe_video(path)


def test_unreadable_file(tmp_path):
    """Permission denied is reported as such; run as an unprivileged user (root reads everything)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="serve-bench-unreadable-"))  # /tmp itself: any user may pass through
    folder.chmod(0o755)
    clip = write_clip(folder / "clip.mp4", frames=2, size=(64, 48))
    clip.chmod(0)
    code = (
        "from serve_bench.media import probe_video, MediaError\n"
        f"try:\n    probe_video({str(clip)!r})\nexcept MediaError as exc:\n    print(exc)\n"
    )
    import os

    if os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code]
    else:
        command = [sys.executable, "-c", code]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT)
    finally:
        clip.unlink()
        folder.rmdir()
    if "No module named 'serve_bench'" in result.stderr:
        # The checkout sits under a directory the unprivileged user cannot enter (a root-only CI
        # clone): check the same path in-process, with the OS answering "no read access".
        clip = write_clip(tmp_path / "clip.mp4", frames=2, size=(64, 48))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(media.os, "access", lambda path, mode: False)
            with pytest.raises(MediaError, match="permission denied"):
                media.probe_video(clip)
        return
    assert "permission denied" in result.stdout, result.stderr
