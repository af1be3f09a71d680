"""Every example runs, against a real local server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests._clips import write_clip
from tests._servers import local_server

ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_video_features_example(models_dir, reference, tmp_path, transport):
    from serve_bench.media import decode_video

    video = write_clip(tmp_path / "clip.mp4", codec="mpeg4", frames=20, size=(96, 80))
    out = tmp_path / "features.npy"
    with local_server(models_dir) as running:
        url = running.grpc_url if transport == "grpc" else running.rest_url
        result = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "video_features.py"),
                str(video),
                "--url",
                url,
                "--model",
                "tiny",
                "--batch-size",
                "6",
                "--features",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    assert result.returncode == 0, result.stderr
    features = np.load(out)
    assert features.shape == (20, 32) and features.dtype == np.float32
    assert "frames/s" in result.stdout and "per-batch latency" in result.stdout
    # every frame, in frame order, as in-process TensorFlow computes it
    frames = np.stack(list(decode_video(video, 64, 64))).astype(np.float32)
    assert np.allclose(features, reference(frames), atol=1e-5)
    assert "decoder held back" in result.stdout


def test_video_features_example_missing_file(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "video_features.py"), str(tmp_path / "nope.mp4")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "no such video" in result.stderr


def test_video_features_example_not_a_video(tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("no frames here\n" * 20)
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "video_features.py"), str(text)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "not a video" in result.stderr
