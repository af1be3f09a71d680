"""CPU of a local server process, and GPU utilisation and memory through NVML when present."""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["ProcessCpu", "GpuSampler"]


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
    """Samples NVML every ``interval`` seconds; absent NVML leaves ``available`` False."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.available = False
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self.available = bool(self._handles)
        except Exception:
            self._handles = []

    def _run(self) -> None:
        while not self._stop.is_set():
            for handle in self._handles:
                util = self._nvml.nvmlDeviceGetUtilizationRates(handle)
                memory = self._nvml.nvmlDeviceGetMemoryInfo(handle)
                self._samples.append((float(util.gpu), float(memory.used)))
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
        if not self._samples:
            return {}
        utils = [u for u, _ in self._samples]
        return {"gpu_util_percent_mean": round(sum(utils) / len(utils), 1),
                "gpu_memory_used_bytes_max": max(m for _, m in self._samples)}
