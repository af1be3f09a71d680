"""The shipped fit, frozen: a version name and a content hash that every prediction carries.

The efficiencies are fitted again on every run, from the shipped tables, so a prediction is only as
fixed as the code and data beside it. The hash is computed at run time from what a prediction is
made of, apart from the user's graph and device:

- the fitted parameters of every runtime and precision class;
- the shipped tables (the published figures and the reference models' costs), as text;
- the figures of the devices those tables measured;
- the form's constants, and what the form predicts for the reference models on those devices,
  so that a change to the formula or to the fusion rules moves the hash even where it leaves a
  fit where it was.

A refit, a corrected row or a new term changes the hash; the version name says which frozen fit
a record claims to be. Predictions frozen before a measurement (benchmarks/results/predicted-*/)
record both, and a test holds the shipped hash to the one recorded there: a deliberate refit takes
a new name and leaves the frozen predictions to the fit that made them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FIT_VERSION", "FORM", "SIGNIFICANT_DIGITS", "ModelVersion", "content_hash", "rounded", "text_digest"]

FIT_VERSION = "2026-11-26"
FORM = "per-op roofline plus a dispatch cost per op, a PCIe copy per batch (serve_bench/predict/_model.py)"
# Numbers are hashed to 4 significant digits: finer than anything a prediction prints, coarser than the
# fit's own resolution (its optimiser stops within about 1e-5 of a parameter), so last-bit differences of
# another machine's floating point leave the hash alone while any real refit moves it.
SIGNIFICANT_DIGITS = 4


@dataclass(frozen=True)
class ModelVersion:
    """Which fit made a prediction: its name and the hash of what it was made from."""

    name: str
    sha256: str

    def describe(self) -> str:
        """One short line for a terminal: ``fit 2026-11-26, sha256 0123456789ab``."""
        return f"fit {self.name}, sha256 {self.sha256[:12]}"

    def to_json(self) -> dict[str, str]:
        return {"version": self.name, "sha256": self.sha256}


def rounded(value: Any) -> Any:
    """``value`` with every float cut to SIGNIFICANT_DIGITS (dicts, lists and tuples walked; tuples become lists)."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(value, Mapping):
        return {str(k): rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def content_hash(inputs: Mapping[str, Any]) -> str:
    """sha256 of ``inputs`` rounded and written as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(rounded(inputs), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def text_digest(text: str) -> str:
    """sha256 of a shipped text file, its line endings made ``\\n`` (a checkout's conversion is no change)."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()
