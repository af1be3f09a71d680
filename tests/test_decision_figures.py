"""The decision table's figures and sentences, each worked out by hand from the points it is made of
(issue 35: the tests that kill the mutants of report/_decision.py).

Every point here is a closed-loop point from ``make_point``: ``c`` requests of ``b`` images in flight,
each taking ``latency`` ms, so images/s = c × b / latency and p99 = 1.2 × latency (``p99_factor``). Ranges are
given as factors of the figure (``items_ci=(0.5, 2.0)``: images/s known within [½×, 2×]), so every range
below is a product or quotient of round numbers. Energy is an ``EnergyView`` with the mean watts
given (joules per image = watts / images/s).
"""

from __future__ import annotations

import html
import math
from dataclasses import replace

import pytest

from serve_bench.report import analyze_run, decide
from serve_bench.report._cells import Cell
from serve_bench.report._decision import (
    NO_PRICE,
    Decision,
    DecisionRow,
    Ratios,
    _clear,
    cost_energy_ratios,
    cost_estimate,
    cost_per_million,
    format_figure,
    joules_estimate,
)
from serve_bench.report._decision_table import (
    cell_cost_energy,
    cost_energy_cells,
    decision_html,
    decision_text,
    table_rows,
)
from serve_bench.stats import NOT_MEASURED, EnergyView, Estimate, Interval, Point, Slo
from tests._points import make_point


def point(
    name: str,
    device: str,
    batch: int,
    latency_ms: float,
    *,
    concurrency: int = 1,
    p99_factor: float = 1.2,
    price: float | None = None,
    currency: str = "USD",
    items_ci: tuple[float, float] | None = None,
    p99_ci: tuple[float, float] | None = None,
    gpu_w: float | None = None,
    cpu_w: float | None = None,
    notes: tuple[str, ...] | None = None,
    server: str = "tfserving",
    cut_off: str = "",
    repeat: int = 0,
) -> Point:
    """A point with known figures; ``notes`` alone (no watts) gives an EnergyView that measured nothing."""
    base = make_point(
        name,
        device,
        batch,
        latency_ms * 1000,
        concurrency=concurrency,
        p99_factor=p99_factor,
        cut_off=cut_off,
        repeat=repeat,
    )
    items, p99 = base.items_per_s, base.latency.p99
    energy = None
    if gpu_w is not None or cpu_w is not None or notes is not None:
        energy = EnergyView(seconds=10.0, gpu_watts_mean=gpu_w, cpu_watts_mean=cpu_w, notes=notes or ())
    return replace(
        base,
        target=replace(
            base.target, price_per_hour=price, currency=currency if price is not None else "", server=server
        ),
        throughput=replace(
            base.throughput, items_per_s_ci=Interval(items * items_ci[0], items * items_ci[1]) if items_ci else None
        ),
        latency=replace(base.latency, p99_ci=Interval(p99 * p99_ci[0], p99 * p99_ci[1]) if p99_ci else None),
        energy=energy,
    )


WIDE = {"items_ci": (0.5, 2.0), "p99_ci": (0.8, 1.25)}


# --- cost and joules per image -------------------------------------------------------------------


def test_cost_per_million_images_is_the_price_per_second_over_images_per_second() -> None:
    # 3.6 USD/h = 0.001 USD/s; at 200 images/s a million images take 5000 s: 5 USD
    assert cost_per_million(3.6, 200.0) == pytest.approx(5.0)
    assert cost_per_million(3.6, 0.5) == pytest.approx(2000.0)  # under 1 image/s is still a rate
    assert cost_per_million(3.6, 0.0) is None
    # the range: the most images/s gives the lowest cost (1000/400 = 2.5, 1000/100 = 10)
    assert cost_estimate(3.6, Estimate(200.0, 100.0, 400.0, "95% CI")) == Estimate(
        pytest.approx(5.0), pytest.approx(2.5), pytest.approx(10.0), "95% CI"
    )
    assert cost_estimate(3.6, Estimate(200.0)) == Estimate(pytest.approx(5.0))
    # a range that reaches 0 images/s has no highest cost: no range at all
    assert cost_estimate(3.6, Estimate(200.0, 0.0, 400.0, "95% CI")) == Estimate(pytest.approx(5.0))
    assert cost_estimate(3.6, Estimate(0.0, 0.0, 1.0)) is None


def test_joules_per_image_of_repeats_is_their_median_and_range() -> None:
    """100 W at 100, 50, 25 and 12.5 images/s: 1, 2, 4 and 8 J per image. The median of an even
    count is the mean of the middle two, of an odd count the middle one; the range is the ends."""

    def repeats(*latencies_ms: float) -> Cell:
        return Cell.of(point("a", "gpu", 1, ms, gpu_w=100.0, repeat=i) for i, ms in enumerate(latencies_ms))

    # measured in this order on purpose: the median is taken of the sorted joules, not of the order
    four = joules_estimate(repeats(20.0, 80.0, 10.0, 40.0))
    assert four == (Estimate(3.0, 1.0, 8.0, "range of 4 repeats"), "")  # (2 + 4) / 2
    three = joules_estimate(repeats(40.0, 10.0, 20.0))
    assert three == (Estimate(2.0, 1.0, 4.0, "range of 3 repeats"), "")  # the middle of 1, 2, 4
    two = joules_estimate(repeats(20.0, 10.0))
    assert two == (Estimate(1.5, 1.0, 2.0, "range of 2 repeats"), "")  # (1 + 2) / 2


def test_joules_per_image_of_one_measurement_takes_its_range_from_images_per_second() -> None:
    """200 W at 0.8 images/s (1 image per 1.25 s): 250 J per image; images/s within [0.5, 1.6]
    gives [200/1.6, 200/0.5] = [125, 400] J. A range that starts at 0 images/s gives no range."""
    one = Cell.of([point("a", "gpu", 1, 1250.0, gpu_w=200.0, items_ci=(0.625, 2.0))])
    assert one.items_per_s == Estimate(0.8, 0.5, 1.6, "95% CI")
    assert joules_estimate(one) == (Estimate(250.0, 125.0, 400.0, "95% CI"), "")
    from_zero = Cell.of([point("a", "gpu", 1, 1250.0, gpu_w=200.0, items_ci=(0.0, 2.0))])
    assert joules_estimate(from_zero) == (Estimate(250.0), "")
    no_range = Cell.of([point("a", "gpu", 1, 1250.0, gpu_w=200.0)])
    assert joules_estimate(no_range) == (Estimate(250.0), "")


def test_joules_not_measured_say_why_in_the_telemetrys_words() -> None:
    """No telemetry; the not-measured note among others (it is the one given); other notes only
    (the first); no note at all (the generic reason)."""
    reason = f"{NOT_MEASURED} (http://h:9100/metrics: no RAPL)"

    def why(p: Point) -> tuple[Estimate | None, str]:
        return joules_estimate(Cell.of([p]))

    assert why(point("a", "cpu", 1, 10.0)) == (None, "no telemetry")
    assert why(point("a", "cpu", 1, 10.0, notes=("telemetry unavailable: x", reason))) == (None, reason)
    assert why(point("a", "cpu", 1, 10.0, notes=("telemetry unavailable: x", "y"))) == (
        None,
        "telemetry unavailable: x",
    )
    assert why(point("a", "cpu", 1, 10.0, notes=())) == (None, NOT_MEASURED)
    # a repeat that measured nothing leaves the cell without joules, even when the others did
    cell = Cell.of([point("a", "cpu", 1, 10.0, cpu_w=50.0), point("a", "cpu", 1, 10.0, notes=(reason,), repeat=1)])
    assert joules_estimate(cell) == (None, reason)


def test_joules_come_from_the_repeats_that_measured_the_speed():
    """A repeat cut off when the target went down (its telemetry read nothing) is not one of the
    figures: the other repeat's 100 W at 0.8 images/s, 125 J, with its own range from [0.5, 1.6]
    images/s (100/1.6 to 100/0.5). Taken as the cell's first point, the cut-off repeat had no joules."""
    down = point("a", "gpu", 1, 1250.0, notes=(NOT_MEASURED,), cut_off="target down")
    measured = point("a", "gpu", 1, 1250.0, gpu_w=100.0, items_ci=(0.625, 2.0), repeat=1)
    assert joules_estimate(Cell.of([down, measured])) == (Estimate(125.0, 62.5, 200.0, "95% CI"), "")


def test_compare_divides_b_by_a_only_where_both_sides_have_the_figure() -> None:
    # a: 3.6/h at 100 images/s = 10 USD per million, 100 W / 100 = 1 J; b: twice the images/s
    a = point("a", "gpu", 1, 10.0, price=3.6, gpu_w=100.0)
    b = point("b", "gpu", 2, 10.0, price=3.6, gpu_w=100.0)
    assert cost_energy_ratios(a, b) == {"cost_ratio": pytest.approx(0.5), "joules_ratio": pytest.approx(0.5)}
    assert cost_energy_ratios(a, point("b", "gpu", 2, 10.0, price=3.6, currency="EUR"))["cost_ratio"] is None
    assert cost_energy_ratios(point("a", "gpu", 1, 10.0), b) == {"cost_ratio": None, "joules_ratio": None}


# --- the rows -------------------------------------------------------------------------------------


def test_a_measured_row_holds_its_best_cells_figures_and_its_batching_over_batch_1() -> None:
    """gpu: b1 at 10 ms (100 images/s), b4 at 20 ms (200 images/s, the best), 3.6 USD/h, 300 W on
    the GPU alone. Every field of the row, from those numbers."""
    b1 = point("g", "gpu", 1, 10.0, price=3.6, gpu_w=300.0, **WIDE)
    b4 = point("g", "gpu", 4, 20.0, price=3.6, gpu_w=300.0, **WIDE)
    (row,) = decide(analyze_run([b1, b4])).rows
    assert row.device == "gpu" and row.why_none == ""
    assert row.target is not None and row.target.name == "g"
    assert row.cell is not None and row.cell.points == (b4,)
    assert row.items_per_s == Estimate(200.0, 100.0, 400.0, "95% CI")
    assert row.p99_us == Estimate(24_000.0, 19_200.0, 30_000.0, "95% CI")  # 1.2 × 20 ms, × [0.8, 1.25]
    assert (row.price_per_hour, row.currency) == (3.6, "USD")
    # 0.001 USD/s / 200 images/s × 1e6 = 5 USD, from 400 and 100 images/s: 2.5 and 10
    assert row.cost_per_million == Estimate(pytest.approx(5.0), pytest.approx(2.5), pytest.approx(10.0), "95% CI")
    # 300 W / 200 images/s = 1.5 J, from 400 and 100 images/s: 0.75 and 3
    assert row.joules_per_image == Estimate(1.5, 0.75, 3.0, "95% CI")
    assert (row.energy_why, row.energy_scope, row.watts, row.idle_watts) == ("", "GPU", 300.0, None)
    b = row.batching
    assert b is not None and b.best is row.cell and b.baseline.points == (b1,) and not b.same
    # best over baseline: images/s 200/100 = 2 from [100/200, 400/50] = [0.5, 8]; cost per image the
    # inverse (100/200); joules 1.5/3 = 0.5 (J at b1: 300/100 = 3 [1.5–6]); p99 24/12 = 2
    assert b.items == Estimate(2.0, 0.5, 8.0, "from both ranges")
    assert b.cost == Estimate(0.5, 0.125, 2.0, "from both ranges")
    assert b.joules == Estimate(0.5, 0.125, 2.0, "from both ranges")
    assert b.p99 is not None and b.p99.value == pytest.approx(2.0)
    assert row.cost_text() == "5.00 USD [2.50–10.0]"
    assert row.joules_text() == "1.50 J [0.750–3.00] (GPU)"
    assert row.configuration == "g b4 c1 grpc"
    assert row.watts_text() == "300 W (idle not measured)"


def test_a_row_without_a_price_has_no_cost_factor_and_a_slow_baseline_still_counts() -> None:
    """A batch-1 baseline under 1 image/s (2 s per image) is still a baseline: batching's factor is
    its best over it (4 / 0.5 = 8×); without a price there is no cost factor."""
    (row,) = decide(analyze_run([point("c", "cpu", 1, 2000.0), point("c", "cpu", 4, 1000.0)])).rows
    assert row.batching is not None and row.batching.items == Estimate(8.0)
    assert row.batching.cost is None and row.batching.joules is None
    assert row.cost_per_million is None and row.cost_text() == NO_PRICE
    # no telemetry: no joules, no watts, no scope
    assert (row.joules_per_image, row.energy_why, row.energy_scope) == (None, "no telemetry", "")
    assert (row.watts, row.watts_text(), row.joules_text()) == (None, "not measured", "not measured (no telemetry)")


def test_a_baseline_that_served_nothing_gives_no_batching_factor() -> None:
    """A batch-1 cell with answers but 0 images/s (a results file can hold one): no factor over it,
    rather than an infinite one."""
    b1 = point("c", "cpu", 1, 10.0)
    b1 = replace(b1, throughput=replace(b1.throughput, requests_per_s=0.0, items_per_s=0.0))
    (row,) = decide(analyze_run([b1, point("c", "cpu", 4, 10.0)])).rows
    assert row.cell is not None and row.cell.batch_size == 4 and row.batching is None


def test_of_two_targets_on_one_device_the_faster_wins_and_a_tie_goes_to_the_first() -> None:
    a, b = point("a", "gpu", 1, 10.0), point("b", "gpu", 1, 10.0)
    faster = point("b", "gpu", 2, 10.0)
    for points, name in (([a, b], "a"), ([b, a], "b"), ([a, b, faster], "b")):
        (row,) = decide(analyze_run(points)).rows
        assert row.target is not None and row.target.name == name


def test_a_device_without_a_usable_point_has_an_empty_row_that_says_why() -> None:
    cut = point("c", "cpu", 1, 10.0, price=0.36, cpu_w=50.0, cut_off="deadline")
    measured = point("g", "gpu", 1, 10.0)
    for slo, why in ((None, "no usable point"), (Slo("p99", 50.0), "no point meets p99 ≤ 50 ms")):
        gpu, cpu = decide(analyze_run([measured, cut], slo)).rows
        assert cpu == DecisionRow("cpu", None, None, why, None, None, None, "", None, None, "", "", None, None, None)
        assert cpu.configuration == why
        assert (cpu.cost_text(), cpu.joules_text(), cpu.watts_text()) == ("", "", "")
        assert gpu.cell is not None
        assert table_rows(decide(analyze_run([measured, cut], slo)))[1] == ["cpu", why, "", "", "", "", ""]


def test_summary_csv_gives_each_point_its_cost_joules_watts_and_idle_watts() -> None:
    """3.6 USD/h at 200 images/s: 5 USD per million; 300 W on the GPU, 60 W of it idle: 1.5 J per image, and the
    idle column is the idle figure, not the mean. No price and no telemetry: every column empty."""
    b4 = point("g", "gpu", 4, 20.0, price=3.6, gpu_w=300.0)
    b4 = replace(b4, energy=replace(b4.energy, gpu_idle_watts=60.0))
    assert cost_energy_cells(b4) == ["5", "USD", "1.5", "300", "60"]
    assert cost_energy_cells(point("c", "cpu", 1, 10.0)) == ["", "", "", "", ""]


def test_a_price_of_zero_is_a_price_and_a_cost_without_a_currency_has_no_trailing_space() -> None:
    """A spec may give price_per_hour = 0 (hardware already paid for): its cost is 0 in its currency, not "no
    price". A per-target cell without a currency is the figure alone."""
    free = point("g", "gpu", 4, 20.0, price=0.0)
    assert cost_energy_cells(free)[:2] == ["0", "USD"]
    (row,) = decide(analyze_run([point("g", "gpu", 4, 20.0, price=3.6, currency="")])).rows
    assert row.cell is not None and cell_cost_energy(row.cell)[0] == "5.00"


def test_the_decision_as_text_and_html_titles_it_and_marks_telemetry_notes_only_where_there_are_some() -> None:
    """The terminal's title is the caption's first sentence without its brackets; each telemetry note is marked
    as one. report.html has a "Telemetry notes" heading only when there are notes (a verdict alone has none)."""
    from rich.console import Console

    measured = decide(analyze_run([point("g", "gpu", 1, 10.0), point("c", "cpu", 1, 10.0)]))
    assert measured.verdict and not measured.notes
    assert "Telemetry notes" not in decision_html(measured)
    # words left-aligned (device, configuration), figures right: the first two columns of every row
    assert "<tr><th class=l>device</th><th class=l>best configuration</th><th>images/s</th>" in decision_html(measured)
    assert "<tr><td class=l>gpu</td><td class=l>g b1 c1 grpc</td><td>100</td>" in decision_html(measured)
    noted = decide(analyze_run([point("g", "gpu", 1, 10.0, notes=("telemetry unavailable: http://x (HTTP 404)",))]))
    note = "telemetry unavailable: http://x (HTTP 404) (1 point: g b1 c1)"
    assert f"<h3>Telemetry notes</h3><ul><li class=warn>{note}</li></ul></div>" in decision_html(noted)
    console = Console(record=True, width=200)
    decision_text(noted, console)
    lines = [line.strip() for line in console.export_text().splitlines() if line.strip()]
    assert lines[0] == "Decision no SLO given: each device's best measured point"
    assert lines[-1] == f"telemetry: {note}"


def _gpu_and_cpu(slo: Slo | None = None) -> Decision:
    """A GPU batching 8 (a priced, powered row with ranges) and a CPU at batch 1 whose telemetry said two things."""
    notes = ("telemetry unavailable: http://x (HTTP 404)", "no CPU power: RAPL not readable")
    points = [
        point("g", "gpu", 8, 20.0, price=3.6, gpu_w=300.0, **WIDE),
        point("g", "gpu", 1, 5.0, price=3.6, gpu_w=200.0),
        point("c", "cpu", 1, 10.0, price=0.36, notes=notes),
    ]
    return decide(analyze_run(points, slo=slo))


def test_the_decision_in_a_terminal_word_for_word_words_left_and_figures_right() -> None:
    """The title is the caption's first sentence without its brackets (here with an SLO); the device and
    configuration columns are left-aligned, every figure right-aligned so that digits line up; the ratio row's
    empty cells stay empty; then each verdict line as a bullet and each telemetry note marked as one."""
    from rich.console import Console

    decision = _gpu_and_cpu(Slo("p99", 50.0))
    console = Console(record=True, width=300)
    decision_text(decision, console)
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert lines[0].strip() == "Decision within p99 ≤ 50 ms"
    assert lines[1:6] == [
        "device      best configuration        images/s             p99 ms   cost per million images  "
        "           joules per image                  mean power",
        "─" * 148,
        "gpu         g b8 c1 grpc         400 [200–800]   24.0 [19.2–30.0]      2.50 USD [1.25–5.00]   "
        "0.750 J [0.375–1.50] (GPU)   300 W (idle not measured)",
        "cpu         c b1 c1 grpc                   100               12.0                  1.00 USD      "
        "           not measured                not measured",
        "GPU / CPU                                4.00×              2.00×                     2.50×      "
        "    not measured on cpu",
    ]
    assert lines[6:9] == [f"  • {line}" for line in decision.verdict] and len(decision.verdict) == 3
    assert lines[9:] == [
        "  telemetry: telemetry unavailable: http://x (HTTP 404) (1 point: c b1 c1)",
        "  telemetry: no CPU power: RAPL not readable (1 point: c b1 c1)",
    ]


def test_the_decision_in_report_html_word_for_word() -> None:
    """The caption, a header row, one row per device and the ratio row, the verdict as a list, then the telemetry
    notes under their heading; without notes the fragment ends after the verdict."""
    decision = _gpu_and_cpu()
    left = "<td class=l>{}</td><td class=l>{}</td>"
    rows = [
        left.format("gpu", "g b8 c1 grpc")
        + "<td>400 [200–800]</td><td>24.0 [19.2–30.0]</td><td>2.50 USD [1.25–5.00]</td>"
        "<td>0.750 J [0.375–1.50] (GPU)</td><td>300 W (idle not measured)</td>",
        left.format("cpu", "c b1 c1 grpc")
        + "<td>100</td><td>12.0</td><td>1.00 USD</td><td>not measured</td><td>not measured</td>",
        left.format("GPU / CPU", "")
        + "<td>4.00×</td><td>2.00×</td><td>2.50×</td><td>not measured on cpu</td><td></td>",
    ]
    head = "<th class=l>device</th><th class=l>best configuration</th>" + "".join(
        f"<th>{name}</th>"
        for name in ("images/s", "p99 ms", "cost per million images", "joules per image", "mean power")
    )
    verdict = "".join(f"<li>{html.escape(line)}</li>" for line in decision.verdict)
    assert decision_html(decision) == (
        '<div class="decision"><h2>Decision</h2><p>Decision (no SLO given: each device&#x27;s best measured '
        "point). Ranges in brackets: 95% CI of one point or the range of its repeats; cost per million images = "
        "price per hour / 3600 / images per s × 1e6; joules per image = mean watts / images per s (devices counted "
        f"in brackets).</p><table><tr>{head}</tr>" + "".join(f"<tr>{row}</tr>" for row in rows) + "</table>"
        f"<ul>{verdict}</ul><h3>Telemetry notes</h3><ul>"
        "<li class=warn>telemetry unavailable: http://x (HTTP 404) (1 point: c b1 c1)</li>"
        "<li class=warn>no CPU power: RAPL not readable (1 point: c b1 c1)</li></ul></div>"
    )
    assert len(decision.verdict) == 3 and verdict.count("<li>") == 3
    quiet = decide(analyze_run([point("g", "gpu", 1, 10.0), point("c", "cpu", 1, 10.0)]))
    assert decision_html(quiet).endswith("</li></ul></div>")


def test_a_target_without_a_price_has_no_currency_and_a_cell_without_either_figure_is_empty() -> None:
    """A spec's currency is every target's, but a target without a price has no cost, so summary.csv names no
    currency for it; a per-target cell with no price and no telemetry has two empty cells."""
    unpriced = point("c", "cpu", 1, 10.0)
    unpriced = replace(unpriced, target=replace(unpriced.target, currency="USD"))
    assert cost_energy_cells(unpriced)[:2] == ["", ""]
    (row,) = decide(analyze_run([unpriced])).rows
    assert row.cell is not None and cell_cost_energy(row.cell) == ["", ""]


def test_cost_text_says_why_a_measured_row_has_no_cost() -> None:
    (row,) = decide(analyze_run([point("g", "gpu", 1, 10.0, price=3.6)])).rows
    assert row.cost_text() == "10.0 USD"  # 0.001 USD/s / 100 images/s × 1e6, no range
    assert replace(row, cost_per_million=None).cost_text() == "not measured (no images/s)"
    assert replace(row, cost_per_million=None, price_per_hour=None).cost_text() == NO_PRICE


def test_devices_are_ordered_gpu_then_cpu_then_the_rest_by_name() -> None:
    points = [point(d, d, 1, 10.0) for d in ("tpu", "cpu", "npu", "gpu")]
    assert [r.device for r in decide(analyze_run(points)).rows] == ["gpu", "cpu", "npu", "tpu"]
    assert [r.device for r in decide(analyze_run(points[::2])).rows] == ["npu", "tpu"]


def test_figures_are_written_with_three_significant_figures() -> None:
    assert [format_figure(v) for v in (0.00123456, 0.5, 12.34, 123.4, 123456.0, -0.5)] == [
        "0.00123",
        "0.500",
        "12.3",
        "123",
        "123456",
        "-0.500",
    ]
    # no logarithm of 0, of infinity or of nan
    assert [format_figure(v) for v in (0.0, math.inf, -math.inf, math.nan)] == ["0", "inf", "-inf", "nan"]


# --- the GPU/CPU ratios ---------------------------------------------------------------------------


def _ratios(gpu: Point, cpu: Point) -> Ratios:
    decision = decide(analyze_run([gpu, cpu]))
    assert decision.ratios is not None
    return decision.ratios


def test_ratios_say_why_cost_or_energy_is_not_compared() -> None:
    both = _ratios(
        point("g", "gpu", 1, 10.0, price=3.6, gpu_w=100.0), point("c", "cpu", 1, 10.0, price=0.36, cpu_w=50.0)
    )
    assert (both.cost_why, both.joules_why) == ("", "")
    assert both.cost == Estimate(pytest.approx(10.0)) and both.joules == Estimate(2.0)  # 10/1 USD; 1/0.5 J
    # a priced target without a currency is written "?"
    usd_none = _ratios(point("g", "gpu", 1, 10.0, price=3.6), point("c", "cpu", 1, 10.0, price=0.36, currency=""))
    assert (usd_none.cost, usd_none.cost_why) == (None, "prices in different currencies (USD and ?)")
    none_eur = _ratios(
        point("g", "gpu", 1, 10.0, price=3.6, currency=""), point("c", "cpu", 1, 10.0, price=0.36, currency="EUR")
    )
    assert none_eur.cost_why == "prices in different currencies (? and EUR)"
    unpriced = _ratios(point("g", "gpu", 1, 10.0), point("c", "cpu", 1, 10.0))
    assert (unpriced.cost_why, unpriced.joules_why) == ("no price given for gpu and cpu", "not measured on gpu and cpu")
    cpu_only = _ratios(point("g", "gpu", 1, 10.0, price=3.6), point("c", "cpu", 1, 10.0, cpu_w=50.0))
    assert (cpu_only.cost_why, cpu_only.joules) == ("no price given for cpu", None)
    assert cpu_only.joules_why == "not measured on gpu"


def test_a_ratio_is_clear_only_when_its_whole_range_lies_on_one_side_of_1() -> None:
    assert _clear(Estimate(0.5, 0.4, 0.9)) == "lower"
    assert _clear(Estimate(0.5, 0.4, 1.0)) == ""  # touches 1: no winner
    assert _clear(Estimate(0.5, 0.4, 1.2)) == ""  # the value is below 1, the range is not
    assert _clear(Estimate(1.5, 1.2, 1.6)) == "higher"
    assert _clear(Estimate(1.5, 1.0, 1.6)) == ""
    assert _clear(Estimate(1.5, 0.9, 1.6)) == ""
    assert _clear(Estimate(1.5, 1.2, 3.0)) == "higher"
    # without a range, the value alone decides
    assert (_clear(Estimate(0.9)), _clear(Estimate(1.0)), _clear(Estimate(1.1))) == ("lower", "", "higher")
    assert _clear(Estimate(2.5)) == "higher"


# --- the verdict: GPU against CPU -----------------------------------------------------------------


def test_the_verdict_names_the_cpu_when_it_wins_all_three_word_for_word() -> None:
    """gpu: b1 10 ms, b4 20 ms (200 images/s, p99 24 ms), 3.6 USD/h, 300 W GPU only; cpu: b1 4 ms
    (250 images/s), b2 5 ms (400 images/s, p99 6 ms), 0.36 USD/h, 40 W (50 W at b1). Images/s
    within [½×, 2×], p99 within [0.8×, 1.25×].

    cost: 5 USD [2.5–10] vs 0.0001/400 × 1e6 = 0.25 [0.125–0.5]: 20× [2.5/0.5, 10/0.125] = [5, 80];
    joules: 300/200 = 1.5 [0.75–3] vs 40/400 = 0.1 [0.05–0.2]: 15× [0.75/0.2, 3/0.05] = [3.75, 60];
    p99: 24 vs 6 ms: 4× [19.2/7.5, 30/4.8] = [2.56, 6.25]. Batching: cost per image gpu 100/200
    (cut 2×), cpu 250/400 (cut 1.6×); joules gpu 1.5/1.5, cpu 0.1/0.2 (cut 2×); p99 gpu 24/12
    (raised 2×), cpu 6/4.8 (raised 1.25×)."""
    gpu = [point("g", "gpu", b, ms, price=3.6, gpu_w=w, **WIDE) for b, ms, w in ((1, 10.0, 150.0), (4, 20.0, 300.0))]
    cpu = [point("c", "cpu", b, ms, price=0.36, cpu_w=w, **WIDE) for b, ms, w in ((1, 4.0, 50.0), (2, 5.0, 40.0))]
    decision = decide(analyze_run(gpu + cpu))
    assert decision.verdict == (
        "Cost: CPU is cheaper (5.00 USD [2.50–10.0] vs 0.250 USD [0.125–0.500] per million images, "
        "GPU/CPU 20.0× [5.00×–80.0×]); batching cut it 2.00× on gpu (g b4 c1 vs g b1 c1) "
        "and 1.60× on cpu (c b2 c1 vs c b1 c1).",
        # gpu joules at b1: 150/100 = 1.5, at b4 1.5: a factor of exactly 1 is said as unchanged, and the next
        # device's verb is said again
        "Energy: CPU uses less energy (1.50 J [0.750–3.00] (GPU) vs 0.100 J [0.0500–0.200] (CPU) per image, "
        "GPU/CPU 15.0× [3.75×–60.0×]; the gpu figure leaves out its host's CPU (add a node exporter to its "
        "telemetry)); batching left it unchanged on gpu (g b4 c1 vs g b1 c1) "
        "and batching cut it 2.00× on cpu (c b2 c1 vs c b1 c1).",
        "Latency: CPU answers faster (p99 24.0 vs 6.00 ms at their best, GPU/CPU 4.00× [2.56×–6.25×]); "
        "batching raised p99 2.00× on gpu (12.0 → 24.0 ms, g b4 c1 vs g b1 c1) "
        "and 1.25× on cpu (4.80 → 6.00 ms, c b2 c1 vs c b1 c1).",
    )
    # a factor that prints as 1.00× is unchanged too: the GPU's batch 4 at 10.04 ms (p99 12.048 ms) over batch 1's
    # 12 ms is 1.004×
    close = [*gpu[:1], point("g", "gpu", 4, 10.04, price=3.6, gpu_w=300.0, **WIDE)]
    latency = decide(analyze_run(close + cpu)).verdict[2]
    assert "batching left p99 unchanged on gpu (12.0 → 12.0 ms, g b4 c1 vs g b1 c1)" in latency, latency


def test_the_verdict_names_no_winner_when_every_range_straddles_1_word_for_word() -> None:
    """gpu and cpu measured alike under p99 ≤ 100 ms: b1 10 ms (100 images/s), b8 40 ms (200 images/s,
    p99 48 ms), both 1.8 USD/h and 200 W (gpu: 150 W GPU + 50 W host CPU). b32 at 100 ms would
    serve 320 images/s but its p99 (120 ms) misses the SLO. Every ratio is 1 within ranges that
    straddle it: cost and joules 1 [½×½, 2×2], p99 1 [0.8/1.25, 1.25/0.8] = [0.64, 1.5625].

    cost: 0.0005 USD/s / 200 × 1e6 = 2.5 USD [1.25–5]; joules 200/200 = 1 J [0.5–2]."""
    points = []
    for name, device, gpu_w, cpu_w in (("g", "gpu", 150.0, 50.0), ("c", "cpu", None, 200.0)):
        for batch, ms in ((1, 10.0), (8, 40.0), (32, 100.0)):
            points.append(point(name, device, batch, ms, price=1.8, gpu_w=gpu_w, cpu_w=cpu_w, **WIDE))
    slo = Slo("p99", 100.0)
    decision = decide(analyze_run(points, slo))
    assert decision.slo == slo
    assert decision.verdict == (
        "Cost: no clear winner within the ranges (2.50 USD [1.25–5.00] vs 2.50 USD [1.25–5.00] per million "
        "images, GPU/CPU 1.00× [0.25×–4.00×]); batching cut it 2.00× on gpu (g b8 c1 vs g b1 c1) "
        "and 2.00× on cpu (c b8 c1 vs c b1 c1).",
        # the gpu's joules count its host's CPU too: nothing is said to be left out
        "Energy: no clear winner within the ranges (1.00 J [0.500–2.00] (GPU+CPU) vs 1.00 J [0.500–2.00] (CPU) "
        "per image, GPU/CPU 1.00× [0.25×–4.00×]); batching cut it 2.00× on gpu (g b8 c1 vs g b1 c1) "
        "and 2.00× on cpu (c b8 c1 vs c b1 c1).",
        "Latency: no clear winner within the ranges (p99 48.0 vs 48.0 ms at their best within p99 ≤ 100 ms, "
        "GPU/CPU 1.00× [0.64×–1.56×]); batching raised p99 4.00× on gpu (12.0 → 48.0 ms, g b8 c1 vs g b1 c1) "
        "and 4.00× on cpu (12.0 → 48.0 ms, c b8 c1 vs c b1 c1).",
    )


def test_the_verdict_of_one_judged_device_lists_its_figures_word_for_word() -> None:
    """gpu b4 at 20 ms: 200 images/s, p99 24 ms, 5 USD [2.5–10] per million, 1.5 J [0.75–3]; the cpu
    and the tpu were cut off (no usable point)."""
    points = [
        point("g", "gpu", 4, 20.0, price=3.6, gpu_w=300.0, **WIDE),
        point("c", "cpu", 1, 10.0, cut_off="deadline"),
        point("t", "tpu", 1, 10.0, cut_off="deadline"),
    ]
    decision = decide(analyze_run(points))
    assert decision.ratios is None
    assert decision.verdict == (
        "Only gpu can be judged (no usable point on cpu, tpu): g b4 c1 grpc: 200 images/s, p99 24.0 ms, "
        "5.00 USD [2.50–10.0] per million images, 1.50 J [0.750–3.00] (GPU) per image.",
    )
    # alone, without price or telemetry
    # p99 = the latency here: 10 ms (10.0, where a p99 a thousandth off would be 9.99)
    (alone,) = decide(analyze_run([point("c", "cpu", 1, 10.0, p99_factor=1.0, notes=(NOT_MEASURED,))])).verdict
    assert alone == (
        "Only cpu can be judged (only one device in this run): c b1 c1 grpc: 100 images/s, p99 10.0 ms, "
        "no price given, energy not measured (why: telemetry notes)."
    )


def test_the_verdict_without_any_usable_point_says_so() -> None:
    cut = [point("g", "gpu", 1, 10.0, cut_off="deadline"), point("c", "cpu", 1, 10.0, cut_off="deadline")]
    assert decide(analyze_run(cut)).verdict == ("No device has a usable point: nothing to decide.",)
    slow = [point("g", "gpu", 1, 100.0), point("c", "cpu", 1, 100.0)]  # p99 120 ms
    assert decide(analyze_run(slow, Slo("p99", 100.0))).verdict == (
        "No device has a usable point within p99 ≤ 100 ms: nothing to decide.",
    )


# --- the verdict: servers on one device -----------------------------------------------------------


def test_servers_on_one_device_are_compared_word_for_word() -> None:
    """Four server kinds on one cpu under p99 ≤ 50 ms; each best is b4 at c1 (images/s = 4 / latency),
    its range [0.8×, 1.25×]; the batch-1 baselines have no range.

    triton b4 20 ms: 200 [160–250] images/s, the most (b1 10 ms: 100, gain 2×);
    tfserving b4 25 ms: 160 [128–200], 160/200 = 0.8 [128/250, 200/160] = [0.512, 1.25]: within the noise
    (b1 10 ms: 100, gain 1.6×); local b4 40 ms: 100 [80–125], 0.5 [80/250, 125/160] = [0.32, 0.78]:
    clearly less (b1 20 ms: 50, gain 2×); mlserver b1 at 50 ms has p99 60 ms: no point meets the SLO."""
    range_ = {"items_ci": (0.8, 1.25)}
    points = [
        point("triton", "cpu", 1, 10.0, server="triton"),
        point("triton", "cpu", 4, 20.0, server="triton", **range_),
        point("tfserving", "cpu", 1, 10.0, server="tfserving"),
        point("tfserving", "cpu", 4, 25.0, server="tfserving", **range_),
        point("local", "cpu", 1, 20.0, server="local"),
        point("local", "cpu", 4, 40.0, server="local", **range_),
        point("mlserver", "cpu", 1, 50.0, server="mlserver"),
    ]
    decision = decide(analyze_run(points, Slo("p99", 50.0)))
    assert [r.device for r in decision.rows] == ["local (cpu)", "mlserver (cpu)", "tfserving (cpu)", "triton (cpu)"]
    assert decision.verdict == (
        "Servers within p99 ≤ 50 ms: triton (cpu) serves the most, 200 images/s (triton b4 c1 grpc); "
        "tfserving (cpu) 0.80× [0.51×–1.25×] of it, within the noise; local (cpu) 0.50× [0.32×–0.78×] of it; "
        "no usable point on mlserver (cpu) (no point meets p99 ≤ 50 ms).",
        "Batching gain, each server's best over its own batch-1 baseline: triton (cpu) 2.00× "
        "(triton b4 c1 vs triton b1 c1); tfserving (cpu) 1.60× (tfserving b4 c1 vs tfserving b1 c1); "
        "local (cpu) 2.00× (local b4 c1 vs local b1 c1).",
        # p99 = 1.2 × latency: 24, 30 and 48 ms
        "p99 at each server's best within p99 ≤ 50 ms: triton (cpu) 24.0 ms, tfserving (cpu) 30.0 ms, "
        "local (cpu) 48.0 ms.",
    )


def test_servers_without_an_slo_nor_a_batched_point() -> None:
    """triton measured only at b1 (its best is its baseline); local only at b2 (no batch-1 baseline):
    2 / 10 ms = 200 images/s against triton's 100, its p99 10 ms (the latency: 10.0, where a p99 a
    thousandth off would be 9.99); mlserver and tfserving cut off."""
    points = [
        point("triton", "cpu", 1, 10.0, server="triton"),
        point("local", "cpu", 2, 10.0, p99_factor=1.0, server="local"),
        point("mlserver", "cpu", 1, 10.0, server="mlserver", cut_off="deadline"),
        point("tfserving", "cpu", 1, 10.0, server="tfserving", cut_off="deadline"),
    ]
    decision = decide(analyze_run(points))
    assert decision.verdict == (
        "Servers: local (cpu) serves the most, 200 images/s (local b2 c1 grpc); triton (cpu) 0.50× of it; "
        "no usable point on mlserver (cpu) (no usable point), tfserving (cpu) (no usable point).",
        "Batching gain, each server's best over its own batch-1 baseline: local (cpu): no batch-1 baseline; "
        "triton (cpu): none (its best is its batch-1 baseline triton b1 c1).",
        "p99 at each server's best: local (cpu) 10.0 ms, triton (cpu) 12.0 ms.",
    )
    # two kinds are enough to compare servers
    two = decide(analyze_run(points[:2]))
    assert [r.device for r in two.rows] == ["local (cpu)", "triton (cpu)"] and two.verdict[0].startswith("Servers: ")
    cut = [replace(p, cut_off="deadline") for p in points]
    assert decide(analyze_run(cut)).verdict == ("No server has a usable point: nothing to compare.",)


# --- the telemetry notes --------------------------------------------------------------------------


def test_each_telemetry_note_is_said_once_with_the_points_it_was_written_for() -> None:
    """'wrap' on b1…b5 and on a repeat of b1 (6 points, 5 names: four shown, 'and 1 more'); 'four' on
    four points (all shown); 'two' on two; 'one' on one; a point without telemetry first."""
    points = [point("a", "cpu", 9, 10.0)]
    points += [point("a", "cpu", b, 10.0, notes=("wrap",) + (("four",) if b <= 4 else ())) for b in range(1, 6)]
    points += [point("a", "cpu", 1, 10.0, notes=("wrap", "two", "one"), repeat=1)]
    points += [point("a", "cpu", 2, 10.0, notes=("two",), repeat=1)]
    # in the order given: the point without telemetry first
    assert decide(analyze_run(points), points).notes == (
        "wrap (6 points: a b1 c1, a b2 c1, a b3 c1, a b4 c1 and 1 more)",
        "four (4 points: a b1 c1, a b2 c1, a b3 c1, a b4 c1)",
        "two (2 points: a b1 c1, a b2 c1)",
        "one (1 point: a b1 c1)",
    )
    assert decide(analyze_run(points)).notes == decide(analyze_run(points), points).notes
    # the points given are where the notes come from, not the analysis' own
    assert decide(analyze_run(points), points[-1:]).notes == ("two (1 point: a b2 c1)",)


def test_batching_is_said_for_each_device_that_has_a_factor() -> None:
    """The cpu's factor is said whatever the gpu's row holds before it: cpu b1 10 ms (100 images/s,
    0.36 USD/h, 100 W: 1 J) and b2 10 ms (200 images/s: cost per image and joules cut 2×)."""
    cpu = [point("c", "cpu", b, 10.0, price=0.36, cpu_w=100.0) for b in (1, 2)]
    cpu_part = "batching cut it 2.00× on cpu (c b2 c1 vs c b1 c1)."
    # the gpu's best is its batch-1 baseline
    same = decide(analyze_run([point("g", "gpu", 1, 10.0, price=3.6), *cpu])).verdict[0]
    assert same.endswith("; batching did not help on gpu (its best is its batch-1 baseline g b1 c1) and " + cpu_part)
    # the gpu has no batch-1 baseline
    no_baseline = decide(analyze_run([point("g", "gpu", 4, 10.0, price=3.6), *cpu])).verdict[0]
    assert no_baseline.endswith(" per million images, GPU/CPU 5.00×); " + cpu_part)  # (0.001/400) / (0.0001/200)
    # the gpu's counter did not move at its best (0 J against 1 J at b1): a factor of 0 is not said
    gpu = [point("g", "gpu", 1, 10.0, gpu_w=100.0), point("g", "gpu", 2, 10.0, gpu_w=0.0)]
    energy = decide(analyze_run([*gpu, *cpu])).verdict[1]
    assert energy.startswith("Energy: GPU uses less energy (0 J (GPU) vs 0.500 J (CPU) per image, GPU/CPU 0.00×")
    assert energy.endswith("; " + cpu_part)
