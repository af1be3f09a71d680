"""The reference models the published tables measured, as ``resnet_family`` builds them, read off a
stand-in for TensorFlow that records every layer and its shapes (no TensorFlow loaded: fast enough for
``make mutants``; the real build is checked against the shipped costs by test_predict.py's walker test).

Expected figures are worked out from NVIDIA DeepLearningExamples' TensorFlow 1 ConvNets definitions
(model/resnet.py's architectures, blocks/resnet_bottleneck_block.py, blocks/conv2d_block.py,
layers/squeeze_excitation_layer.py at 729963dd47e7), not from the code under test:

- ResNet-50 v1.5: blocks (3, 4, 6, 3), widths 64-512, expansion 4; a block's stride in its 3×3.
  Weights: Keras' ResNet50 has 25,636,712 parameters; less its 26,560 convolution biases (v1.5's
  convolutions have none: one per output channel of 53 convolutions, 64 + 1,408 + 3,584 + 10,240 +
  11,264) and its batch normalisations' moving mean and variance (2 × 26,560, which serving folds into
  the scale and shift): 25,557,032, the 25.557 M the walker counts.
- ResNeXt-101 32x4d: blocks (3, 4, 23, 3), widths 128-1024, expansion 2, 3×3 convolutions in 32 groups;
  SE-ResNeXt adds to each block a dense depth → depth/16 and depth/16 → depth, with biases. Counted
  block by block in ``_weights`` below from those shapes: 44,177,704 and 48,955,416 (the walker's
  44.178 M and 48.955 M).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

import serve_bench._tf
import serve_bench.predict._reference
from serve_bench.predict._reference import ARCHITECTURES, build_cost, resnet_family


@dataclass(frozen=True)
class _T:
    """A tensor: its shape without the batch dimension."""

    shape: tuple[int, ...]


@dataclass
class _Recorder:
    """Every layer called, in order: (kind, details, output shape), and the weights each holds."""

    calls: list[tuple[str, dict[str, Any], tuple[int, ...]]] = field(default_factory=list)
    weights: int = 0
    models: list[tuple[_T, _T, str]] = field(default_factory=list)

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.calls]


def _same(size: int, stride: int) -> int:
    return math.ceil(size / stride)  # "same" padding (TensorFlow's conv and pooling rules)


def _keras_padding(value: str) -> str:
    padding = value.lower()  # Keras lowercases a convolution's padding (argument_validation.standardize_padding)
    assert padding in ("same", "valid"), value
    return padding


def _keras_pooling_padding(value: str) -> str:
    """A pooling layer keeps its padding as given (keras/src/layers/pooling/base_pooling.py: self.padding =
    padding) and its shape rule takes "valid" or "same" only (keras/src/ops/operation_utils.py,
    compute_pooling_output_shape: "Argument `padding` must be either 'valid' or 'same'"), Keras 3.15.1."""
    if value not in ("same", "valid"):
        raise ValueError(f"Argument `padding` must be either 'valid' or 'same'. Received: padding={value}")
    return value


def _fake_tf(rec: _Recorder) -> Any:
    """The parts of TensorFlow ``resnet_family`` calls, with TensorFlow's shape rules."""

    class Layer:
        def __init__(self) -> None:
            self.built = False

        def add_weight(self, *, shape: tuple[int, ...], initializer: str, name: str) -> tuple[int, ...]:
            assert all(isinstance(d, int) for d in shape), shape  # TensorShape takes integers only
            rec.weights += math.prod(shape)
            rec.calls.append(("weight", {"initializer": initializer, "name": name, "shape": shape}, shape))
            return shape

        def __call__(self, x: _T) -> _T:
            if not self.built:
                self.build(x.shape)
                self.built = True
            return self.call(x)

        def build(self, shape: tuple[int, ...]) -> None:
            pass

        def call(self, x: _T) -> _T:
            raise NotImplementedError

    def conv2d(x: _T, filters: tuple[int, ...], *, strides: int, padding: str) -> _T:
        assert padding in ("SAME", "VALID"), padding  # tf.nn.conv2d's padding attr: upper case only
        kh, _kw, per_group, out = filters
        h, w, c = x.shape
        assert c % per_group == 0, (c, per_group)
        shape = (_same(h, strides), _same(w, strides), out)
        rec.calls.append(("Conv2D", {"kernel": kh, "stride": strides, "groups": c // per_group, "in": c}, shape))
        return _T(shape)

    def layer(kind: str, forward: Any) -> Any:
        def make(*args: Any, **kwargs: Any) -> Any:
            def call(x: Any) -> _T:
                shape, details, weights = forward(x, *args, **kwargs)
                rec.weights += weights
                rec.calls.append((kind, details, shape))
                return _T(shape)

            return call

        return make

    def conv(x: _T, filters: int, kernel: int, *, strides: int, padding: str, use_bias: bool) -> Any:
        assert _keras_padding(padding) == "same"
        h, w, c = x.shape
        details = {"kernel": kernel, "stride": strides, "groups": 1, "in": c, "bias": use_bias}
        return (
            (_same(h, strides), _same(w, strides), filters),
            details,
            kernel * kernel * c * filters + use_bias * filters,
        )

    def batch_norm(x: _T, *, epsilon: float) -> Any:
        return x.shape, {"epsilon": epsilon}, 2 * x.shape[-1]  # scale and shift, as served

    def max_pool(x: _T, size: int, *, strides: int, padding: str) -> Any:
        assert _keras_pooling_padding(padding) == "same"
        h, w, c = x.shape
        return (_same(h, strides), _same(w, strides), c), {"size": size, "stride": strides}, 0

    def dense(x: _T, units: int, activation: str | None = None) -> Any:
        assert isinstance(units, int) and units > 0, units  # Keras' Dense: "expected a positive integer"
        (inputs,) = x.shape
        return (units,), {"activation": activation}, inputs * units + units

    def add(xs: list[_T]) -> Any:
        a, b = xs
        assert a.shape == b.shape, (a.shape, b.shape)
        return a.shape, {}, 0

    def multiply(xs: list[_T]) -> Any:
        a, b = xs
        assert b.shape == (1, 1, a.shape[-1]), (a.shape, b.shape)  # broadcast over height and width
        return a.shape, {}, 0

    def reshape(x: _T, target: tuple[int, ...]) -> Any:
        assert math.prod(target) == math.prod(x.shape), (x.shape, target)
        return target, {}, 0

    def model(inputs: _T, outputs: _T, *, name: str) -> Any:
        rec.models.append((inputs, outputs, name))

        def called(images: Any, *, training: bool) -> tuple[str, Any, bool]:
            return name, images, training

        return called

    def function(forward: Any) -> Any:  # tf.function: its concrete function traced on a TensorSpec
        return SimpleNamespace(get_concrete_function=lambda spec: ("concrete", forward(spec)))

    layers = SimpleNamespace(
        Layer=Layer,
        Conv2D=layer("Conv2D", conv),
        BatchNormalization=layer("BN", batch_norm),
        ReLU=layer("ReLU", lambda x: (x.shape, {}, 0)),
        MaxPooling2D=layer("MaxPool", max_pool),
        GlobalAveragePooling2D=layer("Mean", lambda x: ((x.shape[-1],), {}, 0)),
        Dense=layer("Dense", dense),
        Add=layer("Add", add),
        Multiply=layer("Mul", multiply),
        Reshape=layer("Reshape", reshape),
    )
    keras = SimpleNamespace(layers=layers, Input=_T, Model=model)
    spec = lambda shape, dtype: ("TensorSpec", shape, dtype)  # noqa: E731
    return SimpleNamespace(
        keras=keras, nn=SimpleNamespace(conv2d=conv2d), function=function, TensorSpec=spec, float32="float32"
    )


def _build(model: str) -> _Recorder:
    rec = _Recorder()
    resnet_family(_fake_tf(rec), model, **ARCHITECTURES[model])
    return rec


def _convs(rec: _Recorder) -> list[tuple[int, int, int, int, tuple[int, ...]]]:
    """(kernel, stride, groups, input channels, output shape) of every convolution, in order."""
    return [(d["kernel"], d["stride"], d["groups"], d["in"], s) for k, d, s in rec.calls if k == "Conv2D"]


def test_resnet50_v1_5_is_nvidias_stem_stages_and_head_with_the_stride_in_the_3x3() -> None:
    rec = _build("resnet50v1.5")
    assert rec.weights == 25_557_032  # Keras' ResNet50 less its conv biases and BN moving statistics
    ((inputs, outputs, name),) = rec.models
    assert (inputs.shape, outputs.shape, name) == ((224, 224, 3), (1000,), "resnet50v1.5")
    convs = _convs(rec)
    # 1 stem + 16 blocks × 3 + 4 projections; none with a bias (batch normalisation follows each)
    assert len(convs) == 53 and not any(d["bias"] for k, d, _ in rec.calls if k == "Conv2D")
    assert convs[0] == (7, 2, 1, 3, (112, 112, 64))
    assert [(d, s) for k, d, s in rec.calls if k == "MaxPool"] == [({"size": 3, "stride": 2}, (56, 56, 64))]
    # the first block of stage 1: the projection (1×1, stride 1 at 56×56), then 1×1, 3×3, 1×1 to 64 × 4
    assert convs[1:5] == [
        (1, 1, 1, 64, (56, 56, 256)),
        (1, 1, 1, 64, (56, 56, 64)),
        (3, 1, 1, 64, (56, 56, 64)),
        (1, 1, 1, 64, (56, 56, 256)),
    ]
    # stage 2's first block halves the resolution in its 3×3 (v1.5), and its projection with it
    stage2 = convs[1 + 3 * 3 + 1 :][:4]
    assert stage2 == [
        (1, 2, 1, 256, (28, 28, 512)),
        (1, 1, 1, 256, (56, 56, 128)),
        (3, 2, 1, 128, (28, 28, 128)),
        (1, 1, 1, 128, (28, 28, 512)),
    ]
    # each stage opens with its projection: convolution 1 + 10 (3 blocks + 1) + 13 (4 + 1) + 19 (6 + 1)
    assert [convs[i] for i in (1, 11, 24, 43)] == [
        (1, 1, 1, 64, (56, 56, 256)),
        (1, 2, 1, 256, (28, 28, 512)),
        (1, 2, 1, 512, (14, 14, 1024)),
        (1, 2, 1, 1024, (7, 7, 2048)),
    ]
    # every convolution is followed by batch normalisation (Keras' epsilon for ResNet), 49 ReLUs: the
    # stem's and 3 per block (after the 1×1 and the 3×3, and after the residual add); no ReLU after a
    # projection or a block's last 1×1
    kinds = rec.kinds()
    assert kinds.count("BN") == 53 and {d["epsilon"] for k, d, _ in rec.calls if k == "BN"} == {1.001e-5}
    assert kinds.count("ReLU") == 49 and kinds.count("Add") == 16
    assert kinds[:4] == ["Conv2D", "BN", "ReLU", "MaxPool"]
    assert kinds[4:16] == [
        "Conv2D",
        "BN",
        "Conv2D",
        "BN",
        "ReLU",
        "Conv2D",
        "BN",
        "ReLU",
        "Conv2D",
        "BN",
        "Add",
        "ReLU",
    ]
    assert kinds[-2:] == ["Mean", "Dense"] and rec.calls[-1][1] == {"activation": None}
    assert [s for k, _, s in rec.calls if k == "Mean"] == [(2048,)]
    assert "Mul" not in kinds and "weight" not in kinds  # no squeeze-and-excitation, no grouped convolution


def _weights(se_ratio: int) -> int:
    """ResNeXt-101 32x4d's weights from its shapes: stem 7·7·3·64 + BN; per block 1×1 in→w, 3×3 w/32→w,
    1×1 w→2w, each with BN's 2 per channel; a projection in→2w + BN at each stage's first block; with SE,
    dense 2w→2w/r and 2w/r→2w with biases; the head 2048→1000 with its bias."""
    total, inputs = 7 * 7 * 3 * 64 + 2 * 64, 64
    for width, count in zip((128, 256, 512, 1024), (3, 4, 23, 3)):
        depth = 2 * width
        for i in range(count):
            if i == 0:
                total += inputs * depth + 2 * depth
            total += inputs * width + 2 * width + 9 * (width // 32) * width + 2 * width + width * depth + 2 * depth
            if se_ratio:
                total += depth * (depth // se_ratio) + depth // se_ratio + (depth // se_ratio) * depth + depth
            inputs = depth
    return total + 2048 * 1000 + 1000


@pytest.mark.parametrize(
    ("model", "se_ratio", "weights"), [("resnext101-32x4d", 0, 44_177_704), ("se-resnext101-32x4d", 16, 48_955_416)]
)
def test_resnext_groups_its_3x3_convolutions_by_32_and_se_resnext_excites_every_block(
    model: str, se_ratio: int, weights: int
) -> None:
    assert _weights(se_ratio) == weights  # the hand count of the docstring
    rec = _build(model)
    assert rec.weights == weights
    ((inputs, outputs, name),) = rec.models
    assert (inputs.shape, outputs.shape, name) == ((224, 224, 3), (1000,), model)
    # the 3×3s: one tf.nn.conv2d each with a [3, 3, width/32, width] filter, He-initialised
    grouped = [c for c in _convs(rec) if c[2] > 1]
    assert len(grouped) == 33 and {c[2] for c in grouped} == {32} and {c[0] for c in grouped} == {3}
    filters = [d for k, d, _ in rec.calls if k == "weight"]
    assert len(filters) == 33 and {(d["initializer"], d["name"]) for d in filters} == {("he_normal", "group_filter")}
    assert filters[0]["shape"] == (3, 3, 4, 128) and filters[-1]["shape"] == (3, 3, 32, 1024)
    assert [c[1] for c in grouped if c[1] == 2] == [2, 2, 2]  # stages 2-4 halve the resolution in the 3×3
    assert [s for k, _, s in rec.calls if k == "Mean"][-1] == (2048,)
    kinds = rec.kinds()
    assert kinds.count("Add") == 33 and kinds.count("Mul") == (33 if se_ratio else 0)
    if se_ratio:
        # squeeze (mean), dense /16 + relu, dense + sigmoid, multiply, before the residual add
        excite = [d["activation"] for k, d, _ in rec.calls if k == "Dense"][:-1]
        assert excite == ["relu", "sigmoid"] * 33
        first = kinds.index("Mul")
        assert kinds[first - 5 : first + 2] == ["BN", "Mean", "Dense", "Dense", "Reshape", "Mul", "Add"]
        assert [s for k, _, s in rec.calls if k == "Dense"][:2] == [(16,), (256,)]
        assert next(s for k, _, s in rec.calls if k == "Reshape") == (1, 1, 256)


def test_any_cardinality_above_one_makes_the_3x3_one_grouped_convolution() -> None:
    """One stage of one block, width 8, in 2 groups: its 3×3 is tf.nn.conv2d with a [3, 3, 8/2, 8] filter;
    the 1×1s stay Keras' Conv2D."""
    rec = _Recorder()
    resnet_family(_fake_tf(rec), "two", (1,), (8,), expansion=2, cardinality=2)
    assert [d["shape"] for k, d, _ in rec.calls if k == "weight"] == [(3, 3, 4, 8)]
    assert [c[:4] for c in _convs(rec)] == [(7, 2, 1, 3), (1, 1, 1, 64), (1, 1, 1, 64), (3, 1, 2, 8), (1, 1, 1, 8)]


@pytest.mark.parametrize(
    ("model", "keras_name"), [("resnet50v1.5", "resnet50v1_5"), ("se-resnext101-32x4d", "se_resnext101_32x4d")]
)
def test_build_cost_traces_the_architecture_for_inference_on_any_batch_of_224x224_rgb_and_costs_its_frozen_graph(
    monkeypatch: pytest.MonkeyPatch, model: str, keras_name: str
) -> None:
    """The model named as Keras takes a name (no '-' or '.'), called with training=False (batch normalisation's
    moving statistics, as served) on a float32 batch of any size, its graph frozen, then costed."""
    rec = _Recorder()
    monkeypatch.setattr(serve_bench._tf, "import_tensorflow", lambda: _fake_tf(rec))
    monkeypatch.setattr(serve_bench._tf, "frozen_graph", lambda concrete: ("frozen", concrete))
    monkeypatch.setattr(serve_bench.predict._reference, "cost_graph", lambda graph: ("costed", graph))
    spec = ("TensorSpec", [None, 224, 224, 3], "float32")
    assert build_cost(model) == ("costed", ("frozen", ("concrete", (keras_name, spec, False))))  # type: ignore[comparison-overlap]
    ((_, outputs, name),) = rec.models
    assert name == keras_name and outputs.shape == (1000,)
    assert rec.weights == {"resnet50v1.5": 25_557_032, "se-resnext101-32x4d": 48_955_416}[model]
    rec.models.clear()
    build_cost()  # ResNet-50 v1.5 by default: the model the tables measured most
    assert rec.models[0][2] == "resnet50v1_5"
