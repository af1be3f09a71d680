"""TF Serving's on-disk layout: <base>/<model>/<version>/, versions are positive integers.

Kept free of TensorFlow so the server and the report can read it cheaply.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "METADATA_FILE",
    "WARMUP_FILE",
    "discard_staging",
    "latest_metadata",
    "list_models",
    "list_versions",
    "read_metadata",
]

WARMUP_FILE = "tf_serving_warmup_requests"
METADATA_FILE = "serve_bench.json"


def list_versions(model_dir: Path) -> list[int]:
    """Versions that TF Serving would see: integer-named sub-directories, ascending."""
    if not model_dir.is_dir():
        return []
    versions = []
    for child in model_dir.iterdir():
        if child.is_dir() and child.name.isdigit() and int(child.name) > 0:
            versions.append(int(child.name))
    return sorted(versions)


def list_models(base: Path) -> list[str]:
    """Model directories under ``base`` that hold at least one version with a saved_model.pb."""
    if not base.is_dir():
        return []
    names = []
    for child in sorted(base.iterdir()):
        if child.name.startswith("."):
            continue
        if any((child / str(v) / "saved_model.pb").exists() for v in list_versions(child)):
            names.append(child.name)
    return names


def read_metadata(version_dir: Path) -> dict[str, Any] | None:
    """The facts written at export (parameters, FLOPs, weights source), or None."""
    path = version_dir / "assets.extra" / METADATA_FILE
    try:
        facts: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return facts


def latest_metadata(models_dir: Path, model: str) -> dict[str, Any] | None:
    """The export facts of the latest version of ``model`` under ``models_dir``, or None."""
    versions = list_versions(models_dir / model)
    return read_metadata(models_dir / model / str(versions[-1])) if versions else None


def discard_staging(staging: Path) -> None:
    """Remove what is left of a staging directory (nothing, once renamed into place), and its
    ``.staging`` parent when no other export still uses it."""
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.parent.rmdir()
    except OSError:
        pass
