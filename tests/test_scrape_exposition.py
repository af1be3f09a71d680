"""The scraper on pages written exactly as TF Serving's exporter writes them, and the local server's page.

``tf_page`` below is this test's own writer, built from TF Serving's sources and
nothing of serve-bench: tensorflow_serving/util/prometheus_exporter.cc (format),
tensorflow_serving/servables/tensorflow/util.cc:66-89, batching/batching_session.cc:59-68
and batching/batching_util.h:117-153 (names, labels, buckets), and tsl's
Histogram::Add (a value goes to the first bucket whose limit is strictly greater).
"""

from __future__ import annotations

import bisect

import pytest

from serve_bench.metrics import breakdown, parse, sum_resolution
from serve_bench.server._metrics import Metrics


def _exp(scale: float, growth: float, count: int) -> list[float]:
    out, bound = [], scale
    for _ in range(count):
        out.append(bound)
        bound *= growth
    return out


# TF name -> (kind, label names, bucket limits); util.cc:66-89, batching_session.cc:59-68, batching_util.h:117-153
TF_METRICS = {
    "/tensorflow/serving/request_count": ("counter", ("model_name", "status"), []),
    "/tensorflow/serving/request_latency": ("histogram", ("model_name", "API", "entrypoint"), _exp(10, 1.8, 33)),
    "/tensorflow/serving/runtime_latency": ("histogram", ("model_name", "API", "runtime"), _exp(10, 1.8, 33)),
    "/tensorflow/serving/batching_session/queuing_latency": ("histogram", ("thread_pool_name",), _exp(100, 1.2, 52)),
    "/tensorflow/serving/batching_session/wrapped_run_count": ("counter", (), []),
    "/tensorflow/serving/batching_session/input_batch_size": ("histogram", (), _exp(1, 2, 14)),
    "/tensorflow/serving/batching_session/processed_batch_size": ("histogram", (), _exp(1, 2, 14)),
    "/tensorflow/serving/batching_session/padding_size": ("histogram", ("execution_batch_size",), _exp(1, 2, 14)),
    # registered at start-up too: util.cc:54-64, saved_model_warmup_util.cc:51-63, core/request_logger.cc:34-38
    "/tensorflow/serving/request_example_counts": ("histogram", ("model",), _exp(1, 2, 15)),
    "/tensorflow/serving/request_example_count_total": ("counter", ("model",), []),
    "/tensorflow/serving/model_warmup_latency": ("histogram", ("model_path", "status"), _exp(10, 1.8, 33)),
    "/tensorflow/serving/model_warmup_records_read": ("counter", ("model_path", "status"), []),
    "/tensorflow/serving/request_log_count": ("counter", ("model_name", "status_code"), []),
}
LAZY = {
    "/tensorflow/serving/batching_session/input_batch_size",
    "/tensorflow/serving/batching_session/padding_size",
    "/tensorflow/serving/batching_session/processed_batch_size",
}


class TfRegistry:
    """Cells as TF's CollectionRegistry holds them: counters are int64, histograms bucket counts + double sum."""

    def __init__(self) -> None:
        self.cells: dict[str, dict[tuple[str, ...], object]] = {name: {} for name in TF_METRICS}
        self.sum_override: dict[tuple[str, tuple[str, ...]], float] = {}

    def inc(self, name: str, labels: tuple[str, ...] = (), by: int = 1) -> None:
        cells = self.cells[name]
        cells[labels] = int(cells.get(labels, 0)) + by  # type: ignore[call-overload]

    def add(self, name: str, value: float, labels: tuple[str, ...] = ()) -> None:
        limits = TF_METRICS[name][2] + [1.7976931348623157e308]  # ExplicitBuckets appends DBL_MAX
        cell = self.cells[name].setdefault(labels, {"buckets": [0.0] * len(limits), "sum": 0.0})
        cell["buckets"][bisect.bisect_right(limits, value)] += 1  # type: ignore[index]
        cell["sum"] += value  # type: ignore[operator,index]


def _name(tf_name: str) -> str:  # prometheus_exporter.cc:53-63
    return "".join(c if c.isalnum() or c == "_" else ":" for c in tf_name)


def _value(v: str) -> str:  # prometheus_exporter.cc:32-40: only \ and " are escaped
    return v.replace("\\", "\\\\").replace('"', '\\"')


def tf_page(registry: TfRegistry, metrics: list[str] | None = None) -> str:
    """PrometheusExporter::GeneratePage (prometheus_exporter.cc:162-189) over the registry."""
    lines: list[str] = []
    for tf_name in sorted(metrics if metrics is not None else TF_METRICS):  # descriptor_map is a std::map
        kind, label_names, limits = TF_METRICS[tf_name]
        if tf_name in LAZY and not registry.cells[tf_name]:
            continue  # batching_util.h registers these on first use
        name = _name(tf_name)
        lines.append(f"# TYPE {name} {kind}")
        for labels, cell in sorted(registry.cells[tf_name].items()):
            pairs = [f'{n}="{_value(v)}"' for n, v in zip(label_names, labels)]
            if kind == "counter":  # SerializeScalar: "NAME{labels} %d"
                lines.append(f"{name}{{{','.join(pairs)}}} {cell}")
                continue
            prefix = f"{name}_bucket{{{','.join(pairs)}" + ("," if pairs else "")
            cumulative = 0
            buckets = cell["buckets"]  # type: ignore[index]
            for i, count in enumerate(buckets):
                cumulative += int(count)
                limit = f"{limits[i]:.6g}" if i < len(buckets) - 1 else "+Inf"  # absl::StrCat(double)
                lines.append(f'{prefix}le="{limit}"}} {cumulative}')
            total = registry.sum_override.get((tf_name, labels), cell["sum"])  # type: ignore[index]
            lines.append(f"{name}_sum{{{','.join(pairs)}}} {total:.6g}")
            lines.append(f"{name}_count{{{','.join(pairs)}}} {cumulative}")
    return "\n".join(lines) + "\n"


def _record_batched_point(tf: TfRegistry, local: Metrics | None = None) -> None:
    """Four gRPC predicts of one image batched into one Run of 4 padded to 8, one REST GET, one error."""
    both = [(tf, "/tensorflow/serving/", "/")] + ([(local, "", ":")] if local else [])
    for target, prefix, sep in both:

        def key(name: str) -> str:
            return prefix + name.replace("/", sep) if prefix else name.replace("/", sep)

        for _ in range(4):
            _inc(target, key("request_count"), ("m", "OK"))
            _add(target, key("request_latency"), 10_000, ("m", "Predict", "GRPC"))
            _add(target, key("runtime_latency"), 9_000, ("m", "Predict", "TF1"))
            _add(target, key("batching_session/queuing_latency"), 3_000, ("",))
            _add(target, key("batching_session/input_batch_size"), 1)
        _add(target, key("batching_session/processed_batch_size"), 8)
        _add(target, key("batching_session/padding_size"), 4, ("8",))
        _inc(target, key("batching_session/wrapped_run_count"))
        _inc(target, key("request_count"), ("m", "OK"))  # a REST model-status GET (health check)
        _add(target, key("request_latency"), 120, ("m", "", "REST"))
        _inc(target, key("request_count"), ("m", "INVALID_ARGUMENT"))  # a refused predict
        _inc(target, key("request_count"), ("other", "OK"))  # another model
        _add(target, key("request_latency"), 50_000, ("other", "Predict", "GRPC"))


def _inc(target: object, name: str, labels: tuple[str, ...] = ()) -> None:
    target.inc(name, labels)  # type: ignore[attr-defined]


def _add(target: object, name: str, value: float, labels: tuple[str, ...] = ()) -> None:
    (target.add if isinstance(target, TfRegistry) else target.observe)(name, value, labels)  # type: ignore[attr-defined]


def test_local_server_page_is_byte_for_byte_tf_servings():
    """The local server's page equals TF Serving's exporter output for the same recordings
    (util/prometheus_exporter.cc:65-111 histograms, :113-142 counters, :162-189 page)."""
    tf, local = TfRegistry(), Metrics()
    _record_batched_point(tf, local)
    local.observe("request_latency", 10, ("m", "Predict", "GRPC"))  # exactly on a limit: next bucket (upper_bound)
    tf.add("/tensorflow/serving/request_latency", 10, ("m", "Predict", "GRPC"))
    local.observe("runtime_latency", 3_456_789_012, ('we"ird\\name', "Predict", "TF1"))  # escaping, 6-digit sum
    tf.add("/tensorflow/serving/runtime_latency", 3_456_789_012, ('we"ird\\name', "Predict", "TF1"))
    wanted = tf_page(tf)
    assert local.render() == wanted
    assert ":tensorflow:serving:batching_session:wrapped_run_count{} 1" in wanted
    assert ":tensorflow:serving:batching_session:input_batch_size_sum{} 4" in wanted
    assert 'runtime_latency_sum{model_name="we\\"ird\\\\name",API="Predict",runtime="TF1"} 3.45679e+09' in wanted
    assert 'le="104.976"' in wanted and 'le="+Inf"' in wanted


def test_fresh_page_lists_types_without_points_and_no_lazy_batching_histograms():
    """A fresh server writes a TYPE line per registered metric and no points; batching_util.h's
    histograms (function-local statics, batching_util.h:119-151) appear only once used."""
    page = Metrics().render()
    assert "# TYPE :tensorflow:serving:request_count counter" in page
    assert "# TYPE :tensorflow:serving:batching_session:queuing_latency histogram" in page
    assert "input_batch_size" not in page and "{" not in page
    assert page == tf_page(TfRegistry())
    assert parse(page, "m").families == len(TF_METRICS) - len(LAZY)


def test_scraper_over_grpc_counts_predicts_not_health_checks():
    """gRPC predicts are request_latency{API="Predict",entrypoint="GRPC"} (prediction_service_impl.cc:52-59);
    REST GETs add to request_count OK (http_server.cc:194-201) but are no predicts."""
    tf = TfRegistry()
    before = parse(tf_page(tf), "m")
    _record_batched_point(tf)
    view = breakdown(before, parse(tf_page(tf), "m"), entrypoint="GRPC")
    assert view.available and view.entrypoint == "GRPC"
    assert view.requests == 5 and view.errors == 1  # 4 OK predicts + 1 refused
    assert view.other_requests == 1  # the health check
    assert view.request_us_mean == pytest.approx(10_000)
    assert view.runtime_us_mean == pytest.approx(9_000)
    assert view.queue_us_mean == pytest.approx(3_000)
    assert view.compute_us_mean == pytest.approx(6_000)  # runtime includes the queue with batching
    assert view.overhead_us_mean == pytest.approx(1_000)
    assert view.batching and view.tf_calls == 1
    assert view.input_batch_mean == pytest.approx(1) and view.processed_batch_mean == pytest.approx(8)
    assert view.padding_share == pytest.approx(0.5)
    assert view.flags() == ("server errors",)


def test_scraper_over_rest_uses_the_url_verb():
    """REST predicts are labelled API="predict", entrypoint="REST" (http_server.cc:195); a gRPC-only
    filter sees none of them, a REST one sees them all."""
    tf = TfRegistry()
    before = parse(tf_page(tf), "m")
    for _ in range(3):
        tf.inc("/tensorflow/serving/request_count", ("m", "OK"))
        tf.add("/tensorflow/serving/request_latency", 2_000, ("m", "predict", "REST"))
        tf.add("/tensorflow/serving/runtime_latency", 1_500, ("m", "Predict", "TF1"))
    after = parse(tf_page(tf), "m")
    rest = breakdown(before, after, entrypoint="REST")
    assert rest.requests == 3 and rest.request_us_mean == pytest.approx(2_000)
    assert rest.compute_us_mean == pytest.approx(1_500) and rest.overhead_us_mean == pytest.approx(500)
    assert not rest.batching and rest.tf_calls == 3 and rest.queue_us_mean is None
    grpc = breakdown(before, after, entrypoint="GRPC")
    assert grpc.requests == 0 and grpc.request_us_mean is None
    assert any("came over REST" in note for note in grpc.notes)


def test_precision_lost_to_six_digit_sums_is_reported():
    """Sums are written with %.6g (absl::StrCat, prometheus_exporter.cc:104-106): on a server that has
    run for long, a short point's share of the sum is imprecise and says so."""
    tf = TfRegistry()
    key = ("/tensorflow/serving/request_latency", ("m", "Predict", "GRPC"))
    tf.add(key[0], 4_567_890_123.0, key[1])  # a long-running server's total
    before = parse(tf_page(tf), "m")
    for _ in range(10):
        tf.add(key[0], 2_000, key[1])
    page = tf_page(tf)
    assert "request_latency_sum{" in page and "4.56791e+09" in page
    view = breakdown(before, parse(page, "m"), entrypoint="GRPC")
    assert view.requests == 10  # counts are exact integers
    assert view.precision > 0.01 and "server metrics imprecise" in view.flags()
    assert any("6 significant digits" in note for note in view.notes)
    assert sum_resolution(4.56789e9) == pytest.approx(5_000)


def test_precision_fine_on_a_fresh_server():
    """The same point on a fresh server: the %.6g sums keep every digit that matters."""
    tf = TfRegistry()
    before = parse(tf_page(tf), "m")
    for _ in range(10):
        tf.add("/tensorflow/serving/request_latency", 2_345, ("m", "Predict", "GRPC"))
    view = breakdown(before, parse(tf_page(tf), "m"), entrypoint="GRPC")
    assert view.request_us_mean == pytest.approx(2_345) and not view.imprecise and not view.notes


def test_restarted_server_gives_no_figures():
    """Counters that go down mean the server restarted between the scrapes."""
    tf = TfRegistry()
    _record_batched_point(tf)
    before = parse(tf_page(tf), "m")
    view = breakdown(before, parse(tf_page(TfRegistry()), "m"), entrypoint="GRPC")
    assert not view.available and "restarted" in view.reason


def test_parser_ignores_foreign_and_odd_lines():
    """A real page carries every TensorFlow metric of the process (exporter.cc:177-186 walks the whole
    registry); lines the scraper does not need, or cannot read, are skipped."""
    tf = TfRegistry()
    tf.inc("/tensorflow/serving/request_count", ("m", "OK"))
    tf.add("/tensorflow/serving/request_latency", 500, ("m", "Predict", "GRPC"))
    page = (
        "# TYPE :tensorflow:core:graph_runs counter\n:tensorflow:core:graph_runs{} 12\n"
        '# TYPE :tensorflow:core:weird untyped\n:tensorflow:core:weird{x="unterminated} 1\n' + tf_page(tf)
    )
    snapshot = parse(page, "m")
    assert snapshot.get("request_latency", "_count", ("Predict", "GRPC")) == 1
    assert snapshot.families == len(TF_METRICS) - len(LAZY)  # TF Serving families only


def test_bad_entrypoint_is_refused():
    with pytest.raises(ValueError, match="entrypoint"):
        breakdown(parse("", "m"), parse("", "m"), entrypoint="grpc")
