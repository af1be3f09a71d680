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

__all__ = ["FOLDER_VARIABLE", "PerfAnalyzerFailed", "locate", "measure", "starts"]

# a folder holding perf_analyzer and lib/ (what tools/perf_analyzer.sh writes): the GPU host's carried copy
# (benchmarks/gpu/visit.sh sets it); by default the servers' environment's
FOLDER_VARIABLE = "SERVE_BENCH_PERF_ANALYZER"
# perf_analyzer ends a level whose last three windows differ by more than this (%) in rate or latency, after
# --max-trials windows, with an error and no figures (src/inference_profiler.h, STABILITY_ERROR); on a shared
# 2-core machine its default 10 lost whole runs. Wide here: the rounds around it say how much a figure moves.
STABILITY_PERCENT = 50


class PerfAnalyzerFailed(RuntimeError):
    pass


def _environment(folder: Path) -> dict[str, str]:
    libs = os.pathsep.join(p for p in (str(folder / "lib"), os.environ.get("LD_LIBRARY_PATH", "")) if p)
    return {**os.environ, "LD_LIBRARY_PATH": libs}


def starts(folder: Path) -> str:
    """ "" when ``folder``'s perf_analyzer starts (its libraries found: it prints its usage, which names
    --service-kind, when given no model), else why not. It links the system's libssl 3, libcrypto 3 and libz
    besides the two carried in lib/."""
    binary = folder / "perf_analyzer"
    if not binary.is_file():
        return f"no {binary}"
    try:
        done = subprocess.run([str(binary)], env=_environment(folder), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} does not start: {exc}"
    said = done.stdout + done.stderr
    return "" if "--service-kind" in said else f"{binary} does not start: {' / '.join(said.strip().splitlines()[:3])}"


def locate() -> Path | None:
    """The folder holding a ``perf_analyzer`` that starts here and its ``lib/``, or None where there is none."""
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
    return None if starts(folder) else folder


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
    perf_analyzer does), measured in windows of ``window_ms`` until three agree within STABILITY_PERCENT.
    PerfAnalyzerFailed (one line) when it cannot run or ends without figures."""
    from serve_bench.stats import parse_target

    target = parse_target(url)
    if target.transport != "grpc":
        raise ValueError(f"{url}: measured over gRPC here, as serve-bench's figures beside it are")
    found = locate()
    if found is None:
        raise PerfAnalyzerFailed(
            f"no perf_analyzer that starts: run `make servers-env` (tools/perf_analyzer.sh), or set {FOLDER_VARIABLE} "
            "to a folder holding perf_analyzer and lib/"
        )
    with tempfile.TemporaryDirectory(prefix="perf-analyzer-") as folder:
        table = Path(folder) / "figures.csv"
        command = [str(found / "perf_analyzer"), "-m", model, "-u", target.authority, "-i", "grpc"]
        command += ["--service-kind", "triton" if target.v2 else "tfserving"]
        command += ["-b", str(batch_size), "--concurrency-range", str(concurrency)]
        command += ["--measurement-interval", str(window_ms), "--stability-percentage", str(STABILITY_PERCENT)]
        command += ["-f", str(table), "--verbose-csv"]
        try:
            done = subprocess.run(command, env=_environment(found), capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise PerfAnalyzerFailed(f"perf_analyzer against {url} ran past {timeout_s:g} s") from None
        if done.returncode != 0 or not table.exists():
            said = (done.stdout + done.stderr).strip().splitlines()
            raise PerfAnalyzerFailed(f"perf_analyzer against {url} exited {done.returncode}: {' / '.join(said[-3:])}")
        rows = list(csv.DictReader(table.read_text().splitlines()))
    if len(rows) != 1:
        raise PerfAnalyzerFailed(f"perf_analyzer against {url} wrote {len(rows)} rows, not one")
    return {name: float(value) for name, value in rows[0].items()}


if __name__ == "__main__":  # tools/perf_analyzer.sh: python -m benchmarks.perf_analyzer FOLDER (does it start?)
    import sys

    why = starts(Path(sys.argv[1]))
    print(why or f"perf_analyzer: {Path(sys.argv[1]) / 'perf_analyzer'}", file=sys.stderr if why else sys.stdout)
    sys.exit(1 if why else 0)
