"""Where energy counters are read: NVML and RAPL locally, DCGM exporter and node exporter remotely.

Each source's ``read()`` returns the counters it sees now (one :class:`Counter` per
component) and never raises for a telemetry problem: it reports it in ``Reading.problems``.
Names and units follow the producers:
* NVML (nvidia-ml-py): ``nvmlDeviceGetTotalEnergyConsumption`` in mJ since the driver
  loaded, ``nvmlDeviceGetPowerUsage`` in mW.
* dcgm-exporter (etc/default-counters.csv): ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``
  counter in mJ, ``DCGM_FI_DEV_POWER_USAGE`` gauge in W, ``DCGM_FI_DEV_GPU_UTIL`` in %,
  ``DCGM_FI_DEV_FB_USED`` in MiB; labelled gpu, UUID, pci_bus_id, device, modelName.
* RAPL (Linux powercap): ``/sys/class/powercap/intel-rapl:*/energy_uj`` in µJ, wrapping
  at ``max_energy_range_uj``.
* node exporter: ``node_rapl_<zone>_joules_total{index,path}`` (the same sysfs counters,
  in J, not wrap-corrected) and ``node_cpu_seconds_total{cpu,mode}``.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench.metrics._exposition import UnreadablePage, read_page, samples

__all__ = ["Counter", "NvmlSource", "PrometheusSource", "RaplSource", "Reading", "rapl_counted"]

_RAPL = re.compile(r"^node_rapl_(.+)_joules_total$")
_NOT_BUSY = ("idle", "iowait", "steal")  # steal: time the hypervisor gave to others


@dataclass(frozen=True)
class Counter:
    """One energy counter now: ``joules`` since an arbitrary origin (None: not exposed),
    ``watts`` an instantaneous power gauge where the source has one, ``wrap_joules`` the
    value at which the counter wraps to 0 when known (RAPL sysfs)."""

    device: str
    source: str
    where: str
    component: str
    joules: float | None
    watts: float | None = None
    wrap_joules: float | None = None
    counted: bool = True

    @property
    def key(self) -> str:
        return f"{self.source}|{self.where}|{self.component}"


@dataclass
class Reading:
    """What one read of one source saw, at ``time`` (time.monotonic())."""

    time: float
    counters: list[Counter] = field(default_factory=list)
    cpu_seconds: dict[str, tuple[float, float]] = field(default_factory=dict)  # where -> (busy, total) s
    cpus: dict[str, int] = field(default_factory=dict)
    gpu_util: list[float] = field(default_factory=list)
    gpu_memory_bytes: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def rapl_counted(zone: str) -> bool:
    """Whether a RAPL zone adds to the CPU's total: package-N and dram do; core, uncore
    (inside package) and psys (the whole platform, package included) do not."""
    return zone.startswith("package") or zone == "dram"


class NvmlSource:
    """Local GPUs through NVML. ``nvml`` is the pynvml module (a fake in tests)."""

    def __init__(self, nvml: Any = None) -> None:
        self.problem = ""
        self._handles: list[tuple[Any, str]] = []
        try:
            if nvml is None:
                import pynvml

                nvml = pynvml
            nvml.nvmlInit()
        except ImportError:
            self.problem = "NVML not read: nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            return
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded ...: no GPU here
            self.problem = f"NVML not available: {exc}"
            return
        self._nvml = nvml
        try:
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                name = _text(nvml.nvmlDeviceGetName(handle))
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
                self._handles.append((handle, f"GPU {index} {name} {uuid}"))
        except Exception as exc:
            self.problem = f"NVML not available: {exc}"
        if not self._handles and not self.problem:
            self.problem = "NVML reports no GPU"

    def read(self, reading: Reading) -> None:
        if self.problem:
            reading.problems.append(self.problem)
            return
        nvml = self._nvml
        for handle, component in self._handles:
            joules = watts = None
            try:
                joules = nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3  # mJ
            except Exception as exc:  # NVMLError_NotSupported before Volta
                reading.problems.append(f"{component}: NVML total energy not available ({exc})")
            try:
                watts = nvml.nvmlDeviceGetPowerUsage(handle) / 1e3  # mW
            except Exception as exc:
                reading.problems.append(f"{component}: NVML power not available ({exc})")
            try:
                reading.gpu_util.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
                reading.gpu_memory_bytes.append(float(nvml.nvmlDeviceGetMemoryInfo(handle).used))
            except Exception:  # utilisation is a side figure; energy does not depend on it
                pass
            reading.counters.append(Counter("gpu", "nvml", "local", component, joules, watts))

    def close(self) -> None:
        if self._handles:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._handles = []


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RaplSource:
    """The host's RAPL counters from the powercap sysfs tree (``root`` for tests)."""

    def __init__(self, root: str | Path = "/sys/class/powercap") -> None:
        self.root = Path(root)

    def _zones(self) -> list[Path]:
        try:
            return sorted(p for p in self.root.glob("intel-rapl:*") if (p / "energy_uj").exists())
        except OSError:
            return []

    def read(self, reading: Reading) -> None:
        zones = self._zones()
        if not zones:
            reading.problems.append(f"no RAPL counters under {self.root}")
            return
        for zone in zones:
            try:
                name = (zone / "name").read_text().strip()
                energy = int((zone / "energy_uj").read_text())
                wrap = int((zone / "max_energy_range_uj").read_text())
            except PermissionError:
                reading.problems.append(
                    f"{zone / 'energy_uj'} is not readable (Linux 5.10+ lets only root read RAPL counters)"
                )
                continue
            except (OSError, ValueError) as exc:
                reading.problems.append(f"{zone}: unreadable RAPL zone ({exc})")
                continue
            reading.counters.append(
                Counter(
                    "cpu",
                    "rapl",
                    "local",
                    f"{name} ({zone.name})",
                    energy / 1e6,
                    wrap_joules=(wrap + 1) / 1e6 if wrap > 0 else None,
                    counted=rapl_counted(name),
                )
            )


class PrometheusSource:
    """A DCGM exporter or node exporter page (whichever families it holds) at ``url``."""

    def __init__(self, url: str, timeout_s: float = 2.0) -> None:
        self.url = url
        self.timeout_s = timeout_s

    def read(self, reading: Reading) -> None:
        try:
            text = read_page(self.url, self.timeout_s)
        except UnreadablePage as exc:
            reading.problems.append(f"telemetry unavailable: {self.url} ({exc})")
            return
        self.read_text(text, reading)

    def read_text(self, text: str, reading: Reading) -> None:
        """Fill ``reading`` from one exposition page (also used on recorded pages)."""
        gpus: dict[str, dict[str, Any]] = {}
        busy = total = 0.0
        cpus: set[str] = set()
        rapl_seen = cpu_seen = False
        for name, labels, value in samples(text):
            if name.startswith("DCGM_FI_DEV_"):
                gpu = gpus.setdefault(labels.get("gpu", "?"), {"labels": labels})
                gpu[name] = value
            elif (rapl := _RAPL.match(name)) is not None:
                rapl_seen = True
                zone = labels.get("rapl_zone") or rapl.group(1)
                where = labels.get("path") or labels.get("index", "")
                reading.counters.append(
                    Counter("cpu", "node-exporter", self.url, f"{zone} ({where})", value, counted=rapl_counted(zone))
                )
            elif name == "node_cpu_seconds_total" and math.isfinite(value):
                cpu_seen = True
                cpus.add(labels.get("cpu", ""))
                total += value
                if labels.get("mode") not in _NOT_BUSY:
                    busy += value
        for index, gpu in sorted(gpus.items()):
            labels = gpu["labels"]
            component = f"GPU {index} {labels.get('modelName', '')} {labels.get('UUID', labels.get('uuid', ''))}"
            component = " ".join(component.split())  # one line in every note, whatever a label's escapes held
            energy = gpu.get("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
            power = gpu.get("DCGM_FI_DEV_POWER_USAGE")
            if "DCGM_FI_DEV_GPU_UTIL" in gpu:
                reading.gpu_util.append(gpu["DCGM_FI_DEV_GPU_UTIL"])
            if "DCGM_FI_DEV_FB_USED" in gpu:
                reading.gpu_memory_bytes.append(gpu["DCGM_FI_DEV_FB_USED"] * 2**20)  # MiB
            if energy is None:
                reading.problems.append(
                    f"{self.url}: {component.strip()} has no "
                    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (add it to the exporter's counters)"
                )
            reading.counters.append(
                Counter(
                    "gpu", "dcgm-exporter", self.url, component.strip(), None if energy is None else energy / 1e3, power
                )
            )
        if cpu_seen:
            reading.cpu_seconds[self.url] = (busy, total)
            reading.cpus[self.url] = len(cpus)
        if not gpus and not rapl_seen:
            what = (
                "node exporter page without node_rapl_*_joules_total (no RAPL on that host, or the rapl "
                "collector is off)"
                if cpu_seen
                else "no DCGM or node exporter energy metrics"
            )
            reading.problems.append(f"{self.url}: {what}")


def now() -> float:
    return time.monotonic()
