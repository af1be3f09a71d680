"""Each figure of a TF Serving point's server view, worked out by hand from pages written as TF Serving writes them.

Pages come from ``tf_page`` (tests/test_scrape_exposition.py), a writer built from TF Serving's sources only
(tensorflow_serving/util/prometheus_exporter.cc:65-189). The expected values are worked out in comments from
what TF Serving records where: request_latency for OK requests (model_servers/prediction_service_impl.cc:41-58),
runtime_latency around the session's Run, only when it succeeds (servables/tensorflow/predict_util.cc:108-115),
the batching session's queueing per task at dequeue and its Run count after the Run
(batching/batching_session.cc:767-768, 769-773 and 810), and sums written with %.6g (prometheus_exporter.cc:104-106),
whose error is half the last written digit (``sum_resolution``).
"""

from __future__ import annotations

import asyncio
import inspect
import math

import pytest

from serve_bench.metrics import MetricsSnapshot, breakdown, parse, read_server, scrape
from serve_bench.metrics import _scrape as scrape_module
from serve_bench.metrics._scrape import from_text
from tests.test_scrape_exposition import TfRegistry, tf_page

TFS = "/tensorflow/serving/"
REQUEST, RUNTIME, COUNT = TFS + "request_latency", TFS + "runtime_latency", TFS + "request_count"
QUEUE, RUNS = TFS + "batching_session/queuing_latency", TFS + "batching_session/wrapped_run_count"
INPUT, PROCESSED = TFS + "batching_session/input_batch_size", TFS + "batching_session/processed_batch_size"
PADDING = TFS + "batching_session/padding_size"
GRPC, REST = ("m", "Predict", "GRPC"), ("m", "predict", "REST")
TAIL = "; restart the server or run longer points"


def _predicts(tf: TfRegistry, n: int, request_us: float, runtime_us: float, cell: tuple[str, ...] = GRPC) -> None:
    """``n`` OK predicts of model m: request_count, request_latency and runtime_latency as TF Serving records them."""
    for _ in range(n):
        tf.inc(COUNT, (cell[0], "OK"))
        tf.add(REQUEST, request_us, cell)
        tf.add(RUNTIME, runtime_us, (cell[0], "Predict", "TF1"))


def _batched(tf: TfRegistry, n: int, queue_us: float, rows: float) -> None:
    """``n`` tasks of ``rows`` rows, each run alone (one Run per task, no padding)."""
    for _ in range(n):
        tf.add(QUEUE, queue_us, ("",))
        tf.add(INPUT, rows)
        tf.add(PROCESSED, rows)
        tf.add(PADDING, 0, (f"{rows:g}",))
        tf.inc(RUNS)


def _view(tf: TfRegistry, point, entrypoint: str = "GRPC"):  # type: ignore[no-untyped-def]
    before = parse(tf_page(tf), "m")
    point(tf)
    return breakdown(before, parse(tf_page(tf), "m"), entrypoint=entrypoint)


def test_a_point_on_a_long_running_server_is_the_difference_of_two_pages_known_to_the_written_digits() -> None:
    """The server had already served 1000 predicts of 1000 µs (runtime and queue likewise, 1000 rows each, 1000
    Runs): every running sum is 1e6 when the point starts. The point adds 10 predicts: request 80 µs, runtime 70 µs,
    queued 50 µs, 50 rows each, one Run each. Means are the differences: 800/10, 700/10, 500/10 µs, 500/10 rows;
    compute = runtime - queue = 20 µs (runtime includes the queue with batching), overhead = request - runtime = 10.
    Each after-sum is 1e6 + share (1.0008e+06 ...), both sums written to 6 digits: error 5 + 5 = 10 (half the last
    digit of each), so the request mean is known to 10/800 = 1.25%, runtime 10/700 = 1.4%, queue and batch sizes
    10/500 = 2%: all over IMPRECISE (1%), each with its note in its unit; precision is the worst, 2%."""
    tf = TfRegistry()
    _predicts(tf, 1000, 1000, 1000)
    _batched(tf, 1000, 1000, 1000)

    def point(tf: TfRegistry) -> None:
        _predicts(tf, 10, 80, 70)
        _batched(tf, 10, 50, 50)

    view = _view(tf, point)
    assert view.available and view.batching
    assert view.requests == 10 and view.errors == 0 and view.other_requests == 0
    assert view.tf_calls == 10  # 1010 Runs after, 1000 before
    assert view.request_us_mean == 80 and view.runtime_us_mean == 70 and view.queue_us_mean == 50
    assert view.compute_us_mean == 20 and view.overhead_us_mean == 10
    assert view.input_batch_mean == 50 and view.processed_batch_mean == 50 and view.padding_share == 0
    assert view.precision == pytest.approx(0.02)

    def note(metric: str, after: str, share: str, unit: str, relative: str) -> str:
        return (
            f"{metric}: the server's running sum ({after} {unit}) is written with 6 significant digits, "
            f"so this point's share ({share} {unit} over 10) is known only to ±{relative}" + TAIL
        )

    assert view.notes == (
        note("request_latency", "1.0008e+06", "800", "µs", "1%"),
        note("runtime_latency", "1.0007e+06", "700", "µs", "1%"),
        note("batching_session:queuing_latency", "1.0005e+06", "500", "µs", "2%"),
        note("batching_session:input_batch_size", "1.0005e+06", "500", "rows", "2%"),
        note("batching_session:processed_batch_size", "1.0005e+06", "500", "rows", "2%"),
    )


def test_a_mean_known_to_exactly_one_percent_is_not_flagged() -> None:
    """IMPRECISE is the bound: a mean is flagged when known to worse than ±1%. 1000 tasks queued 1000 µs each
    (sum 1e6), then 10 tasks of 100 µs: the share is 1000 µs, the error 5 + 5 = 10 µs, 10/1000 = 1% exactly."""
    tf = TfRegistry()
    for _ in range(1000):
        tf.add(QUEUE, 1000, ("",))
    view = _view(tf, lambda tf: [tf.add(QUEUE, 100, ("",)) for _ in range(10)])
    assert view.queue_us_mean == 100 and view.precision == 0.01
    assert view.notes == () and not view.imprecise


def test_a_share_below_the_last_written_digit_gives_no_mean_and_says_so() -> None:
    """A running sum of 4_567_890_123 µs is written 4.56789e+09 (%.6g). Ten predicts of 2 µs add 20 µs, which
    does not change a written digit: the share reads 0 µs, known to no digit at all, and no mean is reported
    (the 10 requests still count: counts are integers, written with %d)."""
    tf = TfRegistry()
    tf.add(REQUEST, 4_567_890_123, GRPC)
    view = _view(tf, lambda tf: [tf.add(REQUEST, 2, GRPC) for _ in range(10)])
    assert view.requests == 10 and view.request_us_mean is None and view.overhead_us_mean is None
    assert view.precision == math.inf
    assert view.notes == (
        "request_latency: the server's running sum (4.56789e+09 µs) is written with 6 significant digits, "
        "so this point's share (0 µs over 10) is known only to no digit at all (mean not reported)" + TAIL,
    )


def test_a_one_row_point_on_a_fresh_server_keeps_zero_and_one_as_figures() -> None:
    """One predict of one row on a fresh server, queued 0 µs (dequeued the microsecond it came:
    batching_session.cc:767-768 records dequeue - enqueue), padded by 0 in a batch of 1. Queue mean 0/1 = 0 µs
    (the sums are 0, so no error at all), input and processed means 1/1 = 1 row (error 0.5e-5 of a sum of 1,
    the worst of the point's relative errors: 5e-6), padding share 0/1 = 0. compute = 2000 - 0, overhead 1000."""
    tf = TfRegistry()

    def point(tf: TfRegistry) -> None:
        _predicts(tf, 1, 3000, 2000)
        _batched(tf, 1, 0, 1)

    view = _view(tf, point)
    assert view.queue_us_mean == 0.0 and view.compute_us_mean == 2000 and view.overhead_us_mean == 1000
    assert view.input_batch_mean == 1.0 and view.processed_batch_mean == 1.0 and view.padding_share == 0.0
    assert view.tf_calls == 1 and view.precision == pytest.approx(5e-6) and view.notes == ()


def test_batching_is_seen_from_either_of_the_batching_sessions_metrics() -> None:
    """A task that timed out in the queue is queued (its latency recorded at dequeue, batching_session.cc:767-768)
    but never Run (ResourceExhausted, :769-773, before :810 counts a Run; predict_util.cc:109 returns before
    recording a runtime): one queue latency, no Run, one RESOURCE_EXHAUSTED request. A Run whose task was dequeued
    just before the first scrape is counted (:810) with no queue latency in the point. Both are batching."""
    tf = TfRegistry()

    def timed_out(tf: TfRegistry) -> None:
        tf.add(QUEUE, 5000, ("",))
        tf.inc(COUNT, ("m", "RESOURCE_EXHAUSTED"))

    view = _view(tf, timed_out)
    assert view.batching and view.tf_calls == 0 and view.queue_us_mean == 5000
    assert view.requests == 1 and view.errors == 1 and view.runtime_us_mean is None and view.compute_us_mean is None

    tf = TfRegistry()
    tf.add(QUEUE, 5000, ("",))  # dequeued before the first scrape

    def run_after_dequeue(tf: TfRegistry) -> None:
        tf.inc(RUNS)
        _predicts(tf, 1, 9000, 8000)

    view = _view(tf, run_after_dequeue)
    assert view.batching and view.tf_calls == 1 and view.queue_us_mean is None and view.compute_us_mean == 8000


def test_compute_is_never_negative_when_other_models_queued_longer() -> None:
    """The queue metric carries no model label (batching_session.cc:59-64): with another model batching, m's
    runtime (2000 µs) can be shorter than the server-wide queue mean ((1500 + 10500)/2 = 6000 µs): compute is
    max(0, 2000 - 6000) = 0, not negative."""
    tf = TfRegistry()

    def point(tf: TfRegistry) -> None:
        _predicts(tf, 1, 2500, 2000)
        tf.add(QUEUE, 1500, ("",))
        tf.add(QUEUE, 10500, ("",))
        tf.inc(RUNS, by=2)

    view = _view(tf, point)
    assert view.queue_us_mean == 6000 and view.runtime_us_mean == 2000 and view.compute_us_mean == 0.0
    assert view.overhead_us_mean == 500


def test_runtime_and_tf_calls_count_predicts_only() -> None:
    """runtime_latency is labelled by API (util.cc:70-78): Predict (predict_util.cc:113) and Classify
    (classifier.cc:78). Three predicts (runtime 1500 µs) and two classifies (runtime 9000 µs, counted OK in
    request_count, request_latency API="Classify"): the runtime mean is 1500, tf_calls 3 without batching, and
    the two classifies are other requests (5 OK - 3 predicts)."""
    tf = TfRegistry()

    def point(tf: TfRegistry) -> None:
        _predicts(tf, 3, 2000, 1500)
        for _ in range(2):
            tf.inc(COUNT, ("m", "OK"))
            tf.add(REQUEST, 10_000, ("m", "Classify", "GRPC"))
            tf.add(RUNTIME, 9000, ("m", "Classify", "TF1"))

    view = _view(tf, point)
    assert not view.batching and view.tf_calls == 3 and view.runtime_us_mean == 1500
    assert view.requests == 3 and view.other_requests == 2 and view.overhead_us_mean == 500


def test_a_rest_point_says_how_many_grpc_predicts_its_runtime_includes() -> None:
    """Two REST predicts (request 1000 µs, runtime 900) while three came over gRPC (request 5000, runtime 4900):
    runtime_latency has no entrypoint label, so the runtime mean covers all five, (1800 + 14700)/5 = 3300 µs,
    longer than the REST request mean: overhead max(0, 1000 - 3300) = 0. Five OK requests, all predicts:
    no other requests. The note counts 5 - 2 = 3 predicts over gRPC."""
    tf = TfRegistry()

    def point(tf: TfRegistry) -> None:
        _predicts(tf, 2, 1000, 900, REST)
        _predicts(tf, 3, 5000, 4900, GRPC)

    view = _view(tf, point, entrypoint="REST")
    assert view.requests == 2 and view.request_us_mean == 1000 and view.runtime_us_mean == 3300
    assert view.overhead_us_mean == 0.0 and view.other_requests == 0.0
    assert view.notes == (
        "3 predicts came over gRPC during the point: runtime, queueing and batch figures include them "
        "(TF Serving does not label those by entrypoint)",
    )


def test_a_restart_is_seen_when_any_counter_fell_even_if_others_grew() -> None:
    """Counters only grow on one server (TF's Counter, Sampler bucket counts): one that fell means a restart,
    even when the new server has already served more than the old one had, with larger sums."""
    old, new = TfRegistry(), TfRegistry()
    _predicts(old, 4, 10, 10)
    _predicts(new, 2, 1000, 1000)  # request and runtime counts 4 -> 2, OK requests 4 -> 2; sums 40 -> 2000
    view = breakdown(parse(tf_page(old), "m"), parse(tf_page(new), "m"), entrypoint="GRPC")
    assert not view.available
    assert view.reason == (
        "the server's counters went down during the point (request_count, request_latency, runtime_latency): "
        "it restarted, so this point has no server-side figures"
    )

    old, new = TfRegistry(), TfRegistry()
    _predicts(old, 1, 10, 10)
    old.inc(COUNT, ("m", "INVALID_ARGUMENT"))  # a status the new server has not seen yet
    _predicts(new, 3, 1000, 1000)  # every other count and sum grew
    view = breakdown(parse(tf_page(old), "m"), parse(tf_page(new), "m"), entrypoint="GRPC")
    assert not view.available and "(request_count)" in view.reason


def test_a_falling_sum_is_not_a_restart() -> None:
    """A _sum is a counter only while no observation is negative (Prometheus, docs/practices/histograms.md: "the
    sum of observations can go down"); TF Serving records latencies as int64(NowMicros() - start) of the wall
    clock (prediction_service_impl.cc:41,53-55; util.cc:358-361), negative when the clock steps back. Four
    predicts of 10 ms, then one recorded as -100 ms: the count grew (1 request), the sum fell; no restart, and
    no mean (the share is negative)."""
    tf = TfRegistry()
    for _ in range(4):
        tf.add(REQUEST, 10_000, GRPC)
    view = _view(tf, lambda tf: tf.add(REQUEST, -100_000, GRPC))
    assert view.available and view.requests == 1 and view.request_us_mean is None


def test_a_snapshot_reads_cells_totals_and_single_values() -> None:
    """request_count is labelled model_name, status (util.cc:66-68); the snapshot keeps status. The batching Run
    counter (batching_session.cc:66-68) carries no label and is no request_count cell."""
    tf = TfRegistry()
    _predicts(tf, 2, 100, 90)
    tf.inc(COUNT, ("m", "INVALID_ARGUMENT"))
    tf.inc(RUNS, by=7)
    snapshot = parse(tf_page(tf), "m")
    assert snapshot.get("request_count", labels=("OK",)) == 2  # the counter itself: no suffix
    assert snapshot.total("request_count") == 3
    assert snapshot.cells("request_count") == {("OK",): 2, ("INVALID_ARGUMENT",): 1}
    assert snapshot.cells("request_latency", "_count") == {("Predict", "GRPC"): 2}
    assert snapshot.total("batching_session:wrapped_run_count") == 7


def test_the_parser_adds_cells_that_differ_only_in_labels_it_drops_and_reads_a_missing_label_as_empty() -> None:
    """runtime_latency's runtime label (util.cc:70-78) is summed over: a TF1 and a TFRT cell of API="Predict" add
    up (2 + 3 = 5 runs, 200 + 600 µs). A cell written without API is API="" (Prometheus' data model, docs/concepts/
    data_model.md: "a label with an empty label value is considered equivalent to a label that does not exist").
    A summary's quantile samples carry the bare name (docs/instrumenting/exposition_formats.md): not a figure."""
    p = ":tensorflow:serving:"
    page = (
        f"# TYPE {p}runtime_latency histogram\n"
        f'{p}runtime_latency_sum{{model_name="m",API="Predict",runtime="TF1"}} 200\n'
        f'{p}runtime_latency_count{{model_name="m",API="Predict",runtime="TF1"}} 2\n'
        f'{p}runtime_latency_sum{{model_name="m",API="Predict",runtime="TFRT"}} 600\n'
        f'{p}runtime_latency_count{{model_name="m",API="Predict",runtime="TFRT"}} 3\n'
        f'{p}runtime_latency_count{{model_name="m",runtime="TF1"}} 4\n'
        f"# TYPE {p}request_latency summary\n"
        f'{p}request_latency{{model_name="m",API="Predict",entrypoint="GRPC",quantile="0.5"}} 900\n'
        f'{p}request_latency_count{{model_name="m",API="Predict",entrypoint="GRPC"}} 6\n'
    )
    assert parse(page, "m").values == {
        ("runtime_latency", "_sum", ("Predict",)): 800,
        ("runtime_latency", "_count", ("Predict",)): 5,
        ("runtime_latency", "_count", ("",)): 4,
        ("request_latency", "_count", ("Predict", "GRPC")): 6,
    }


def test_a_fetched_page_is_one_models_snapshot_or_says_it_is_not_tf_servings() -> None:
    tf = TfRegistry()
    _predicts(tf, 2, 100, 90)
    _predicts(tf, 5, 100, 90, ("other", "Predict", "GRPC"))
    page, url = tf_page(tf), "http://h:8501/monitoring/prometheus/metrics"
    snapshot, why = from_text(page, url, "m")
    assert why == "" and snapshot == parse(page, "m") and snapshot.get("request_count", "", ("OK",)) == 2
    assert from_text("# TYPE process_cpu_seconds_total counter\n", url, "m") == (
        None,
        f"metrics endpoint {url} has no TF Serving metrics (is it TF Serving's monitoring path?)",
    )


def test_scrape_reads_the_page_at_the_url_and_waits_as_long_as_read_server(monkeypatch: pytest.MonkeyPatch) -> None:
    tf = TfRegistry()
    _predicts(tf, 2, 100, 90)
    _predicts(tf, 5, 100, 90, ("other", "Predict", "GRPC"))
    page, url = tf_page(tf), "http://h:8501/monitoring/prometheus/metrics"
    asked: list[tuple[str, float]] = []

    async def fetch(at: str, timeout: float) -> tuple[str | None, str]:
        asked.append((at, timeout))
        return (page, "") if at == url else (None, f"metrics endpoint {at} unreachable")

    monkeypatch.setattr(scrape_module, "fetch_text", fetch)
    snapshot, why = asyncio.run(scrape(url, "m"))
    assert why == "" and isinstance(snapshot, MetricsSnapshot) and snapshot == parse(page, "m")
    assert asked == [(url, inspect.signature(read_server).parameters["timeout"].default)]
    assert asyncio.run(scrape("http://h:1/x", "m", timeout=0.5)) == (None, "metrics endpoint http://h:1/x unreachable")
    assert asked[-1] == ("http://h:1/x", 0.5)
    monkeypatch.setattr(scrape_module, "fetch_text", lambda at, timeout: _page("# TYPE x counter\n"))
    assert asyncio.run(scrape(url, "m")) == (
        None,
        f"metrics endpoint {url} has no TF Serving metrics (is it TF Serving's monitoring path?)",
    )


async def _page(text: str) -> tuple[str | None, str]:
    return text, ""
