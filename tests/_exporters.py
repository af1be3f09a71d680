"""Telemetry exporters for tests: Prometheus' node exporter run for real (Debian package
prometheus-node-exporter), and recorded pages written exactly as dcgm-exporter and node exporter
write them, to build EnergyViews from recorded telemetry (e.g. report tests)."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from serve_bench.metrics import energy_between
from serve_bench.metrics._energy_sources import PrometheusSource, Reading
from serve_bench.stats._energy import EnergyView
from tests.conftest import free_port, require

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
UUID0 = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
UUID1 = "GPU-8f2a11c0-5b7e-4c3d-9a41-0e6d2b7c9f13"


@contextmanager
def node_exporter(flags: Sequence[str]) -> Iterator[str]:
    """Runs the node exporter with ``flags`` plus a free 127.0.0.1 listen address; yields its
    metrics URL, stops it on exit."""
    if NODE_EXPORTER is None:
        require("Prometheus' node exporter", "apt-get install prometheus-node-exporter (.ci/run installs it)")
    port = free_port()
    args = [NODE_EXPORTER, *flags, f"--web.listen-address=127.0.0.1:{port}"]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).read()
                break
            except OSError:
                if process.poll() is not None:
                    why = process.stderr.read().decode() if process.stderr else ""
                    raise AssertionError(f"{args} exited: {why}") from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"node exporter did not answer on {url}") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def dcgm_page(
    energy_mj: tuple[int | None, ...], power_w: tuple[float, ...], util: int = 87, fb_used_mib: int = 30211
) -> str:
    """A dcgm-exporter page for len(energy_mj) GPUs, rendered as gpuMetricsFormat does."""

    def line(field: str, gpu: int, value: str) -> str:
        uuid = (UUID0, UUID1)[gpu]
        return (
            f'{field}{{gpu="{gpu}",UUID="{uuid}",pci_bus_id="00000000:{gpu + 0x1E:02X}:00.0",'
            f'device="nvidia{gpu}",modelName="NVIDIA H100 80GB HBM3",hostname="gpu-host",'
            f'DCGM_FI_DRIVER_VERSION="550.54.15"}} {value}'
        )

    gpus = range(len(energy_mj))
    blocks = [
        (
            "DCGM_FI_DEV_SM_CLOCK",
            "gauge",
            "SM clock frequency (in MHz).",
            [line("DCGM_FI_DEV_SM_CLOCK", g, "1980") for g in gpus],
        ),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            "gauge",
            "Power draw (in W).",
            [line("DCGM_FI_DEV_POWER_USAGE", g, f"{power_w[g]:f}") for g in gpus],
        ),
        # a blank value (GPU without the field) is skipped by the exporter, not written as 0
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            [
                line("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", g, f"{energy_mj[g]:d}")
                for g in gpus
                if energy_mj[g] is not None
            ],
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            "gauge",
            "GPU utilization (in %).",
            [line("DCGM_FI_DEV_GPU_UTIL", g, f"{util:d}") for g in gpus],
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "gauge",
            "Framebuffer memory used (in MiB).",
            [line("DCGM_FI_DEV_FB_USED", g, f"{fb_used_mib:d}") for g in gpus],
        ),
    ]
    return "".join(
        f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n" + "".join(f"{s}\n" for s in samples)
        for name, kind, help_text, samples in blocks
    )


def node_page(package_j: float | None, dram_j: float, busy_s: float, idle_s: float, cpus: int = 2) -> str:
    """A node exporter 1.5 page (cpu + rapl collectors) as it writes it: ``package_j`` None is a
    host without RAPL (no node_rapl families at all)."""
    lines = [
        "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.",
        "# TYPE node_cpu_seconds_total counter",
    ]
    for cpu in range(cpus):
        for mode, value in (
            ("idle", idle_s),
            ("iowait", 0.0),
            ("irq", 0.0),
            ("nice", 0.0),
            ("softirq", 0.0),
            ("steal", 0.0),
            ("system", busy_s / 2),
            ("user", busy_s / 2),
        ):
            lines.append(f'node_cpu_seconds_total{{cpu="{cpu}",mode="{mode}"}} {value / cpus:g}')
    if package_j is not None:
        for zone, value, path in (("dram", dram_j, "intel-rapl:0:1"), ("package", package_j, "intel-rapl:0")):
            lines += [
                f"# HELP node_rapl_{zone}_joules_total Current RAPL {zone} value in joules",
                f"# TYPE node_rapl_{zone}_joules_total counter",
                f'node_rapl_{zone}_joules_total{{index="0",path="/sys/class/powercap/{path}"}} {value:g}',
            ]
    return "\n".join(lines) + "\n"


def recorded_energy(
    gpu_watts: float | None,
    cpu_watts: float | None,
    seconds: float = 10.0,
    gpu_idle_watts: float | None = None,
    cpu_idle_watts: float | None = None,
) -> EnergyView:
    """The EnergyView a TelemetrySession gives for a point of ``seconds`` at these mean watts, built
    from recorded dcgm-exporter / node exporter pages (None: that device's exporter is absent;
    cpu_watts None with a node exporter present means a host without RAPL)."""
    gpu_url, node_url = "http://gpu-host:9400/metrics", "http://host:9100/metrics"
    first, last = Reading(0.0), Reading(seconds)
    idle: dict[str, float] = {}
    if gpu_watts is not None:
        source = PrometheusSource(gpu_url)
        source.read_text(dcgm_page((1_000_000,), (gpu_watts,)), first)
        source.read_text(dcgm_page((1_000_000 + round(gpu_watts * seconds * 1000),), (gpu_watts,)), last)
        if gpu_idle_watts is not None:
            idle[f"dcgm-exporter|{gpu_url}|GPU 0 NVIDIA H100 80GB HBM3 {UUID0}"] = gpu_idle_watts
    # CPU watts split 90% package, 10% dram (both counted, as on a server CPU)
    source = PrometheusSource(node_url)
    source.read_text(node_page(None if cpu_watts is None else 5000.0, 700.0, 100.0, 900.0), first)
    package = None if cpu_watts is None else 5000.0 + 0.9 * cpu_watts * seconds
    dram = 700.0 if cpu_watts is None else 700.0 + 0.1 * cpu_watts * seconds
    source.read_text(node_page(package, dram, 100.0 + seconds, 900.0 + seconds), last)
    if cpu_watts is not None and cpu_idle_watts is not None:
        idle[f"node-exporter|{node_url}|package (/sys/class/powercap/intel-rapl:0)"] = 0.9 * cpu_idle_watts
        idle[f"node-exporter|{node_url}|dram (/sys/class/powercap/intel-rapl:0:1)"] = 0.1 * cpu_idle_watts
    return energy_between(first, last, idle=idle)
