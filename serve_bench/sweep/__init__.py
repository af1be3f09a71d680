"""Measuring: one point (``measure``), a grid of points from a TOML spec (``run_sweep``) with resume.

One-point measurement lives here because sweep is the lowest layer that may use both
``load`` (the generators) and ``metrics`` (the server's side). The checks of a point's
settings and load are ``load``'s (``check_settings``, ``check_load``): the CLI, the sweep
spec and tune all call them.
"""

from serve_bench.sweep._launch import launched_target
from serve_bench.sweep._measure import (
    METRICS_UNREAD,
    measure,
    measure_async,
    measure_plan,
    measure_point,
    plan_point,
)
from serve_bench.sweep._outcome import open_point_run, point_failure, same_name_elsewhere
from serve_bench.sweep._runner import OnPoint, SweepOutcome, new_run_dir, plan_points, run_sweep
from serve_bench.sweep._spec import (
    UNTIL_STABLE,
    SweepSpec,
    load_spec,
    parse_durations,
    parse_spec,
    target_metrics,
    target_pricing,
    target_telemetry,
)
from serve_bench.sweep._toml import check_keys, checked, typed, typed_list

__all__ = [
    "METRICS_UNREAD",
    "UNTIL_STABLE",
    "OnPoint",
    "SweepOutcome",
    "SweepSpec",
    "check_keys",
    "checked",
    "launched_target",
    "load_spec",
    "measure",
    "measure_async",
    "measure_plan",
    "measure_point",
    "new_run_dir",
    "open_point_run",
    "parse_durations",
    "parse_spec",
    "plan_point",
    "plan_points",
    "point_failure",
    "run_sweep",
    "same_name_elsewhere",
    "target_metrics",
    "target_pricing",
    "target_telemetry",
    "typed",
    "typed_list",
]
