"""The models the published tables measured, rebuilt here to be costed by the same walker.

ResNet-50 v1.5, ResNeXt-101 32x4d and SE-ResNeXt-101 32x4d, as NVIDIA DeepLearningExamples'
TensorFlow 1 ConvNets define them (model/resnet.py's architectures dict).

NVIDIA's DeepLearningExamples ResNet-50 v1.5 differs from v1 (Keras' ResNet50) in one place:
a bottleneck block that halves the resolution does it in its 3×3 convolution, not its first 1×1
(TensorFlow/Classification/ConvNets/resnet50v1.5/README.md, "The difference between v1 and
v1.5"), which makes it ~4.1 G multiply-adds per 224×224 image rather than ~3.9. Convolutions
have no bias (batch normalisation follows each); 1000-class head, as in the published runs.
ResNeXt's 3×3 convolutions are grouped (32 groups; one Conv2D op with a [3, 3, in/32, out] filter as
blocks/conv2d_block.py makes it); SE-ResNeXt adds squeeze-and-excitation with ratio 16: 8.0 G and
8.0 G multiply-adds, 44.18 M and 48.96 M parameters. Their costs are shipped in
data/tf1_convnets_costs.json; ``build_cost`` makes them again.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from serve_bench.predict._graph import GraphCost, cost_graph

__all__ = ["ARCHITECTURES", "REFERENCE_FILE", "build_cost", "reference_costs", "resnet_family"]

REFERENCE_FILE = "tf1_convnets_costs.json"


def resnet_family(
    tf: Any,
    name: str,
    blocks: tuple[int, ...],
    widths: tuple[int, ...],
    *,
    expansion: int,
    cardinality: int = 1,
    se_ratio: int = 0,
) -> Any:
    """A DeepLearningExamples TF1 ConvNet (model/resnet.py's architectures; blocks/resnet_bottleneck_block.py),
    random weights, NHWC, 224×224×3 in, 1000 logits out.

    Bottleneck blocks of 1×1 (width), 3×3 (width, ``cardinality`` groups, the block's stride),
    1×1 (width × expansion); squeeze-and-excitation on the block's output before the residual add
    when ``se_ratio`` is set (layers/squeeze_excitation_layer.py: mean, dense /ratio + relu, dense +
    sigmoid, multiply); a 1×1 projection with the stride where the depth changes.
    """
    layers = tf.keras.layers

    class GroupedConv(layers.Layer):  # type: ignore[misc,name-defined]
        """One Conv2D op with a [k, k, in/groups, out] filter, as blocks/conv2d_block.py makes it.

        (Keras' own Conv2D(groups=...) runs through an XLA function the freezer does not inline.)
        """

        def __init__(self, filters: int, kernel: int, stride: int, groups: int) -> None:
            super().__init__()
            self.filters, self.kernel, self.stride, self.groups = filters, kernel, stride, groups

        def build(self, shape: Any) -> None:
            size = (self.kernel, self.kernel, shape[-1] // self.groups, self.filters)
            self.filter = self.add_weight(shape=size, initializer="he_normal", name="group_filter")

        def call(self, x: Any) -> Any:
            return tf.nn.conv2d(x, self.filter, strides=self.stride, padding="SAME")

    def conv_bn(x: Any, filters: int, kernel: int, stride: int, relu: bool = True, groups: int = 1) -> Any:
        if groups > 1:
            x = GroupedConv(filters, kernel, stride, groups)(x)
        else:
            x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization(epsilon=1.001e-5)(x)
        return layers.ReLU()(x) if relu else x

    def block(x: Any, width: int, stride: int, project: bool) -> Any:
        depth = width * expansion
        shortcut = conv_bn(x, depth, 1, stride, relu=False) if project else x
        y = conv_bn(x, width, 1, 1)
        y = conv_bn(y, width, 3, stride, groups=cardinality)  # v1.5: the stride is here
        y = conv_bn(y, depth, 1, 1, relu=False)
        if se_ratio:
            squeeze = layers.GlobalAveragePooling2D()(y)
            excite = layers.Dense(depth // se_ratio, activation="relu")(squeeze)
            excite = layers.Dense(depth, activation="sigmoid")(excite)
            y = layers.Multiply()([y, layers.Reshape((1, 1, depth))(excite)])
        return layers.ReLU()(layers.Add()([shortcut, y]))

    inputs = tf.keras.Input((224, 224, 3))
    x = conv_bn(inputs, 64, 7, 2)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for i in range(count):
            x = block(x, width, (1 if stage == 0 else 2) if i == 0 else 1, project=i == 0)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(1000)(x)
    return tf.keras.Model(inputs, outputs, name=name)


# model/resnet.py's architectures dict at NVIDIA/DeepLearningExamples@729963dd47e7
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "resnet50v1.5": dict(blocks=(3, 4, 6, 3), widths=(64, 128, 256, 512), expansion=4),
    "resnext101-32x4d": dict(blocks=(3, 4, 23, 3), widths=(128, 256, 512, 1024), expansion=2, cardinality=32),
    "se-resnext101-32x4d": dict(
        blocks=(3, 4, 23, 3), widths=(128, 256, 512, 1024), expansion=2, cardinality=32, se_ratio=16
    ),
}


def build_cost(model: str = "resnet50v1.5") -> GraphCost:
    """Build one of ARCHITECTURES and cost its inference graph (seconds)."""
    from serve_bench._tf import frozen_graph, import_tensorflow

    tf = import_tensorflow()
    keras_model = resnet_family(tf, model.replace("-", "_").replace(".", "_"), **ARCHITECTURES[model])
    forward = tf.function(lambda images: keras_model(images, training=False))
    concrete = forward.get_concrete_function(tf.TensorSpec([None, 224, 224, 3], tf.float32))
    return cost_graph(frozen_graph(concrete))


@cache
def reference_costs() -> dict[str, GraphCost]:
    """The shipped costs of every model of ARCHITECTURES (what ``build_cost`` gives), by the tables' name."""
    text = resources.files("serve_bench.predict").joinpath("data", REFERENCE_FILE).read_text()
    return {name: GraphCost.from_json(data) for name, data in json.loads(text).items()}
