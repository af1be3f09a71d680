"""Sweeps: the TOML spec, the grid runner with resume, and one-point measurement."""

from serve_bench.sweep._measure import PointPlan, Target, measure_point, server_kind
from serve_bench.sweep._runner import SweepOutcome, latest_run_dir, new_run_dir, plan_points, run_sweep
from serve_bench.sweep._spec import Slo, SweepSpec, load_spec, parse_spec

__all__ = [
    "PointPlan",
    "Slo",
    "SweepOutcome",
    "SweepSpec",
    "Target",
    "latest_run_dir",
    "load_spec",
    "measure_point",
    "new_run_dir",
    "parse_spec",
    "plan_points",
    "run_sweep",
    "server_kind",
]
