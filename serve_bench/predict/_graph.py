"""What one image costs, op by op, read off a frozen serving graph.

For each op of the graph the walker counts the float operations and the tensor elements it
reads and writes, per image (the batch dimension, unknown in a serving signature, counts as 1),
apart from the weights it reads once per batch. Precision is applied later, by the cost model:
here everything is in elements, not bytes.

Counting rules (multiply-add = 2 FLOPs, as TensorFlow's profiler counts):
  Conv2D               2 · out_h · out_w · out_c · k_h · k_w · in_c
  DepthwiseConv2dNative 2 · out_h · out_w · in_c · multiplier · k_h · k_w
  MatMul               2 · rows · inner · cols
  pooling              one per window element of every output element
  FusedBatchNorm*      2 per element (inference: scale and shift)
  element-wise ops     1 per output element
  Mean/Sum             1 per input element
Ops that only move metadata (Reshape, Identity, Const, Shape, ...) cost nothing, and so do ops on
weights alone (batch normalisation's rsqrt of the variance, say): TensorFlow folds them into
constants before it serves. An op the
walker does not know is costed as a memory-bound copy (its inputs read, its outputs written, no
FLOPs) and named in ``GraphCost.unknown``, so a prediction can say it guessed.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GraphCost", "OpCost", "cost_graph", "cost_saved_model", "fuse_pointwise"]

_ELEMENTWISE = frozenset(
    "Relu Relu6 Elu Selu Sigmoid Tanh Softplus Softsign Swish LeakyRelu Add AddV2 Sub Mul RealDiv Div "
    "Maximum Minimum BiasAdd Square Sqrt Rsqrt Exp Log Neg Abs Cast Pow SquaredDifference Erf Gelu "
    "ClipByValue Floor Round".split()
)
_POOLS = frozenset({"MaxPool", "AvgPool", "MaxPoolV2"})
_REDUCTIONS = frozenset({"Mean", "Sum", "Max", "Min", "Prod"})
_BATCH_NORMS = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"})
_COPIES = frozenset({"ConcatV2", "Concat", "Pad", "PadV2", "MirrorPad", "Transpose", "Slice", "StridedSlice", "Tile"})
# no kernel that touches the data: metadata, constants, control
_FREE = frozenset(
    "Placeholder Const Identity IdentityN Reshape Shape ShapeN Size Rank NoOp Squeeze ExpandDims Pack Unpack "
    "ReadVariableOp VarHandleOp Fill Range StopGradient PreventGradient Enter Exit Merge Switch "
    "NextIteration LoopCond _Arg _Retval".split()
)


@dataclass(frozen=True)
class OpCost:
    """One op's cost for one image; ``weights`` are the constant elements it reads once per batch."""

    name: str
    type: str
    flops: float
    activations: float  # elements read and written that scale with the batch
    weights: float  # elements read once per batch (filters, scales, biases)
    known: bool = True
    # the batch-scaled tensors it reads: (the costed op that wrote it, elements); () where not recorded
    reads: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class GraphCost:
    """A serving graph's ops with their costs per image, and what the walker could not cost."""

    ops: tuple[OpCost, ...]
    input_elements: int  # one image as the signature takes it (for the transfer to the device)
    unknown: tuple[str, ...] = field(default=())  # op types costed as copies, with how many: "Foo ×3"

    @cached_property
    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """FLOPs, activation elements and weight elements of every op, as arrays (made once per cost)."""
        return (
            np.array([op.flops for op in self.ops]),
            np.array([op.activations for op in self.ops]),
            np.array([op.weights for op in self.ops]),
        )

    @property
    def flops_per_image(self) -> float:
        return sum(op.flops for op in self.ops)

    @property
    def weight_elements(self) -> float:
        return sum(op.weights for op in self.ops)

    @property
    def activation_elements(self) -> float:
        return sum(op.activations for op in self.ops)

    def to_json(self) -> dict[str, Any]:
        return {
            "input_elements": self.input_elements,
            "unknown": list(self.unknown),
            "ops": [
                [o.name, o.type, o.flops, o.activations, o.weights, o.known, [list(r) for r in o.reads]]
                for o in self.ops
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraphCost:
        ops = tuple(
            OpCost(
                n, t, float(f), float(a), float(w), bool(k), tuple((str(p), float(e)) for p, e in (r[0] if r else ()))
            )
            for n, t, f, a, w, k, *r in data["ops"]
        )
        return cls(ops, int(data["input_elements"]), tuple(data.get("unknown", ())))


def fuse_pointwise(cost: GraphCost) -> GraphCost:
    """The graph as TensorRT runs it: each element-wise op and batch norm inside the kernel that wrote its input.

    TensorRT's builder fuses a convolution with the scale (batch normalisation folded into it),
    activation and element-wise sum that follow (its Layer Fusion Catalog,
    docs.nvidia.com/deeplearning/tensorrt/latest/performance/fusion-catalog.html: "computing the
    ReLU function on the output in one step directly from the convolution kernel without requiring
    a second kernel call"). A point-wise op joins the kernel that wrote its last-computed operand,
    if that operand is full-size (the size of the op's output); its other operands must exist
    before that kernel runs, so a squeeze-and-excitation gate, computed from the kernel's own
    output, keeps its multiply out, and a broadcast gate or a reduction's mean is too small to carry
    the op. An op with no such operand (or reading the graph's input) stays a kernel of its own.

    A kernel then costs its members' FLOPs and weights, one launch, and the traffic that leaves
    it: the tensors its members read from other kernels, and the outputs that a later kernel reads
    (or nothing reads: the graph's outputs). A tensor used only inside the kernel never reaches
    memory; one also read outside it is written once. Costs saved without their reads (before the
    walker recorded them) fall back to joining each point-wise op to the op listed before it.
    """
    if not any(op.reads for op in cost.ops):
        return _fuse_in_list_order(cost)
    kernel_of: dict[str, int] = {}  # an op's name -> the kernel it runs in
    members: list[list[OpCost]] = []
    for op in cost.ops:
        index = _host(op, kernel_of) if op.type in _ELEMENTWISE or op.type in _BATCH_NORMS else None
        if index is None:
            index = len(members)
            members.append([])
        members[index].append(op)
        kernel_of[op.name] = index
    read_elsewhere = {p for op in cost.ops for p, _ in op.reads if kernel_of.get(p) != kernel_of[op.name]}
    read_at_all = {p for op in cost.ops for p, _ in op.reads}
    kernels = []
    for index, group in enumerate(members):
        traffic = 0.0
        for op in group:
            reads = dict(op.reads)  # an op reading one tensor twice reads it once
            traffic += sum(e for p, e in reads.items() if kernel_of.get(p) != index)
            if op.name in read_elsewhere or op.name not in read_at_all:
                traffic += _output(op)
        head = group[0]
        kernels.append(
            OpCost(
                head.name,
                head.type,
                sum(o.flops for o in group),
                traffic,
                sum(o.weights for o in group),
                all(o.known for o in group),
                head.reads,
            )
        )
    return GraphCost(tuple(kernels), cost.input_elements, cost.unknown)


def _output(op: OpCost) -> float:
    """Elements an op writes per image (what it moves besides what it reads)."""
    return op.activations - sum(e for _, e in op.reads)


def _host(op: OpCost, kernel_of: dict[str, int]) -> int | None:
    """The kernel a point-wise op joins (``fuse_pointwise``'s rule), or None."""
    if not op.reads:
        return None
    index, elements = max((kernel_of.get(producer, -1), e) for producer, e in op.reads)
    return index if index >= 0 and elements >= _output(op) else None


def _fuse_in_list_order(cost: GraphCost) -> GraphCost:
    """``fuse_pointwise`` for costs without reads: each point-wise op joins the op listed before it,
    adding the reads besides its own output's size (its first operand's, taken to be that op's)."""
    ops: list[OpCost] = []
    for op in cost.ops:
        if not (op.type in _ELEMENTWISE or op.type in _BATCH_NORMS) or not ops:
            ops.append(op)
            continue
        # a batch norm moves its input and output only; an element-wise op's FLOPs are its output's size
        besides = 0.0 if op.type in _BATCH_NORMS else max(0.0, op.activations - 2 * op.flops)
        into = ops[-1]
        ops[-1] = OpCost(
            into.name,
            into.type,
            into.flops + op.flops,
            into.activations + besides,
            into.weights + op.weights,
            into.known,
        )
    return GraphCost(tuple(ops), cost.input_elements, cost.unknown)


def _dims(tensor: Any) -> list[int | None] | None:
    shape = tensor.shape
    if shape.rank is None:
        return None
    return [d if d is None else int(d) for d in shape.as_list()]


def _per_image(dims: list[int | None] | None) -> tuple[float, bool]:
    """Elements for one image, and whether the tensor scales with the batch (its first dim unknown)."""
    if dims is None:
        return 0.0, False
    batched = bool(dims) and dims[0] is None
    known = [1 if d is None else d for d in dims]
    return float(math.prod(known)), batched


def _writer(tensor: Any) -> str:
    """The op that computed ``tensor``, looking through ops that only relabel it (Identity, Reshape)."""
    op = tensor.op
    while op.type in _FREE and op.inputs:
        op = op.inputs[0].op
    return str(op.name)


def _op_cost(op: Any) -> OpCost | None:
    kind = op.type
    if kind in _FREE or not op.outputs:
        return None
    activations = 0.0
    weights = 0.0
    reads: list[tuple[str, float]] = []
    for tensor, is_input in [(t, True) for t in op.inputs] + [(t, False) for t in op.outputs]:
        if not tensor.dtype.is_floating:
            continue
        elements, batched = _per_image(_dims(tensor))
        if batched:
            activations += elements
            if is_input:
                reads.append((_writer(tensor), elements))
        elif is_input:
            weights += elements  # no batch dimension: read once per batch (filters, scales, constants)
    out_dims = _dims(op.outputs[0])
    out, _ = _per_image(out_dims)
    flops = 0.0
    known = True
    if kind == "Conv2D":
        k_h, k_w, in_c, _ = _dims(op.inputs[1]) or [0, 0, 0, 0]
        flops = 2.0 * out * (k_h or 0) * (k_w or 0) * (in_c or 0)
    elif kind == "DepthwiseConv2dNative":
        k_h, k_w, _, _ = _dims(op.inputs[1]) or [0, 0, 0, 0]
        flops = 2.0 * out * (k_h or 0) * (k_w or 0)
    elif kind in ("MatMul", "BatchMatMulV2"):
        a = _dims(op.inputs[0]) or [0, 0]
        # transposed (adjoint) x: the inner dimension is x's second-to-last, not the last
        inner = a[-2] if op.get_attr("transpose_a" if kind == "MatMul" else "adj_x") else a[-1]
        flops = 2.0 * out * (inner or 0)
    elif kind in _POOLS:
        ksize = op.get_attr("ksize") if kind != "MaxPoolV2" else [1, 1, 1, 1]
        flops = out * math.prod(ksize)
    elif kind in _BATCH_NORMS:
        flops = 2.0 * out
    elif kind in _ELEMENTWISE:
        flops = out
    elif kind in _REDUCTIONS:
        flops, _ = _per_image(_dims(op.inputs[0]))
    elif kind not in _COPIES:
        known = False
    if activations == 0.0:
        return None  # on shapes, integers or weights only: Grappler's constant folding removes it before serving
    return OpCost(op.name, kind, flops, activations, weights, known, tuple(reads))


def cost_graph(graph: Any) -> GraphCost:
    """The costs of a frozen ``tf.Graph`` (variables already constants, functions inlined)."""
    ops: list[OpCost] = []
    input_elements = 0
    for op in graph.get_operations():
        if op.type == "Placeholder" and op.outputs[0].dtype.is_floating:
            input_elements += int(_per_image(_dims(op.outputs[0]))[0])
        cost = _op_cost(op)
        if cost is not None:
            ops.append(cost)
    unknown = Counter(o.type for o in ops if not o.known)
    return GraphCost(tuple(ops), input_elements, tuple(f"{t} ×{n}" for t, n in sorted(unknown.items())))


def cost_saved_model(path: str | Path, signature: str = "serving_default") -> GraphCost:
    """The costs of an exported SavedModel's signature (its float-image entry point)."""
    from serve_bench._tf import frozen_graph, import_tensorflow

    loaded = import_tensorflow().saved_model.load(str(path))
    return cost_graph(frozen_graph(loaded.signatures[signature]))
