"""The user's own CPU as a device: described on the command line or read from this host.

A CPU's peak is cores × clock × FLOPs per cycle, where FLOPs per cycle = (vector bits / 32)
float32 lanes × 2 (a fused multiply-add counts two) × FMA units (2 on every x86 core with FMA
since Haswell and Zen 2; AMD Zen 4 runs AVX-512 as two 256-bit halves, so 256 counts there).
Memory bandwidth is not printed anywhere on a host; it is read with one timed copy when asked
for (``measure_bandwidth``) or given. A prediction calibrated on a measured point rescales both
by one efficiency, so these figures set the balance between compute and memory, not the answer.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from serve_bench.errors import UserError
from serve_bench.predict._devices import Device

__all__ = ["CpuSpec", "cpu_device", "measure_bandwidth", "parse_cpu", "read_host_cpu"]

CPU_ID = "cpu"
_KEYS = {
    "cores": int,
    "ghz": float,
    "vector_bits": int,
    "fma_units": int,
    "bw_gbs": float,
    "mem_gb": float,
    "call_ms": float,
}
# What one call of a served model costs on a CPU whatever its batch size (the session's set-up, thread
# pools waking, kernels too small to keep every core busy at batch 1). No datasheet gives it: fitted with
# fit_cpu on the two runs of tests/data/demo_2core_20261125 (13.9 ms InceptionV3, 12.3 ms MobileNetV2).
CALL_MS = 13.0
CALL_MS_SOURCE = "fitted on make demo, 2-core EPYC VM; yours: --cpu call_ms=N"


@dataclass(frozen=True)
class CpuSpec:
    """What sets a CPU's peak: cores, clock, vector width and FMA units; its memory bandwidth and size."""

    name: str
    cores: int
    ghz: float
    vector_bits: int
    fma_units: int
    bw_gbs: float
    mem_gb: float
    call_ms: float = CALL_MS

    @property
    def peak_gflops(self) -> float:
        lanes = self.vector_bits / 32
        return self.cores * self.ghz * lanes * 2 * self.fma_units

    def describe(self) -> str:
        return (
            f"{self.name}: {self.cores} cores x {self.ghz:.2f} GHz x {self.vector_bits}-bit FMA x {self.fma_units}"
            f" = {self.peak_gflops:.0f} GFLOP/s fp32 peak, {self.bw_gbs:.0f} GB/s"
        )


def cpu_device(spec: CpuSpec) -> Device:
    """The CPU as a row of the device table: no TF32, no float16 tensor cores, no PCIe transfer."""
    peak = spec.peak_gflops / 1e3
    return Device(
        id=CPU_ID,
        name=spec.name,
        fp32_tflops=peak,
        tf32_tflops=None,
        fp16_tflops=peak,
        mem_bw_gbs=spec.bw_gbs,
        mem_gb=spec.mem_gb,
        pcie_gen=0,
        pcie_lanes=0,
        sources={"fp32_tflops": spec.describe()},
    )


def _cpuinfo(text: str) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _vector_bits(flags: set[str], vendor: str) -> int:
    if "avx512f" in flags and vendor != "AuthenticAMD":
        return 512
    if "avx2" in flags or "avx" in flags:
        return 256
    return 128


def read_host_cpu(
    cpuinfo: str | None = None,
    cores: int | None = None,
    mem_gb: float | None = None,
    bw_gbs: float | None = None,
    ghz: float | None = None,
) -> CpuSpec:
    """This host's CPU from /proc/cpuinfo (clock: the firmware's maximum where /sys gives it, else the current)."""
    text = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text(errors="replace")
    info = _cpuinfo(text)
    flags = set(info.get("flags", "").split())
    if ghz is None:
        ghz = float(info.get("cpu MHz", "0") or 0) / 1e3
        max_freq = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        if cpuinfo is None and max_freq.exists():
            ghz = int(max_freq.read_text()) / 1e6
    if ghz <= 0:
        raise UserError("cannot read this CPU's clock from /proc/cpuinfo; describe it with --cpu cores=N,ghz=F")
    if cores is None:
        cores = len(os.sched_getaffinity(0))
    if mem_gb is None:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return CpuSpec(
        name=info.get("model name", "this CPU"),
        cores=cores,
        ghz=ghz,
        vector_bits=_vector_bits(flags, info.get("vendor_id", "")),
        fma_units=2 if "fma" in flags else 1,
        bw_gbs=bw_gbs if bw_gbs is not None else measure_bandwidth(),
        mem_gb=mem_gb,
    )


def measure_bandwidth(megabytes: int = 256, repeats: int = 3) -> float:
    """GB/s of the best of ``repeats`` copies of a ``megabytes`` array (read + write counted)."""
    src = np.ones(megabytes * 2**20 // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - started)
    return 2 * src.nbytes / best / 1e9


def parse_cpu(text: str, host: CpuSpec | None = None) -> CpuSpec:
    """``cores=2,ghz=2.6,vector_bits=256`` over the host's figures (or over ``host``); a one-line error if malformed.

    The host is read only for the figures not given: with all of them, nothing of this machine is used.
    """
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in _KEYS:
            raise UserError(f"--cpu {text!r}: expected KEY=VALUE pairs with keys {', '.join(_KEYS)}")
        try:
            number = _KEYS[key](value)
        except ValueError:
            kind = "a whole number" if _KEYS[key] is int else "a number"
            raise UserError(f"--cpu {key}={value!r}: not {kind}") from None
        try:
            finite = math.isfinite(number)
        except OverflowError:  # a whole number past float's range (cores of 400 digits): a traceback before
            finite = False
        if not finite:
            raise UserError(f"--cpu {key}={value}: must be a finite number")
        if number <= 0 and not (key == "call_ms" and number == 0):
            raise UserError(f"--cpu {key}={value}: must be greater than 0")
        values[key] = number
    if host is None and set(_KEYS) - {"call_ms"} <= set(values):
        host = CpuSpec("the CPU described", 1, 1.0, 128, 1, 1.0, 1.0)  # every figure is replaced below
    if host is None:
        try:
            host = read_host_cpu(bw_gbs=values.get("bw_gbs"), ghz=values.get("ghz"))
        except (OSError, ValueError) as exc:
            raise UserError(
                f"cannot read this host's CPU ({exc}); describe it: --cpu cores=N,ghz=F,vector_bits=B,fma_units=U,"
                "bw_gbs=G,mem_gb=M"
            ) from None
    return CpuSpec(
        name=host.name,
        cores=int(values.get("cores", host.cores)),
        ghz=values.get("ghz", host.ghz),
        vector_bits=int(values.get("vector_bits", host.vector_bits)),
        fma_units=int(values.get("fma_units", host.fma_units)),
        bw_gbs=values.get("bw_gbs", host.bw_gbs),
        mem_gb=values.get("mem_gb", host.mem_gb),
        call_ms=values.get("call_ms", host.call_ms),
    )
