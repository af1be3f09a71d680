"""The server view of Triton and MLServer, on pages those servers wrote.

tests/data holds real pages, recorded by hand on this machine with serve_bench.servers:
Triton 2.51.0 (Python backend running `tiny`, dynamic batching, max queue delay 2 ms) and
MLServer 1.7.1 (adaptive batching, 32 / 2 ms, one parallel worker), read before and after
load sent with urllib at 8 in flight: 37 warm-up requests before the "before" reading, then
200 requests (every fifth of 2 images, the others of 1); MLServer's REST recording adds 3
requests naming a wrong input (its model raises) and 2 through /versions/1/infer, and its gRPC
one is 120 single-image ModelInfer calls (tritonclient) on a fresh server. Triton's statistics
API was read after its page each time. Expected figures below are computed from the numbers
as they stand on those pages (quoted in each test), never with the reader's code.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from serve_bench.client import server_kind
from serve_bench.metrics import (
    page_kind,
    read_server,
    read_settled,
    server_breakdown,
    triton_stats_url,
)
from serve_bench.metrics._mlserver import MLServerSnapshot, parse_mlserver
from serve_bench.metrics._triton import TritonSnapshot, parse_triton, parse_triton_stats, settled
from serve_bench.server._metrics import Metrics
from serve_bench.stats import ServerView, parse_target
from serve_bench.stats._schema import point_from_data, point_to_data

DATA = Path(__file__).parent / "data"


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _triton(which: str, page: str | None = None, stats: bool = True) -> TritonSnapshot:
    snapshot = parse_triton(page if page is not None else _text(f"triton_2.51_metrics_{which}.txt"), "tiny")
    data = json.loads(_text(f"triton_2.51_stats_{which}.json"))
    return TritonSnapshot(
        snapshot.counters, snapshot.failures, snapshot.families, parse_triton_stats(data, "tiny") if stats else None
    )


def _mlserver(name: str) -> MLServerSnapshot:
    return parse_mlserver(_text(name), "tiny")


# --- Triton ------------------------------------------------------------------------------


def test_triton_view_of_a_recorded_point():
    """Per request: success +1, the durations in µs (core src/infer_stats.cc:104-132); per execution:
    exec_count +1 (:401-433). Page lines, before -> after: request_success 37 -> 237, inference_count
    37 -> 277, exec_count 21 -> 109, request_duration_us 312270 -> 1635318, queue 179496 -> 720594,
    compute_input 2539 -> 21244, compute_infer 124606 -> 810579, compute_output 5416 -> 81152."""
    view = server_breakdown(_triton("before"), _triton("after"), "REST")
    assert view.available and view.source == "triton"
    assert view.requests == 200 and view.errors == 0
    assert view.request_us_mean == pytest.approx(1_323_048 / 200)
    assert view.queue_us_mean == pytest.approx(541_098 / 200)
    assert view.compute_input_us_mean == pytest.approx(18_705 / 200)
    assert view.compute_infer_us_mean == pytest.approx(685_973 / 200)
    assert view.compute_output_us_mean == pytest.approx(75_736 / 200)
    assert view.compute_us_mean == pytest.approx((18_705 + 685_973 + 75_736) / 200)
    assert view.runtime_us_mean == pytest.approx((541_098 + 18_705 + 685_973 + 75_736) / 200)
    assert view.overhead_us_mean == pytest.approx((1_323_048 - 541_098 - 18_705 - 685_973 - 75_736) / 200)
    assert view.executions == 88
    assert view.processed_batch_mean == pytest.approx(240 / 88)  # rows per execution
    assert view.input_batch_mean == pytest.approx(240 / 200)  # 160 requests of 1 image, 40 of 2
    assert view.requests_per_execution == pytest.approx(200 / 88)
    assert view.batching
    assert view.describe() == "server 6.6 ms = queue 2.7 + compute 3.9 + overhead 0.0; executed batch 2.7"
    assert not view.flags()


def test_triton_executions_by_batch_size_come_from_the_statistics_api():
    """batch_stats counts one per execution under its batch size (core src/infer_stats.cc:420-427,
    src/tritonserver.cc:3076-3108). Before: sizes 1..4 ran 9, 9, 2, 1 times; after: 1..7 and 9 ran
    33, 30, 21, 14, 5, 4, 1, 1 times. Their rows add up to inference_count (37, 277)."""
    view = server_breakdown(_triton("before"), _triton("after"))
    assert view.batch_executions == ((1, 24), (2, 21), (3, 19), (4, 13), (5, 5), (6, 4), (7, 1), (9, 1))
    assert sum(n for _, n in view.batch_executions) == view.executions == 109 - 21
    assert sum(size * n for size, n in view.batch_executions) == 277 - 37
    assert not any("statistics API counted" in note for note in view.notes)


def test_triton_page_means_are_the_exact_means_truncated_to_microseconds():
    """The page adds ns / 1000 per request (core src/infer_stats.cc:123-132), the statistics API the
    nanoseconds: each page mean is below the exact one by less than 1 µs, as precision says."""
    view = server_breakdown(_triton("before"), _triton("after"))
    stats = [
        json.loads(_text(f"triton_2.51_stats_{w}.json"))["model_stats"][0]["inference_stats"]
        for w in ("before", "after")
    ]
    for name, mean in (("success", view.request_us_mean), ("queue", view.queue_us_mean)):
        exact = (
            (stats[1][name]["ns"] - stats[0][name]["ns"]) / 1000 / (stats[1][name]["count"] - stats[0][name]["count"])
        )
        assert mean is not None and 0 <= exact - mean < 1.0, name
    assert view.precision == pytest.approx(1 / view.request_us_mean) and not view.imprecise


def test_triton_failures_count_as_requests_and_errors_by_reason():
    """request_failure{reason} +1 per failed request, no duration (core src/infer_stats.cc:58-73;
    REJECTED by a full queue, src/dynamic_batch_scheduler.cc:74). The recorded page, with 5 rejected."""
    after = _text("triton_2.51_metrics_after.txt")
    line = 'nv_inference_request_failure{model="tiny",reason="REJECTED",version="1"} 0'
    assert line in after
    view = server_breakdown(_triton("before"), _triton("after", after.replace(line, line[:-1] + "5")))
    assert view.requests == 205 and view.errors == 5 and view.flags() == ("server errors",)
    assert view.request_us_mean == pytest.approx(1_323_048 / 200)  # durations are the successes' only
    assert "REJECTED 5" in " ".join(view.notes)


def test_triton_counts_the_model_asked_for_over_all_its_versions():
    """Every counter is labelled model/version (core src/metric_model_reporter.cc:195-246): a second
    version's lines add to the model's figures, another model's do not."""
    page = _text("triton_2.51_metrics_after.txt")
    assert parse_triton(page, "other").counters == {}
    assert parse_triton(page, "tiny").get("request_success") == 237
    version_2 = page.replace('version="1"', 'version="2"')
    other = page.replace('model="tiny"', 'model="other"')
    assert parse_triton(page + version_2 + other, "tiny").get("request_success") == 2 * 237


def test_triton_restart_between_readings_leaves_no_figures():
    view = server_breakdown(_triton("after"), _triton("before"))
    assert not view.available and "went down" in view.reason


def test_triton_without_its_statistics_api_still_has_the_mean_executed_batch():
    before, after = _triton("before", stats=False), _triton("after", stats=False)
    after = TritonSnapshot(after.counters, after.failures, after.families, None, "statistics API unreachable")
    view = server_breakdown(before, after)
    assert view.batch_executions == () and view.processed_batch_mean == pytest.approx(240 / 88)
    assert any("no executions by batch size: statistics API unreachable" in note for note in view.notes)


def test_triton_reading_has_settled_once_successes_and_executions_are_all_in():
    """The Python backend reports statistics after sending the responses (python_backend
    src/pb_metric_reporter.cc:44-79), requests first, then the batch."""
    before, after = _triton("before"), _triton("after")
    assert settled(before, after, 200) and not settled(before, after, 201)
    # the page read while the last execution's requests were reported but not yet the execution itself
    page = _text("triton_2.51_metrics_after.txt").replace(
        'nv_inference_exec_count{model="tiny",version="1"} 109', 'nv_inference_exec_count{model="tiny",version="1"} 108'
    )
    assert not settled(before, _triton("after", page), 200)


def test_triton_statistics_api_location():
    """v2+http is Triton's HTTP endpoint; gRPC 8001 pairs with HTTP 8000 (server src/grpc/grpc_server.h:52,
    src/command_line_parser.h:194 at v2.51.0); any other gRPC port cannot be paired."""
    assert triton_stats_url("v2+http://h:9000", "m") == ("http://h:9000/v2/models/m/stats", "")
    assert triton_stats_url("v2+https://h:9000", "m") == ("https://h:9000/v2/models/m/stats", "")
    assert triton_stats_url("v2+grpc://h:8001", "m") == ("http://h:8000/v2/models/m/stats", "")
    url, why = triton_stats_url("v2+grpc://h:9001", "m")
    assert url == "" and "port 9001" in why


# --- MLServer ----------------------------------------------------------------------------


def test_mlserver_view_of_a_recorded_rest_point():
    """mlserver/handlers/dataplane.py:42-56,179-194 (success, failure, duration by model/version),
    rest/app.py:220-231 (the REST front end), parallel/dispatcher.py:61-75 (one observation per call
    to the worker), batching/adaptive.py:65-68 (one per request batched). Page lines, before -> after:
    success 37 -> 237 + 2 (version "1"), failure 0 -> 3, duration count 37 -> 240 + 2, sum
    0.6802188319998095 -> 6.825863414000651 + 0.017503128000271317 s; REST POST …/infer duration
    count 37 -> 237 + 3 + 2, sum 0.7828709939990404 -> 7.6411397819993 + 0.0230834879998838 +
    0.02219741899989458 s; parallel_request_queue_count 15 -> 104; batch_request_queue_count 37 -> 242."""
    view = server_breakdown(
        _mlserver("mlserver_1.7.1_metrics_before.txt"), _mlserver("mlserver_1.7.1_metrics_after.txt"), "REST"
    )
    assert view.available and view.source == "mlserver"
    assert view.requests == 205 and view.errors == 3
    runtime = (6.825863414000651 + 0.017503128000271317 - 0.6802188319998095) / 205 * 1e6
    request = (7.6411397819993 + 0.0230834879998838 + 0.02219741899989458 - 0.7828709939990404) / 205 * 1e6
    assert view.runtime_us_mean == pytest.approx(runtime)
    assert view.request_us_mean == pytest.approx(request)
    assert view.overhead_us_mean == pytest.approx(request - runtime)
    assert view.executions == 89 and view.requests_per_execution == pytest.approx(205 / 89) and view.batching
    # what MLServer does not tell
    assert view.queue_us_mean is None and view.compute_us_mean is None and view.compute_infer_us_mean is None
    assert view.processed_batch_mean is None and view.input_batch_mean is None and view.batch_executions == ()
    assert any("no queue, compute" in note for note in view.notes)
    assert view.describe() == "server 33.7 ms = runtime 30.1 + overhead 3.6; executed batch 2.3 requests"
    assert view.other_requests == 0
    # a metadata GET during the point (1 s long) is another request, not an infer: it leaves the request time alone
    page = _text("mlserver_1.7.1_metrics_after.txt")
    get = 'app_name="mlserver",method="GET",path="/v2",status_code="200"}'
    for old, new in (
        (f"rest_server_requests_total{{{get} 1.0", f"rest_server_requests_total{{{get} 2.0"),
        (
            f"rest_server_request_duration_seconds_count{{{get} 1.0",
            f"rest_server_request_duration_seconds_count{{{get} 2.0",
        ),
        (
            f"rest_server_request_duration_seconds_sum{{{get} 0.00075",
            f"rest_server_request_duration_seconds_sum{{{get} 1.00075",
        ),
    ):
        assert page.count(old) == 1
        page = page.replace(old, new)
    with_get = server_breakdown(_mlserver("mlserver_1.7.1_metrics_before.txt"), parse_mlserver(page, "tiny"), "REST")
    assert with_get.other_requests == 1 and with_get.request_us_mean == pytest.approx(request)


def test_mlserver_view_of_a_recorded_grpc_point():
    """gRPC front end: grpc_server_handling_seconds of ModelInfer (mlserver/grpc/interceptors.py:72-130).
    Fresh server: no model series before. After: success 120, duration sum 2.7196793629996137 s,
    handling sum 2.8035887490009372 s over 120, parallel_request_queue_count 1 -> 77."""
    view = server_breakdown(
        _mlserver("mlserver_1.7.1_grpc_metrics_before.txt"), _mlserver("mlserver_1.7.1_grpc_metrics_after.txt"), "GRPC"
    )
    assert view.requests == 120 and view.errors == 0
    assert view.runtime_us_mean == pytest.approx(2.7196793629996137 / 120 * 1e6)
    assert view.request_us_mean == pytest.approx(2.8035887490009372 / 120 * 1e6)
    assert view.executions == 76 and view.requests_per_execution == pytest.approx(120 / 76)


def test_mlserver_without_worker_processes_counts_no_executions():
    """With parallel_workers 0 the page is prometheus_client's default registry (mlserver/metrics/prometheus.py:50-57):
    no parallel_request_queue, no batch_request_queue, and _created samples. Recorded: 10 requests before,
    50 after; duration sums 0.40219739900067 -> 1.1282417929992334 s; REST 0.4424643139991531 -> 1.277072257998043 s."""
    view = server_breakdown(
        _mlserver("mlserver_1.7.1_workers0_metrics_before.txt"),
        _mlserver("mlserver_1.7.1_workers0_metrics_after.txt"),
        "REST",
    )
    assert view.requests == 40 and view.executions is None and view.requests_per_execution is None
    assert view.runtime_us_mean == pytest.approx((1.1282417929992334 - 0.40219739900067) / 40 * 1e6)
    assert view.request_us_mean == pytest.approx((1.277072257998043 - 0.4424643139991531) / 40 * 1e6)
    assert any("parallel_workers 0" in note for note in view.notes)
    assert view.describe() == "server 20.9 ms = runtime 18.2 + overhead 2.7"
    assert page_kind(_text("mlserver_1.7.1_workers0_metrics_before.txt")) == "mlserver"


def test_mlserver_model_in_the_main_process_counts_no_executions():
    """A model with its own parallel_workers 0 runs in the main process: the dispatcher's histogram is on the
    page but does not move (seen on a real 1.7.1 page); zero executions for 205 requests is not a figure."""
    line = "parallel_request_queue_count 104.0"
    page = _text("mlserver_1.7.1_metrics_after.txt")
    assert page.count(line) == 1
    view = server_breakdown(
        _mlserver("mlserver_1.7.1_metrics_before.txt"),
        parse_mlserver(page.replace(line, "parallel_request_queue_count 15.0"), "tiny"),
        "REST",
    )
    assert view.requests == 205 and view.executions is None and view.requests_per_execution is None


def test_mlserver_reading_waits_for_the_rest_front_end():
    """starlette_exporter observes after the response went out (its middleware's finally): a client
    can hold an answer the REST counter does not show yet."""
    before, after = _mlserver("mlserver_1.7.1_metrics_before.txt"), _mlserver("mlserver_1.7.1_metrics_after.txt")
    from serve_bench.metrics._mlserver import settled as ml_settled

    assert ml_settled(before, after, 202, "REST")  # 237 + 2 OK at the front end, 37 before
    assert not ml_settled(before, after, 203, "REST")
    line = 'rest_server_requests_total{app_name="mlserver",method="POST",path="/v2/models/{model_name}/infer",'
    line += 'status_code="200"} 237.0'
    page = _text("mlserver_1.7.1_metrics_after.txt")
    assert page.count(line) == 1
    lagging = page.replace(line, line.replace("237.0", "236.0"))  # the data plane counted it, the front end not yet
    assert not ml_settled(before, parse_mlserver(lagging, "tiny"), 202, "REST")


# --- which reader, where its page is -------------------------------------------------------


def test_page_kind_tells_the_servers_apart():
    assert page_kind(_text("triton_2.51_metrics_before.txt")) == "triton"
    assert page_kind(_text("mlserver_1.7.1_metrics_after.txt")) == "mlserver"
    # a fresh MLServer page has no model_infer_request_* yet: its worker queue says whose it is
    assert "model_infer_request" not in _text("mlserver_1.7.1_grpc_metrics_before.txt")
    assert page_kind(_text("mlserver_1.7.1_grpc_metrics_before.txt")) == "mlserver"
    assert page_kind(Metrics().render()) == "tfserving"
    assert page_kind("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.0\n") == ""


def test_default_metrics_url_follows_the_v2_servers_ports():
    """Triton: HTTP 8000, gRPC 8001, metrics 8002 (server src/command_line_parser.h:194,212 and
    src/grpc/grpc_server.h:52 at v2.51.0); MLServer: 8080, 8081, 8082 (mlserver/settings.py:214-236)."""
    assert parse_target("v2+grpc://h:8001").metrics_url == "http://h:8002/metrics"
    assert parse_target("v2+http://h:8000").metrics_url == "http://h:8002/metrics"
    assert parse_target("v2+grpc://h:8081").metrics_url == "http://h:8082/metrics"
    assert parse_target("v2+http://h:8080").metrics_url == "http://h:8082/metrics"
    assert parse_target("v2+grpc://h:9001").metrics_url == ""  # no default to assume: give it
    assert parse_target("grpc://h:8500").metrics_url == "http://h:8501/monitoring/prometheus/metrics"


@pytest.mark.parametrize(
    ("identity", "declared", "expected"),
    [
        ("triton/2.51.0", "", ("triton", "2.51.0")),
        ("mlserver/1.7.1", "triton", ("mlserver", "1.7.1")),  # what the server says beats the spec
        ("", "triton", ("triton", "")),
        ("uvicorn", "", ("unknown", "")),
    ],
)
def test_server_kind_from_the_v2_server_metadata(identity, declared, expected):
    """GET /v2 answers {"name": "triton", "version": "2.51.0"} (server src/http_server.cc
    HandleServerMetadata) and {"name": "mlserver", "version": "1.7.1"} (mlserver/handlers/dataplane.py:69-74)."""
    client: Any = SimpleNamespace(transport=SimpleNamespace(server_identity=identity))
    assert server_kind(client, declared) == expected


class _Pages:
    """A metrics page (and Triton's statistics API) answering the next recorded text on each GET."""

    def __init__(self, metrics: list[str], stats: list[str]) -> None:
        self.metrics, self.stats, self.gets = metrics, stats, 0
        pages = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                queue = pages.stats if self.path.endswith("/stats") else pages.metrics
                body = (queue.pop(0) if len(queue) > 1 else queue[0]).encode()
                pages.gets += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def pages() -> Iterator[Any]:
    made: list[_Pages] = []

    def make(metrics: list[str], stats: list[str] | None = None) -> _Pages:
        made.append(_Pages(metrics, stats or ["{}"]))
        return made[-1]

    yield make
    for page in made:
        page.server.shutdown()
        page.server.server_close()


async def test_reading_waits_until_triton_counts_every_answer(pages):
    """The "after" page is re-read until it counts the client's OK answers: here Triton's first two
    answers still show the "before" counters, the third the recorded "after" ones."""
    before_page, after_page = _text("triton_2.51_metrics_before.txt"), _text("triton_2.51_metrics_after.txt")
    before_stats, after_stats = _text("triton_2.51_stats_before.json"), _text("triton_2.51_stats_after.json")
    served = pages([before_page, before_page, before_page, after_page], [before_stats] * 3 + [after_stats])
    url, target = f"http://127.0.0.1:{served.port}/metrics", f"v2+http://127.0.0.1:{served.port}"
    before, why = await read_server(url, "tiny", target_url=target)  # the kind from the page itself
    assert isinstance(before, TritonSnapshot) and before.stats is not None, why
    after, why, late = await read_settled(url, "tiny", before, 200, "REST", target_url=target, settle_s=30)
    assert after is not None and not late, why
    view = server_breakdown(before, after, "REST")
    assert view.requests == 200 and view.batch_executions[0] == (1, 24)
    assert served.gets == 2 * 4  # page + statistics: the "before" reading, two early "after" ones, the last


async def test_reading_gives_up_with_a_note_when_the_server_never_catches_up(pages):
    served = pages([_text("mlserver_1.7.1_metrics_before.txt")])
    url = f"http://127.0.0.1:{served.port}/metrics"
    before, _ = await read_server(url, "tiny", kind="mlserver")
    assert before is not None
    after, _, late = await read_settled(url, "tiny", before, 1, "REST", settle_s=0.05)
    assert after is not None and "had not caught up with the client's 1 OK answers" in late


async def test_a_declared_kind_that_does_not_match_the_page_says_so(pages):
    served = pages([_text("mlserver_1.7.1_metrics_after.txt")])
    snapshot, why = await read_server(f"http://127.0.0.1:{served.port}/metrics", "tiny", kind="triton")
    assert snapshot is None and "no Triton metrics" in why


async def test_triton_over_grpc_on_its_own_port_notes_the_missing_batch_sizes(pages):
    served = pages([_text("triton_2.51_metrics_before.txt")])
    before, _ = await read_server(f"http://127.0.0.1:{served.port}/metrics", "tiny", target_url="v2+grpc://h:9001")
    assert isinstance(before, TritonSnapshot) and before.stats is None
    view = server_breakdown(before, before)
    assert any("port 9001" in note for note in view.notes)


# --- the record ----------------------------------------------------------------------------


def test_a_schema_2_point_written_before_these_fields_still_reads():
    """tests/data/points_v2_tf_serving_view.jsonl was written by serve-bench before ServerView had
    source, executions, the compute split and batch_executions: it reads, and they take their defaults."""
    line = (DATA / "points_v2_tf_serving_view.jsonl").read_text().splitlines()[0]
    data = json.loads(line)
    assert data["schema_version"] == 2 and "executions" not in data["server"]
    point = point_from_data(data, line)
    assert point.server is not None and point.server.processed_batch_mean == 7.8 and point.server.tf_calls == 52
    assert point.server.source == "" and point.server.executions is None and point.server.batch_executions == ()
    assert point.server.describe() == (
        "server 10.2 ms = queue 3.0 + compute 6.0 + overhead 1.2; server batch 7.8 (padding 3%)"
    )
    assert ServerView.from_dict(data["server"]) == point.server  # the older reader of the same object


def test_a_triton_view_round_trips_through_the_results_file():
    view = server_breakdown(_triton("before"), _triton("after"), "GRPC")
    from dataclasses import replace

    from tests._points import make_point

    point = replace(make_point("triton", "cpu", 1, 6_615.0, concurrency=8), server=view)
    again = point_from_data(json.loads(json.dumps(point_to_data(point))))
    assert again.server == view
    assert ServerView.from_dict(json.loads(json.dumps(view.to_dict()))) == view


def test_the_breakdown_plot_draws_mlserver_s_unsplit_runtime(tmp_path, monkeypatch):
    """MLServer times queue and model together (mlserver/handlers/dataplane.py:179-194): its bar stacks that
    runtime under the overhead instead of drawing a zero queue and a zero compute."""
    from dataclasses import replace

    import matplotlib.axes

    from serve_bench.report import build_report
    from serve_bench.stats import ResultsWriter
    from tests._points import make_point

    ml = server_breakdown(
        _mlserver("mlserver_1.7.1_metrics_before.txt"), _mlserver("mlserver_1.7.1_metrics_after.txt"), "REST"
    )
    tr = server_breakdown(_triton("before"), _triton("after"), "REST")
    drawn: dict[str, list[float]] = {}
    real_bar = matplotlib.axes.Axes.bar

    def bar(self: Any, x: Any, height: Any, *args: Any, **kwargs: Any) -> Any:
        drawn[str(kwargs.get("label"))] = list(height)
        return real_bar(self, x, height, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", bar)
    run_dir = tmp_path / "run"
    with ResultsWriter(run_dir) as writer:
        writer.append(replace(make_point("mlserver", "cpu", 1, 34_000.0), server=ml))
        writer.append(replace(make_point("triton", "cpu", 1, 6_700.0), server=tr))
        writer.write_run({"settings": {}})
    assert "breakdown" in build_report(run_dir, models_dir=tmp_path).plots
    assert drawn["queue + compute (not split by the server)"] == pytest.approx([ml.runtime_us_mean / 1000, 0.0])
    assert drawn["queue (batching)"] == pytest.approx([0.0, tr.queue_us_mean / 1000])
