"""perf_analyzer, Triton's C++ load generator (2.51, ``tools/perf_analyzer.sh``), against a server: its own figures.

    figures = measure("grpc://127.0.0.1:8500", "tiny")        # TF Serving's API: --service-kind=tfserving
    figures = measure("v2+grpc://127.0.0.1:8001", "tiny")     # the Open Inference Protocol: Triton
    figures["Avg latency"]                                    # µs, a request's mean at the client

The client serve-bench's users measure Triton with: a C++ client beside serve-bench's Python one, so a figure can
say what a Python client costs, and a TF Serving client nobody here wrote (it sends ``float_val``, built for each
request: perf_analyzer src/client_backend/tensorflow_serving/tfserve_grpc_client.cc, ``PopulateFloatVal``).
Returned: the row of its ``-f`` CSV (``--verbose-csv``), µs per request but ``Inferences/Second``; for a Triton
target the server's own split too (``Server Queue``, ``Server Compute Infer`` ...).
"""

from __future__ import annotations

import csv
import os
import subprocess
import tempfile
from pathlib import Path

__all__ = ["FOLDER_VARIABLE", "PerfAnalyzerFailed", "locate", "measure"]

# a folder holding perf_analyzer and lib/ (what tools/perf_analyzer.sh writes): the GPU host's carried copy
# (benchmarks/gpu/visit.sh sets it); by default the servers' environment's
FOLDER_VARIABLE = "SERVE_BENCH_PERF_ANALYZER"


class PerfAnalyzerFailed(RuntimeError):
    pass


def locate() -> Path | None:
    """The folder holding ``perf_analyzer`` and its ``lib/``, or None where there is none."""
    given = os.environ.get(FOLDER_VARIABLE)
    if given:
        folder = Path(given)
    else:
        from serve_bench.errors import UserError
        from serve_bench.servers import servers_env

        try:
            folder = servers_env("perf_analyzer").root / "perf_analyzer"
        except UserError:
            return None
    return folder if (folder / "perf_analyzer").is_file() else None


def measure(
    url: str,
    model: str,
    *,
    batch_size: int = 1,
    concurrency: int = 1,
    window_ms: int = 1000,
    timeout_s: float = 120.0,
) -> dict[str, float]:
    """One perf_analyzer run at ``concurrency`` requests in flight of ``batch_size`` random inputs (made once, as
    perf_analyzer does), measured in windows of ``window_ms`` until three agree (its default stability rule)."""
    from serve_bench.stats import parse_target

    target = parse_target(url)
    if target.transport != "grpc":
        raise ValueError(f"{url}: measured over gRPC here, as serve-bench's figures beside it are")
    found = locate()
    if found is None:
        raise PerfAnalyzerFailed(
            f"no perf_analyzer: run `make servers-env` (tools/perf_analyzer.sh), or set {FOLDER_VARIABLE} to a folder "
            "holding perf_analyzer and lib/"
        )
    with tempfile.TemporaryDirectory(prefix="perf-analyzer-") as folder:
        table = Path(folder) / "figures.csv"
        command = [str(found / "perf_analyzer"), "-m", model, "-u", target.authority, "-i", "grpc"]
        command += ["--service-kind", "triton" if target.v2 else "tfserving"]
        command += ["-b", str(batch_size), "--concurrency-range", str(concurrency)]
        command += ["--measurement-interval", str(window_ms), "-f", str(table), "--verbose-csv"]
        libs = os.pathsep.join(p for p in (str(found / "lib"), os.environ.get("LD_LIBRARY_PATH", "")) if p)
        done = subprocess.run(
            command,
            env={**os.environ, "LD_LIBRARY_PATH": libs},
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if done.returncode != 0 or not table.exists():
            said = (done.stdout + done.stderr).strip().splitlines()
            raise PerfAnalyzerFailed(f"perf_analyzer against {url} exited {done.returncode}: {' / '.join(said[-3:])}")
        rows = list(csv.DictReader(table.read_text().splitlines()))
    if len(rows) != 1:
        raise PerfAnalyzerFailed(f"perf_analyzer against {url} wrote {len(rows)} rows, not one")
    return {name: float(value) for name, value in rows[0].items()}
