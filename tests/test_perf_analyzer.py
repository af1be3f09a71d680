"""perf_analyzer, Triton's C++ load generator (2.51, tools/perf_analyzer.sh), against the local server and Triton.

perf_analyzer is the tool serve-bench's users measure TF Serving and Triton with; its TF Serving client is C++ code
nobody here wrote, so it holds the local server to TF Serving's API from outside: it reads the model's inputs from
GetModelMetadata's ``signature_def`` as TF Serving answers it (perf_analyzer src/model_parser.cc:211-260,
``InitTFServe``: ``metadata.signature_def.signature_def[<signature>].inputs``, each with ``dtype`` and
``tensor_shape.unknown_rank``) and sends every float as ``float_val``, never ``tensor_content``
(src/client_backend/tensorflow_serving/tfserve_grpc_client.cc:540-551, ``PopulateFloatVal``). Lines cite
triton-inference-server/perf_analyzer 263c5f6; both files are unchanged there since b15f438 (2024-07) and
dbdaff8 (2025-04, model_parser.cc, after 2.51: the TF Serving lines read the same as the binary runs here).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import perf_analyzer, server_overhead
from tests.conftest import _servers_env_or_skip, require


def _perf_analyzer_or_skip() -> None:
    _servers_env_or_skip()
    if perf_analyzer.locate() is None:
        require("perf_analyzer", "make servers-env (tools/perf_analyzer.sh; make test builds it)")


@pytest.fixture(scope="module")
def local_server(models_dir: Path):
    from serve_bench.servers import LocalServerProcess

    _perf_analyzer_or_skip()
    with LocalServerProcess(models_dir, "tiny") as server:
        yield server


def test_perf_analyzer_measures_the_local_server_as_it_measures_tf_serving(local_server):
    """perf_analyzer's own TF Serving client reads the local server's metadata and has every float_val request
    answered (it exits non-zero at a failed request); the server counts them, no errors, and its own time per
    request is inside the client's."""
    import asyncio

    from serve_bench.metrics import read_server, server_breakdown

    url, metrics = local_server.grpc_url, local_server.metrics_url
    before = asyncio.run(read_server(metrics, "tiny", target_url=url))[0]
    figures = perf_analyzer.measure(url, "tiny", window_ms=500)
    after = asyncio.run(read_server(metrics, "tiny", target_url=url))[0]
    assert before is not None and after is not None
    view = server_breakdown(before, after, "GRPC")
    # its rate is over its last three windows of 500 ms (stable ones; earlier windows and warm-up come first): the
    # server counted those at least, 10% allowed for a window's edges
    assert view.errors == 0 and view.requests >= 0.9 * figures["Inferences/Second"] * 3 * 0.5
    assert view.request_us_mean is not None and 0 < view.request_us_mean < figures["Avg latency"]
    assert figures["Client Send"] > 0  # it builds each float_val request: the cost it reports apart


def test_server_overhead_puts_triton_and_perf_analyzer_beside_the_local_server():
    """``benchmarks/server_overhead.py --stub --triton --perf-analyzer``: each served figure has its server's own
    split (Triton's from its counters: its runtime is queue + compute, src/infer_stats.cc), and perf_analyzer's
    rows come from its CSV. The figures' sizes are the machine's; what holds anywhere is their structure: a
    client's latency holds the server's request, which holds its runtime call."""
    _perf_analyzer_or_skip()
    short = ["--model", "tiny", "--batch-sizes", "1", "--rounds", "1", "--seconds", "0.5", "--no-batching"]
    args, _ = server_overhead.parse(["--stub", "--triton", "--perf-analyzer", *short])
    results = server_overhead.compare(args)
    for name in ("served", "triton"):
        (figures,) = results[(1, name)]
        assert 0 < figures["runtime_us"] <= figures["request_us"] < figures["us"], name
        (pa,) = results[(1, "perf_analyzer " + name)]
        assert 0 < pa["send_us"] < pa["us"], name
    assert results[(1, "grpc")][0]["us"] > 0
