"""How the CLI shows a sweep going on: a progress bar (or plain lines) and one line per point."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from serve_bench.load import PointPlan
from serve_bench.stats import Point

__all__ = ["SweepProgress"]


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


class SweepProgress:
    """``on_point`` for ``run_sweep``: a bar when ``bar`` (a terminal), else one line per point started."""

    def __init__(self, console: Console, *, bar: bool, indent: str = "  ") -> None:
        self.console = console
        self.bar = bar
        self.indent = indent
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            console=console,
            disable=not bar,
        )

    def __call__(self, plan: PointPlan, point: Point | None, done: int, total: int, eta: float) -> None:
        if not self.progress.tasks:
            self.progress.add_task("", total=total, eta=_clock(eta))
        task = self.progress.tasks[0].id
        if point is None:
            self.progress.update(task, description=plan.key, completed=done, eta=_clock(eta))
            if not self.bar:
                self.console.print(f"{self.indent}[{done + 1}/{total}] {plan.key} (about {_clock(eta)} left)")
        else:
            self.progress.update(task, completed=done, eta=_clock(eta))
            self.console.print(f"{self.indent}  {point.describe()}")

    def __enter__(self) -> SweepProgress:
        self.progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.progress.__exit__(kind, error, trace)
