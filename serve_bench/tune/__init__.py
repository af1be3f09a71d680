"""Tune: search TF Serving batching configurations under a latency SLO, restarting the server per configuration.

Library: ``parse_tune_spec`` / ``load_tune_spec``, ``run_tune`` (async), ``TuneConfig``; the CLI calls
``add_tune_arguments`` and ``run_tune_command``.
"""

from serve_bench.tune._answer import Gain, KnobRow, ParetoPoint, Score, TuneAnswer, answer, pareto_front, score_config
from serve_bench.tune._cli import add_tune_arguments, run_tune_command
from serve_bench.tune._config import TuneConfig
from serve_bench.tune._restart import CommandRestarter, ComposeRestarter, LocalRestarter, StartFailed, make_restarter
from serve_bench.tune._run import TuneEvent, TuneOutcome, latest_tune_dir, new_tune_dir, run_tune, search_budget
from serve_bench.tune._search import bayesian_search, coordinate_search, grid_search
from serve_bench.tune._spec import BASELINES, ServerSpec, TuneSpec, load_tune_spec, parse_tune_spec

__all__ = [
    "BASELINES",
    "CommandRestarter",
    "ComposeRestarter",
    "Gain",
    "KnobRow",
    "LocalRestarter",
    "ParetoPoint",
    "Score",
    "ServerSpec",
    "StartFailed",
    "TuneAnswer",
    "TuneConfig",
    "TuneEvent",
    "TuneOutcome",
    "TuneSpec",
    "add_tune_arguments",
    "answer",
    "bayesian_search",
    "coordinate_search",
    "grid_search",
    "latest_tune_dir",
    "load_tune_spec",
    "make_restarter",
    "new_tune_dir",
    "pareto_front",
    "parse_tune_spec",
    "run_tune",
    "run_tune_command",
    "score_config",
    "search_budget",
]
