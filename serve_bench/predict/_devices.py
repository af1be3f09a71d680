"""The device table (data/devices.json, each figure with its source) and the precisions a device has."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from serve_bench.errors import UserError

__all__ = [
    "GENERATIONS",
    "PRECISIONS",
    "Device",
    "bytes_per_element",
    "device_table",
    "get_device",
    "peak_flops",
    "precision_class",
]

# fp32: CUDA cores; tf32: TensorFloat-32 tensor cores on float32 data (TensorFlow's default on
# Ampere and later); mixed: float16 tensor cores with float16 activations and weights (AMP).
PRECISIONS = ("fp32", "tf32", "mixed")
# Each architecture's CUDA compute capability (github winston-zhang-orz/gpu-specs specs.md
# @097f0fb34b7530bb7aa83535e5170a4c6701b5d7 line 39: V100 7, T4 7.5, A100 8.0 (A10 8.6), L4 8.9, H100 9):
# the order in which "the nearest architecture" is taken.
GENERATIONS = {"Volta": 7.0, "Turing": 7.5, "Ampere": 8.0, "Ada Lovelace": 8.9, "Hopper": 9.0}


@dataclass(frozen=True)
class Device:
    id: str
    name: str
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float
    mem_bw_gbs: float
    mem_gb: float
    pcie_gen: int
    pcie_lanes: int
    tdp_w: float | None = None
    price_per_hour_usd: float | None = None
    architecture: str = ""  # a key of GENERATIONS ("" for a CPU)
    sources: dict[str, str] = field(default_factory=dict, compare=False)


@cache
def device_table() -> dict[str, Device]:
    """Every device serve-bench can predict for, by id."""
    text = resources.files("serve_bench.predict").joinpath("data", "devices.json").read_text()
    entries: list[dict[str, Any]] = json.loads(text)["devices"]
    return {e["id"]: Device(**e) for e in entries}


def get_device(name: str) -> Device:
    table = device_table()
    device = table.get(name.lower())
    if device is None:
        raise UserError(f"unknown GPU {name!r}; choose one of: {', '.join(table)}")
    return device


def precision_class(precision: str) -> str:
    """Precisions that share fitted efficiencies: 4-byte data (fp32, tf32) or 2-byte (mixed)."""
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)}")
    return "mixed" if precision == "mixed" else "fp32"


def peak_flops(device: Device, precision: str) -> float:
    """The device's peak in FLOP/s at ``precision``; a one-line error where it has none."""
    precision_class(precision)
    if precision == "tf32":
        if device.tf32_tflops is None:
            raise UserError(f"{device.name} has no TF32 (it came with Ampere); use --precision fp32 or mixed")
        return device.tf32_tflops * 1e12
    return (device.fp16_tflops if precision == "mixed" else device.fp32_tflops) * 1e12


def bytes_per_element(precision: str) -> int:
    return 2 if precision_class(precision) == "mixed" else 4
