"""The model the published tables measured: ResNet-50 v1.5, rebuilt here to be costed by the same walker.

NVIDIA's DeepLearningExamples ResNet-50 v1.5 differs from v1 (Keras' ResNet50) in one place:
a bottleneck block that halves the resolution does it in its 3×3 convolution, not its first 1×1
(TensorFlow/Classification/ConvNets/resnet50v1.5/README.md, "The difference between v1 and
v1.5"), which makes it ~4.1 G multiply-adds per 224×224 image rather than ~3.9. Convolutions
have no bias (batch normalisation follows each); 1000-class head, as in the published runs.
Its costs are shipped in data/resnet50v15_ops.json; ``build_cost`` makes them again.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from serve_bench.predict._graph import GraphCost, cost_graph

__all__ = ["REFERENCE_FILE", "build_cost", "reference_cost", "resnet50_v15"]

REFERENCE_FILE = "resnet50v15_ops.json"


def resnet50_v15(tf: Any) -> Any:
    """ResNet-50 v1.5 (random weights), NHWC, 224×224×3 in, 1000 logits out."""
    layers = tf.keras.layers

    def conv_bn(x: Any, filters: int, kernel: int, stride: int, relu: bool = True) -> Any:
        x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization(epsilon=1.001e-5)(x)
        return layers.ReLU()(x) if relu else x

    def block(x: Any, filters: int, stride: int, project: bool) -> Any:
        shortcut = conv_bn(x, 4 * filters, 1, stride, relu=False) if project else x
        y = conv_bn(x, filters, 1, 1)
        y = conv_bn(y, filters, 3, stride)  # v1.5: the stride is here
        y = conv_bn(y, 4 * filters, 1, 1, relu=False)
        return layers.ReLU()(layers.Add()([shortcut, y]))

    inputs = tf.keras.Input((224, 224, 3))
    x = conv_bn(inputs, 64, 7, 2)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    for filters, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            x = block(x, filters, stride if i == 0 else 1, project=i == 0)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(1000)(x)
    return tf.keras.Model(inputs, outputs, name="resnet50_v15")


def build_cost() -> GraphCost:
    """Build ResNet-50 v1.5 and cost its inference graph (a few seconds)."""
    from serve_bench._tf import frozen_graph, import_tensorflow

    tf = import_tensorflow()
    model = resnet50_v15(tf)
    forward = tf.function(lambda images: model(images, training=False))
    concrete = forward.get_concrete_function(tf.TensorSpec([None, 224, 224, 3], tf.float32))
    return cost_graph(frozen_graph(concrete))


def reference_cost() -> GraphCost:
    """The shipped costs of ResNet-50 v1.5 (what ``build_cost`` gives)."""
    text = resources.files("serve_bench.predict").joinpath("data", REFERENCE_FILE).read_text()
    return GraphCost.from_json(json.loads(text))
