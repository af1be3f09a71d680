"""The graph walker's FLOPs, elements and reads per op, on small hand-built graphs (no TensorFlow).

``cost_graph`` reads a ``tf.Graph`` through a few attributes only: ``get_operations()``; an
operation's ``name``, ``type``, ``inputs``, ``outputs`` and ``get_attr``; a tensor's ``op``,
``dtype.is_floating`` and ``shape`` (``rank``, ``as_list()``, None for an unknown dimension). The
stand-ins below have exactly those, as tensorflow/python/framework/ops.py and tensor_shape.py
define them, so a graph of a dozen ops is built in microseconds; ``get_attr`` of an attribute the op
does not have raises, as TensorFlow's does. tests/test_predict.py checks the walker on a real
exported model (tiny). Every expected figure is worked out by hand from the counting rules in
serve_bench/predict/_graph.py's docstring: multiply-add = 2 FLOPs, the batch dimension counted as 1.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from serve_bench.predict import GraphCost, OpCost, cost_graph, fuse_pointwise


@dataclasses.dataclass
class _DType:
    is_floating: bool


FLOAT, INT = _DType(True), _DType(False)


class _Shape:
    """tf.TensorShape: ``rank`` None where even the rank is unknown; ``as_list()`` None per unknown dimension."""

    def __init__(self, dims: list[int | None] | None) -> None:
        self._dims = dims

    @property
    def rank(self) -> int | None:
        return None if self._dims is None else len(self._dims)

    def as_list(self) -> list[int | None]:
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)


@dataclasses.dataclass(eq=False)
class _Tensor:
    op: _Op
    shape: _Shape
    dtype: _DType


@dataclasses.dataclass(eq=False)
class _Op:
    name: str
    type: str
    inputs: list[_Tensor]
    outputs: list[_Tensor] = dataclasses.field(default_factory=list)
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)

    def get_attr(self, name: str) -> Any:
        if name not in self.attrs:
            raise ValueError(f"Operation '{self.name}' has no attr named '{name}'.")
        return self.attrs[name]


class _Graph:
    """Ops in the order they were added, as tf.Graph.get_operations() lists them."""

    def __init__(self) -> None:
        self.ops: list[_Op] = []

    def get_operations(self) -> list[_Op]:
        return list(self.ops)

    def op(
        self,
        name: str,
        kind: str,
        inputs: tuple[_Tensor, ...] = (),
        outputs: tuple[list[int | None] | None, ...] = (),
        dtype: _DType = FLOAT,
        **attrs: Any,
    ) -> _Op:
        op = _Op(name, kind, list(inputs), [], attrs)
        op.outputs = [_Tensor(op, _Shape(dims), dtype) for dims in outputs]
        self.ops.append(op)
        return op

    def const(self, name: str, dims: list[int | None] | None, dtype: _DType = FLOAT) -> _Tensor:
        return self.op(name, "Const", (), (dims,), dtype).outputs[0]


def _by_name(cost: GraphCost) -> dict[str, OpCost]:
    return {op.name: op for op in cost.ops}


def test_convolutions_count_two_flops_per_multiply_add_of_every_tap():
    """Conv2D, 8×8×3 in, 3×3 filter to 4 channels, stride 2 to 4×4×4: 2 · (4·4·4) · 3·3·3 = 3,456 FLOPs;
    it reads the 192-element image and writes 64 (activations 256), and reads the 108 filter
    elements once per batch. The image reaches it through an Identity, which the reads look through
    to the Placeholder that wrote it. A depthwise 3×3 with multiplier 2 on 4×4×4 to 4×4×8:
    2 · (4·4·8) · 3·3 = 2,304 (one filter channel per output channel: in_c is not a factor again)."""
    g = _Graph()
    image = g.op("image", "Placeholder", (), ([None, 8, 8, 3],)).outputs[0]
    same = g.op("image/read", "Identity", (image,), ([None, 8, 8, 3],)).outputs[0]
    conv = g.op("conv", "Conv2D", (same, g.const("filter", [3, 3, 3, 4])), ([None, 4, 4, 4],)).outputs[0]
    g.op("depthwise", "DepthwiseConv2dNative", (conv, g.const("dw", [3, 3, 4, 2])), ([None, 4, 4, 8],))
    cost = cost_graph(g)
    assert [op.name for op in cost.ops] == ["conv", "depthwise"]  # Placeholder, Identity, Const cost nothing
    conv_cost, depthwise = cost.ops
    assert conv_cost == OpCost("conv", "Conv2D", 3_456.0, 256.0, 108.0, True, (("image", 192.0),))
    assert depthwise == OpCost(
        "depthwise", "DepthwiseConv2dNative", 2_304.0, 64.0 + 128.0, 72.0, True, (("conv", 64.0),)
    )
    assert (cost.input_elements, cost.unknown) == (192, ())
    assert (cost.flops_per_image, cost.weight_elements, cost.activation_elements) == (5_760.0, 180.0, 448.0)


def test_a_filter_of_unknown_shape_costs_no_flops_but_its_traffic():
    """A filter whose rank is unknown gives no taps to count: 0 FLOPs, and no weight elements (an
    unknown shape has no size); the input and output are still read and written: 16 + 16."""
    g = _Graph()
    x = g.op("x", "Placeholder", (), ([None, 4, 4, 1],)).outputs[0]
    g.op("conv", "Conv2D", (x, g.op("f", "Placeholder", (), (None,)).outputs[0]), ([None, 4, 4, 1],))
    g.op("dw", "DepthwiseConv2dNative", (x, g.op("w", "Placeholder", (), (None,)).outputs[0]), ([None, 4, 4, 1],))
    ops = _by_name(cost_graph(g))
    assert (ops["conv"].flops, ops["conv"].activations, ops["conv"].weights) == (0.0, 32.0, 0.0)
    assert (ops["dw"].flops, ops["dw"].activations, ops["dw"].weights) == (0.0, 32.0, 0.0)


def test_a_matrix_product_counts_rows_inner_and_columns():
    """MatMul [B, 16] × [16, 10]: 2 · 10 · 16 = 320 FLOPs per image, weights 160. BatchMatMulV2 of
    x [B, 6, 4] by y [4, 5]: out 6·5, inner 4: 2 · 30 · 4 = 240. With adj_x the product is of x's
    adjoint, [B, 4, 6]: out [B, 4, 5], inner 6 (x's second-to-last dimension): 2 · 20 · 6 = 240.
    (tensorflow/core/ops/math_ops.cc, BatchMatMulV2: "adj_x: If True, adjoint the slices of x".)"""
    g = _Graph()
    x = g.op("x", "Placeholder", (), ([None, 16],)).outputs[0]
    g.op("dense", "MatMul", (x, g.const("kernel", [16, 10])), ([None, 10],), transpose_a=False, transpose_b=False)
    s = g.op("s", "Placeholder", (), ([None, 6, 4],)).outputs[0]
    y = g.const("y", [4, 5])
    g.op("bmm", "BatchMatMulV2", (s, y), ([None, 6, 5],), adj_x=False, adj_y=False)
    t = g.op("t", "Placeholder", (), ([None, 6, 4],)).outputs[0]
    g.op("bmm_adj", "BatchMatMulV2", (t, g.const("z", [6, 5])), ([None, 4, 5],), adj_x=True, adj_y=False)
    ops = _by_name(cost_graph(g))
    assert (ops["dense"].flops, ops["dense"].activations, ops["dense"].weights) == (320.0, 26.0, 160.0)
    assert (ops["bmm"].flops, ops["bmm"].activations, ops["bmm"].weights) == (240.0, 24.0 + 30.0, 20.0)
    assert (ops["bmm_adj"].flops, ops["bmm_adj"].activations) == (240.0, 24.0 + 20.0)


def test_pools_batch_norms_element_wise_ops_and_reductions_count_as_the_docstring_says():
    """On a [B, 4, 4, 8] tensor (128 elements per image):
    MaxPool 2×2 stride 2 to 2×2×8 = 32 outputs of 4 window elements: 128 FLOPs; AvgPool 3×3 same
    padding (4×4×8): 128 · 9 = 1,152; MaxPoolV2 takes its window as an input, counted as 1: 128.
    FusedBatchNormV3: 2 per output element = 256; its scale, offset, mean and variance, 8 each, are
    weights (32); the batch statistics it also outputs have no batch dimension and are not read.
    Relu: 1 per output element = 128. Mean over height and width to [B, 8]: 1 per input element,
    128; its int32 axes are no float tensor and count for nothing."""
    g = _Graph()
    x = g.op("x", "Placeholder", (), ([None, 4, 4, 8],)).outputs[0]
    g.op("max", "MaxPool", (x,), ([None, 2, 2, 8],), ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1])
    g.op("avg", "AvgPool", (x,), ([None, 4, 4, 8],), ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1])
    window = g.const("window", [4], INT)
    g.op("max2", "MaxPoolV2", (x, window, window), ([None, 4, 4, 8],))
    stats = tuple(g.const(n, [8]) for n in ("scale", "offset", "mean", "variance"))
    g.op("bn", "FusedBatchNormV3", (x, *stats), ([None, 4, 4, 8], [8], [8], [8], [8], None))
    g.op("relu", "Relu", (x,), ([None, 4, 4, 8],))
    g.op("mean", "Mean", (x, g.const("axes", [2], INT)), ([None, 8],), keep_dims=False)
    ops = _by_name(cost_graph(g))
    figures = {n: (o.flops, o.activations, o.weights) for n, o in ops.items()}
    assert figures == {
        "max": (128.0, 128.0 + 32.0, 0.0),
        "avg": (1_152.0, 256.0, 0.0),
        "max2": (128.0, 256.0, 0.0),
        "bn": (256.0, 256.0, 32.0),
        "relu": (128.0, 256.0, 0.0),
        "mean": (128.0, 128.0 + 8.0, 0.0),
    }
    assert all(o.known and o.reads == (("x", 128.0),) for o in ops.values())


def test_copies_cost_traffic_only_and_an_unknown_op_is_a_named_copy():
    """ConcatV2 of two [B, 4] into [B, 8]: no FLOPs, 4 + 4 read and 8 written, known. Cumsum and
    Foo (no list of the walker has them): the same, but named in ``unknown`` by type with a count,
    sorted by type."""
    g = _Graph()
    a = g.op("a", "Placeholder", (), ([None, 4],)).outputs[0]
    b = g.op("b", "Placeholder", (), ([None, 4],)).outputs[0]
    g.op("cat", "ConcatV2", (a, b, g.const("axis", [], INT)), ([None, 8],))
    g.op("f1", "Foo", (a,), ([None, 4],))
    g.op("cum", "Cumsum", (a, g.const("axis2", [], INT)), ([None, 4],))
    g.op("f2", "Foo", (b,), ([None, 4],))
    cost = cost_graph(g)
    ops = _by_name(cost)
    assert ops["cat"] == OpCost("cat", "ConcatV2", 0.0, 16.0, 0.0, True, (("a", 4.0), ("b", 4.0)))
    assert [(o.name, o.flops, o.activations, o.known) for o in cost.ops if not o.known] == [
        ("f1", 0.0, 8.0, False),
        ("cum", 0.0, 8.0, False),
        ("f2", 0.0, 8.0, False),
    ]
    assert cost.unknown == ("Cumsum ×1", "Foo ×2")
    assert cost.input_elements == 8  # two float placeholders of 4 each


def test_ops_that_touch_no_batch_scaled_float_data_cost_nothing():
    """Left out of the costs: a Reshape (metadata), an op with no outputs, an Rsqrt of a constant
    variance (folded by Grappler before serving), a Cast of an int image's shape, an op whose
    tensors all have unknown rank. An int Placeholder adds nothing to the input's elements. A
    scalar float constant (rank 0) is one weight element, read once per batch (tiny's 255)."""
    g = _Graph()
    x = g.op("x", "Placeholder", (), ([None, 3],)).outputs[0]
    g.op("ids", "Placeholder", (), ([None, 7],), INT)
    g.op("flat", "Reshape", (x, g.const("shape", [2], INT)), ([None, 3],))
    g.op("save", "SaveV2", (x,), ())
    g.op("rsqrt", "Rsqrt", (g.const("var", [8]),), ([8],))
    g.op("size", "Cast", (g.op("sh", "Shape", (x,), ([2],), INT).outputs[0],), ([2],))
    g.op("odd", "Relu", (g.op("u", "Placeholder", (), (None,)).outputs[0],), (None,))
    g.op("scaled", "RealDiv", (x, g.const("255", [])), ([None, 3],))
    cost = cost_graph(g)
    assert cost.ops == (OpCost("scaled", "RealDiv", 3.0, 6.0, 1.0, True, (("x", 3.0),)),)
    assert cost.input_elements == 3


def test_the_columns_are_each_ops_flops_activations_and_weights_in_order():
    cost = GraphCost((OpCost("a", "Conv2D", 5.0, 7.0, 11.0), OpCost("b", "Relu", 13.0, 17.0, 19.0)), 3)
    flops, activations, weights = cost.columns
    assert (list(flops), list(activations), list(weights)) == ([5.0, 13.0], [7.0, 17.0], [11.0, 19.0])
    assert (cost.flops_per_image, cost.activation_elements, cost.weight_elements) == (18.0, 24.0, 30.0)


def test_a_cost_saved_and_read_back_is_the_same_cost():
    """The JSON form: input elements, the unknown types, and each op as [name, type, flops, activations,
    weights, known, reads]; a row saved before reads were recorded (six fields) reads back without them."""
    ops = (
        OpCost("conv", "Conv2D", 100.0, 20.0, 5.0, True, (("image", 10.0),)),
        OpCost("odd", "Cumsum", 0.0, 20.0, 0.0, False, (("conv", 10.0),)),
    )
    cost = GraphCost(ops, 10, ("Cumsum ×1",))
    saved = cost.to_json()
    assert saved == {
        "input_elements": 10,
        "unknown": ["Cumsum ×1"],
        "ops": [
            ["conv", "Conv2D", 100.0, 20.0, 5.0, True, [["image", 10.0]]],
            ["odd", "Cumsum", 0.0, 20.0, 0.0, False, [["conv", 10.0]]],
        ],
    }
    assert GraphCost.from_json(saved) == cost
    old = {"input_elements": "10", "ops": [["conv", "Conv2D", "100", "20", "5", 1]]}
    assert GraphCost.from_json(old) == GraphCost((OpCost("conv", "Conv2D", 100.0, 20.0, 5.0, True, ()),), 10, ())


def test_a_pointwise_op_joins_the_kernel_only_of_a_full_size_operand_written_before_it():
    """By hand, per image. An AddV2 of conv's 10 and a 10-element bias Placeholder read (a graph
    input, no kernel): joins conv, reading the bias besides (traffic 10 in + 10 bias + 10 out).
    A Mul of a 10-element tensor by a 2-element one written later (its largest-numbered kernel
    is the 2-element writer, too small to carry a 10-element output): stays a kernel of its own.
    A pointwise op reading only the graph's input stays one. Kernels keep their head's reads and type,
    sum FLOPs and weights, and are unknown where a member was."""
    ops = (
        OpCost("conv", "Conv2D", 100, 20, 5, reads=(("image", 10.0),)),
        OpCost("add", "AddV2", 10, 30, 1, False, reads=(("conv", 10.0), ("bias", 10.0))),
        OpCost("gate", "MatMul", 4, 12, 8, reads=(("add", 10.0),)),
        OpCost("mul", "Mul", 10, 22, 0, reads=(("add", 10.0), ("gate", 2.0))),
        OpCost("neg", "Neg", 10, 20, 0, reads=(("image", 10.0),)),
    )
    fused = fuse_pointwise(GraphCost(ops, 10, ("X ×1",)))
    assert [(o.name, o.type, o.flops, o.activations, o.weights, o.known, o.reads) for o in fused.ops] == [
        ("conv", "Conv2D", 110, 10 + 10 + 10, 6, False, (("image", 10.0),)),
        ("gate", "MatMul", 4, 12, 8, True, (("add", 10.0),)),
        ("mul", "Mul", 10, 22, 0, True, (("add", 10.0), ("gate", 2.0))),
        ("neg", "Neg", 10, 20, 0, True, (("image", 10.0),)),
    ]
    assert (fused.input_elements, fused.unknown) == (10, ("X ×1",))


def test_without_reads_a_pointwise_op_joins_the_op_listed_before_it():
    """Costs saved before reads: an element-wise op adds its FLOPs and weights to the op before it,
    and its traffic beyond its output's size counted twice (activations - 2 · FLOPs: a second
    operand), never below 0; a batch norm adds no traffic, even one saved with more than twice its FLOPs (60
    against 20: its scale and shift are weights, its one full-size read the op's output). The first op has
    nothing to join."""
    ops = (
        OpCost("relu0", "Relu", 10, 20, 0),
        OpCost("conv", "Conv2D", 100, 20, 5),
        OpCost("bn", "FusedBatchNormV3", 20, 60, 4),
        OpCost("add", "AddV2", 10, 30, 1, False),
        OpCost("clip", "Relu6", 10, 15, 0),
        OpCost("pool", "MaxPool", 40, 30, 0),
    )
    fused = fuse_pointwise(GraphCost(ops, 10, ("X ×1",)))
    assert [(o.name, o.flops, o.activations, o.weights, o.known) for o in fused.ops] == [
        ("relu0", 10, 20, 0, True),
        ("conv", 100 + 20 + 10 + 10, 20 + 0 + 10 + 0, 5 + 4 + 1, True),
        ("pool", 40, 30, 0, True),
    ]
    assert (fused.input_elements, fused.unknown) == (10, ("X ×1",))


@pytest.mark.parametrize("kind", ["Sigmoid", "Tanh", "Swish", "Gelu", "Maximum", "SquaredDifference", "Round"])
def test_every_listed_element_wise_op_fuses_and_costs_one_flop_per_output(kind):
    g = _Graph()
    x = g.op("x", "Placeholder", (), ([None, 5],)).outputs[0]
    g.op("op", kind, (x,), ([None, 5],))
    (op,) = cost_graph(g).ops
    assert (op.flops, op.known) == (5.0, True)


def test_a_filter_or_inner_dimension_that_is_unknown_counts_no_taps():
    """Each tap count is the product of the filter's dimensions (in_c too for Conv2D), so one unknown
    dimension makes it unknown: 0 FLOPs, whichever dimension it is, where counting it as 1 would give
    2 · 16 · 3 · 2 = 192 (or similar). A MatMul whose x has an unknown rank or an unknown inner
    dimension likewise has no inner size: 0 FLOPs, transposed or not. An unknown-rank x has no
    batch dimension to read per image: the product keeps no read of it (only its batched inputs)."""
    g = _Graph()
    x = g.op("x", "Placeholder", (), ([None, 4, 4, 1],)).outputs[0]
    for i, dims in enumerate(([None, 3, 2, 1], [3, None, 2, 1], [3, 2, None, 1])):
        g.op(f"conv{i}", "Conv2D", (x, g.const(f"f{i}", dims)), ([None, 4, 4, 1],))
    for i, dims in enumerate(([None, 3, 1, 1], [3, None, 1, 1])):
        g.op(f"dw{i}", "DepthwiseConv2dNative", (x, g.const(f"w{i}", dims)), ([None, 4, 4, 1],))
    nowhere = g.op("u", "Placeholder", (), (None,)).outputs[0]  # rank unknown: no dimensions at all
    kernel = g.const("kernel", [16, 10])
    g.op("mm", "MatMul", (nowhere, kernel), ([None, 10],), transpose_a=False, transpose_b=False)
    g.op("mm_t", "MatMul", (nowhere, kernel), ([None, 10],), transpose_a=True, transpose_b=False)
    v = g.op("v", "Placeholder", (), ([None, None],)).outputs[0]
    g.op("mm_inner", "MatMul", (v, kernel), ([None, 10],), transpose_a=False, transpose_b=False)
    ops = _by_name(cost_graph(g))
    for name in ("conv0", "conv1", "conv2", "dw0", "dw1", "mm", "mm_t", "mm_inner"):
        assert ops[name].flops == 0.0, name
    # the unknown-rank x: not batched, so neither activations nor a read; the kernel's 160 are weights
    assert (ops["mm"].activations, ops["mm"].weights, ops["mm"].reads) == (10.0, 160.0, ())
    assert ops["mm_inner"].reads == (("v", 1.0),)  # [B, None]: the unknown dimension counted as 1


def test_a_pointwise_op_after_an_unknown_op_leaves_it_unknown():
    """Without reads, a Relu joining an op of unknown type keeps the kernel unknown (its head's flag)."""
    ops = (OpCost("odd", "Custom", 10, 20, 0, False), OpCost("relu", "Relu", 10, 20, 0))
    (fused,) = fuse_pointwise(GraphCost(ops, 10, ("Custom ×1",))).ops
    assert (fused.name, fused.flops, fused.activations, fused.known) == ("odd", 20, 20, False)


def test_a_saved_models_cost_is_the_cost_of_its_named_signature_frozen(monkeypatch, tmp_path):
    """``cost_saved_model`` loads the directory given (as a string: tf.saved_model.load's
    ``export_dir``), takes the signature named (``serving_default`` unless told: the key
    tf.saved_model.save writes a Keras model's call under, signature_constants.py), freezes that
    concrete function and walks it. TensorFlow is replaced here by a loader that records what it was
    asked for, because mutation testing cannot fork after TensorFlow has started its threads (MUTANTS.md);
    tests/test_predict.py runs the same function on a real exported model."""
    import serve_bench._tf as tf_glue
    from serve_bench.predict import cost_saved_model

    default, other = object(), object()
    graphs = {id(default): _Graph(), id(other): _Graph()}
    graphs[id(default)].op("image", "Placeholder", (), ([None, 2, 2, 3],))
    graphs[id(other)].op("image", "Placeholder", (), ([None, 5],))
    loaded: list[object] = []

    class _SavedModel:
        @staticmethod
        def load(export_dir: object) -> Any:
            loaded.append(export_dir)
            return type("Loaded", (), {"signatures": {"serving_default": default, "other": other}})()

    monkeypatch.setattr(tf_glue, "import_tensorflow", lambda *a, **k: type("TF", (), {"saved_model": _SavedModel}))
    monkeypatch.setattr(tf_glue, "frozen_graph", lambda concrete: graphs[id(concrete)])
    assert cost_saved_model(tmp_path) == GraphCost((), 12, ())  # serving_default's 2·2·3 input elements
    assert cost_saved_model(tmp_path / "1", signature="other") == GraphCost((), 5, ())
    assert loaded == [str(tmp_path), str(tmp_path / "1")]
