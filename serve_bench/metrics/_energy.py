"""Energy per point: read every energy counter before and after, subtract, explain what is missing.

    session = TelemetrySession(["http://gpu-host:9400/metrics", "http://gpu-host:9100/metrics"],
                               local_nvml=False, local_rapl=False)
    session.measure_idle(2.0)     # once, before the run: idle watts reported beside each point
    session.start()
    ...                           # the point's load
    view = session.stop()         # EnergyView: joules and mean watts per device
    view.joules_per_item(point.throughput.items_per_s)

Counters are differenced, never integrated from samples: a counter that went backwards
between the readings (reset, or a wrap whose range is unknown) drops its figure with a
note; a RAPL wrap is corrected with ``max_energy_range_uj``. A telemetry endpoint that is
down leaves "telemetry unavailable: URL" and the run goes on. Where no energy counter can
be read (most VMs), the view says "energy not measured on this host" and why.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from serve_bench.errors import InvalidValue
from serve_bench.metrics._energy_sources import Counter, NvmlSource, PrometheusSource, RaplSource, Reading, now
from serve_bench.metrics._telemetry import ProcessCpu
from serve_bench.stats import NOT_MEASURED, EnergySource, EnergyView

__all__ = ["TelemetrySession", "check_endpoint", "energy_between"]


def check_endpoint(url: str, name: str = "telemetry") -> None:
    """Refuse a Prometheus page that is not an http(s) URL with a host (InvalidValue ``name``: "telemetry", or
    "metrics_url" for a server's own page)."""
    scheme, host = "", None
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            scheme, host = parts.scheme, parts.hostname
        except ValueError:  # urlsplit's own refusal ("Invalid IPv6 URL" for an unclosed "[")
            pass
    if scheme not in ("http", "https") or not host:
        raise InvalidValue(name, url, "an http:// or https:// URL of a Prometheus metrics page")


class TelemetrySession:
    """Energy and utilisation telemetry around points, from the sources asked for.

    ``endpoints`` are Prometheus pages of dcgm-exporter (GPU) and/or node exporter (CPU
    RAPL and CPU seconds); ``local_nvml`` reads this machine's GPUs, ``local_rapl`` its
    ``/sys/class/powercap``; ``server_pid`` adds the local server process's CPU %.
    ``interval_s``: how often utilisation and power gauges are sampled between start()
    and stop(). ``nvml`` and ``powercap_root`` replace the real ones in tests.
    Blocking calls (HTTP scrapes with ``timeout_s``); from async code use astart()/astop().
    """

    def __init__(
        self,
        endpoints: Sequence[str] = (),
        local_nvml: bool = False,
        local_rapl: bool = False,
        *,
        server_pid: int | None = None,
        interval_s: float = 1.0,
        timeout_s: float = 2.0,
        nvml: Any = None,
        powercap_root: str = "/sys/class/powercap",
    ) -> None:
        for url in endpoints:
            check_endpoint(url)
        if not (math.isfinite(interval_s) and interval_s > 0):
            raise InvalidValue("interval_s", interval_s, "a finite number of seconds > 0")
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise InvalidValue("timeout_s", timeout_s, "a finite number of seconds > 0")
        self._sources: list[Any] = [PrometheusSource(url, timeout_s) for url in endpoints]
        if local_rapl:
            self._sources.append(RaplSource(powercap_root))
        if local_nvml:
            self._sources.append(NvmlSource(nvml))
        self._server_pid = server_pid
        self.interval_s = interval_s
        self._idle: dict[str, float] = {}
        self._idle_notes: tuple[str, ...] = ()
        self._readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu: ProcessCpu | None = None

    def read(self) -> Reading:
        """Every source once, now."""
        reading = Reading(now())
        for source in self._sources:
            source.read(reading)
        reading.time = (reading.time + now()) / 2  # the middle of the (short) scrape round
        return reading

    def measure_idle(self, seconds: float = 2.0) -> EnergyView:
        """Idle power over ``seconds`` with no load: kept and reported beside every later point."""
        first = self.read()
        time.sleep(seconds)
        view = energy_between(first, self.read())
        self._idle = {
            f"{s.source}|{s.where}|{s.component}": s.watts_mean for s in view.sources if s.watts_mean is not None
        }
        self._idle_notes = tuple(f"idle: {note}" for note in view.notes if not note.startswith(NOT_MEASURED))
        return view

    def start(self) -> None:
        """Read every counter now and sample gauges until stop()."""
        self._stop.clear()
        self._readings = [self.read()]
        if self._server_pid:
            try:
                self._cpu = ProcessCpu(self._server_pid)
                self._cpu.start()
            except Exception:  # psutil.NoSuchProcess / AccessDenied: a side figure only
                self._cpu = None
        self._thread = threading.Thread(target=self._sample, name="telemetry", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._readings.append(self.read())

    def stop(self) -> EnergyView:
        """Read every counter again and return the point's EnergyView."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 10)
            self._thread = None
        if not self._readings:
            return EnergyView(notes=("telemetry session stopped without start()",))
        last = self.read()
        readings = [*self._readings, last]
        server_cpu = None
        if self._cpu is not None:
            try:
                server_cpu = self._cpu.stop().get("server_cpu_percent")
            except Exception:
                server_cpu = None
            self._cpu = None
        view = energy_between(readings[0], last, readings, self._idle, server_cpu_percent=server_cpu)
        if self._idle_notes:
            view = replace(view, notes=(*view.notes, *self._idle_notes))
        return view

    async def astart(self) -> None:
        await asyncio.to_thread(self.start)

    async def astop(self) -> EnergyView:
        return await asyncio.to_thread(self.stop)

    def close(self) -> None:
        self._stop.set()
        for source in self._sources:
            if isinstance(source, NvmlSource):
                source.close()


def _difference(values: Sequence[Counter], seconds: float) -> tuple[float | None, str]:
    """The energy between the first and the last of one counter's readings, summed pair by pair
    so that a wrap between two samples (one interval apart) is seen and, with a known range,
    corrected; a decrease without a known range is a reset, and drops the figure."""
    joules = [c.joules for c in values]
    if None in joules:
        return None, "no energy counter"
    numbers = [float(j) for j in joules if j is not None]
    total, wraps = 0.0, 0
    for (before, after), counter in zip(itertools.pairwise(numbers), values[1:]):
        delta = after - before
        if delta < 0:
            if counter.wrap_joules is None or -delta >= counter.wrap_joules:
                return None, (
                    f"counter went backwards ({before:.3f} J -> {after:.3f} J): reset or wrapped "
                    "between readings; figure dropped"
                )
            delta += counter.wrap_joules
            wraps += 1
        total += delta
    if total == 0 and seconds > 0:
        extra = (
            " (dcgm-exporter updates every --collect-interval, 30 s by default)"
            if values[0].source == "dcgm-exporter"
            else ""
        )
        return None, f"counter did not advance in {seconds:.2f} s{extra}; figure dropped"
    note = f"counter wrapped {'once' if wraps == 1 else f'{wraps} times'}; corrected with max_energy_range_uj"
    return total, note if wraps else ""


def _gauge_mean(key: str, readings: Sequence[Reading]) -> float | None:
    values = [c.watts for r in readings for c in r.counters if c.key == key and c.watts is not None]
    return statistics.fmean(values) if values else None


def energy_between(
    first: Reading,
    last: Reading,
    readings: Sequence[Reading] = (),
    idle: dict[str, float] | None = None,
    *,
    server_cpu_percent: float | None = None,
) -> EnergyView:
    """The EnergyView from two readings (``readings``: every sample between, for gauges)."""
    idle = idle or {}
    samples = list(readings) or [first, last]
    seconds = max(last.time - first.time, 0.0)
    before = {c.key: c for c in first.counters}
    notes: list[str] = list(dict.fromkeys([*first.problems, *last.problems]))
    sources: list[EnergySource] = []
    for counter in last.counters:
        old = before.pop(counter.key, None)
        if old is None:
            notes.append(f"{counter.source} {counter.component}: not there at the start; figure dropped")
            continue
        series = [c for r in samples for c in r.counters if c.key == counter.key]
        if not series or series[0] is not old or series[-1] is not counter:
            series = [old, counter]  # readings given without the first and last among them
        joules, why = _difference(series, seconds)
        watts = joules / seconds if joules is not None and seconds > 0 else None
        if joules is None and why == "no energy counter":
            gauge = _gauge_mean(counter.key, samples)
            if gauge is not None:
                why = f"no energy counter; mean of {counter.source}'s power gauge {gauge:.1f} W, not counted"
        sources.append(
            EnergySource(
                counter.device,
                counter.source,
                counter.where,
                counter.component,
                joules,
                seconds,
                watts,
                idle.get(counter.key),
                counter.counted,
                why,
            )
        )
        if why:
            notes.append(f"{counter.source} {counter.component}: {why}")
    for old in before.values():
        notes.append(f"{old.source} {old.component}: gone at the end; figure dropped")
    figures: dict[str, Any] = {}
    for device in ("gpu", "cpu"):
        counted = [s for s in sources if s.device == device and s.counted]
        complete = bool(counted) and all(s.joules is not None for s in counted)
        if counted and not complete:
            notes.append(f"{device} energy not summed: a {device} counter was dropped (see above)")
        joules = sum(s.joules for s in counted if s.joules is not None) if complete else None
        figures[f"{device}_joules"] = joules
        figures[f"{device}_watts_mean"] = joules / seconds if joules is not None and seconds > 0 else None
        idles = [s.idle_watts for s in counted]
        figures[f"{device}_idle_watts"] = (
            sum(i for i in idles if i is not None) if complete and idles and all(i is not None for i in idles) else None
        )
    busy = total = 0.0
    cpus = None
    for where, (busy_after, total_after) in last.cpu_seconds.items():
        if where in first.cpu_seconds:
            busy_before, total_before = first.cpu_seconds[where]
            if total_after < total_before or busy_after < busy_before:
                notes.append(
                    f"{where}: node_cpu_seconds_total went backwards (exporter or host restarted); host CPU dropped"
                )
                continue
            busy += busy_after - busy_before
            total += total_after - total_before
            cpus = (cpus or 0) + last.cpus.get(where, 0)
    util = [u for r in samples for u in r.gpu_util]
    memory = [m for r in samples for m in r.gpu_memory_bytes]
    if figures["gpu_joules"] is None and figures["cpu_joules"] is None:
        why = "; ".join(n for n in notes) or "no telemetry source configured"
        notes = [f"{NOT_MEASURED} ({why})"]
    return EnergyView(
        seconds=seconds,
        sources=tuple(sources),
        **figures,
        host_cpu_busy_percent=round(100 * busy / total, 1) if total > 0 else None,
        host_cpus=cpus,
        server_cpu_percent=server_cpu_percent,
        gpu_util_percent_mean=round(statistics.fmean(util), 1) if util else None,
        gpu_memory_used_bytes_max=max(memory) if memory else None,
        notes=tuple(dict.fromkeys(notes)),
    )
