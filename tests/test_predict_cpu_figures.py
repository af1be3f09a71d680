"""This CPU's figures: its peak and description, /proc/cpuinfo read as the kernel writes it, the
bandwidth copy, ``--cpu``, and the calibration on one measured point.

Expected values are worked out by hand from serve_bench/predict/_host.py's docstring (peak = cores
× GHz × vector bits / 32 × 2 × FMA units) and _calibrate.py's (t(B) = call + roofline(B) / e, with e
fixed by one measured point); /proc/cpuinfo's fields as arch/x86/kernel/cpu/proc.c writes them.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

import serve_bench.predict._host as host
from serve_bench.errors import UserError
from serve_bench.predict import GraphCost, OpCost, calibrate_cpu, cpu_device, cpu_points, fit_cpu
from serve_bench.predict._host import CpuSpec, measure_bandwidth, parse_cpu, read_host_cpu

EPYC = CpuSpec("EPYC", 2, 2.6, 256, 2, 25.0, 24.0)


def test_a_cpus_description_and_device_row_carry_its_peak():
    """2 cores × 2.6 GHz × 8 float32 lanes × 2 (FMA) × 2 units = 166.4 GFLOP/s: the device row's fp32
    and fp16 (no float16 tensor cores on a CPU) are 0.1664 TFLOPS, no TF32, no PCIe."""
    assert EPYC.peak_gflops == pytest.approx(166.4)
    assert EPYC.describe() == "EPYC: 2 cores x 2.60 GHz x 256-bit FMA x 2 = 166 GFLOP/s fp32 peak, 25 GB/s"
    d = cpu_device(EPYC)
    assert (d.id, d.name, d.tf32_tflops, d.mem_bw_gbs, d.mem_gb, d.pcie_gen, d.pcie_lanes) == (
        "cpu",
        "EPYC",
        None,
        25.0,
        24.0,
        0,
        0,
    )
    assert (d.fp32_tflops, d.fp16_tflops) == (pytest.approx(0.1664), pytest.approx(0.1664))
    assert d.sources == {"fp32_tflops": EPYC.describe()}
    assert CpuSpec("x", 1, 1.0, 128, 1, 1.0, 1.0).call_ms == 13.0  # the shipped per-call cost


_BLOCKS = """
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz
cpu MHz\t\t: 2200.000
flags\t\t: fpu sse2 avx fma
flags\t\t: avx512f
power management:

processor\t: 1
cpu MHz\t\t: 3000.000
"""


def test_only_the_first_processors_fields_are_read_the_first_of_each_name():
    """A blank line before the first block is skipped; the block ends at the next blank line; a field
    given twice keeps its first value; a value keeps its own colons (the model name here has none,
    the empty power management field is empty). AVX without AVX2 is still 256-bit; FMA: 2 units."""
    fields = host._cpuinfo(_BLOCKS)
    assert fields["cpu MHz"] == "2200.000" and fields["flags"] == "fpu sse2 avx fma"
    assert fields["power management"] == "" and "vendor_id" in fields and len(fields) == 6
    assert host._cpuinfo("a: b: c\n")["a"] == "b: c"
    spec = read_host_cpu(_BLOCKS, cores=4, mem_gb=16, bw_gbs=20)
    assert spec == CpuSpec("Intel(R) Xeon(R) CPU @ 2.20GHz", 4, 2.2, 256, 2, 20.0, 16.0)
    assert host._vector_bits({"avx2"}, "GenuineIntel") == 256
    assert host._vector_bits({"sse2"}, "AuthenticAMD") == 128
    assert host._vector_bits({"avx512f"}, "GenuineIntel") == 512
    assert host._vector_bits({"avx512f", "avx2"}, "AuthenticAMD") == 256  # Zen 4: two 256-bit halves


def test_the_clock_is_the_firmwares_maximum_where_sys_gives_it_and_cpu_mhz_otherwise(monkeypatch, tmp_path):
    """cpuinfo_max_freq is in kHz (Documentation/admin-guide/pm/cpufreq.rst): 3500000 is 3.5 GHz. It is
    read only for this host (no text given); /proc/cpuinfo is read with undecodable bytes replaced.
    Cores: the CPUs this process may run on; memory: pages × page size."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_bytes(b"model name\t: Odd \xff CPU\ncpu MHz\t\t: 2000.000\nflags\t\t: fma avx2\n")
    freq = tmp_path / "max_freq"
    freq.write_text("3500000\n")
    real = {"/proc/cpuinfo": cpuinfo, "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq": freq}
    monkeypatch.setattr(host, "Path", lambda p: real.get(str(p), tmp_path / "absent"))
    monkeypatch.setattr(host.os, "sched_getaffinity", lambda pid: {0, 1, 2} if pid == 0 else set())
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 1_000_000}
    monkeypatch.setattr(host.os, "sysconf", lambda name: pages[name])
    monkeypatch.setattr(host, "measure_bandwidth", lambda: 12.5)
    spec = read_host_cpu()
    assert spec == CpuSpec("Odd \ufffd CPU", 3, 3.5, 256, 2, 12.5, 4.096)
    assert read_host_cpu(cpuinfo.read_text(errors="replace")).ghz == 2.0  # text given: /sys is not read
    freq.unlink()
    assert read_host_cpu().ghz == 2.0
    assert read_host_cpu(ghz=1.5).ghz == 1.5
    nameless = read_host_cpu("cpu MHz\t\t: 1000\n", cores=1, mem_gb=1, bw_gbs=1)
    assert (nameless.name, nameless.vector_bits, nameless.fma_units) == ("this CPU", 128, 1)


@pytest.mark.parametrize("text", ["model name\t: X\n", "cpu MHz\t\t: \n", "cpu MHz\t\t: 0\n", "cpu MHz\t\t: -5\n"])
def test_a_clock_that_cannot_be_read_is_one_line(text):
    with pytest.raises(UserError, match=r"^cannot read this CPU's clock from /proc/cpuinfo; describe it with --cpu"):
        read_host_cpu(text, cores=1, mem_gb=1, bw_gbs=1)


def test_the_bandwidth_is_the_best_copy_read_and_written(monkeypatch):
    """1 MiB copied three times, taking 4, 2 and 3 ms: 2 × 1,048,576 B / 2 ms = 1.048576 GB/s. The
    default copies 256 MiB three times (six clock readings)."""
    ticks = iter([0.0, 0.004, 1.0, 1.002, 2.0, 2.003])
    monkeypatch.setattr(host.time, "perf_counter", lambda: next(ticks))
    assert measure_bandwidth(1) == pytest.approx(2 * 2**20 / 0.002 / 1e9)
    ticks = iter([0.0, 0.25, 1.0, 1.125, 2.0, 2.5])  # binary fractions: the best copy is exactly 1/8 s
    assert measure_bandwidth(1) == pytest.approx(0.016777216, rel=1e-12)  # 2 × 1,048,576 B × 8 / 1e9 B per GB
    ticks = iter([0.0, 0.5, 1.0, 2.0, 3.0, 4.0])
    sizes = []

    class _Numpy:  # the default's 2 × 256 MiB, allocated and copied for real, would take seconds here
        @staticmethod
        def ones(n: int) -> SimpleNamespace:
            sizes.append(n)
            return SimpleNamespace(nbytes=8 * n)

        empty_like = staticmethod(lambda a: a)
        copyto = staticmethod(lambda dst, src: None)

    monkeypatch.setattr(host, "np", _Numpy)
    assert measure_bandwidth() == pytest.approx(2 * 256 * 2**20 / 0.5 / 1e9)
    assert sizes == [256 * 2**20 // 8]


def test_cpu_takes_every_key_over_the_host_and_refuses_what_is_not_a_positive_number():
    """Spaces and empty parts are ignored; integers stay integers; call_ms may be 0, nothing else;
    a negative is refused like 0."""
    spec = parse_cpu(" cores=8, ghz=3.5,,vector_bits=512,fma_units=1,bw_gbs=40,mem_gb=64,call_ms=2 ", EPYC)
    assert spec == CpuSpec("EPYC", 8, 3.5, 512, 1, 40.0, 64.0, 2.0)
    assert all(type(v) is int for v in (spec.cores, spec.vector_bits, spec.fma_units))
    assert parse_cpu("", EPYC) == EPYC
    assert parse_cpu("call_ms=0", EPYC).call_ms == 0.0  # no per-call cost: the pure roofline
    for text, says in [
        ("ghz=-1", "--cpu ghz=-1: must be greater than 0"),
        ("call_ms=-1", "--cpu call_ms=-1: must be greater than 0"),
        ("bw_gbs=0", "--cpu bw_gbs=0: must be greater than 0"),
        ("ghz=inf", "--cpu ghz=inf: must be a finite number"),
        ("cores=2.5", "--cpu cores='2.5': not a whole number"),
        ("cores=2=3", "--cpu cores='2=3': not a whole number"),
        ("ghz=2.6GHz", "--cpu ghz='2.6GHz': not a number"),
        ("=2", "--cpu '=2': expected KEY=VALUE pairs with keys cores, ghz, vector_bits, fma_units, bw_gbs, mem_gb, "),
    ]:
        with pytest.raises(UserError) as caught:
            parse_cpu(text, EPYC)
        assert str(caught.value).startswith(says), (text, str(caught.value))


def test_cpu_reads_the_host_only_for_what_it_does_not_give(monkeypatch):
    """Every figure but call_ms given: the host is not read, the name is "the CPU described", the
    shipped call cost stays. Some given: the host is read with the bandwidth and clock given (so
    it measures and reads nothing it is told), its figures filling the rest. A host that cannot be
    read is one line naming every key."""
    monkeypatch.setattr(host, "read_host_cpu", lambda **_: pytest.fail("the host was read"))
    full = parse_cpu("cores=4,ghz=3,vector_bits=256,fma_units=2,bw_gbs=40,mem_gb=16")
    assert full == CpuSpec("the CPU described", 4, 3.0, 256, 2, 40.0, 16.0, 13.0)
    asked = []

    def reading(**kwargs: object) -> CpuSpec:
        asked.append(kwargs)
        return EPYC

    monkeypatch.setattr(host, "read_host_cpu", reading)
    assert parse_cpu("bw_gbs=7,ghz=1.5") == CpuSpec("EPYC", 2, 1.5, 256, 2, 7.0, 24.0)
    assert parse_cpu("cores=3") == CpuSpec("EPYC", 3, 2.6, 256, 2, 25.0, 24.0)
    assert asked == [{"bw_gbs": 7.0, "ghz": 1.5}, {"bw_gbs": None, "ghz": None}]
    for error in (OSError("no /proc"), ValueError("bad")):

        def broken(error: Exception = error, **_: object) -> CpuSpec:
            raise error

        monkeypatch.setattr(host, "read_host_cpu", broken)
        with pytest.raises(UserError) as caught:
            parse_cpu("cores=3")
        assert str(caught.value) == (
            f"cannot read this host's CPU ({error}); describe it: --cpu cores=N,ghz=F,vector_bits=B,fma_units=U,"
            "bw_gbs=G,mem_gb=M"
        )


# A CPU of 8 GFLOP/s (1 core × 1 GHz × 4 lanes × 2, one FMA unit) and 1 GB/s: one op of 8e7 FLOPs an image
# (10 ms at peak) and one of 2.5e6 elements read and written (10 MB: 10 ms): 20 ms an image at peak.
SLOW = CpuSpec("slow", 1, 1.0, 128, 1, 1.0, 1.0, call_ms=5.0)
COST = GraphCost((OpCost("conv", "Conv2D", 8e7, 0.0, 0.0), OpCost("relu", "Relu", 0.0, 2.5e6, 0.0)), 100)


def test_one_measured_point_fixes_the_efficiency_that_predicts_the_others():
    """Measured 25 images/s at batch 1 (40 ms), 40 at 2, 50 at 4. Calibrated on batch 1 with 5 ms a call:
    the roofline's 20 ms took 35, e = 20/35 = 4/7. Batch 2: 5 + 40 × 7/4 = 75 ms, 26.67 images/s
    (-33.3%); batch 4: 5 + 140 = 145 ms, 27.59 (-44.8%); batch 8, asked for: 5 + 280 ms, 28.07.
    The median error is the middle of |-1/3| and |-0.448|."""
    measured = {2: 40.0, 1: 25.0, 4: 50.0}
    c = calibrate_cpu(COST, SLOW, measured, target="local-grpc", batch_sizes=(8, 2))
    assert (c.calibrated_on, c.target, c.spec, c.device) == (1, "local-grpc", SLOW, cpu_device(SLOW))
    assert (c.efficiency.compute, c.efficiency.memory) == (pytest.approx(4 / 7), pytest.approx(4 / 7))
    assert (c.efficiency.per_op_s, c.efficiency.per_call_s) == (0.0, pytest.approx(0.005))
    assert list(c.predicted) == [1, 2, 4, 8]
    assert c.predicted == pytest.approx({1: 25.0, 2: 2 / 0.075, 4: 4 / 0.145, 8: 8 / 0.285})
    assert c.errors == pytest.approx({2: (2 / 0.075) / 40 - 1, 4: (4 / 0.145) / 50 - 1})
    assert c.median_error == pytest.approx(statistics.median([1 / 3, 1 - (4 / 0.145) / 50]))
    assert c.measured == measured and c.measured is not measured
    on_two = calibrate_cpu(COST, SLOW, measured, batch=2)  # 50 ms: 45 for 40 at peak, e = 8/9
    assert on_two.calibrated_on == 2 and on_two.efficiency.compute == pytest.approx(40 / 45)
    assert set(on_two.errors) == {1, 4} and on_two.predicted[2] == pytest.approx(40.0)
    alone = calibrate_cpu(COST, SLOW, {1: 25.0})
    assert alone.errors == {} and alone.median_error is None and alone.target == ""


def test_the_shipped_call_cost_is_held_to_half_of_the_calibration_points_time():
    """Batch 1 took 40 ms: a shipped 30 ms call is held to 20 ms (e = 20/20 = 1); one given (call_given)
    is kept, 10 ms leaving 30 (e = 2/3); a shipped call below half is kept, 5 ms. A call that leaves the
    point no time is one line; so is a batch the run did not measure, or no point at all."""
    shipped = CpuSpec("slow", 1, 1.0, 128, 1, 1.0, 1.0, call_ms=30.0)
    held = calibrate_cpu(COST, shipped, {1: 25.0}, call_given=False)
    assert (held.efficiency.per_call_s, held.efficiency.compute) == (pytest.approx(0.02), pytest.approx(1.0))
    kept = calibrate_cpu(COST, SLOW, {1: 25.0}, call_given=False)
    assert kept.efficiency.per_call_s == pytest.approx(0.005)
    third = calibrate_cpu(COST, CpuSpec("slow", 1, 1.0, 128, 1, 1.0, 1.0, call_ms=15.0), {1: 25.0}, call_given=False)
    assert third.efficiency.per_call_s == pytest.approx(0.015)  # over a third of 40 ms, under half: kept
    given = calibrate_cpu(COST, CpuSpec("slow", 1, 1.0, 128, 1, 1.0, 1.0, call_ms=10.0), {1: 25.0})
    assert given.efficiency.compute == pytest.approx(20 / 30)
    with pytest.raises(UserError) as caught:
        calibrate_cpu(COST, CpuSpec("slow", 1, 1.0, 128, 1, 1.0, 1.0, call_ms=40.0), {1: 25.0})
    assert str(caught.value) == (
        "batch 1 took 40.00 ms, no more than --cpu call_ms=40; give a smaller call_ms or calibrate on a larger "
        "--calibrate-batch"
    )
    with pytest.raises(UserError, match=r"^--calibrate-batch 3: the run measured batch sizes 1, 2 only$"):
        calibrate_cpu(COST, SLOW, {2: 40.0, 1: 25.0}, batch=3)
    with pytest.raises(UserError, match=r"^no measured CPU points to calibrate from$"):
        calibrate_cpu(COST, SLOW, {})


def test_a_calibration_is_saved_with_its_figures_rounded():
    """predictions.json's cpu record: e to 4 places, the call in ms to 3, images/s to 2, errors to 4."""
    c = calibrate_cpu(COST, SLOW, {1: 25.0, 2: 40.0}, target="local-grpc")
    assert c.to_json() == {
        "device": "slow",
        "described": SLOW.describe(),
        "target": "local-grpc",
        "calibrated_on": 1,
        "efficiency": 0.5714,
        "call_ms": 5.0,
        "measured_images_per_s": {"1": 25.0, "2": 40.0},
        "predicted_images_per_s": {"1": 25.0, "2": 26.67},
        "errors": {"2": -0.3333},
        "predicted": True,
    }
    # a call of 5.1234 ms and 40.456 images/s at batch 2: 5.123 (3 places) and 40.46 (2), neither an integer
    odd = calibrate_cpu(COST, CpuSpec("slow", 1, 1.0, 128, 1, 1.0, 1.0, call_ms=5.1234), {1: 25.0, 2: 40.456})
    saved = odd.to_json()
    assert (saved["call_ms"], saved["measured_images_per_s"]) == (5.123, {"1": 25.0, "2": 40.46})
    # a calibration of a device that says nowhere how its peak was described (a Device row without sources)
    # is saved with an empty description: "described" is text in every record, never null
    bare = dataclasses.replace(c, device=dataclasses.replace(c.device, sources={}))
    assert bare.to_json()["described"] == ""


def test_fit_cpu_finds_the_efficiency_and_call_cost_that_made_the_figures():
    """Figures made by t(B) = 8 ms + 20 ms · B / 0.4 at batch 1, 2, 4 and 8 (images/s 1/0.058, 2/0.108, ...)
    are fitted back to e = 0.4 and 8 ms; one batch size cannot tell the two apart."""
    measured = {b: b / (0.008 + 0.02 * b / 0.4) for b in (1, 2, 4, 8)}
    e, call = fit_cpu(COST, SLOW, measured)
    assert (e, call) == (pytest.approx(0.4, rel=1e-3), pytest.approx(0.008, rel=1e-3))
    two = fit_cpu(COST, SLOW, {1: measured[1], 2: measured[2]})  # two figures fix the two unknowns
    assert two == (pytest.approx(0.4, rel=1e-3), pytest.approx(0.008, rel=1e-3))
    with pytest.raises(ValueError, match=r"^fitting a per-call cost needs two batch sizes or more$"):
        fit_cpu(COST, SLOW, {1: 25.0})


def test_the_cpu_target_with_the_most_client_batching_points_is_taken(tmp_path: Path):
    """Two CPU targets: the one with three batch sizes wins over the one with two, whatever the file
    order; a GPU target's points are not CPU points. With none, the error names the models measured."""
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        writer.append(make_point("rest", "cpu", 1, 10_000, model="tiny"))
        writer.append(make_point("rest", "cpu", 2, 10_000, model="tiny"))
        writer.append(make_point("gpu", "gpu", 1, 1_000, model="small"))  # a second model, for the error's list
        for batch in (1, 2, 4):
            writer.append(make_point("grpc", "cpu", batch, 20_000, model="tiny"))
            writer.append(make_point("gpu", "gpu", batch, 1_000, model="tiny"))
            writer.append(make_point("gpu", "gpu", batch * 8, 1_000, model="tiny"))
        writer.write_run({"settings": {}})
    assert cpu_points(run_dir, "tiny") == ("grpc", {1: 50.0, 2: 100.0, 4: 200.0})
    with pytest.raises(UserError) as caught:
        cpu_points(run_dir, "other")
    assert str(caught.value) == (
        f"run {run_dir} has no CPU points of other at one request in flight (models measured there: small, tiny); "
        "calibrate from a run whose spec has a CPU target and concurrency 1"
    )
    empty = tmp_path / "empty"
    with ResultsWriter(empty) as writer:
        writer.write_run({"settings": {}})
    with pytest.raises(UserError, match=r"\(models measured there: none\)"):
        cpu_points(empty, "tiny")
    with pytest.raises(UserError, match=r"is not a results directory; give results/<run> \(RUN or --from-run\)$"):
        cpu_points(tmp_path / "nowhere", "tiny")


def test_a_cpu_point_counts_if_it_measured_any_images_at_all(tmp_path: Path):
    """A point that answered nothing (0 images/s) is no CPU point, however many there are; one of
    0.5 images/s (batch 1 in 2 s) is: the one slow point is taken over three empty ones."""
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        for batch in (1, 2, 4):
            writer.append(make_point("idle", "cpu", batch, 10_000, ok=0, model="tiny"))
        writer.append(make_point("crawl", "cpu", 1, 2_000_000, model="tiny"))
        writer.write_run({"settings": {}})
    assert cpu_points(run_dir, "tiny") == ("crawl", {1: 0.5})
