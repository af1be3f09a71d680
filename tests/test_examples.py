"""Every example runs, against a real local server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests._servers import local_server

ROOT = Path(__file__).parent.parent


def _write_video(path: Path, frames: int = 20, size: tuple[int, int] = (96, 80)) -> None:
    import av

    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for i in range(frames):
            image = np.zeros((size[1], size[0], 3), np.uint8)
            image[:, :, 0] = (i * 12) % 256
            image[: size[1] // 2, :, 1] = 200
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_video_features_example(models_dir, tmp_path, transport):
    video = tmp_path / "clip.mp4"
    _write_video(video)
    out = tmp_path / "features.npy"
    with local_server(models_dir) as running:
        url = running.grpc_url if transport == "grpc" else running.rest_url
        result = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "video_features.py"), str(video), "--target", url,
             "--model", "tiny", "--batch-size", "6", "--out", str(out)],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )
    assert result.returncode == 0, result.stderr
    features = np.load(out)
    assert features.shape == (20, 32) and features.dtype == np.float32
    assert "frames/s" in result.stdout and "per-batch latency" in result.stdout
    # frames differ, so their features do too, and stay in order (frame 0 != frame 10)
    assert not np.allclose(features[0], features[10])


def test_video_features_example_missing_file(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "video_features.py"), str(tmp_path / "nope.mp4")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "no such video" in result.stderr
