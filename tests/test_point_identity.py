"""A point's identity and wording (stats/_point.py) and the energy side's arithmetic (stats/_energy.py).

Written from `make mutants`' survivors (MUTANTS.md): each expected value is worked out by hand, so a
one-line change of the code (a scheme compared wrongly, a word dropped, idle not subtracted) fails.
"""

from __future__ import annotations

import pytest

from serve_bench.stats import EnergyView, LoadInfo, parse_target
from serve_bench.stats._energy import NOT_MEASURED
from serve_bench.stats._point import PointId, point_key
from tests._points import make_point


@pytest.mark.parametrize(
    ("url", "protocol"),
    [
        ("grpc://h:8500", "grpc"),
        ("GRPC://h:8500", "grpc"),
        ("http://h:8501", "rest"),
        ("https://h", "rest"),
        ("v2+grpc://h:8001", "v2-grpc"),
        ("V2+GRPC://h:8001", "v2-grpc"),
        ("v2+http://h:8000", "v2-rest"),
        ("v2+https://h", "v2-rest"),
    ],
)
def test_the_protocol_is_read_from_the_scheme(url, protocol):
    assert parse_target(url).protocol == protocol


@pytest.mark.parametrize(
    ("load", "described", "level"),
    [
        (LoadInfo("closed", concurrency=8), "concurrency 8", "c8"),
        (LoadInfo("closed"), "concurrency 1", "c1"),
        (LoadInfo("open", rate=50.0, arrival="constant"), "50 req/s constant", "50/s"),
        (LoadInfo("open", rate=12.5), "12.5 req/s poisson", "12.5/s"),
        (LoadInfo("locust", concurrency=4), "4 Locust users", "c4"),
        (LoadInfo("stream", concurrency=2), "stream of 2 batches in flight", "c2"),
    ],
)
def test_a_load_is_described_word_for_word(load, described, level):
    assert load.describe() == described
    assert load.level() == level


def test_point_keys_tell_closed_from_open_loads_and_repeats():
    closed = point_key("t", "m", "serving_default", "float", 4, LoadInfo("closed", concurrency=8), 0)
    opened = point_key("t", "m", "serving_default", "float", 4, LoadInfo("open", rate=50.0, arrival="poisson"), 1)
    assert closed == "t|m|serving_default|float|b4|closed|c8|#0"
    assert opened == "t|m|serving_default|float|b4|open|r50-poisson|#1"
    assert PointId("t", "m", "serving_default", "float", 4, LoadInfo("closed", concurrency=8)).key == closed


def test_a_point_id_is_twelve_hex_digits_and_with_notes_keeps_the_old_ones():
    point = make_point("a", "cpu", 1, latency_us=1_000)
    assert len(point.id) == 12 and int(point.id, 16) >= 0
    noted = point.with_notes("first").with_notes("second", "third")
    assert noted.notes[-3:] == ("first", "second", "third")
    assert noted.notes[: len(point.notes)] == point.notes


def _energy(**figures: float | None) -> EnergyView:
    return EnergyView(seconds=10.0, **figures)


def test_watts_per_device_both_and_above_idle():
    view = _energy(gpu_watts_mean=200.0, gpu_idle_watts=50.0, cpu_watts_mean=80.0, cpu_idle_watts=30.0)
    assert view.watts("gpu") == 200.0 and view.watts("cpu") == 80.0
    assert view.watts() == 280.0
    assert view.watts("gpu", above_idle=True) == 150.0
    assert view.watts(above_idle=True) == 200.0  # (200 - 50) + (80 - 30)
    assert _energy(cpu_watts_mean=80.0).watts("cpu", above_idle=True) is None  # idle not measured
    assert _energy(cpu_watts_mean=80.0).watts("gpu") is None


def test_joules_per_item_is_watts_over_items_per_second():
    view = _energy(cpu_watts_mean=80.0, cpu_idle_watts=30.0)
    assert view.joules_per_item(40.0) == 2.0  # 80 W / 40 images/s
    assert view.joules_per_item(40.0, above_idle=True) == 1.25  # (80 - 30) W / 40 images/s
    assert view.joules_per_item(0.0) is None and view.joules_per_item(-1.0) is None
    assert _energy().joules_per_item(40.0) is None


def test_energy_is_described_per_device_with_its_idle():
    both = _energy(gpu_watts_mean=212.34, gpu_idle_watts=55.55, cpu_watts_mean=80.0)
    assert both.describe() == "GPU 212.3 W (idle 55.5 W), CPU 80.0 W"
    assert _energy(notes=("RAPL is not readable here",)).describe() == "RAPL is not readable here"
    assert _energy().describe() == NOT_MEASURED
