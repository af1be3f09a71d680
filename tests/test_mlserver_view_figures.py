"""MLServer's server view (metrics/_mlserver.py), figure by figure, on the recorded 1.7.1 pages
(tests/data, recorded as tests/test_v2_server_views.py says) and on readings built from them.

Sources cited: SeldonIO/MLServer as the module's docstring says (1.7.1, the same as the mirror's HEAD
in these places). Expected values are the numbers on the pages (quoted in each test) or worked out by
hand from them, never with the reader's code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_bench.metrics import server_breakdown
from serve_bench.metrics._mlserver import MLServerSnapshot, mlserver_breakdown, parse_mlserver, settled

DATA = Path(__file__).parent / "data"
REST_BEFORE = (DATA / "mlserver_1.7.1_metrics_before.txt").read_text()
REST_AFTER = (DATA / "mlserver_1.7.1_metrics_after.txt").read_text()
GRPC_BEFORE = (DATA / "mlserver_1.7.1_grpc_metrics_before.txt").read_text()
GRPC_AFTER = (DATA / "mlserver_1.7.1_grpc_metrics_after.txt").read_text()
WORKERS0_BEFORE = (DATA / "mlserver_1.7.1_workers0_metrics_before.txt").read_text()
WORKERS0_AFTER = (DATA / "mlserver_1.7.1_workers0_metrics_after.txt").read_text()
RUNTIME_NOTE = (
    "MLServer times the adaptive-batching queue and the model together (runtime): no queue, compute "
    "or compute split; its executions are every call to its workers (all models) and count requests, not rows"
)
NO_EXECUTIONS_NOTE = (
    "no executions: MLServer counts calls to its worker processes only, and this model ran in its "
    "main process (parallel_workers 0)"
)
GRPC_LABELS = 'grpc_service="inference.GRPCInferenceService",grpc_type="UNARY"'


def _read(page: str) -> MLServerSnapshot:
    return parse_mlserver(page, "tiny")


def test_the_rest_page_gives_the_models_figures_and_the_rest_front_ends():
    """Model series by model/version (mlserver/handlers/dataplane.py:42-56), summed over versions "None" and
    "1"; REST by method, path template and status (rest/app.py:220-231); the worker queue's count
    (parallel/dispatcher.py:41-75); the batcher's count by model_name (batching/adaptive.py:65-68).
    The recorded after page: success 237 + 2, failure 3 + 0, duration count 240 + 2, sum
    6.825863414000651 + 0.017503128000271317 s; POST .../infer 200: 237 (7.6411397819993 s), 500: 3
    (0.0230834879998838 s), POST .../versions/{model_version}/infer 200: 2 (0.02219741899989458 s);
    GET /v2/models/{model_name}/ready and GET /v2 200 once each; parallel_request_queue_count 104,
    batch_request_queue_count 242. Five TYPE lines of MLServer's own families and starlette_exporter's
    app_name="mlserver" label: six signs of an MLServer page."""
    snapshot = _read(REST_AFTER)
    assert snapshot.values == pytest.approx(
        {
            "success_total": 239,
            "failure_total": 3,
            "duration_count": 242,
            "duration_sum": 6.825863414000651 + 0.017503128000271317,
            "rest_infer_count": 242,
            "rest_infer_sum": 7.6411397819993 + 0.0230834879998838 + 0.02219741899989458,
            "rest_infer_ok": 239,  # 2xx only
            "rest_other_ok": 2,
            "executions": 104,
            "batched": 242,
        }
    )
    assert snapshot.present == frozenset({"rest"}) and snapshot.families == 6
    # a POST that is not an infer (the repository API's load, rest/app.py:166-170) is another request
    load = (
        'rest_server_requests_total{app_name="mlserver",method="POST",'
        'path="/v2/repository/models/{model_name}/load",status_code="200"} 1.0\n'
    )
    assert _read(REST_AFTER + load).get("rest_other_ok") == 3
    # another model's series are left out; model None takes every model's
    other = "".join(
        line.replace('model="tiny"', 'model="other"').replace('model_name="tiny"', 'model_name="other"') + "\n"
        for line in REST_AFTER.splitlines()
        if line.startswith(("model_infer_request_success_total", "batch_request_queue_count"))
    )
    assert _read(other + REST_AFTER).values == snapshot.values
    every = parse_mlserver(other + REST_AFTER, None)
    assert every.get("success_total") == 2 * 239 and every.get("batched") == 2 * 242


def test_the_grpc_page_counts_ok_model_infer_calls_apart_from_other_calls_and_other_codes():
    """gRPC through MLServer's port of py-grpc-prometheus: grpc_server_handled_total labelled with the
    status code's name (mlserver/grpc/interceptors.py:93-107, StatusCode.name: "OK", "INVALID_ARGUMENT"),
    grpc_server_handling_seconds by method. Recorded after: 120 ModelInfer OK in 2.8035887490009372 s,
    the model's 120 successes in 2.7196793629996137 s, parallel_request_queue_count 77, batched 120, one
    REST GET .../ready; the TYPE lines of MLServer's five families and app_name: 6."""
    refused = f'grpc_server_handled_total{{grpc_code="INVALID_ARGUMENT",grpc_method="ModelInfer",{GRPC_LABELS}}} 2.0\n'
    ready = f'grpc_server_handled_total{{grpc_code="OK",grpc_method="ServerReady",{GRPC_LABELS}}} 3.0\n'
    snapshot = _read(GRPC_AFTER + refused + ready)
    assert snapshot.values == pytest.approx(
        {
            "success_total": 120,
            "failure_total": 0,
            "duration_count": 120,
            "duration_sum": 2.7196793629996137,
            "grpc_infer_count": 120,
            "grpc_infer_sum": 2.8035887490009372,
            "grpc_infer_ok": 120,
            "grpc_other_ok": 3,
            "rest_other_ok": 1,
            "executions": 77,
            "batched": 120,
        }
    )
    assert snapshot.present == frozenset({"rest", "grpc"}) and snapshot.families == 6
    # a fresh page: only the worker queue's TYPE line and app_name say it is MLServer's
    assert _read(GRPC_BEFORE).families == 2


def test_a_reading_has_settled_when_the_data_plane_and_the_points_front_end_count_every_answer():
    """The data plane counts success before answering (mlserver/handlers/dataplane.py:179-194); the front end
    the point came through must count it too. REST pages: 239 - 37 = 202 successes, and no gRPC front end
    on them, so a gRPC point waits on the data plane alone."""
    assert settled(_read(REST_BEFORE), _read(REST_AFTER), 202, "GRPC")
    assert not settled(_read(REST_BEFORE), _read(REST_AFTER), 203, "GRPC")
    # gRPC pages: 120 successes and 120 ModelInfer OK (the REST front end there saw no infer)
    assert settled(_read(GRPC_BEFORE), _read(GRPC_AFTER), 120, "GRPC")
    handled = f'grpc_server_handled_total{{grpc_code="OK",grpc_method="ModelInfer",{GRPC_LABELS}}} 120.0'
    assert GRPC_AFTER.count(handled) == 1
    lagging = GRPC_AFTER.replace(handled, handled.replace("120.0", "119.0"))
    assert not settled(_read(GRPC_BEFORE), _read(lagging), 120, "GRPC")


def test_the_recorded_points_notes_and_what_each_front_end_adds():
    """REST recorded point: 205 infer calls at the REST front end (242 - 37) for 205 requests (239 + 3 -
    37): no note on other models' calls. The gRPC point: no other gRPC calls, none counted."""
    view = server_breakdown(_read(REST_BEFORE), _read(REST_AFTER), "REST")
    assert view.entrypoint == "REST" and view.notes == (RUNTIME_NOTE,)
    grpc = server_breakdown(_read(GRPC_BEFORE), _read(GRPC_AFTER), "GRPC")
    assert grpc.entrypoint == "GRPC" and grpc.notes == (RUNTIME_NOTE,) and grpc.other_requests == 0.0
    # the gRPC point read as REST: the REST front end saw no infer call, so no request time and no note
    as_rest = server_breakdown(_read(GRPC_BEFORE), _read(GRPC_AFTER), "REST")
    assert as_rest.request_us_mean is None and as_rest.notes == (RUNTIME_NOTE,)
    # no entrypoint: the data plane's time only, no front end's requests
    plane = server_breakdown(_read(REST_BEFORE), _read(REST_AFTER))
    assert plane.request_us_mean is None and plane.other_requests == 0.0 and plane.notes == (RUNTIME_NOTE,)
    assert plane.runtime_us_mean == pytest.approx(view.runtime_us_mean)
    assert mlserver_breakdown(_read(REST_BEFORE), _read(REST_AFTER)).entrypoint == ""


def test_another_models_infer_calls_at_the_front_end_are_noted_with_both_counts():
    """The REST metrics carry no model name (rest/app.py:220-231): 10 more POST .../infer 200 at the front
    end than the model counted gives 242 + 10 - 37 = 215 calls against 205 requests."""
    line = (
        'rest_server_request_duration_seconds_count{app_name="mlserver",method="POST",'
        'path="/v2/models/{model_name}/infer",status_code="200"} 237.0'
    )
    assert REST_AFTER.count(line) == 1
    view = server_breakdown(_read(REST_BEFORE), _read(REST_AFTER.replace(line, line[:-5] + "247.0")), "REST")
    assert view.notes == (
        RUNTIME_NOTE,
        "215 infer calls reached the REST front end against 205 for this model: the front end's time (request) "
        "covers them all (its metrics carry no model name)",
    )


def test_without_worker_processes_there_are_no_executions_and_no_batching():
    """parallel_workers 0: prometheus_client's default registry, no worker queue and no batcher
    (mlserver/metrics/prometheus.py:50-57). Recorded: 10 requests before, 50 after."""
    view = server_breakdown(_read(WORKERS0_BEFORE), _read(WORKERS0_AFTER), "REST")
    assert view.notes == (RUNTIME_NOTE, NO_EXECUTIONS_NOTE)
    assert view.executions is None and not view.batching


def test_counters_going_down_name_each_one():
    """The recorded REST pages read in reverse: every figure that moved went down (rest_other_ok, 2 and 2,
    did not move)."""
    view = server_breakdown(_read(REST_AFTER), _read(REST_BEFORE), "REST")
    assert not view.available
    assert view.reason == (
        "MLServer's counters went down during the point (batched, duration_count, duration_sum, executions, "
        "failure_total, rest_infer_count, rest_infer_ok, rest_infer_sum, success_total): it or a worker "
        "restarted, so this point has no server-side figures"
    )


def test_one_request_has_means_and_no_request_has_none():
    """One request through the batcher and one worker call: runtime 0.002 s = 2000 µs, request 0.0025 s =
    2500 µs, overhead 500 µs; batched once (adaptive batching on), one request per execution."""
    one = MLServerSnapshot(
        {
            "success_total": 1,
            "duration_count": 1,
            "duration_sum": 0.002,
            "rest_infer_count": 1,
            "rest_infer_sum": 0.0025,
            "rest_infer_ok": 1,
            "executions": 1,
            "batched": 1,
        },
        frozenset({"rest"}),
        6,
    )
    view = server_breakdown(MLServerSnapshot(), one, "REST")
    assert view.requests == 1 and view.errors == 0
    assert view.runtime_us_mean == pytest.approx(2000) and view.request_us_mean == pytest.approx(2500)
    assert view.overhead_us_mean == pytest.approx(500) and view.batching
    assert view.executions == 1 and view.requests_per_execution == 1.0
    # a fresh page read twice (no model series yet): no request, no mean
    none = server_breakdown(_read(GRPC_BEFORE), _read(GRPC_BEFORE), "GRPC")
    assert none.requests == 0 and none.errors == 0
    assert none.runtime_us_mean is None and none.request_us_mean is None and none.overhead_us_mean is None


def test_overhead_is_never_below_zero():
    """The front end's time and the data plane's are separate observations: 1 call of 1.0 ms at the
    front end, 1.0005 ms in the data plane, gives no overhead rather than -0.5 µs."""
    after = MLServerSnapshot(
        {
            "success_total": 1,
            "duration_count": 1,
            "duration_sum": 0.0010005,
            "rest_infer_count": 1,
            "rest_infer_sum": 0.001,
        },
        frozenset({"rest"}),
        6,
    )
    assert server_breakdown(MLServerSnapshot(), after, "REST").overhead_us_mean == 0.0
