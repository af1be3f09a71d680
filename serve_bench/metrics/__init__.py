"""Server-side figures: the servers' Prometheus metrics (TF Serving, Triton, MLServer), server CPU, GPU through NVML."""

from serve_bench.metrics._energy import TelemetrySession, check_endpoint, energy_between
from serve_bench.metrics._reader import (
    ServerSnapshot,
    page_kind,
    read_server,
    read_settled,
    server_breakdown,
    triton_stats_url,
)
from serve_bench.metrics._scrape import (
    MetricsSnapshot,
    breakdown,
    parse,
    scrape,
    sum_resolution,
)
from serve_bench.metrics._telemetry import GpuSampler, ProcessCpu

__all__ = [
    "GpuSampler",
    "MetricsSnapshot",
    "ProcessCpu",
    "ServerSnapshot",
    "TelemetrySession",
    "breakdown",
    "check_endpoint",
    "energy_between",
    "page_kind",
    "parse",
    "read_server",
    "read_settled",
    "scrape",
    "server_breakdown",
    "sum_resolution",
    "triton_stats_url",
]
