"""Energy telemetry: node exporter run for real, DCGM exporter pages as it writes them, NVML through a fake.

Names and units are the producers' own:
* dcgm-exporter etc/default-counters.csv: ``DCGM_FI_DEV_POWER_USAGE`` gauge "Power draw (in W)",
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` counter "Total energy consumption since boot (in mJ)";
  lines rendered by internal/pkg/rendermetrics/render_metrics.go (gpuMetricsFormat: gpu, UUID,
  pci_bus_id, device, modelName, hostname, then label fields such as DCGM_FI_DRIVER_VERSION),
  values with ``%d`` for int64 fields and ``%f`` for doubles (collector/gpu_collector.go toString).
* NVML (nvidia-ml-py): nvmlDeviceGetTotalEnergyConsumption in mJ, nvmlDeviceGetPowerUsage in mW.
* node exporter: ``node_rapl_<zone>_joules_total{index,path}`` read from the powercap sysfs tree
  (``--path.sysfs``), ``node_cpu_seconds_total{cpu,mode}`` from /proc/stat.
"""

from __future__ import annotations

import http.server
import inspect
import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from serve_bench.metrics import TelemetrySession, energy_between
from serve_bench.metrics._energy_sources import Counter, NvmlSource, PrometheusSource, RaplSource, Reading
from serve_bench.stats._energy import NOT_MEASURED, EnergyView
from tests._exporters import UUID0, UUID1, dcgm_page
from tests._exporters import node_exporter as run_node_exporter
from tests.conftest import free_port


def _reading(source: PrometheusSource, text: str, at: float) -> Reading:
    reading = Reading(at)
    source.read_text(text, reading)
    return reading


# ---------------------------------------------------------------- DCGM exporter (recorded pages)


def test_dcgm_energy_counter_gives_joules_and_watts_per_gpu():
    """Two GPUs: joules = counter difference in mJ / 1000 summed over GPUs, watts = J / s; the
    power gauge (W), GPU_UTIL (%) and FB_USED (MiB) are read with their documented units."""
    source = PrometheusSource("http://gpu-host:9400/metrics")
    first = _reading(source, dcgm_page((151_164_848, 98_000_000), (71.5, 69.0)), at=100.0)
    last = _reading(source, dcgm_page((151_164_848 + 3_000_000, 98_000_000 + 2_500_000), (305.25, 290.0)), at=110.0)
    view = energy_between(
        first,
        last,
        idle={
            f"dcgm-exporter|{source.url}|GPU 0 NVIDIA H100 80GB HBM3 {UUID0}": 60.0,
            f"dcgm-exporter|{source.url}|GPU 1 NVIDIA H100 80GB HBM3 {UUID1}": 58.5,
        },
    )
    assert view.seconds == 10.0
    assert [s.joules for s in view.sources] == [3000.0, 2500.0]
    assert [s.watts_mean for s in view.sources] == [300.0, 250.0]
    assert view.gpu_joules == 5500.0 and view.gpu_watts_mean == 550.0 and view.gpu_idle_watts == 118.5
    assert view.cpu_joules is None and view.measured
    assert view.gpu_util_percent_mean == 87.0 and view.gpu_memory_used_bytes_max == 30211 * 2**20
    assert view.joules_per_item(1100.0) == 0.5 and view.joules_per_item(1100.0, above_idle=True) == pytest.approx(
        (550.0 - 118.5) / 1100.0
    )
    assert view.describe() == "GPU 550.0 W (idle 118.5 W)"
    assert not view.notes


def test_the_telemetry_reader_unescapes_label_values_as_prometheus_does():
    """A label value's escapes are ``\\\\``, ``\\"`` and ``\\n`` (prometheus/common d2417e2,
    expfmt/text_parse.go:875-885). The telemetry reader had an exposition parser of its own that left ``\\n`` as
    two characters where the metrics readers' (``_exposition.samples``) gave a new line; it now uses that one, so
    one page reads alike whichever reader reads it. The GPU's name, said in notes, stays on one line."""
    page = 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a",modelName="H100 \\"SXM\\"\\\\x\\nrev"} 5000\n'
    reading = _reading(PrometheusSource("http://gpu-host:9400/metrics"), page, at=1.0)
    assert [c.component for c in reading.counters] == ['GPU 0 H100 "SXM"\\x rev GPU-a']


def test_dcgm_counter_reset_drops_the_figure_with_a_note():
    """DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counts since the driver loaded: a smaller value after
    the point means a reset (driver reload, exporter on another node); the figure is dropped."""
    source = PrometheusSource("http://gpu-host:9400/metrics")
    first = _reading(source, dcgm_page((151_164_848,), (71.5,)), at=0.0)
    last = _reading(source, dcgm_page((2_000,), (80.0,)), at=5.0)
    view = energy_between(first, last)
    assert view.sources[0].joules is None and view.gpu_joules is None and not view.measured
    assert (
        "counter went backwards (151164.848 J -> 2.000 J): reset or wrapped between readings; figure dropped"
        in view.notes[0]
    )
    assert view.notes[0].startswith(NOT_MEASURED)


def test_dcgm_counter_that_did_not_advance_is_dropped():
    """dcgm-exporter refreshes values every --collect-interval (pkg/cmd/app.go: 30000 ms by
    default): an unchanged counter over a busy point is stale, not zero energy."""
    source = PrometheusSource("http://gpu-host:9400/metrics")
    view = energy_between(
        _reading(source, dcgm_page((5_000,), (300.0,)), 0.0), _reading(source, dcgm_page((5_000,), (300.0,)), 4.0)
    )
    assert view.gpu_joules is None
    assert (
        "counter did not advance in 4.00 s (dcgm-exporter updates every --collect-interval, 30 s by default)"
        in view.notes[0]
    )


def test_gpu_without_energy_counter_is_not_summed_and_says_so():
    """Before Volta the energy field is blank and the exporter skips the line: the power gauge is
    reported in the note, never turned into joules silently; a second GPU with a counter does not
    make a partial sum."""
    source = PrometheusSource("http://gpu-host:9400/metrics")
    view = energy_between(
        _reading(source, dcgm_page((1_000, None), (100.0, 40.0)), 0.0),
        _reading(source, dcgm_page((3_000, None), (100.0, 50.0)), 2.0),
    )
    assert view.sources[0].joules == 2.0 and view.sources[1].joules is None
    assert "no energy counter; mean of dcgm-exporter's power gauge 45.0 W, not counted" in view.sources[1].note
    assert view.gpu_joules is None
    assert any("has no DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in n for n in view.notes[0].split("; "))


def test_counters_are_differenced_sample_by_sample():
    """A reset in the middle of a point is seen even when the counter ends above where it began
    (100 -> 5 -> 150 J is not +50 J); RAPL wraps between samples are corrected one by one."""
    source = PrometheusSource("http://gpu-host:9400/metrics")
    pages = [dcgm_page((100_000,), (300.0,)), dcgm_page((5_000,), (300.0,)), dcgm_page((150_000,), (300.0,))]
    readings = [_reading(source, page, at) for page, at in zip(pages, (0.0, 1.0, 2.0))]
    view = energy_between(readings[0], readings[-1], readings)
    assert view.gpu_joules is None
    assert "counter went backwards (100.000 J -> 5.000 J)" in view.notes[0]

    wrap = 1000.0

    def rapl(at: float, joules: float) -> Reading:
        return Reading(at, counters=[Counter("cpu", "rapl", "local", "package-0", joules, wrap_joules=wrap)])

    samples = [rapl(0.0, 900.0), rapl(1.0, 100.0), rapl(2.0, 950.0), rapl(3.0, 50.0)]
    view = energy_between(samples[0], samples[-1], samples)
    assert view.cpu_joules == pytest.approx(200.0 + 850.0 + 100.0)
    assert "rapl package-0: counter wrapped 2 times; corrected with max_energy_range_uj" in view.notes


class _Pages(http.server.BaseHTTPRequestHandler):
    pages: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        body = (self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def page_server() -> Iterator[tuple[str, type[_Pages]]]:
    """A real HTTP server answering the recorded pages in order (the last one repeats)."""
    handler = type("Pages", (_Pages,), {"pages": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics", handler
    server.shutdown()
    server.server_close()


def test_session_scrapes_dcgm_over_http_and_a_down_endpoint_does_not_stop_it(page_server):
    """TelemetrySession over HTTP: idle, then a point; an endpoint that refuses connections adds
    "telemetry unavailable: URL" and the figures of the live endpoint still come out."""
    url, handler = page_server
    down = f"http://127.0.0.1:{free_port()}/metrics"
    handler.pages[:] = [
        dcgm_page((10_000,), (60.0,)),
        dcgm_page((10_120,), (60.0,)),  # idle
        dcgm_page((20_000,), (300.0,)),
        dcgm_page((20_600,), (300.0,)),
    ]  # point
    session = TelemetrySession([url, down], interval_s=30.0, timeout_s=1.0)
    idle = session.measure_idle(0.2)
    assert idle.gpu_joules == pytest.approx(0.12)
    session.start()
    time.sleep(0.3)
    view = session.stop()
    session.close()
    assert view.gpu_joules == pytest.approx(0.6)
    assert view.gpu_watts_mean == pytest.approx(0.6 / view.seconds)
    assert view.gpu_idle_watts == pytest.approx(0.12 / idle.seconds)
    assert idle.seconds >= 0.2
    assert any(n.startswith(f"telemetry unavailable: {down} (") for n in view.notes)


# ---------------------------------------------------------------- NVML (fake handle, real names)


class FakeNvml:
    """Stands in for pynvml on a host without a GPU: same function names and units (mJ, mW)."""

    NVMLError = None  # set from the real module below

    def __init__(self, energy_mj: list[int], power_mw: list[int], energy_supported: bool = True) -> None:
        self.energy_mj, self.power_mw, self.energy_supported = energy_mj, power_mw, energy_supported
        self.shutdown = False

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.energy_mj)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return (UUID0, UUID1)[handle]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if not self.energy_supported:
            import pynvml

            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.energy_mj[handle]

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self.power_mw[handle]

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        return SimpleNamespace(gpu=95, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(total=80 * 2**30, free=50 * 2**30, used=30 * 2**30)


def test_fake_nvml_has_the_real_modules_names_and_arities():
    """Every function the fake provides exists in nvidia-ml-py with the same required parameters."""
    import pynvml

    names = [n for n in vars(FakeNvml) if n.startswith("nvml")]
    assert "nvmlDeviceGetTotalEnergyConsumption" in names and "nvmlDeviceGetPowerUsage" in names
    for name in names:
        real = inspect.signature(getattr(pynvml, name)).parameters.values()
        fake = inspect.signature(getattr(FakeNvml([0], [0]), name)).parameters
        assert [p.name for p in real if p.default is inspect.Parameter.empty] == list(fake), name


def test_nvml_energy_before_and_after_a_point():
    """nvmlDeviceGetTotalEnergyConsumption (mJ) read at start() and stop(): joules and mean watts per
    GPU, summed; utilisation and memory sampled beside; NVML shut down on close()."""
    nvml = FakeNvml([1_000_000, 2_000_000], [70_000, 65_000])
    session = TelemetrySession(local_nvml=True, nvml=nvml, interval_s=30.0)
    session.start()
    nvml.energy_mj[:] = [1_090_000, 2_045_000]
    view = session.stop()
    assert session.measure_idle(0.1).seconds >= 0.1  # after a stop() too, idle waits its full span
    session.close()
    assert [s.joules for s in view.sources] == [90.0, 45.0] and view.gpu_joules == 135.0
    assert view.gpu_watts_mean == pytest.approx(135.0 / view.seconds, rel=1e-3)
    assert view.gpu_util_percent_mean == 95.0 and view.gpu_memory_used_bytes_max == 30 * 2**30
    assert view.sources[0].component == f"GPU 0 NVIDIA H100 80GB HBM3 {UUID0}" and nvml.shutdown


def test_nvml_without_energy_support_says_so():
    """NVML answers NVML_ERROR_NOT_SUPPORTED for total energy on pre-Volta GPUs: noted, not measured."""
    session = TelemetrySession(local_nvml=True, nvml=FakeNvml([0], [50_000], energy_supported=False), interval_s=30.0)
    session.start()
    view = session.stop()
    assert view.gpu_joules is None and view.notes[0].startswith(NOT_MEASURED)
    assert "NVML total energy not available (Not Supported)" in view.notes[0]
    assert "mean of nvml's power gauge 50.0 W, not counted" in view.sources[0].note


def test_gpu_sampler_reads_utilisation_and_memory_through_the_same_nvml_reader():
    """GpuSampler (server utilisation beside a point) samples the fake NVML until stop()."""
    from serve_bench.metrics import GpuSampler

    nvml = FakeNvml([0], [0])
    sampled = threading.Event()
    read_memory = nvml.nvmlDeviceGetMemoryInfo

    def memory_then_signal(handle: int) -> Any:  # the last NVML call of a sample
        try:
            return read_memory(handle)
        finally:
            sampled.set()

    nvml.nvmlDeviceGetMemoryInfo = memory_then_signal  # type: ignore[method-assign]
    sampler = GpuSampler(interval=0.01, nvml=nvml)
    assert sampler.available
    sampler.start()
    assert sampled.wait(30), "the sampler thread never sampled"  # stop() joins it, so the sample is complete
    assert sampler.stop() == {"gpu_util_percent_mean": 95.0, "gpu_memory_used_bytes_max": 30 * 2**30}
    assert GpuSampler().stop() == {}  # no GPU on this host (or not started): nothing to report


def test_real_nvml_library_on_this_host():
    """The real nvidia-ml-py: where no NVIDIA driver is present it reports why, and the session says
    energy was not measured; on a GPU host it lists the GPUs."""
    source = NvmlSource()
    reading = Reading(0.0)
    source.read(reading)
    source.close()
    if reading.counters:
        assert all(c.device == "gpu" and c.component.startswith("GPU ") for c in reading.counters)
    else:
        assert reading.problems and reading.problems[0].startswith("NVML not available: ")


# ---------------------------------------------------------------- RAPL (sysfs) and node exporter (real)


def _powercap(root: Path, package_uj: int, core_uj: int, dram_uj: int) -> Path:
    """A powercap tree laid out as Linux's intel_rapl driver does (zones and sub-zones)."""
    base = root / "class" / "powercap"
    for zone, name, value, wrap in (
        ("intel-rapl:0", "package-0", package_uj, 262143328850),
        ("intel-rapl:0:0", "core", core_uj, 262143328850),
        ("intel-rapl:0:1", "dram", dram_uj, 65712999613),
    ):
        path = base / zone
        path.mkdir(parents=True, exist_ok=True)
        (path / "name").write_text(f"{name}\n")
        (path / "energy_uj").write_text(f"{value}\n")
        (path / "max_energy_range_uj").write_text(f"{wrap}\n")
    (base / "intel-rapl").mkdir(exist_ok=True)  # the control type directory: no counter in it
    return base


def test_local_rapl_sums_package_and_dram_and_corrects_a_wrap(tmp_path):
    """energy_uj in µJ; package includes core, so core is listed but not counted; a package counter
    that wrapped past max_energy_range_uj is corrected (one wrap), with a note."""
    base = _powercap(tmp_path, 262143328850 - 5_000_000, 1_000_000, 7_000_000)
    source = RaplSource(base)
    first = Reading(0.0)
    source.read(first)
    _powercap(tmp_path, 15_000_000 - 1, 11_000_000, 9_000_000)  # package wrapped: +20 J
    last = Reading(2.0)
    source.read(last)
    view = energy_between(first, last)
    by_zone = {s.component.split()[0]: s for s in view.sources}
    assert by_zone["package-0"].joules == pytest.approx(20.0) and by_zone["dram"].joules == pytest.approx(2.0)
    assert by_zone["core"].joules == pytest.approx(10.0) and not by_zone["core"].counted
    assert view.cpu_joules == pytest.approx(22.0) and view.cpu_watts_mean == pytest.approx(11.0)
    assert any("counter wrapped once; corrected with max_energy_range_uj" in n for n in view.notes)


def test_local_rapl_absent_on_this_vm_says_not_measured():
    """Where /sys/class/powercap has no intel-rapl zone (this VM) the record says so; where it has
    them (bare metal, read as root), the CPU energy is measured."""
    session = TelemetrySession(local_rapl=True, interval_s=30.0)
    session.start()
    view = session.stop()
    zones = [p for p in Path("/sys/class/powercap").glob("intel-rapl:*") if (p / "energy_uj").exists()]
    if zones and os.access(zones[0] / "energy_uj", os.R_OK):
        assert view.cpu_joules is not None
    else:
        assert view.cpu_joules is None and view.notes[0].startswith(f"{NOT_MEASURED} (")
        assert view.describe().startswith(NOT_MEASURED)


@pytest.fixture
def node_exporter() -> Iterator[Any]:
    """Starts Prometheus' node exporter on a free 127.0.0.1 port with only the cpu and rapl
    collectors; ``sysfs`` None reads the host's own /sys."""
    with ExitStack() as stack:

        def start(sysfs: Path | None) -> str:
            flags = ["--collector.disable-defaults", "--collector.cpu", "--collector.rapl"]
            return stack.enter_context(run_node_exporter([*flags, *([f"--path.sysfs={sysfs}"] if sysfs else [])]))

        yield start


def test_node_exporter_rapl_and_cpu_seconds(node_exporter, tmp_path):
    """The real node exporter reads a powercap tree (--path.sysfs) and exposes
    node_rapl_{package,core,dram}_joules_total; the session differences them (package + dram) and
    turns node_cpu_seconds_total into the host's busy share."""
    _powercap(tmp_path, 100_000_000, 40_000_000, 5_000_000)
    url = node_exporter(tmp_path)
    session = TelemetrySession([url], interval_s=30.0)
    session.start()
    _powercap(tmp_path, 130_000_000, 60_000_000, 8_000_000)
    busy_until = time.monotonic() + 0.3
    while time.monotonic() < busy_until:  # some CPU work for the busy share
        sum(range(1000))
    view = session.stop()
    by_zone = {s.component.split()[0]: s for s in view.sources}
    assert set(by_zone) == {"package", "core", "dram"}
    assert by_zone["package"].joules == pytest.approx(30.0) and by_zone["dram"].joules == pytest.approx(3.0)
    assert not by_zone["core"].counted and view.cpu_joules == pytest.approx(33.0)
    assert view.cpu_watts_mean == pytest.approx(33.0 / view.seconds)
    assert view.host_cpus == os.cpu_count()
    assert view.host_cpu_busy_percent is not None and 0 < view.host_cpu_busy_percent <= 100


def test_node_exporter_counter_going_backwards_is_dropped(node_exporter, tmp_path):
    """node_rapl_*_joules_total is the raw sysfs counter (no wrap correction, no range exposed): a
    smaller value after the point is dropped with a note, and the CPU sum with it."""
    _powercap(tmp_path, 100_000_000, 40_000_000, 5_000_000)
    url = node_exporter(tmp_path)
    session = TelemetrySession([url], interval_s=30.0)
    session.start()
    _powercap(tmp_path, 1_000_000, 41_000_000, 6_000_000)
    view = session.stop()
    assert view.cpu_joules is None
    assert (
        "counter went backwards (100.000 J -> 1.000 J): reset or wrapped between readings; figure dropped"
        in view.notes[0]
    )


def _without_rapl(view: EnergyView, url: str) -> None:
    assert view.cpu_joules is None and view.cpu_watts_mean is None
    assert view.notes[0].startswith(f"{NOT_MEASURED} ({url}: node exporter page without node_rapl_*_joules_total")


def test_node_exporter_without_rapl_says_energy_is_not_measured(node_exporter, tmp_path):
    """A sysfs whose powercap class holds no intel-rapl zone (a VM; a host without the driver): the
    CPU families are read and energy is "not measured on this host" (the RAPL side is
    test_node_exporter_rapl_and_cpu_seconds)."""
    (tmp_path / "class" / "powercap").mkdir(parents=True)
    url = node_exporter(tmp_path)
    session = TelemetrySession([url], interval_s=30.0)
    session.start()
    view = session.stop()
    assert view.host_cpus == os.cpu_count()  # the cpu collector was read (its busy share needs time to pass)
    _without_rapl(view, url)


def test_node_exporter_on_this_host(node_exporter):
    """The node exporter on the host's own /sys. Which answer is right is decided from the host
    before the run, never from the answer: RAPL counters the exporter can read give a measured
    energy; none (this VM), or root-only ones (Linux since 5.10), give "not measured"."""
    readable = [z for z in Path("/sys/class/powercap").glob("intel-rapl:*") if os.access(z / "energy_uj", os.R_OK)]
    url = node_exporter(None)
    session = TelemetrySession([url], interval_s=30.0)
    session.start()
    time.sleep(0.2)
    view = session.stop()
    assert view.host_cpus == os.cpu_count() and view.host_cpu_busy_percent is not None
    if readable:
        assert view.cpu_joules is not None and view.cpu_watts_mean is not None and view.cpu_watts_mean > 0
    else:
        _without_rapl(view, url)


def test_energy_view_round_trips_in_a_point():
    """Point.energy is written to points.jsonl and read back equal; old points read as None."""
    from dataclasses import replace

    from serve_bench.stats._schema import point_from_data, point_to_data
    from tests._points import make_point

    source = PrometheusSource("http://gpu-host:9400/metrics")
    view = energy_between(
        _reading(source, dcgm_page((1_000,), (70.0,)), 0.0), _reading(source, dcgm_page((9_000,), (300.0,)), 2.0)
    )
    point = replace(make_point("gpu", "gpu", 8, 1000.0), energy=view)
    assert point_from_data(point_to_data(point)).energy == view
    assert point_from_data(point_to_data(make_point("cpu", "cpu", 8, 1000.0))).energy is None


def test_recorded_energy_builds_the_view_a_session_would():
    """tests/_exporters.recorded_energy (for report tests): recorded dcgm-exporter and node exporter
    pages through the real parser give back the watts asked for; without RAPL, CPU energy is None
    and the GPU's still counts; node_cpu_seconds_total gives the host's busy share."""
    from tests._exporters import recorded_energy

    view = recorded_energy(250.0, 120.0, seconds=10.0, gpu_idle_watts=60.0, cpu_idle_watts=40.0)
    assert view.gpu_watts_mean == pytest.approx(250.0) and view.cpu_watts_mean == pytest.approx(120.0)
    assert view.gpu_idle_watts == pytest.approx(60.0) and view.cpu_idle_watts == pytest.approx(40.0)
    assert view.joules_per_item(100.0) == pytest.approx(3.7)
    assert view.host_cpu_busy_percent == 50.0 and view.host_cpus == 2 and not view.notes
    no_rapl = recorded_energy(250.0, None)
    assert no_rapl.cpu_joules is None and no_rapl.gpu_joules == pytest.approx(2500.0)
    assert any("node exporter page without node_rapl_*_joules_total" in n for n in no_rapl.notes)
    assert recorded_energy(None, None).notes[0].startswith(NOT_MEASURED)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"endpoints": ["localhost:9100/metrics"]}, "telemetry must be an http:// or https:// URL of a Prometheus"),
        ({"endpoints": ["http:///metrics"]}, "got 'http:///metrics'"),
        ({"interval_s": 0.0}, "interval_s must be a finite number of seconds > 0, got 0.0"),
        ({"timeout_s": float("inf")}, "timeout_s must be a finite number of seconds > 0, got inf"),
    ],
)
def test_bad_settings_are_refused_naming_the_parameter(kwargs, message):
    """A mistyped endpoint is the user's error (InvalidValue naming it), unlike one that is down."""
    from serve_bench.errors import InvalidValue

    with pytest.raises(InvalidValue, match=message.replace("(", "\\(")):
        TelemetrySession(**kwargs)
