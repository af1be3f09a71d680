"""Reports: analysis (batching gains, latency model, CPU vs GPU, SLO), tables, plots, HTML, compare.

matplotlib is imported only when a plot is drawn.
"""

from serve_bench.report._analysis import (
    Analysis,
    DeviceRatio,
    Gain,
    LatencyModel,
    TargetAnalysis,
    analyze_run,
    fit_latency_model,
)
from serve_bench.report._build import (
    Comparison,
    ReportOutput,
    build_report,
    compare_runs,
    find_model_facts,
    load_run_metadata,
)
from serve_bench.report._cells import Cell, cells_of
from serve_bench.report._decision import Decision, DecisionRow, decide
from serve_bench.report._predicted import PREDICTIONS_FILE, read_predictions
from serve_bench.report._tables import CSV_COLUMNS, print_comparison, print_summary, write_summary_csv
from serve_bench.report._terminal import print_predictions

__all__ = [
    "CSV_COLUMNS",
    "PREDICTIONS_FILE",
    "Analysis",
    "Cell",
    "Comparison",
    "Decision",
    "DecisionRow",
    "DeviceRatio",
    "Gain",
    "LatencyModel",
    "ReportOutput",
    "TargetAnalysis",
    "analyze_run",
    "build_report",
    "cells_of",
    "compare_runs",
    "decide",
    "find_model_facts",
    "fit_latency_model",
    "load_run_metadata",
    "print_comparison",
    "print_predictions",
    "print_summary",
    "read_predictions",
    "write_summary_csv",
]
