"""The models serve-bench knows how to export, and how each preprocesses its input.

Each model is built by Keras 3 (``build(keras, weights)``) and preprocessed with plain arithmetic
and numpy constants, so the same definitions run under TensorFlow (``tf.keras``, in the exported
SavedModel's graph) and under Keras on JAX (the ``jax`` runtime): one catalogue, two backends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CATALOGUE", "ModelSpec", "get_spec"]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    height: int
    width: int
    feature_size: int
    description: str
    # Builds the Keras model from the ``keras`` module given (tf.keras, or Keras on JAX); weights is
    # "imagenet" or None (random).
    build: Callable[[Any, str | None], Any]
    # Maps float32 pixels 0..255 (RGB) to the model's expected input: a TensorFlow tensor in the
    # exported graph, a JAX array in the jax runtime (only arithmetic both take).
    preprocess: Callable[[Any], Any]
    has_imagenet_weights: bool = True

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.height, self.width, 3)


_CAFFE_MEANS = np.array([103.939, 116.779, 123.68], dtype=np.float32)


def _scale_minus_one_to_one(images: Any) -> Any:
    return images / 127.5 - 1.0


def _caffe(images: Any) -> Any:
    # keras.applications.resnet50.preprocess_input: RGB->BGR, ImageNet means subtracted.
    bgr = images[..., ::-1]
    return bgr - _CAFFE_MEANS


def _unit(images: Any) -> Any:
    return images / 255.0


def _inception_v3(keras: Any, weights: str | None) -> Any:
    return keras.applications.InceptionV3(include_top=False, weights=weights, pooling="avg", input_shape=(299, 299, 3))


def _resnet50(keras: Any, weights: str | None) -> Any:
    return keras.applications.ResNet50(include_top=False, weights=weights, pooling="avg", input_shape=(224, 224, 3))


def _mobilenet_v2(keras: Any, weights: str | None) -> Any:
    return keras.applications.MobileNetV2(include_top=False, weights=weights, pooling="avg", input_shape=(224, 224, 3))


def _tiny(keras: Any, weights: str | None) -> Any:
    # A few thousand parameters: exports, loads and serves in seconds, for tests.
    keras.utils.set_random_seed(1234)
    inputs = keras.Input((64, 64, 3))
    x = keras.layers.Conv2D(8, 3, strides=2, activation="relu")(inputs)
    x = keras.layers.Conv2D(16, 3, strides=2, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(32)(x)
    return keras.Model(inputs, outputs, name="tiny")


CATALOGUE: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "inception_v3",
            299,
            299,
            2048,
            "InceptionV3 feature extractor (no top, average pooling)",
            _inception_v3,
            _scale_minus_one_to_one,
        ),
        ModelSpec(
            "resnet50", 224, 224, 2048, "ResNet50 feature extractor (no top, average pooling)", _resnet50, _caffe
        ),
        ModelSpec(
            "mobilenet_v2",
            224,
            224,
            1280,
            "MobileNetV2 feature extractor (no top, average pooling)",
            _mobilenet_v2,
            _scale_minus_one_to_one,
        ),
        ModelSpec(
            "tiny", 64, 64, 32, "small CNN for tests (random weights only)", _tiny, _unit, has_imagenet_weights=False
        ),
    )
}


def get_spec(name: str) -> ModelSpec:
    from serve_bench.errors import UserError

    try:
        return CATALOGUE[name]
    except KeyError:
        raise UserError(f"unknown model {name!r}; choose one of: {', '.join(CATALOGUE)}") from None
