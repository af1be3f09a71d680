"""Tune: search a server's batching configurations under a latency SLO, restarting the server per configuration:
TF Serving (or the local server), Triton's dynamic batcher, MLServer's adaptive batching.

Library: ``parse_tune_spec`` / ``load_tune_spec``, ``run_tune`` (async), the configurations ``TuneConfig``
(TF Serving), ``TritonConfig`` and ``MLServerConfig``; the CLI calls ``add_tune_arguments`` and
``run_tune_command``.
"""

from serve_bench.tune._answer import answer, pareto_front, score_config
from serve_bench.tune._cli import add_tune_arguments, run_tune_command
from serve_bench.tune._config import ServerConfig, TuneConfig
from serve_bench.tune._restart import (
    CommandRestarter,
    ComposeRestarter,
    LocalRestarter,
    make_restarter,
)
from serve_bench.tune._restarter import StartFailed
from serve_bench.tune._run import TuneEvent, TuneOutcome, run_tune, search_budget
from serve_bench.tune._search import bayesian_search, coordinate_search, grid_search
from serve_bench.tune._spec import BASELINES, ServerSpec, TuneSpec, load_tune_spec, parse_tune_spec
from serve_bench.tune._started import MLServerRestarter, TritonRestarter
from serve_bench.tune._v2config import MLServerConfig, TritonConfig

__all__ = [
    "BASELINES",
    "CommandRestarter",
    "ComposeRestarter",
    "LocalRestarter",
    "MLServerConfig",
    "MLServerRestarter",
    "ServerConfig",
    "ServerSpec",
    "StartFailed",
    "TritonConfig",
    "TritonRestarter",
    "TuneConfig",
    "TuneEvent",
    "TuneOutcome",
    "TuneSpec",
    "add_tune_arguments",
    "answer",
    "bayesian_search",
    "coordinate_search",
    "grid_search",
    "load_tune_spec",
    "make_restarter",
    "pareto_front",
    "parse_tune_spec",
    "run_tune",
    "run_tune_command",
    "score_config",
    "search_budget",
]
