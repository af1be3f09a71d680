"""Energy and power of one point, from counters the hardware keeps (read by metrics' telemetry).

Produced by ``serve_bench.metrics.TelemetrySession.stop()``; embedded in a Point as
``Point.energy`` (None when no telemetry was asked for). Only measured figures appear:
a source that could not be read, or whose counter wrapped or reset between the two
readings, leaves its figure None and says why in ``notes``. Nothing is estimated.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NOT_MEASURED", "EnergySource", "EnergyView"]

NOT_MEASURED = "energy not measured on this host"


@dataclass(frozen=True)
class EnergySource:
    """One energy counter read before and after the point.

    ``device`` is "gpu" or "cpu"; ``source`` one of "nvml", "dcgm-exporter", "rapl",
    "node-exporter"; ``where`` "local" or the scraped URL; ``component`` what the counter
    covers ("GPU 0 NVIDIA H100 GPU-…", "package-0", "dram"). ``joules`` is the counter's
    difference, ``watts_mean`` = joules / seconds, ``idle_watts`` the same counter over the
    idle measurement before the run (None when not measured). ``counted`` is False for
    components included in another one (RAPL core/uncore are inside package) so sums
    never count them twice.
    """

    device: str
    source: str
    where: str
    component: str
    joules: float | None
    seconds: float
    watts_mean: float | None
    idle_watts: float | None = None
    counted: bool = True
    note: str = ""


@dataclass(frozen=True)
class EnergyView:
    """The energy side of one point: counters per component, their sums per device, and
    the utilisation figures read beside them.

    ``gpu_joules``/``cpu_joules`` sum the counted sources of that device (None when none
    was measured); ``*_watts_mean`` divide them by ``seconds`` (start() to stop(), which
    includes the point's warm-up: under steady load the mean power is the same);
    ``*_idle_watts`` sum the idle figures. Joules per image = mean watts / images per
    second (:meth:`joules_per_item`).
    """

    seconds: float = 0.0
    sources: tuple[EnergySource, ...] = ()
    gpu_joules: float | None = None
    gpu_watts_mean: float | None = None
    gpu_idle_watts: float | None = None
    cpu_joules: float | None = None
    cpu_watts_mean: float | None = None
    cpu_idle_watts: float | None = None
    host_cpu_busy_percent: float | None = None  # node exporter: share of all host CPUs busy
    host_cpus: int | None = None
    server_cpu_percent: float | None = None  # the local server process (100 = one core)
    gpu_util_percent_mean: float | None = None
    gpu_memory_used_bytes_max: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def measured(self) -> bool:
        """True when at least one device's energy was measured."""
        return self.gpu_joules is not None or self.cpu_joules is not None

    def watts(self, device: str | None = None, above_idle: bool = False) -> float | None:
        """Mean watts of ``device`` ("gpu"/"cpu"), or of both summed when None; minus the idle
        watts when ``above_idle``. None when not measured (or idle not measured)."""
        parts = []
        for name in ("gpu", "cpu") if device is None else (device,):
            mean = getattr(self, f"{name}_watts_mean")
            idle = getattr(self, f"{name}_idle_watts")
            if mean is None:
                continue
            if above_idle:
                if idle is None:
                    return None
                mean -= idle
            parts.append(mean)
        return sum(parts) if parts else None

    def joules_per_item(self, items_per_s: float, device: str | None = None, above_idle: bool = False) -> float | None:
        """Joules per image at ``items_per_s`` (the point's throughput); None if not measured."""
        watts = self.watts(device, above_idle)
        if watts is None or not items_per_s > 0:
            return None
        return watts / items_per_s

    def describe(self) -> str:
        """One line for a terminal: watts per device, idle beside it, or why not measured."""
        parts = []
        for device in ("gpu", "cpu"):
            mean = getattr(self, f"{device}_watts_mean")
            if mean is not None:
                idle = getattr(self, f"{device}_idle_watts")
                parts.append(f"{device.upper()} {mean:.1f} W" + (f" (idle {idle:.1f} W)" if idle is not None else ""))
        return ", ".join(parts) if parts else (self.notes[0] if self.notes else NOT_MEASURED)
