"""CPU of a local server process, and GPU utilisation and memory through NVML when present."""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["GpuSampler", "ProcessCpu"]


class ProcessCpu:
    """CPU used by a local process (e.g. the local server) between start() and stop()."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._process = psutil.Process(pid)
        self._start: tuple[float, float] | None = None

    def start(self) -> None:
        times = self._process.cpu_times()
        self._start = (time.perf_counter(), times.user + times.system)

    def stop(self) -> dict[str, Any]:
        if self._start is None:
            return {}
        times = self._process.cpu_times()
        wall = time.perf_counter() - self._start[0]
        used = times.user + times.system - self._start[1]
        return {"server_cpu_percent": round(100 * used / max(wall, 1e-9), 1), "server_pid": self._process.pid}


class GpuSampler:
    """Samples GPU utilisation and memory through NVML every ``interval`` seconds; absent NVML
    leaves ``available`` False. Energy and power: :class:`serve_bench.metrics.TelemetrySession`."""

    def __init__(self, interval: float = 0.1, nvml: Any = None) -> None:
        from serve_bench.metrics._energy_sources import NvmlSource, Reading

        self.interval = interval
        self._source = NvmlSource(nvml)
        self.available = not self._source.problem
        self._reading = Reading(0.0)  # accumulates every sample's utilisation and memory
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._source.read(self._reading)
            self._stop.wait(self.interval)

    def start(self) -> None:
        if self.available:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def stop(self) -> dict[str, Any]:
        if not self.available or self._thread is None:
            return {}
        self._stop.set()
        self._thread.join(timeout=2)
        self._source.close()
        utils, memory = self._reading.gpu_util, self._reading.gpu_memory_bytes
        if not utils:
            return {}
        return {
            "gpu_util_percent_mean": round(sum(utils) / len(utils), 1),
            "gpu_memory_used_bytes_max": max(memory) if memory else 0.0,
        }
