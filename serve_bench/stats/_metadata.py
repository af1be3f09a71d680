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
from pathlib import Path
from typing import Any

__all__ = ["collect_run_metadata", "config_hash", "cpu_model", "gpu_names"]

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
        "libraries": _versions(),
        "git_commit": _git_commit(),
        "config_hash": config_hash(config_text) if config_text else "",
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }
