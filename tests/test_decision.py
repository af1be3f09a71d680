"""The deployer's decision (issue 13): prices and telemetry in the spec, cost and energy per image
in the report, every figure of the decision table traced back to the point it came from."""

from __future__ import annotations

import csv
import html
import io
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from serve_bench.cli import main
from serve_bench.errors import UserError
from serve_bench.metrics import TelemetrySession, energy_between
from serve_bench.metrics._energy_sources import PrometheusSource, Reading
from serve_bench.report import build_report, compare_runs, decide, print_comparison, print_summary
from serve_bench.report._decision import format_figure
from serve_bench.report._decision_table import COLUMNS, table_rows
from serve_bench.report._tables import CELL_COLUMNS, cell_rows
from serve_bench.stats import EnergyView, Interval, Point, ResultsWriter, Slo, read_points
from serve_bench.sweep import load_spec, parse_spec, run_sweep
from tests._delay_server import MODEL, DelayServer
from tests._exporters import dcgm_page, node_exporter, node_page, recorded_energy
from tests._points import make_point
from tests.conftest import free_port

ROOT = Path(__file__).parent.parent
SLO = Slo("p99", 200.0)

# (target, batch, latency ms, gpu watts, cpu watts) — p99 is 1.2 × latency (make_point), so with
# p99 ≤ 200 ms the cpu's best is b4 (b8: p99 360 ms) and the gpu's is b32 (b64: p99 300 ms).
CPU_POINTS = [("cpu", 1, 50.0, None, 100.0), ("cpu", 4, 120.0, None, 150.0), ("cpu", 8, 300.0, None, 160.0)]
GPU_POINTS = [
    ("gpu", 1, 10.0, 80.0, 60.0),
    ("gpu", 8, 20.0, 200.0, 70.0),
    ("gpu", 32, 60.0, 300.0, 80.0),
    ("gpu", 64, 250.0, 320.0, 85.0),
]
PRICE = {"cpu": 0.40, "gpu": 1.20}
IDLE = {"gpu": 50.0, "cpu": 30.0}


def priced_point(name: str, batch: int, latency_ms: float, gpu_w: float | None, cpu_w: float | None) -> Point:
    """A closed-loop point (c1) with a ±5% images/s interval, a ±10% p99 interval, a price and recorded energy."""
    point = make_point(name, name, batch, latency_ms * 1000)
    items = point.items_per_s
    p99 = point.latency.p99
    return replace(
        point,
        target=replace(point.target, price_per_hour=PRICE[name], currency="USD"),
        throughput=replace(point.throughput, items_per_s_ci=Interval(items * 0.95, items * 1.05)),
        latency=replace(point.latency, p99_ci=Interval(p99 * 0.9, p99 * 1.1)),
        energy=recorded_energy(gpu_w, cpu_w, gpu_idle_watts=IDLE["gpu"] if gpu_w else None, cpu_idle_watts=IDLE["cpu"]),
    )


def write_run(run_dir: Path, points: list[Point]) -> Path:
    with ResultsWriter(run_dir) as writer:
        for point in points:
            writer.append(point)
    return run_dir


def _range(value: float, low: float, high: float, unit: str = "") -> str:
    return f"{format_figure(value)}{unit} [{format_figure(low)}–{format_figure(high)}]"


def _ratio(value: float, low: float, high: float) -> str:
    def r(x: float) -> str:
        return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"

    return f"{r(value)} [{r(low)}–{r(high)}]"


def expected_row(spec: tuple[str, int, float, float | None, float | None]) -> dict[str, float]:
    """The figures of one decision row computed from the inputs alone (not from the report)."""
    name, batch, latency_ms, gpu_w, cpu_w = spec
    items = batch / (latency_ms / 1000)  # c1: one request of ``batch`` images per latency
    watts = (gpu_w or 0.0) + (cpu_w or 0.0)
    per_s = PRICE[name] / 3600
    return {
        "items": items,
        "items_low": items * 0.95,
        "items_high": items * 1.05,
        "p99_ms": latency_ms * 1.2,
        "cost": per_s / items * 1e6,
        "cost_low": per_s / (items * 1.05) * 1e6,
        "cost_high": per_s / (items * 0.95) * 1e6,
        "joules": watts / items,
        "joules_low": watts / (items * 1.05),
        "joules_high": watts / (items * 0.95),
        "watts": watts,
        "idle": (IDLE["gpu"] if gpu_w else 0.0) + IDLE["cpu"],
    }


def test_decision_table_from_two_priced_targets_matches_every_point(tmp_path: Path) -> None:
    """Report from a cpu and a gpu target with prices and recorded telemetry: each figure of the
    decision table (row by row, the GPU/CPU ratios, the batching factors in the verdict) equals
    what the formula gives from the chosen point's own figures."""
    points = [priced_point(*s) for s in CPU_POINTS + GPU_POINTS]
    run_dir = write_run(tmp_path / "run", points)
    output = build_report(run_dir, slo=SLO, models_dir=tmp_path, plots=False)
    decision = decide(output.analysis, output.points)

    gpu_spec, cpu_spec = GPU_POINTS[2], CPU_POINTS[1]  # the best under the SLO, worked out by hand above
    gpu_base_spec, cpu_base_spec = GPU_POINTS[0], CPU_POINTS[0]
    gpu, cpu = expected_row(gpu_spec), expected_row(cpu_spec)
    rows = {r.device: r for r in decision.rows}
    assert [r.device for r in decision.rows] == ["gpu", "cpu"]
    for device, want, spec in (("gpu", gpu, gpu_spec), ("cpu", cpu, cpu_spec)):
        row = rows[device]
        assert row.cell is not None and row.cell.point.batch_size == spec[1]
        point = row.cell.point
        # the structured figures, against the point and against the inputs
        assert row.items_per_s is not None and row.items_per_s.value == point.items_per_s
        assert row.items_per_s.value == pytest.approx(want["items"])
        assert (row.items_per_s.low, row.items_per_s.high) == pytest.approx((want["items_low"], want["items_high"]))
        assert row.p99_us is not None and row.p99_us.value == point.latency.p99 == pytest.approx(want["p99_ms"] * 1000)
        price = point.target.price_per_hour
        assert row.cost_per_million is not None and price is not None
        assert row.cost_per_million.value == pytest.approx(price / 3600 / point.items_per_s * 1e6)
        assert (row.cost_per_million.value, row.cost_per_million.low, row.cost_per_million.high) == pytest.approx(
            (want["cost"], want["cost_low"], want["cost_high"])
        )
        assert point.energy is not None and row.joules_per_image is not None
        assert row.joules_per_image.value == pytest.approx(point.energy.joules_per_item(point.items_per_s))
        assert (row.joules_per_image.value, row.joules_per_image.low, row.joules_per_image.high) == pytest.approx(
            (want["joules"], want["joules_low"], want["joules_high"])
        )
        assert row.watts == pytest.approx(want["watts"]) and row.idle_watts == pytest.approx(want["idle"])

    # the rendered rows: every cell, from the same inputs
    scope = {"gpu": "GPU+CPU", "cpu": "CPU"}
    text_rows = table_rows(decision)
    assert len(text_rows) == 3 and all(len(r) == len(COLUMNS) for r in text_rows)
    for text, device, want, spec in ((text_rows[0], "gpu", gpu, gpu_spec), (text_rows[1], "cpu", cpu, cpu_spec)):
        assert text[0] == device
        assert text[1] == f"{device} b{spec[1]} c1 grpc"
        assert text[2] == _range(want["items"], want["items_low"], want["items_high"])
        assert text[3] == _range(want["p99_ms"], want["p99_ms"] * 0.9, want["p99_ms"] * 1.1)
        assert text[4] == _range(want["cost"], want["cost_low"], want["cost_high"], " USD")
        assert text[5] == _range(want["joules"], want["joules_low"], want["joules_high"], " J") + f" ({scope[device]})"
        assert text[6] == f"{format_figure(want['watts'])} W (idle {format_figure(want['idle'])} W)"
    # GPU/CPU ratios: value = gpu/cpu; range from both ranges' extremes
    ratio_row = text_rows[2]
    assert ratio_row[0] == "GPU / CPU"
    assert ratio_row[2] == _ratio(
        gpu["items"] / cpu["items"], gpu["items_low"] / cpu["items_high"], gpu["items_high"] / cpu["items_low"]
    )
    assert ratio_row[3] == _ratio(
        gpu["p99_ms"] / cpu["p99_ms"],
        0.9 * gpu["p99_ms"] / (1.1 * cpu["p99_ms"]),
        1.1 * gpu["p99_ms"] / (0.9 * cpu["p99_ms"]),
    )
    assert ratio_row[4] == _ratio(
        gpu["cost"] / cpu["cost"], gpu["cost_low"] / cpu["cost_high"], gpu["cost_high"] / cpu["cost_low"]
    )
    assert ratio_row[5] == _ratio(
        gpu["joules"] / cpu["joules"], gpu["joules_low"] / cpu["joules_high"], gpu["joules_high"] / cpu["joules_low"]
    )
    ratios = decision.ratios
    assert ratios is not None and ratios.cost is not None and ratios.joules is not None
    assert ratios.cost.value == pytest.approx(gpu["cost"] / cpu["cost"])
    assert ratios.joules.value == pytest.approx(gpu["joules"] / cpu["joules"])

    # the verdict: one sentence each on cost, energy, latency, with batching's factor per device
    cost_line, energy_line, latency_line = decision.verdict
    gpu_base, cpu_base = expected_row(gpu_base_spec), expected_row(cpu_base_spec)
    assert cost_line.startswith("Cost: GPU is cheaper")  # 0.37× [0.33×–0.41×]: the whole range below 1
    assert cost_line.endswith(
        f"; batching cut it {gpu['items'] / gpu_base['items']:.2f}× on gpu (gpu b32 c1 vs gpu b1 c1)"
        f" and {cpu['items'] / cpu_base['items']:.2f}× on cpu (cpu b4 c1 vs cpu b1 c1)."
    )
    assert energy_line.startswith("Energy: GPU uses less energy")
    assert energy_line.endswith(
        f"; batching cut it {gpu_base['joules'] / gpu['joules']:.2f}× on gpu (gpu b32 c1 vs gpu b1 c1)"
        f" and {cpu_base['joules'] / cpu['joules']:.2f}× on cpu (cpu b4 c1 vs cpu b1 c1)."
    )
    assert latency_line.startswith("Latency: GPU answers faster")
    assert f"p99 {format_figure(gpu['p99_ms'])} vs {format_figure(cpu['p99_ms'])} ms" in latency_line
    assert latency_line.endswith(
        f"; batching raised p99 {gpu['p99_ms'] / gpu_base['p99_ms']:.2f}× on gpu "
        f"({format_figure(gpu_base['p99_ms'])} → {format_figure(gpu['p99_ms'])} ms, gpu b32 c1 vs gpu b1 c1)"
        f" and {cpu['p99_ms'] / cpu_base['p99_ms']:.2f}× on cpu "
        f"({format_figure(cpu_base['p99_ms'])} → {format_figure(cpu['p99_ms'])} ms, cpu b4 c1 vs cpu b1 c1)."
    )

    # every point's cost and joules per image in its target's table, with their ranges
    cost_at, joules_at = CELL_COLUMNS.index("cost/M images"), CELL_COLUMNS.index("J/image")
    rows_by_label = {row[0]: row for t in output.analysis.targets for row in cell_rows(t)}
    for spec in CPU_POINTS + GPU_POINTS:
        want = expected_row(spec)
        cells = rows_by_label[f"{spec[0]} b{spec[1]} c1"]
        assert cells[cost_at] == _range(want["cost"], want["cost_low"], want["cost_high"], " USD")
        assert cells[joules_at] == _range(want["joules"], want["joules_low"], want["joules_high"], " J")

    # the same table at the top of report.html, in the terminal summary, and the CSV columns per point
    page = output.html.read_text()
    assert page.index('class="decision"') < page.index("<h2>Verdict</h2>")
    for text_row in text_rows:
        for cell in text_row:
            assert html.escape(cell) in page
    buffer = io.StringIO()
    console = Console(file=buffer, width=400)
    print_summary(output.analysis, console)
    terminal = buffer.getvalue()
    assert terminal.index("Decision") < terminal.index("gpu — gpu")
    for cell in text_rows[0][2:] + text_rows[2][2:6]:
        assert cell in terminal
    with output.csv.open() as handle:
        table = list(csv.DictReader(handle))
    by_key = {p.key: p for p in points}
    for line in table:
        point = by_key[line["Key"]]
        cost = PRICE[point.target.name] / 3600 / point.items_per_s * 1e6
        assert float(line["Cost per Million Images"]) == pytest.approx(cost, rel=1e-5)
        assert line["Currency"] == "USD"
        watts = point.energy.watts() if point.energy is not None else None
        assert watts is not None
        assert float(line["Joules per Image"]) == pytest.approx(watts / point.items_per_s, rel=1e-5)


def test_unmeasured_figures_say_not_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No price on the gpu, no telemetry on the gpu, a cpu host without RAPL: the table says so
    in each cell, the ratios too, and the verdict compares only what was measured."""
    cpu = [
        replace(priced_point(*s), energy=recorded_energy(None, None))  # node exporter without RAPL
        for s in CPU_POINTS
    ]
    gpu = [make_point("gpu", "gpu", b, ms * 1000) for _, b, ms, _, _ in GPU_POINTS]  # no price, energy None
    output = build_report(write_run(tmp_path / "run", cpu + gpu), slo=SLO, models_dir=tmp_path, plots=False)
    decision = decide(output.analysis, output.points)
    gpu_row, cpu_row, ratio_row = table_rows(decision)
    assert gpu_row[4] == "no price given"
    assert gpu_row[5] == "not measured (no telemetry)" and gpu_row[6] == "not measured"
    assert cpu_row[4].endswith("]") and " USD [" in cpu_row[4]  # the cpu is priced
    assert cpu_row[5] == "not measured"  # why: in the telemetry notes under the table, once
    (why,) = decision.notes
    assert why.startswith("energy not measured on this host (http://host:9100/metrics: node exporter page without")
    assert why.endswith("(3 points: cpu b1 c1, cpu b4 c1, cpu b8 c1)")
    assert ratio_row[4] == "no price given for gpu" and ratio_row[5] == "not measured on gpu and cpu"
    # the cpu's own batching factor on cost is still said (its price is known)
    assert decision.verdict[0] == (
        "Cost: not compared (no price given for gpu); batching cut it 1.67× on cpu (cpu b4 c1 vs cpu b1 c1)."
    )
    assert decision.verdict[1] == (
        "Energy: not compared (not measured on gpu (no telemetry) and cpu (why: telemetry notes))."
    )
    page = output.html.read_text()
    assert "no price given" in page and "not measured (no telemetry)" in page and html.escape(why) in page
    # summary.csv leaves the cells empty where nothing was measured
    with output.csv.open() as handle:
        for line in csv.DictReader(handle):
            assert line["Joules per Image"] == ""
            assert (line["Cost per Million Images"] == "") == (line["Target"] == "gpu")


def test_a_ratio_whose_range_straddles_one_names_no_winner(tmp_path: Path) -> None:
    """GPU priced 16× the CPU at 16× its images/s: cost ratio 1.00× [0.90×–1.11×], no winner;
    GPU energy without its host's CPU is said to leave it out."""
    points = [priced_point(*s) for s in CPU_POINTS]
    for name, batch, ms, gpu_w, _ in GPU_POINTS:
        point = priced_point(name, batch, ms, gpu_w, None)
        points.append(replace(point, target=replace(point.target, price_per_hour=PRICE["cpu"] * 16)))
    output = build_report(write_run(tmp_path / "run", points), slo=SLO, models_dir=tmp_path, plots=False)
    decision = decide(output.analysis)
    assert decision.ratios is not None and decision.ratios.cost is not None
    assert decision.ratios.cost.value == pytest.approx(1.0)
    assert table_rows(decision)[2][4] == "1.00× [0.90×–1.11×]"
    assert decision.verdict[0].startswith("Cost: no clear winner within the ranges (")
    assert "the gpu figure leaves out its host's CPU" in decision.verdict[1]


def test_no_prices_no_telemetry_and_one_device(tmp_path: Path) -> None:
    """The demo's case: one cpu target, no price, no telemetry — the table still stands."""
    points = [make_point("local", "cpu", b, ms * 1000) for _, b, ms, _, _ in CPU_POINTS]
    output = build_report(write_run(tmp_path / "run", points), models_dir=tmp_path, plots=False)
    decision = decide(output.analysis)
    (row,) = table_rows(decision)
    assert row[4] == "no price given" and row[5] == "not measured (no telemetry)"
    assert decision.ratios is None
    best = expected_row(CPU_POINTS[1])  # no SLO: the most images/s (b4: 33.3; b8: 26.7)
    assert decision.verdict == (
        f"Only cpu can be judged (only one device in this run): local b4 c1 grpc: "
        f"{format_figure(best['items'])} images/s, p99 {format_figure(best['p99_ms'])} ms, no price given, "
        "energy not measured (no telemetry).",
    )
    assert 'class="decision"' in output.html.read_text()


def _reset_energy() -> EnergyView:
    """dcgm-exporter's energy counter went backwards between the readings (a driver reload)."""
    url = "http://gpu-host:9400/metrics"
    first, last = Reading(0.0), Reading(10.0)
    source = PrometheusSource(url)
    source.read_text(dcgm_page((5_000_000,), (200.0,)), first)
    source.read_text(dcgm_page((1_000,), (200.0,)), last)
    node = PrometheusSource("http://host:9100/metrics")
    node.read_text(node_page(5000.0, 700.0, 100.0, 900.0), first)
    node.read_text(node_page(5800.0, 780.0, 110.0, 910.0), last)
    return energy_between(first, last)


def test_telemetry_notes_reach_the_report(tmp_path: Path) -> None:
    """A counter reset (figure dropped by the telemetry) and an endpoint that is down (a real
    session against a closed port) are named in the decision's notes and in report.html."""
    down = f"http://127.0.0.1:{free_port()}/metrics"
    session = TelemetrySession([down], timeout_s=0.5)
    session.start()
    unavailable = session.stop()
    session.close()
    assert any(f"telemetry unavailable: {down}" in n for n in unavailable.notes)
    reset = _reset_energy()
    assert reset.gpu_joules is None and reset.cpu_joules is not None  # the GPU figure is dropped, CPU kept
    points = [priced_point(*s) for s in CPU_POINTS + GPU_POINTS]
    points[0] = replace(points[0], energy=unavailable)
    points[4] = replace(points[4], energy=reset)  # gpu b8
    output = build_report(write_run(tmp_path / "run", points), slo=SLO, models_dir=tmp_path, plots=False)
    decision = decide(output.analysis, output.points)
    page = output.html.read_text()
    for note in (*unavailable.notes, *reset.notes):
        line = next(n for n in decision.notes if n.startswith(note))
        assert html.escape(line) in page
    assert any("gpu b8 c1" in n for n in decision.notes) and any("cpu b1 c1" in n for n in decision.notes)
    # the cpu's baseline has no energy: its batching factor on energy is left out, not invented
    assert "on cpu" not in decision.verdict[1]


def test_compare_shows_cost_and_energy_ratios(tmp_path: Path) -> None:
    """compare: B/A cost per image and joules per image for matching points."""
    a = write_run(tmp_path / "a", [priced_point(*s) for s in GPU_POINTS])
    faster = [priced_point(n, b, ms / 2, g, c) for n, b, ms, g, c in GPU_POINTS]  # twice the images/s, same watts
    b = write_run(tmp_path / "b", faster)
    result = compare_runs(a, b)
    for row in result.rows:
        assert row["cost_ratio"] == pytest.approx(0.5)
        assert row["joules_ratio"] == pytest.approx(0.5, rel=1e-6)
    buffer = io.StringIO()
    console = Console(file=buffer, width=300)
    print_comparison(result, "B vs A", console)
    out = buffer.getvalue()
    assert "B/A cost/image" in out and "B/A J/image" in out and "0.50×" in out


# --- the spec: prices, the one currency, telemetry endpoints -------------------------------------

_BASE = "model = 'x'\nbatch_sizes = [1]\n"
_TARGET = "[[targets]]\nname = 'a'\nurl = 'grpc://h:1'\n"


def test_spec_prices_and_telemetry_reach_the_targets() -> None:
    spec = parse_spec(
        _BASE + "currency = 'EUR'\n" + _TARGET + "price_per_hour = 0.5\ntelemetry = ['http://h:9100/metrics']\n"
        "[[targets]]\nname = 'b'\nurl = 'grpc://h:2'\nprice_per_hour = 0\n"
        "[[targets]]\nname = 'c'\nurl = 'grpc://h:3'\n"
    )
    a, b, c = spec.targets
    assert (a.price_per_hour, a.currency, a.telemetry) == (0.5, "EUR", ("http://h:9100/metrics",))
    assert (b.price_per_hour, b.currency) == (0.0, "EUR")  # free (e.g. owned hardware) is a price
    assert (c.price_per_hour, c.currency, c.telemetry) == (None, "", ())
    shipped = {t.device: t for t in load_spec(ROOT / "loadtests/sweeps/cpu-vs-gpu.toml").targets}
    assert shipped["cpu"].price_per_hour and shipped["gpu"].price_per_hour and shipped["gpu"].currency
    assert "http://localhost:9400/metrics" in shipped["gpu"].telemetry


@pytest.mark.parametrize(
    "text, words",
    [
        ("currency = 'USD'\n" + _TARGET + "price_per_hour = -0.5\n", ["targets[0].price_per_hour", ">= 0", "-0.5"]),
        ("currency = 'USD'\n" + _TARGET + "price_per_hour = 'cheap'\n", ["targets[0].price_per_hour", "'cheap'"]),
        ("currency = 'USD'\n" + _TARGET + "price_per_hour = nan\n", ["price_per_hour", "finite"]),
        ("currency = 'USD'\n" + _TARGET + "price_per_hour = inf\n", ["price_per_hour", "finite"]),
        ("currency = 'USD'\ncurrency = 'EUR'\n" + _TARGET, ["currency is given twice", "once"]),
        ("currency = 'USD'\n" + _TARGET + "currency = 'EUR'\n", ["targets[0].currency", "named once, at the top"]),
        (_TARGET + "price_per_hour = 1.0\n", ["price_per_hour needs the currency", 'currency = "USD"']),
        ("currency = 'USD'\n" + _TARGET + "telemetry = ['localhost:9100']\n", ["targets[0].telemetry[0]", "http"]),
        ("currency = 'USD'\n" + _TARGET + "price_per_hour = true\n", ["targets[0].price_per_hour", "True"]),
        ("currency = 'USD'\n" + _TARGET + "telemetry = 'http://h:9100/metrics'\n", ["targets[0].telemetry", "list"]),
    ],
)
def test_bad_prices_and_currencies_are_one_line_errors(text: str, words: list[str]) -> None:
    with pytest.raises(UserError) as info:
        parse_spec(_BASE + text, "s.toml")
    message = str(info.value)
    assert message.startswith("s.toml") and "\n" not in message
    for word in words:
        assert word in message


def test_cli_refuses_a_negative_price_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(_BASE + "currency = 'USD'\n" + _TARGET + "price_per_hour = -1\n")
    assert main(["sweep", str(spec)]) == 2
    err = capsys.readouterr().err.strip()
    assert "price_per_hour" in err and "\n" not in err


# --- measuring: the telemetry session around each point ------------------------------------------


async def test_sweep_with_a_down_telemetry_endpoint_goes_on_and_notes_it(tmp_path: Path) -> None:
    """One endpoint up (Prometheus' node exporter, run for real, no RAPL here) and one down:
    every point is measured, carries the price, and records "telemetry unavailable" for the
    down one; idle power was measured once, before the first point."""
    down = f"http://127.0.0.1:{free_port()}/metrics"
    with node_exporter(["--collector.disable-defaults", "--collector.cpu", "--collector.rapl"]) as up:
        with DelayServer(delay=0.002) as server:
            spec = parse_spec(
                f"""
name = "t"
model = "{MODEL}"
batch_sizes = [1, 2]
currency = "USD"
[load]
concurrency = [1]
[durations]
warmup_s = 0.1
min_duration_s = 0.4
min_requests = 3
max_duration_s = 1.5
[[targets]]
name = "delay"
url = "{server.grpc_url}"
metrics = ""
device = "cpu"
price_per_hour = 0.4
telemetry = ["{up}", "{down}"]
"""
            )
            outcome = await run_sweep(spec, tmp_path / "run")
    points = read_points(tmp_path / "run")
    assert len(points) == len(outcome.measured) == 2
    for point in points:
        assert point.counts.ok > 0 and point.target.price_per_hour == 0.4 and point.target.currency == "USD"
        assert point.energy is not None
        assert any(f"telemetry unavailable: {down}" in n for n in point.energy.notes)
        assert point.energy.host_cpus and point.energy.host_cpu_busy_percent is not None  # the one that was up
    output = build_report(tmp_path / "run", models_dir=tmp_path, plots=False)
    (row,) = table_rows(decide(output.analysis))
    assert " USD" in row[4]
    # the node exporter reads this host's RAPL: joules where it has them, else said not measured
    assert row[5] == "not measured" or row[5].endswith(" (CPU)")
    assert f"telemetry unavailable: {down}" in output.html.read_text()


def test_a_tuned_configuration_is_named_by_its_knobs(tmp_path: Path) -> None:
    """Tune points (one target per server configuration): the device's best configuration is the
    fastest one under the SLO, named by its knobs."""
    points = []
    for config, latency_ms in (("c1", 150.0), ("c2", 100.0), ("c3", 90.0)):
        point = priced_point("cpu", 4, latency_ms, None, 150.0)
        knobs = (("config", config), ("max_batch_size", "8"))
        points.append(replace(point, target=replace(point.target, name=config), server_config=knobs))
    points[2] = replace(points[2], latency=replace(points[2].latency, due=replace(points[2].latency.due, p99=300e3)))
    output = build_report(write_run(tmp_path / "run", points), slo=SLO, models_dir=tmp_path, plots=False)
    (row,) = table_rows(decide(output.analysis))
    assert row[1] == "c2 b4 c1 grpc config=c2, max_batch_size=8"  # c3 is faster but its p99 misses the SLO


def _served_by(server: str, point: Point) -> Point:
    return replace(point, target=replace(point.target, server=server))


def test_three_servers_on_one_device_are_compared_as_servers() -> None:
    """Servers of three kinds on one CPU: one row per server, the verdict names who serves most and
    each server's batching gain (best over its own batch-1, one-in-flight baseline), computed here by
    hand from the points' known rates."""
    from serve_bench.report import analyze_run, decide

    points = []
    # (server, batch-1 latency at c1, latency at c8): requests/s = concurrency / latency
    for server, base_us, c8_us in (
        ("local", 10_000, 40_000),
        ("triton", 10_000, 20_000),
        ("mlserver", 12_000, 60_000),
    ):
        points.append(_served_by(server, make_point(server, "cpu", 1, base_us, concurrency=1)))
        points.append(_served_by(server, make_point(server, "cpu", 1, c8_us, concurrency=8)))
    decision = decide(analyze_run(points))
    assert [r.device for r in decision.rows] == ["local (cpu)", "mlserver (cpu)", "triton (cpu)"]
    assert decision.ratios is None
    first, gains, latency = decision.verdict
    # triton c8: 8 / 0.020 = 400 images/s, the most; local 8 / 0.040 = 200 (0.50x); mlserver 8 / 0.060 = 133 (0.33x)
    assert first.startswith("Servers: triton (cpu) serves the most, 400 images/s"), first
    assert "local (cpu) 0.50×" in first and "mlserver (cpu) 0.33×" in first
    # gains over each one's c1 baseline: triton 400/100 = 4.00x, local 200/100 = 2.00x, mlserver 133/83.3 = 1.60x
    assert "triton (cpu) 4.00×" in gains and "local (cpu) 2.00×" in gains
    assert "mlserver (cpu) 1.60×" in gains
    assert "p99 at each server's best" in latency


def test_one_server_kind_keeps_the_device_table() -> None:
    from serve_bench.report import analyze_run, decide

    points = [make_point("a", "cpu", 1, 10_000), make_point("b", "gpu", 1, 5_000)]
    decision = decide(analyze_run(points))
    assert [r.device for r in decision.rows] == ["gpu", "cpu"]
