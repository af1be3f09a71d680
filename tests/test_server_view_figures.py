"""The server's split of a point's time (stats/_server_view.py): its line word for word and its JSON round trip.

Written from `make mutants`' survivors (MUTANTS.md, issue 35). The lines follow ServerView.describe's own
examples for TF Serving, Triton and MLServer; every time is in µs and shown in ms to 0.1, with values such as
20,060 µs (20.1 ms) that read differently when divided by 1001 instead of 1000.
"""

from __future__ import annotations

from serve_bench.stats import ServerView


def test_tf_servings_split_is_queue_compute_and_overhead_with_its_padded_batch() -> None:
    view = ServerView(
        request_us_mean=20_060.0,
        queue_us_mean=5_060.0,
        compute_us_mean=14_060.0,
        overhead_us_mean=940.0,
        processed_batch_mean=7.84,
        padding_share=0.034,
    )
    assert view.describe() == "server 20.1 ms = queue 5.1 + compute 14.1 + overhead 0.9; server batch 7.8 (padding 3%)"


def test_a_server_that_times_only_its_queue_shows_the_queue_not_a_runtime() -> None:
    """Queue known, compute not: the split is the queue (and overhead), not the runtime that holds both."""
    view = ServerView(request_us_mean=9_960.0, queue_us_mean=2_060.0, runtime_us_mean=9_000.0)
    assert view.describe() == "server 10.0 ms = queue 2.1"


def test_tritons_line_names_the_executed_batch() -> None:
    view = ServerView(
        source="triton",
        request_us_mean=6_060.0,
        queue_us_mean=1_000.0,
        compute_us_mean=4_060.0,
        overhead_us_mean=1_000.0,
        processed_batch_mean=6.1,
    )
    assert view.describe() == "server 6.1 ms = queue 1.0 + compute 4.1 + overhead 1.0; executed batch 6.1"


def test_mlservers_line_shows_its_unsplit_runtime_and_requests_per_execution() -> None:
    """MLServer times queue and model together (runtime) and counts requests, not rows, per execution."""
    view = ServerView(
        source="mlserver",
        request_us_mean=9_160.0,
        runtime_us_mean=8_460.0,
        overhead_us_mean=700.0,
        requests_per_execution=2.5,
    )
    assert view.describe() == "server 9.2 ms = runtime 8.5 + overhead 0.7; executed batch 2.5 requests"


def test_unavailable_metrics_say_why_or_nothing() -> None:
    assert ServerView.unavailable("connection refused").describe() == "server metrics unavailable (connection refused)"
    assert ServerView.unavailable("").describe() == ""


def test_a_view_goes_to_json_and_back_with_its_notes_flags_and_batch_counts() -> None:
    view = ServerView(
        source="triton",
        batching=True,
        requests=12.0,
        notes=("first", "second"),
        batch_executions=((1, 3), (4, 2)),
    )
    data = view.to_dict()
    assert data["notes"] == ["first", "second"]  # JSON has lists, not tuples
    back = ServerView.from_dict(data)
    assert back == view
    assert back.batch_executions == ((1, 3), (4, 2)) and back.notes == ("first", "second")
    # flags written as numbers (an older writer) are read as booleans, not as floats that compare equal
    flags = ServerView.from_dict({"available": 0, "batching": 1})
    assert flags.available is False and flags.batching is True
