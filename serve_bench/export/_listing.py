"""What ``serve-bench export`` prints: the catalogue as a table, an export as a few lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from serve_bench.catalogue import CATALOGUE
from serve_bench.export._convert import Conversion
from serve_bench.export._export import ExportResult, model_facts
from serve_bench.runtimes import record

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["catalogue_table", "describe_export"]


def catalogue_table() -> Table:
    """The catalogue with sizes, parameters and GFLOPs counted from each graph (builds each model)."""
    from rich.table import Table

    table = Table(title="serve-bench model catalogue (counted from each graph)")
    for column in ("model", "input", "output", "parameters", "GFLOPs/image", "description"):
        table.add_column(column, justify="right" if column in ("parameters", "GFLOPs/image") else "left")
    for name, spec in CATALOGUE.items():
        facts = model_facts(name)
        h, w, c = facts.input_shape
        table.add_row(
            name,
            f"{h}x{w}x{c}",
            str(facts.feature_size),
            f"{facts.parameters:,}",
            f"{facts.flops_per_image / 1e9:.3f}",
            spec.description,
        )
    return table


def describe_export(result: ExportResult) -> str:
    """Where the export went, its two signatures, its size and cost, and its weights."""
    facts = result.facts
    h, w, c = facts.input_shape
    weights = (
        "random (timing does not depend on weight values; the features mean nothing)"
        if facts.weights == "random"
        else facts.weights
    )
    return "\n".join(
        [
            f"exported {facts.model} version {result.version} to {result.path}",
            f"  serving_default: images float32 [-1, {h}, {w}, {c}] (pixels 0-255) -> features float32 "
            f"[-1, {facts.feature_size}]",
            f"  serving_bytes:   image_bytes string [-1] (JPEG/PNG) -> features float32 [-1, {facts.feature_size}]",
            f"  parameters {facts.parameters:,}; {facts.flops_per_image / 1e9:.3f} GFLOPs per image; "
            f"warm-up batch sizes {','.join(map(str, facts.warmup_batch_sizes))}",
            f"  weights: {weights}",
            f"  models.config: {result.models_config}",
            *(f"  {path.parent.name} model: {path}" for path in result.repositories),
            *(_conversion_line(c) for c in result.conversions),
            *(f"  {notice}" for notice in result.notices),
        ]
    )


def _conversion_line(conversion: Conversion) -> str:
    if not conversion.ok:
        return f"  {conversion.runtime}: not converted ({conversion.converter}): {conversion.reason}"
    error = f"{conversion.max_error:.1g}" if conversion.max_error is not None else "?"
    tolerance = f"{conversion.tolerance:.1g}" if conversion.tolerance is not None else "?"
    # a runtime that never serves beside TensorFlow (jax) does not serve serving_bytes at all
    alone = not record(conversion.runtime).beside_tensorflow
    bytes_note = "serving_bytes is TensorFlow's alone" if alone else "serving_bytes stays on TensorFlow"
    return (
        f"  {conversion.runtime}: {conversion.path} ({conversion.converter}, {conversion.seconds:.1f} s; "
        f"features within {error} of TensorFlow's, float32 allows {tolerance}; {bytes_note})"
    )
