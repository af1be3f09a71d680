"""Server-side figures: TF Serving's Prometheus metrics, server CPU, GPU through NVML."""

from serve_bench.metrics._energy import TelemetrySession, check_endpoint, energy_between
from serve_bench.metrics._scrape import (
    MetricsSnapshot,
    breakdown,
    default_metrics_url,
    parse,
    scrape,
    sum_resolution,
)
from serve_bench.metrics._telemetry import GpuSampler, ProcessCpu

__all__ = [
    "GpuSampler",
    "MetricsSnapshot",
    "ProcessCpu",
    "TelemetrySession",
    "breakdown",
    "check_endpoint",
    "default_metrics_url",
    "energy_between",
    "parse",
    "scrape",
    "sum_resolution",
]
