"""Run metadata: where and with what a run was measured (pyperf-style)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["collect_run_metadata", "config_hash", "cpu_model", "gpu_details", "gpu_names"]

_LIBRARIES = (
    "serve-bench",
    "tensorflow",
    "tensorflow-serving-api",
    "grpcio",
    "protobuf",
    "aiohttp",
    "numpy",
    "orjson",
    "hdrhistogram",
    "locust",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_names() -> list[str]:
    """GPUs seen by NVML (pynvml) or nvidia-smi; [] when there are none."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [
                pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                for i in range(pynvml.nvmlDeviceGetCount())
            ]
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        pass
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
            )
            return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            return []
    return []


def gpu_details() -> list[dict[str, Any]]:
    """What NVML says of each GPU where it is readable (name, driver, memory, clocks now and at most, power
    limit; a figure NVML refuses is left out); [] without NVML or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    readings: dict[str, Callable[[Any], Any]] = {
        "name": pynvml.nvmlDeviceGetName,
        "driver": lambda _: pynvml.nvmlSystemGetDriverVersion(),
        "memory_total_mib": lambda h: pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20,
        # read once, when the run starts (the GPU is likely idle then): not the clocks it ran at
        "sm_clock_at_start_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "memory_clock_at_start_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": lambda h: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
        "max_memory_clock_mhz": lambda h: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "power_limit_w": lambda h: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000,
    }
    details: list[dict[str, Any]] = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            facts: dict[str, Any] = {"index": index}
            for key, read in readings.items():
                try:
                    value = read(handle)
                except Exception:  # NVML_ERROR_NOT_SUPPORTED and kin: that figure is not readable here
                    continue
                facts[key] = value.decode() if isinstance(value, bytes) else value
            details.append(facts)
    except Exception:
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return details


def _git_commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0:
            return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        pass
    return ""


def _versions() -> dict[str, str]:
    versions = {}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def config_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def collect_run_metadata(config_text: str = "", **extra: Any) -> dict[str, Any]:
    try:
        import psutil

        memory = psutil.virtual_memory().total
    except Exception:
        memory = 0
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory,
        "gpus": gpu_names(),
        "gpu_details": gpu_details(),
        "libraries": _versions(),
        "git_commit": _git_commit(),
        "config_hash": config_hash(config_text) if config_text else "",
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }
