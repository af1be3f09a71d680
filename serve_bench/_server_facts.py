"""What several layers must know of the servers, in the one module each of them may import (a shared leaf, as
``errors`` is): the client, the metrics readers and stats may not import ``servers/``, and ``servers/`` and the
local server (``server/``) may not import ``stats/`` or the client. ``servers.KINDS`` holds each kind whole;
these are the few facts about them that the wire and the pages carry.
"""

from __future__ import annotations

__all__ = [
    "LOCAL",
    "LOCAL_IDENTITY",
    "MLSERVER",
    "TFSERVING",
    "TF_SERVING_METRICS_PATH",
    "TF_SERVING_PAGE",
    "TRITON",
    "V2",
]

LOCAL, TFSERVING, TRITON, MLSERVER = "local", "tfserving", "triton", "mlserver"  # the kinds' one names

# the kinds that speak the Open Inference Protocol, and name themselves "<name>/<version>" in its server
# metadata (GET /v2: Triton "triton/2.51.0", MLServer "mlserver/1.7.1")
V2 = (TRITON, MLSERVER)
# the kinds whose metrics page is TF Serving's: the local server writes the same one
TF_SERVING_PAGE = (TFSERVING, LOCAL)
# where TF Serving serves its Prometheus page: docker/monitoring.config's prometheus_config path, which the
# local server takes too when its monitoring config names none
TF_SERVING_METRICS_PATH = "/monitoring/prometheus/metrics"
# the local server's name in its identity (gRPC metadata, Server header): "serve-bench-local/<version> (...)"
LOCAL_IDENTITY = "serve-bench-local"
