"""`make demo`: the whole pipeline on this machine, with random weights."""

from __future__ import annotations

import argparse
from pathlib import Path

from serve_bench import export

DEMO_MODELS = ("inception_v3", "mobilenet_v2")


def ensure_exported(name: str, out: Path, warmup_batch_sizes: tuple[int, ...] = (1, 8)) -> Path:
    """Reuse the latest exported version of ``name``, exporting one with random weights if none."""
    versions = export.list_versions(out / name)
    if versions:
        path = out / name / str(versions[-1])
        print(f"reusing {name} version {versions[-1]} at {path}")
        return path
    print(f"exporting {name} with random weights (no download here; timing does not depend on weight values)")
    result = export.export_model(name, weights="random", out=out, warmup_batch_sizes=warmup_batch_sizes)
    facts = result.facts
    print(f"  -> {result.path}: {facts.parameters:,} parameters, {facts.flops_per_image / 1e9:.2f} GFLOPs/image")
    return result.path


def run_demo(args: argparse.Namespace) -> int:
    out = Path(args.out)
    for name in DEMO_MODELS:
        ensure_exported(name, out)
    print(f"models.config: {export.write_models_config(out)}")
    return 0
