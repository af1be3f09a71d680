"""Tables for a terminal of any width: the columns that fit, every cell whole.

rich squeezes a table wider than the terminal by cutting cells to an ellipsis ("lo…", "ba…"),
and a pipe or a log is 80 columns unless ``COLUMNS`` says otherwise. ``print_fitted`` instead
keeps the columns that fit whole, most important first, and names the ones left out (the full
table is in summary.csv and report.html); when not even the first two fit, each row becomes a
line of "header value" pairs, which the console wraps at spaces: so too when the three first-ranked
columns do not fit side by side, as a table without its main figures says little.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Column", "fit_columns", "print_fitted"]

# Figures per row when rows are printed as lines.
_LINE_FIGURES = 4
# Light rules, no outer frame: three characters between columns and none at the edges.
_STYLE: dict[str, Any] = {"show_edge": False, "pad_edge": False}


@dataclass(frozen=True)
class Column:
    """One column: its header, its rank (0 first kept), and whether its cells may wrap at spaces.

    Figures (``wrap=False``) are never split; words (a configuration, flags) may wrap onto
    a second line of their cell. A header always may.
    """

    header: str
    rank: int
    justify: str = "right"
    wrap: bool = False


def _longest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def _needs(column: Column, cells: Sequence[str]) -> tuple[int, int, int]:
    """Widths: the narrowest that keeps every cell whole, one that puts every cell on one line, and one
    that puts the header on one line too."""
    fit = max((_longest_word(c) if column.wrap else len(c) for c in cells), default=0)
    one_line = max((len(c) for c in cells), default=0)
    narrowest = max(fit, _longest_word(column.header), 1)
    return narrowest, max(one_line, narrowest), max(one_line, len(column.header), narrowest)


def _table(title: str | None, columns: Sequence[Column], widths: Sequence[int]) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, **_STYLE)
    for column, width in zip(columns, widths):
        # overflow "fold" only as a guard: the widths below leave room for every cell
        table.add_column(column.header, justify=column.justify, width=width, overflow="fold")  # type: ignore[arg-type]
    return table


def _overhead(console: Any, count: int) -> int:
    """Characters the table's rules and padding take beside ``count`` columns."""
    from rich.measure import Measurement

    table = _table(None, [Column("", 0)] * count, [1] * count)
    table.add_row(*["x"] * count)
    return int(Measurement.get(console, console.options, table).maximum) - count


def fit_columns(
    console: Any, columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, keep: int = 3
) -> list[tuple[int, int]] | None:
    """The columns to show within ``width`` as (index, width), in table order; None when the ``keep``
    first-ranked do not fit side by side. Columns with no text in any row are left out."""
    needs = [_needs(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    used = [i for i in range(len(columns)) if i == 0 or any(row[i].strip() for row in rows)]
    chosen: list[int] = []
    for i in sorted(used, key=lambda i: columns[i].rank):
        trial = [*chosen, i]
        if sum(needs[j][0] for j in trial) + _overhead(console, len(trial)) <= width:
            chosen = trial
        elif len(chosen) < keep:
            return None
    chosen.sort()
    widths = {i: needs[i][0] for i in chosen}
    spare = width - sum(widths.values()) - _overhead(console, len(chosen))
    for level in (1, 2):  # room left: put cells on one line, then headers, left to right
        for i in chosen:
            extra = min(spare, needs[i][level] - widths[i])
            widths[i] += extra
            spare -= extra
    return [(i, widths[i]) for i in chosen]


def print_fitted(
    console: Any,
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    elsewhere: str = "summary.csv and report.html",
) -> None:
    """Print ``rows`` under ``columns`` in the console's width with no cell cut; say what was left out and where
    it is (``elsewhere``)."""
    width = int(console.width)
    fitted = fit_columns(console, columns, rows, width)
    if fitted is None:  # a line per row: its first-ranked figures, "header value", wrapped at spaces
        console.print(title)
        ranked = sorted(range(1, len(columns)), key=lambda i: columns[i].rank)[:_LINE_FIGURES]
        for row in rows:
            figures = [f"{columns[i].header} {row[i]}".strip() for i in ranked if row[i].strip()]
            console.print(f"  {row[0]}: " + "; ".join(figures), overflow="fold")
        console.print(f"  (the other columns are in {elsewhere})")
        return
    shown = [i for i, _ in fitted]
    table = _table(title, [columns[i] for i in shown], [w for _, w in fitted])
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    console.print(table)
    left_out = [
        c.header or "role" for i, c in enumerate(columns) if i not in shown and any(row[i].strip() for row in rows)
    ]
    if left_out:
        console.print(f"  (not shown at {width} columns: {', '.join(left_out)}; all are in {elsewhere})")
