"""The decision table as text: rows for a terminal, an HTML fragment, and the cost/energy cells of
summary.csv and the per-target tables (figures from _decision.py)."""

from __future__ import annotations

import html
from typing import Any

from serve_bench.report._cells import Cell
from serve_bench.report._decision import (
    Decision,
    DecisionRow,
    Ratios,
    cost_estimate,
    cost_per_million,
    idle_watts,
    joules_estimate,
    with_range,
)
from serve_bench.report._terminal import Column, print_fitted
from serve_bench.stats import Estimate, Point, ratio_text

__all__ = [
    "COLUMNS",
    "COST_ENERGY_COLUMNS",
    "cell_cost_energy",
    "cost_energy_cells",
    "decision_html",
    "decision_text",
    "table_rows",
]

# summary.csv columns, one row per point (cost_energy_cells)
COST_ENERGY_COLUMNS = ["Cost per Million Images", "Currency", "Joules per Image", "Avg Watts", "Idle Watts"]

COLUMNS = (
    "device",
    "best configuration",
    "images/s",
    "p99 ms",
    "cost per million images",
    "joules per image",
    "mean power",
)


def _cells(row: DecisionRow) -> list[str]:
    if row.cell is None:
        return [row.device, row.why_none, "", "", "", "", ""]
    assert row.items_per_s is not None and row.p99_us is not None
    return [
        row.device,
        row.configuration,
        with_range(row.items_per_s, ""),
        with_range(Estimate(row.p99_us.value / 1000, _ms(row.p99_us.low), _ms(row.p99_us.high)), ""),
        row.cost_text(),
        row.joules_text(),
        row.watts_text(),
    ]


def _ms(value: float | None) -> float | None:
    return None if value is None else value / 1000


def _ratio_cells(ratios: Ratios) -> list[str]:
    return [
        "GPU / CPU",
        "",
        ratio_text(ratios.items),
        ratio_text(ratios.p99),
        ratio_text(ratios.cost, ratios.cost_why),
        ratio_text(ratios.joules, ratios.joules_why),
        "",
    ]


def table_rows(decision: Decision) -> list[list[str]]:
    """The decision table as rows of text (COLUMNS), the GPU/CPU ratio row last."""
    rows = [_cells(r) for r in decision.rows]
    if decision.ratios is not None:
        rows.append(_ratio_cells(decision.ratios))
    return rows


def _within(decision: Decision) -> str:
    return f"within {decision.slo.label()}" if decision.slo else "no SLO given: each device's best measured point"


def _caption(decision: Decision) -> str:
    return (
        f"Decision ({_within(decision)}). Ranges in brackets: 95% CI of one point or the range of its repeats; "
        "cost per million images = price per hour / 3600 / images per s × 1e6; "
        "joules per image = mean watts / images per s (devices counted in brackets)."
    )


# In a narrow terminal the last-ranked columns are left out (report.html keeps them; _terminal.py).
_TERMINAL = tuple(
    Column(name, rank, justify="left" if rank < 2 else "right", wrap=name not in ("images/s", "p99 ms"))
    for rank, name in enumerate(COLUMNS)
)


def decision_text(decision: Decision, console: Any | None = None) -> None:
    """Print the decision table and its verdict to a rich console (the terminal summary's top)."""
    from rich.console import Console

    out = console if console is not None else Console()
    print_fitted(out, f"Decision {_within(decision)}", _TERMINAL, table_rows(decision))
    for line in decision.verdict:
        out.print(f"  • {line}")
    for note in decision.notes:
        out.print(f"  [yellow]telemetry:[/yellow] {note}")


def decision_html(decision: Decision) -> str:
    """The decision table, verdict and telemetry notes as an HTML fragment (top of report.html)."""

    def e(value: object) -> str:
        return html.escape(str(value))

    head = "".join(f"<th{' class=l' if i < 2 else ''}>{e(c)}</th>" for i, c in enumerate(COLUMNS))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=l' if i < 2 else ''}>{e(v)}</td>" for i, v in enumerate(row)) + "</tr>"
        for row in table_rows(decision)
    )
    verdict = "".join(f"<li>{e(line)}</li>" for line in decision.verdict)
    notes = "".join(f"<li class=warn>{e(n)}</li>" for n in decision.notes)
    return (
        f'<div class="decision"><h2>Decision</h2><p>{e(_caption(decision))}</p>'
        f"<table><tr>{head}</tr>{body}</table><ul>{verdict}</ul>"
        + (f"<h3>Telemetry notes</h3><ul>{notes}</ul>" if notes else "")
        + "</div>"
    )


def cost_energy_cells(point: Point) -> list[str]:
    """summary.csv's COST_ENERGY_COLUMNS for one point ("" where no price or no energy was measured)."""
    price = point.target.price_per_hour
    cost = cost_per_million(price, point.items_per_s) if price is not None else None
    energy = point.energy
    joules = energy.joules_per_item(point.items_per_s) if energy is not None else None
    watts = energy.watts() if energy is not None else None
    idle = idle_watts(point)
    return [
        "" if cost is None else f"{cost:.6g}",
        point.target.currency if price is not None else "",
        "" if joules is None else f"{joules:.6g}",
        "" if watts is None else f"{watts:.6g}",
        "" if idle is None else f"{idle:.6g}",
    ]


def cell_cost_energy(cell: Cell) -> list[str]:
    """A per-target table's cost per million images and joules per image of one cell, with their
    ranges ("" where no price was given or no energy measured: the decision table says why)."""
    price = cell.points[0].target.price_per_hour
    cost = cost_estimate(price, cell.items_per_s) if price is not None else None
    joules, _ = joules_estimate(cell)
    unit = f" {cell.points[0].target.currency}".rstrip()
    return ["" if cost is None else with_range(cost, unit), "" if joules is None else with_range(joules, " J")]
