"""The floor's as-served calls: the same pixels as the local server hands them to the runtime.

The server decodes an input as a view of the bytes gRPC received (server/_grpc.py, ``_decode_inputs``), so the
runtime gets a read-only float32 array at the offset a Predict request puts the pixels, which is not 4-byte
aligned (71 to 82 bytes for the catalogue's models at batch 1 to 256: this test computes InceptionV3's from the
client's own request). On the H100 the server's runtime call at batch 1 took 0.4 ms over the floor's 4.5 ms;
the floor line's ``as_served_p50_ms`` says on the next visit whether such a view is the difference, and its
``gapped_p50_ms`` whether the device idling between requests is (calls each after ``GAP_MS`` of sleep). A stand-in
runner and clock: the test is about what is passed and what is recorded, not about a device.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from serve_bench.client._grpc import encode_predict_request
from serve_bench.runtimes import _floor as floor
from serve_bench.server._wire import content_spans


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []  # every sleep, in seconds
        self.idle = False  # slept since the last call

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept.append(seconds)
        self.idle = True

    def time(self) -> SimpleNamespace:
        return SimpleNamespace(perf_counter=self.perf_counter, sleep=self.sleep)


class _Runner:
    """Records every input it is called with; a fresh array's call takes 1 ms of the clock, a view's 3 ms, and a
    call after a sleep 0.7 ms more (a device slow to wake)."""

    def __init__(self, clock: _Clock, view_s: float = 0.003) -> None:
        self.clock, self.seen, self.view_s = clock, [], view_s
        self.spec = SimpleNamespace(input_shape=(5, 7, 3))
        self.compile_seconds: dict[int, float] = {}
        self.first_run_seconds: dict[int, float] = {}

    def compile(self, size: int) -> float:
        self.compile_seconds[size] = 0.5
        return 0.5

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, Any]:
        images = inputs["images"]
        self.seen.append(images)
        self.clock.now += (self.view_s if images.base is not None else 0.001) + (0.0007 if self.clock.idle else 0.0)
        self.clock.idle = False
        return {"features": np.zeros((len(images), 4), np.float32)}


def test_the_as_served_calls_get_a_read_only_unaligned_view_of_the_same_pixels(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(floor, "time", clock.time())
    runner = _Runner(clock)
    line = floor._point(runner, 2, min_seconds=0.0, min_calls=4, seed=1)
    calls = floor.AS_SERVED_CALLS + 1  # and one untimed first
    fresh, served = runner.seen[:5], runner.seen[5:]  # one untimed fresh call, four timed; the view's
    assert len(served) == calls and "gapped_p50_ms" not in line  # the gapped calls: batch 1 alone
    assert all(a is fresh[0] and a.flags.writeable and a.flags.aligned for a in fresh)
    for view in served:
        assert not view.flags.writeable and not view.flags.aligned
        assert view.ctypes.data % 4 == floor.AS_SERVED_OFFSET % 4 != 0
        assert view.dtype == np.float32 and np.array_equal(view, fresh[0])
    # the timed figures stay the fresh array's; the as-served median is the views' own
    assert (line["calls"], line["p50_ms"], line["as_served_p50_ms"]) == (4, pytest.approx(1.0), pytest.approx(3.0))


def test_the_offset_is_where_a_predict_request_puts_inceptions_pixels():
    """AS_SERVED_OFFSET is the offset from InceptionV3's batch 2 to 64 in serve-bench's own request (the
    client's encoding; TF Serving's clients write the same fields in the same order, so the same bytes)."""
    for batch in (2, 16):
        data = encode_predict_request(
            "inception_v3", None, "serving_default", {"images": np.zeros((batch, 299, 299, 3), np.float32)}
        )
        spans = content_spans(data)
        assert spans is not None and spans["images"][0] == floor.AS_SERVED_OFFSET


def test_slow_calls_are_as_served_a_half_second_or_three(monkeypatch):
    """A CPU's large batches take a second or more a call: three as-served calls then, not ten."""
    clock = _Clock()
    monkeypatch.setattr(floor, "time", clock.time())
    for view_s, calls in ((1.2, 3), (0.2, 3), (0.15, 4), (0.01, floor.AS_SERVED_CALLS)):
        runner = _Runner(clock, view_s)
        line = floor._point(runner, 2, min_seconds=0.0, min_calls=4, seed=1)
        assert (len(runner.seen) - 6, line["as_served_p50_ms"]) == (calls, pytest.approx(view_s * 1e3))


def test_the_gapped_calls_each_come_after_the_gap_and_are_timed_apart(monkeypatch):
    """At batch 1, each gapped call comes after ``GAP_MS`` of sleep on the same fresh pixels; the sleep is not in its
    time, and the back-to-back figures stay without it: a device 0.7 ms slower after idling shows in gapped_p50_ms
    alone."""
    clock = _Clock()
    monkeypatch.setattr(floor, "time", clock.time())
    runner = _Runner(clock)
    line = floor._point(runner, 1, min_seconds=0.0, min_calls=4, seed=1)
    gapped = runner.seen[5 + floor.AS_SERVED_CALLS + 1 :]
    assert len(gapped) == floor.AS_SERVED_CALLS + 1 and all(a is runner.seen[0] for a in gapped)
    assert clock.slept == [floor.GAP_MS / 1e3] * floor.AS_SERVED_CALLS  # before each timed call, none before others
    assert (line["gap_ms"], line["p50_ms"], line["gapped_p50_ms"]) == (floor.GAP_MS, 1.0, pytest.approx(1.7))
