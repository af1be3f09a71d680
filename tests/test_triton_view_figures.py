"""Triton's server view (metrics/_triton.py), figure by figure, on the recorded 2.51 pages and on
readings built from them (tests/data, recorded as tests/test_v2_server_views.py says).

Sources cited: triton-inference-server/core at 84868f1 and server at v2.51.0, as the module's docstring.
Expected values are read off the recorded pages and statistics (quoted in each test) or worked out by
hand from the numbers given, never with the reader's code.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from serve_bench.metrics import server_breakdown
from serve_bench.metrics._triton import (
    TritonSnapshot,
    TritonStats,
    _per_batch_size,
    parse_triton,
    parse_triton_stats,
    read_stats,
    read_triton,
    settled,
    triton_breakdown,
)

DATA = Path(__file__).parent / "data"
BEFORE_PAGE = (DATA / "triton_2.51_metrics_before.txt").read_text()
AFTER_PAGE = (DATA / "triton_2.51_metrics_after.txt").read_text()
BEFORE_STATS = (DATA / "triton_2.51_stats_before.json").read_text()
AFTER_STATS = (DATA / "triton_2.51_stats_after.json").read_text()
REJECTED = 'nv_inference_request_failure{model="tiny",reason="REJECTED",version="1"} 0'
# the after statistics' batch_stats: batch size -> compute_infer.count (one per execution)
AFTER_BATCHES = {1: 33, 2: 30, 3: 21, 4: 14, 5: 5, 6: 4, 7: 1, 9: 1}


def _reading(page: str, stats: str | None = None) -> TritonSnapshot:
    snapshot = parse_triton(page, "tiny")
    parsed = parse_triton_stats(json.loads(stats), "tiny") if stats is not None else None
    return TritonSnapshot(snapshot.counters, snapshot.failures, snapshot.families, parsed)


def _counters(
    success: float, executions: float, request: float, queue: float, compute: tuple[float, float, float]
) -> TritonSnapshot:
    """An "after" reading over an empty "before" one, with the page's sums given directly (µs)."""
    names = ("compute_input_duration_us", "compute_infer_duration_us", "compute_output_duration_us")
    counters = {
        "request_success": success,
        "count": success,
        "exec_count": executions,
        "request_duration_us": request,
        "queue_duration_us": queue,
        **dict(zip(names, compute, strict=True)),
    }
    return TritonSnapshot(counters, {}, 10)


def test_the_page_reader_takes_the_models_counters_and_failures_by_reason():
    """Every nv_inference_* counter is labelled model/version (core src/metric_model_reporter.cc:195-246),
    failures also by reason, each of the four created at 0 when the model loads (:238-245, the reasons at
    :105-110). The recorded after page: request_success 237, inference_count 277, exec_count 109,
    request_duration_us 1635318, queue 720594, compute_input 21244, compute_infer 810579, compute_output
    81152; ten "# TYPE nv_inference_" lines (nine counters and the pending-request gauge)."""
    after = parse_triton(AFTER_PAGE, "tiny")
    assert after.counters == {
        "request_success": 237,
        "count": 277,
        "exec_count": 109,
        "request_duration_us": 1635318,
        "queue_duration_us": 720594,
        "compute_input_duration_us": 21244,
        "compute_infer_duration_us": 810579,
        "compute_output_duration_us": 81152,
    }
    assert after.failures == {"OTHER": 0, "BACKEND": 0, "CANCELED": 0, "REJECTED": 0}
    assert after.families == 10
    # another model's lines, before the model's own or after them, are left out; model None takes every model
    other = AFTER_PAGE.replace('model="tiny"', 'model="other"')
    assert parse_triton(other + AFTER_PAGE, "tiny").counters == after.counters
    assert parse_triton(other + AFTER_PAGE, None).get("request_success") == 2 * 237
    # failures add up over versions: 2 (version 1) + 3 (version 2) rejected
    two = AFTER_PAGE.replace(REJECTED, REJECTED[:-1] + "2") + AFTER_PAGE.replace(REJECTED, REJECTED[:-1] + "3").replace(
        'version="1"', 'version="2"'
    )
    assert parse_triton(two, "tiny").failures["REJECTED"] == 5
    # before core a07169e (2024-07, "Metrics API enhanced for Failure counters") the counter had no reason
    # label: its failures are kept under the reason ""
    old = 'nv_inference_request_failure{model="tiny",version="1"} 3\n'
    assert parse_triton(old, "tiny").failures == {"": 3}


def test_the_statistics_reader_sums_the_models_versions_and_counts_executions_by_batch_size():
    """core src/tritonserver.cc:3072-3117 writes model_stats[] = {name, version, inference_count,
    execution_count, inference_stats.success.count, batch_stats[] = {batch_size, compute_infer.count, ...}}.
    Recorded after: inference_count 277, execution_count 109, success 237, batch sizes 1..7 and 9 run
    33, 30, 21, 14, 5, 4, 1, 1 times."""
    data = json.loads(AFTER_STATS)
    assert parse_triton_stats(data, "tiny") == TritonStats(277, 109, 237, AFTER_BATCHES)
    # a second version adds to each figure; another model's entry, listed first, is skipped
    (entry,) = data["model_stats"]
    other = {**entry, "name": "other"}
    both = {"model_stats": [other, entry, {**entry, "version": "2"}]}
    assert parse_triton_stats(both, "tiny") == TritonStats(
        2 * 277, 2 * 109, 2 * 237, {size: 2 * n for size, n in AFTER_BATCHES.items()}
    )
    # executed rows: 33*1 + 30*2 + 21*3 + 14*4 + 5*5 + 4*6 + 1*7 + 1*9 = 277 = inference_count
    assert TritonStats(batches=AFTER_BATCHES).executed_rows == 277
    # Triton's error answer (server src/http_server.cc:128, {"error": ...}) and an entry missing its
    # fields count nothing
    assert parse_triton_stats({"error": "requested model 'tiny' is not found"}, "tiny") == TritonStats()
    assert parse_triton_stats({"model_stats": [{"name": "tiny"}]}, "tiny") == TritonStats(0, 0, 0, {})
    assert parse_triton_stats({"model_stats": [{"name": "tiny", "inference_stats": {}}]}, "tiny") == TritonStats()


def test_a_point_of_only_failures_has_requests_and_errors_but_no_times():
    """Failures carry no duration (core src/infer_stats.cc:58-73): with no success no mean exists, and the
    note lists the reasons that moved, in order: BACKEND 1, REJECTED 3."""
    after = TritonSnapshot({}, {"REJECTED": 3.0, "BACKEND": 1.0, "OTHER": 0.0}, 10)
    view = server_breakdown(TritonSnapshot(), after, "GRPC")
    assert view.entrypoint == "GRPC"
    assert view.requests == 4 and view.errors == 4
    assert view.request_us_mean is None and view.queue_us_mean is None
    assert view.compute_us_mean is None and view.runtime_us_mean is None and view.overhead_us_mean is None
    assert view.input_batch_mean is None and view.processed_batch_mean is None
    assert view.precision == 0.0 and view.executions == 0 and not view.batching
    assert view.notes == ("Triton's failures by reason: BACKEND 1, REJECTED 3",)
    # called without an entrypoint, the view names none
    assert triton_breakdown(TritonSnapshot(), after).entrypoint == ""


def test_failures_are_counted_between_the_readings_whichever_reading_names_the_reason():
    """A reason missing from one reading counts 0 there: a reading taken before the model loaded has
    no counters at all (they are created at load, core src/metric_model_reporter.cc:229-245)."""
    unloaded = parse_triton(AFTER_PAGE.replace('model="tiny"', 'model="other"'), "tiny")
    assert unloaded.counters == {} and unloaded.failures == {}
    after = parse_triton(AFTER_PAGE.replace(REJECTED, REJECTED[:-1] + "5"), "tiny")
    view = server_breakdown(unloaded, after)
    # everything on the after page: 237 successes + 5 rejected, 109 executions, 1635318 µs / 237
    assert view.requests == 242 and view.errors == 5 and view.executions == 109
    assert view.request_us_mean == pytest.approx(1635318 / 237)
    assert view.notes == ("Triton's failures by reason: REJECTED 5",)
    # REJECTED 2 before and 7 after: 5 in the point
    before = parse_triton(BEFORE_PAGE.replace(REJECTED, REJECTED[:-1] + "2"), "tiny")
    after = parse_triton(AFTER_PAGE.replace(REJECTED, REJECTED[:-1] + "7"), "tiny")
    assert server_breakdown(before, after).errors == 5
    # a reason only the before reading names, at 0, adds nothing
    before = TritonSnapshot(dict(parse_triton(BEFORE_PAGE, "tiny").counters), {"OTHER": 0.0}, 10)
    assert server_breakdown(before, TritonSnapshot(dict(after.counters), {}, 10)).errors == 0


def test_counters_going_down_name_each_counter_and_say_why_there_are_no_figures():
    """A restart or reload starts the counters again (they belong to the model's reporter, core
    src/metric_model_reporter.cc:195-246): every counter of the recorded pages, read in reverse order,
    went down."""
    view = server_breakdown(_reading(AFTER_PAGE), _reading(BEFORE_PAGE))
    assert not view.available
    assert view.reason == (
        "Triton's counters went down during the point (compute_infer_duration_us, compute_input_duration_us, "
        "compute_output_duration_us, count, exec_count, queue_duration_us, request_duration_us, "
        "request_success): it restarted or reloaded the model, so this point has no server-side figures"
    )


def test_a_reload_that_the_page_hides_is_seen_in_the_statistics_apis_counts():
    """A reload starts the statistics API's counts again too (they are the model's InferenceStatsAggregator,
    core src/infer_stats.cc). Served more after it than before, no counter of the page falls, but a batch
    size executed only before the reload does (8: 1 -> 0), and so can the API's totals: no figures either."""
    after = dataclasses.replace(
        _counters(40, 30, 4000, 400, (100, 450, 51)),
        stats=TritonStats(inference_count=60, execution_count=54, success_count=40, batches={1: 33, 2: 9, 3: 21}),
    )
    before = TritonSnapshot(
        stats=TritonStats(inference_count=30, execution_count=19, success_count=19, batches={1: 9, 2: 9, 8: 1})
    )
    view = server_breakdown(before, after)
    assert not view.available and view.reason.startswith(
        "Triton's counters went down during the point (executions at batch size 8): it restarted or reloaded"
    )
    fewer = dataclasses.replace(before, stats=dataclasses.replace(before.stats, execution_count=55, success_count=41))
    assert server_breakdown(fewer, after).reason.startswith(
        "Triton's counters went down during the point (execution_count (statistics API), success_count "
        "(statistics API), executions at batch size 8)"
    )
    # the same readings without the dropped size: every count grew, so the point has its figures
    kept = dataclasses.replace(before, stats=dataclasses.replace(before.stats, batches={1: 9, 2: 9}))
    assert server_breakdown(kept, after).available
    # a page counter that fell is named with the statistics API's, not replaced by them (here none of those fell)
    page_fell = dataclasses.replace(kept, counters={"request_success": 50.0})
    assert server_breakdown(page_fell, after).reason.startswith(
        "Triton's counters went down during the point (request_success): "
    )
    # the rows counted alone fell (61 before, 60 after): that is a reload too
    rows = dataclasses.replace(kept, stats=dataclasses.replace(kept.stats, inference_count=61))
    assert server_breakdown(rows, after).reason.startswith(
        "Triton's counters went down during the point (inference_count (statistics API)): "
    )
    # counts that did not move (every request failed before it ran) did not go down: the point keeps its figures
    still = dataclasses.replace(after, stats=dataclasses.replace(after.stats, batches={1: 9, 2: 9}))
    unmoved = dataclasses.replace(kept, stats=dataclasses.replace(after.stats, batches={1: 9, 2: 9}))
    assert server_breakdown(unmoved, still).available


def test_overhead_is_never_below_zero_and_batching_means_fewer_executions_than_requests():
    """The page adds each duration truncated to whole µs (core src/infer_stats.cc:123-132), separately,
    so queue + compute can exceed the request's time by a few µs: 4 requests, request 1000 µs, queue 400,
    compute 100 + 450 + 51 = 601, runtime 1001 / 4 = 250.25 > 250 -> overhead 0, not negative."""
    view = server_breakdown(TritonSnapshot(), _counters(4, 1, 1000, 400, (100, 450, 51)))
    assert view.runtime_us_mean == pytest.approx(1001 / 4) and view.overhead_us_mean == 0.0
    assert view.request_us_mean == 250.0 and view.precision == pytest.approx(1 / 250)
    # one execution for 4 requests: batched; 4 for 4: not; none at all (not reported yet): not
    assert view.batching and view.requests_per_execution == 4.0
    assert not server_breakdown(TritonSnapshot(), _counters(4, 4, 1000, 400, (100, 450, 51))).batching
    assert not server_breakdown(TritonSnapshot(), _counters(4, 0, 1000, 400, (100, 450, 51))).batching


def test_executions_by_batch_size_are_after_minus_before_for_every_size_either_reading_has():
    """batch_stats is cumulative per batch size (core src/infer_stats.cc:420-427); a size one reading lacks
    counts 0 there (a reload between the readings can drop one: then its count is negative, and the point
    has no server-side figures)."""
    before = TritonStats(batches={1: 9, 2: 9, 8: 1})
    after = TritonStats(batches={1: 33, 2: 9, 3: 21})
    # 1: 33 - 9 = 24; 2: 9 - 9 = 0, left out; 3: 21 - 0; 8: 0 - 1
    assert _per_batch_size(before, after) == ((1, 24), (3, 21), (8, -1))


def test_a_reading_without_statistics_settles_on_successes_alone():
    """The statistics API counts a request's rows when its success is reported (inference_count,
    core src/infer_stats.cc:109) and the execution's batch separately (:418-427), so a reading can
    count rows no execution has yet: it has not settled. Here the page and the API both still miss the
    last execution (batch size 9, exec_count 108): 240 rows, 277 - 9 - 37 = 231 executed."""
    assert settled(_reading(BEFORE_PAGE), _reading(AFTER_PAGE), 200)
    assert not settled(_reading(BEFORE_PAGE), _reading(AFTER_PAGE), 201)
    page = AFTER_PAGE.replace(
        'nv_inference_exec_count{model="tiny",version="1"} 109', 'nv_inference_exec_count{model="tiny",version="1"} 108'
    )
    data = json.loads(AFTER_STATS)
    entry = data["model_stats"][0]
    entry["execution_count"] = 108
    entry["batch_stats"] = [b for b in entry["batch_stats"] if b["batch_size"] != 9]
    lagging = _reading(page, json.dumps(data))
    assert not settled(_reading(BEFORE_PAGE, BEFORE_STATS), lagging, 200)
    assert settled(_reading(BEFORE_PAGE, BEFORE_STATS), _reading(AFTER_PAGE, AFTER_STATS), 200)


class _Server:
    """Answers GET /stats with Triton's recorded statistics and anything else with Triton's 400 error."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = self.path == "/stats"
                body = AFTER_STATS.encode() if found else b'{"error":"requested model \'x\' is not found"}'
                self.send_response(200 if found else 400)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()


@pytest.fixture
def triton_stats() -> Iterator[str]:
    served = _Server()
    yield served.url
    served.server.shutdown()
    served.server.server_close()


def test_the_statistics_api_is_read_after_the_page_and_a_failure_is_said_by_name(triton_stats):
    stats, problem = asyncio.run(read_stats(f"{triton_stats}/stats", "tiny", 5.0))
    assert stats == TritonStats(277, 109, 237, AFTER_BATCHES) and problem == ""
    missing = f"{triton_stats}/v2/models/x/stats"
    assert asyncio.run(read_stats(missing, "x", 5.0)) == (None, f"Triton's statistics API {missing} answered HTTP 400")

    # another model's lines on the page are not the model's
    page = AFTER_PAGE + AFTER_PAGE.replace('model="tiny"', 'model="other"')
    snapshot, why = asyncio.run(read_triton(page, "http://h/metrics", "tiny", f"{triton_stats}/stats", 5.0))
    assert why == "" and snapshot is not None
    assert snapshot.get("request_success") == 237 and snapshot.stats == TritonStats(277, 109, 237, AFTER_BATCHES)
    assert snapshot.stats_problem == ""
    snapshot, why = asyncio.run(read_triton(page, "http://h/metrics", "tiny", missing, 5.0))
    assert why == "" and snapshot is not None and snapshot.stats is None
    assert snapshot.stats_problem == f"Triton's statistics API {missing} answered HTTP 400"
    # no statistics asked for: the page alone, no problem
    snapshot, why = asyncio.run(read_triton(page, "http://h/metrics", "tiny", "", 5.0))
    assert why == "" and snapshot is not None and snapshot.stats is None and snapshot.stats_problem == ""
