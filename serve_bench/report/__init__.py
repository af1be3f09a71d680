"""Reports: analysis (batching gain, latency model, CPU vs GPU, SLO), tables, plots, HTML, compare.

matplotlib is imported only when a plot is drawn.
"""

from serve_bench.report._analysis import (
    Analysis,
    LatencyModel,
    Slo,
    TargetAnalysis,
    analyze_run,
    fit_latency_model,
    format_ratio,
)
from serve_bench.report._build import Comparison, ReportOutput, build_report, compare_runs, find_model_facts
from serve_bench.report._tables import CSV_COLUMNS, print_summary, write_summary_csv

__all__ = [
    "CSV_COLUMNS",
    "Analysis",
    "Comparison",
    "LatencyModel",
    "ReportOutput",
    "Slo",
    "TargetAnalysis",
    "analyze_run",
    "build_report",
    "compare_runs",
    "find_model_facts",
    "fit_latency_model",
    "format_ratio",
    "print_summary",
    "write_summary_csv",
]
