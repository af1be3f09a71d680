"""--input-data: a directory of images or a video as request payloads (serve_bench.load.load_input_data)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from serve_bench.load import InputSet, load_input_data
from serve_bench.media import MediaError
from tests._clips import corrupt_mjpeg_frame, frame_image, write_clip, write_image, write_zero_frame_clip
from tests._servers import local_server


def _photo(seed: int, width: int, height: int) -> np.ndarray:
    """Smooth gradients plus noise: compresses like a photograph, not like a flat test card."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, np.full_like(x, (seed * 53) % 256)], axis=-1)
    return np.clip(base + rng.normal(0, 10, base.shape), 0, 255).astype(np.uint8)


@pytest.fixture
def photos(tmp_path):
    """Mixed sizes and formats, plus files that are not images."""
    folder = tmp_path / "photos"
    folder.mkdir()
    write_image(folder / "a.jpg", _photo(1, 64, 64))
    write_image(folder / "b.png", _photo(2, 64, 64))
    write_image(folder / "c.jpeg", _photo(3, 120, 80))
    (folder / "readme.txt").write_text("not an image")
    (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    (folder / "subdir").mkdir()
    return folder


def test_images_as_float_are_decoded_and_resized_before_the_timed_region(photos):
    inputs = load_input_data(photos, "float", (64, 64))
    assert inputs.count == 3 and inputs.source.kind == "images"
    assert inputs.source.skipped == 2  # readme.txt and broken.jpg; the subdirectory is not a file
    assert inputs.source.width == 0  # mixed sizes
    assert inputs.source.codec == "JPEG+PNG"
    assert any("different sizes" in n for n in inputs.source.notes)
    assert any("resized to 64x64" in n for n in inputs.source.notes)
    batch = inputs.batch(0, 3)
    assert batch.shape == (3, 64, 64, 3) and batch.dtype == np.float32
    # b.png is lossless and already 64x64: its pixels arrive exactly
    assert np.array_equal(batch[1], _photo(2, 64, 64).astype(np.float32))
    assert inputs.mean_bytes == 64 * 64 * 3 * 4


def test_images_as_jpeg_are_the_files_own_bytes(photos):
    inputs = load_input_data(photos, "jpeg", (64, 64))
    batch = inputs.batch(0, 3)
    assert batch.dtype == object
    assert [bytes(b) for b in batch] == [(photos / n).read_bytes() for n in ("a.jpg", "b.png", "c.jpeg")]
    assert inputs.mean_bytes == pytest.approx(np.mean([len(b) for b in batch]))
    assert any("own bytes" in n for n in inputs.source.notes)


def test_images_are_re_encoded_only_when_the_model_cannot_resize_and_then_it_says_so(photos):
    inputs = load_input_data(photos, "jpeg", (64, 64), fixed_size=True)
    import io

    from PIL import Image

    sizes = {Image.open(io.BytesIO(bytes(b))).size for b in inputs.batch(0, 3)}
    assert sizes == {(64, 64)}
    assert any("re-encoded as JPEG" in n and "120x80" in n for n in inputs.source.notes)


def test_batches_cycle_through_the_inputs_in_order(photos):
    inputs = load_input_data(photos, "float", (64, 64))
    batch = inputs.batch(2, 5)  # c, a, b, c, a
    singles = [inputs.batch(i, 1)[0] for i in range(3)]
    for got, index in zip(batch, [2, 0, 1, 2, 0]):
        assert np.array_equal(got, singles[index])


def test_max_items_bounds_memory(photos):
    inputs = load_input_data(photos, "float", (32, 32), max_items=2)
    assert inputs.count == 2 and any("first 2 of 3" in n for n in inputs.source.notes)


def test_empty_directory(tmp_path):
    with pytest.raises(MediaError, match=r"no JPEG or PNG images in .* \(it is empty\)"):
        load_input_data(tmp_path, "float", (64, 64))


def test_directory_without_images_names_what_it_skipped(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "b.gif").write_bytes(b"GIF89a")
    with pytest.raises(MediaError, match=r"no JPEG or PNG images .*2 other files skipped"):
        load_input_data(tmp_path, "jpeg", (64, 64))


def test_missing_path(tmp_path):
    with pytest.raises(MediaError, match="no such file or directory"):
        load_input_data(tmp_path / "nothing", "float", (64, 64))


def test_video_frames_as_payloads(tmp_path):
    clip = write_clip(tmp_path / "clip.avi", codec="mjpeg", frames=10, size=(65, 47))
    corrupt_mjpeg_frame(clip, 4)
    floats = load_input_data(clip, "float", (64, 64))
    assert floats.count == 9 and floats.source.skipped == 1
    assert (floats.source.kind, floats.source.codec, floats.source.width, floats.source.height) == (
        "video",
        "mjpeg",
        65,
        47,
    )
    reds = [float(f[..., 0].mean()) for f in floats.batch(0, 9)]
    assert np.allclose(reds, [8 * i for i in range(10) if i != 4], atol=4)
    jpegs = load_input_data(clip, "jpeg", (64, 64))
    assert jpegs.count == 9 and 0 < jpegs.mean_bytes < 64 * 64 * 3
    assert any("encoded once as JPEG" in n for n in jpegs.source.notes)


def test_video_without_frames(tmp_path):
    with pytest.raises(MediaError, match="no decodable video frames"):
        load_input_data(write_zero_frame_clip(tmp_path / "empty.avi"), "float", (64, 64))


def test_payloads_reach_the_model_intact(models_dir, reference, tmp_path):
    """The same lossless images sent as float pixels and as PNG bytes give the features in-process
    TensorFlow gives for those pixels."""
    from serve_bench.client import connect

    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(4):
        write_image(folder / f"{i}.png", frame_image(i, 64, 64))
    floats = load_input_data(folder, "float", (64, 64))
    pngs = load_input_data(folder, "jpeg", (64, 64))
    expected = reference(floats.batch(0, 4))

    async def ask(inputs: InputSet, signature: str, name: str) -> np.ndarray:
        async with connect(running.grpc_url, "tiny", signature) as client:
            return (await client.predict({name: inputs.batch(0, 4)}))["features"]

    with local_server(models_dir) as running:
        served_float = asyncio.run(ask(floats, "serving_default", "images"))
        served_png = asyncio.run(ask(pngs, "serving_bytes", "image_bytes"))
    assert np.allclose(served_float, expected, atol=1e-5)
    assert np.allclose(served_png, expected, atol=1e-4)


def test_synthetic_jpeg_sizes_are_like_a_real_photograph(tmp_path):
    """The synthetic JPEG payload (smooth gradients + noise) should cost about what a photograph costs on
    the wire. The real photograph is matplotlib's bundled sample (grace_hopper.jpg, 512x600), read
    through --input-data and re-encoded at the model's size with the same quality.

    Measured: synthetic / real = 1.25 at 299x299 and 1.17 at 224x224. Photographs of different scenes
    vary about 2x in JPEG size at one quality, hence the [0.5, 2] band."""
    matplotlib = pytest.importorskip("matplotlib")
    import os
    import shutil

    from serve_bench.load import make_inputs

    folder = tmp_path / "photo"
    folder.mkdir()
    shutil.copy(os.path.join(matplotlib.get_data_path(), "sample_data", "grace_hopper.jpg"), folder)
    for size in (299, 224):
        real = load_input_data(folder, "jpeg", (size, size), fixed_size=True)  # re-encoded at q90, this size
        synthetic = next(iter(make_inputs("jpeg", 8, None, image_size=(size, size)).values()))
        ratio = float(np.mean([len(b) for b in synthetic])) / real.mean_bytes
        assert 0.5 <= ratio <= 2.0, (size, ratio)
