"""The error to expect of a prediction, on a small made-up calibration: which held-out errors it is
taken over, their 10th-90th percentiles, the out-of-sample and copy lines, and how it prints and saves.

The shipped tables' figures are checked in tests/test_predict_out_of_sample.py; here the calibration
(its devices, held-out errors and scored out-of-sample tables) is stood in by a handful of figures,
so every percentile is worked out by hand: statistics.quantiles(method="inclusive") interpolates
linearly between the closest ranks at (n - 1) · q (the Python docs' "inclusive" method, as numpy's
default percentile does).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import serve_bench.predict._expected as expected
from serve_bench.predict import Device, Observation
from serve_bench.predict._expected import CopyCheck, ExpectedError, Interval, OutOfSample, expected_error
from serve_bench.predict._published import HeldOut, LeaveOneOut


def _device(name: str, architecture: str, gen: int = 4) -> Device:
    return Device(name, name.upper(), 10.0, 20.0, 40.0, 500.0, 16.0, gen, 16, architecture=architecture)


DEVICES = {
    d.id: d
    for d in (
        _device("v1", "Volta", 3),
        _device("t1", "Turing", 3),
        _device("a1", "Ampere"),
        _device("a2", "Ampere"),
        _device("h1", "Hopper", 5),
    )
}


def _held(model: str, device: str, errors: tuple[float, ...], gain: float) -> HeldOut:
    return HeldOut(model, device, 0.0, 0.0, gain, errors)


def _loo(left_out: str, *held: HeldOut) -> LeaveOneOut:
    return LeaveOneOut("fp32", left_out, held, 0.0, 0.0, 0.0, 0.0)


# the calibration's held-out errors: a1 and a2 (Ampere) and v1 (Volta) left out in turn, then model m2
CALIBRATION = SimpleNamespace(
    device_out=_loo(
        "device",
        _held("m", "a1", (0.1, -0.2), 0.05),
        _held("m", "v1", (0.5,), 0.3),
        _held("m", "a2", (0.3,), -0.1),
    ),
    model_out=_loo("model", _held("m2", "a1", (-0.4,), 0.2)),
)


def _scored(
    table: str, tables: str, device: str, precision: str, errors: tuple[float, ...], gain: float, rate: float | None
) -> SimpleNamespace:
    """What ``score()`` gives of one out-of-sample (table, model, device, precision)."""
    return SimpleNamespace(
        table=SimpleNamespace(name=table, tables=tables, served=rate is not None),
        device=device,
        precision=precision,
        errors=errors,
        gain_error=gain,
        served_transfer_gbs=lambda: rate,
    )


SCORED = (
    _scored("mx", "tensorflow", "a2", "fp32", (0.4,), 0.1, None),
    _scored("mx", "tensorflow", "a1", "tf32", (0.2, -0.1), -0.3, None),
    _scored("amx", "tensorflow", "a2", "tf32", (0.0,), 0.0, None),
    _scored("mx", "tensorflow", "a1", "mixed", (0.9,), 0.9, None),
    _scored("mx", "tensorflow", "t1", "mixed", (-0.5,), -0.5, None),
    _scored("triton-tf-trt", "tensorrt", "t1", "mixed", (2.0,), 0.2, 0.5),
    _scored("mlserver", "tensorrt", "a1", "mixed", (3.0,), 0.3, 0.8),
    _scored("triton-tf-trt", "tensorrt", "t1", "mixed", (2.5,), 0.25, 0.6),
)


@pytest.fixture
def made_up(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The made-up calibration in place of the shipped one; the calls to it, logged."""
    asked: list[tuple[str, ...]] = []

    def calibration(klass: str, tables: str) -> SimpleNamespace:
        asked.append(("calibration", klass, tables))
        return CALIBRATION

    def published(tables: str) -> tuple[Observation, ...]:
        asked.append(("published", tables))
        return tuple(Observation(d, "fp32", 1, 1.0) for d in ("v1", "a2", "a1", "a2"))

    monkeypatch.setattr(expected, "device_table", lambda: DEVICES)
    monkeypatch.setattr(expected, "score", lambda: SCORED)
    monkeypatch.setattr(expected, "calibration", calibration)
    monkeypatch.setattr(expected, "published_observations", published)
    return asked


def test_a_device_gets_the_held_out_errors_of_the_nearest_architecture_from_both_fits(made_up):
    """An H100-like device (Hopper, PCIe 5 x16), tf32 (the fp32 class) on tensorflow's tables, measured on
    a1, a2 (Ampere) and v1 (Volta): Ampere is nearest (8.0 to 9.0). Its held-out images/s errors, device
    out (a1: .1, -.2; a2: .3) and model out (a1: -.4): sorted -.4 -.2 .1 .3, p10 at rank 0.3: -.4 + .3 × .2
    = -.34, p90 at 2.7: .1 + .7 × .2 = .24. Gains .05, -.1, .2: p10 at 0.2: -.1 + .2 × .15 = -.07, p90 at
    1.8: .05 + .8 × .15 = .17. No out-of-sample row of Hopper: Ampere's at the fp32 class, a2 .4 (gain
    .1), a1 .2 -.1 (-.3), a2 0 (0) of tables mx and amx: sorted -.1 0 .2 .4, p10 -.1 + .3 × .1 = -.07,
    p90 .2 + .7 × .2 = .34; gains -.3 0 .1: p10 -.3 + .2 × .3 = -.24, p90 0 + .8 × .1 = .08."""
    e = expected_error(DEVICES["h1"], "tf32", "tensorflow")
    assert made_up == [("published", "tensorflow"), ("calibration", "fp32", "tensorflow")]
    assert (e.tables, e.architecture, e.nearest, e.covered) == ("tensorflow", "Hopper", "Ampere", False)
    assert (e.held_out, e.left_out) == (("a1", "a2"), ("device", "model"))
    assert e.images_per_s == Interval(pytest.approx(-0.34), pytest.approx(0.24), 4)
    assert e.gain == Interval(pytest.approx(-0.07), pytest.approx(0.17), 3)
    assert e.out_of_sample == OutOfSample(
        ("amx", "mx"),
        ("a1", "a2"),
        Interval(pytest.approx(-0.07), pytest.approx(0.34), 4),
        Interval(pytest.approx(-0.24), pytest.approx(0.08), 3),
    )


def test_the_out_of_sample_rows_are_the_devices_own_architectures_first(made_up, monkeypatch):
    """A Turing device at mixed on tensorflow: mx's t1 row is Turing's own (though Ampere is the nearest
    calibrated architecture: 0.5 from both Volta and Ampere, the newer taken); a Volta device at mixed
    has no row of Volta, nor of its nearest (itself): none. A calibration without a model-left-out fit
    gives the device-left-out errors alone."""
    turing = expected_error(DEVICES["t1"], "mixed", "tensorflow")
    assert made_up[-1] == ("calibration", "mixed", "tensorflow")
    assert turing.nearest == "Ampere" and turing.out_of_sample is not None
    assert (turing.out_of_sample.tables, turing.out_of_sample.devices) == (("mx",), ("t1",))
    assert turing.out_of_sample.images_per_s == Interval(-0.5, -0.5, 1)
    volta = expected_error(DEVICES["v1"], "mixed", "tensorflow")
    assert (volta.nearest, volta.covered, volta.held_out, volta.out_of_sample) == ("Volta", True, ("v1",), None)
    assert volta.images_per_s == Interval(0.5, 0.5, 1) and volta.gain == Interval(0.3, 0.3, 1)
    alone = SimpleNamespace(device_out=CALIBRATION.device_out, model_out=None)
    monkeypatch.setattr(expected, "calibration", lambda klass, tables: alone)
    a1 = expected_error(DEVICES["a1"], "fp32", "tensorflow")
    assert (a1.left_out, a1.images_per_s.count, a1.gain.count) == (("device",), 3, 2)


def test_the_copy_is_checked_against_every_served_tables_rate(made_up, monkeypatch):
    """Served rows arrived at .5, .8 and .6 GB/s: lowest .5, highest .8; the tables sorted, the devices
    in the order first served (t1, a1). PCIe 5 x16: 16 × 3.938 = 63.008 GB/s; .8 is under half of it:
    refuted. No served row: unvalidated."""
    copy = expected_error(DEVICES["h1"], "tf32", "tensorflow").copy
    assert copy == CopyCheck(pytest.approx(63.008), (0.5, 0.8), ("mlserver", "triton-tf-trt"), ("t1", "a1"))
    assert copy.refuted
    monkeypatch.setattr(expected, "score", lambda: SCORED[:5])
    assert expected_error(DEVICES["v1"], "fp32", "tensorflow").copy == CopyCheck(
        pytest.approx(16 * 0.985), None, (), ()
    )


def test_a_copy_is_refuted_only_by_rates_all_under_half_the_pcie_rate():
    assert CopyCheck(10.0, (1.0, 4.99), ("t",), ("d",)).refuted
    assert not CopyCheck(10.0, (1.0, 5.0), ("t",), ("d",)).refuted
    assert not CopyCheck(10.0, None, (), ()).refuted


def test_an_interval_is_the_10th_and_90th_percentile_or_the_one_error():
    """Ten errors 0.0 ... 0.9: p10 at rank 0.9, 0.09; p90 at 8.1, 0.81. One error: itself, as one figure."""
    ten = Interval.of([i / 10 for i in (9, 0, 1, 2, 3, 4, 5, 6, 7, 8)])
    assert (ten.low, ten.high, ten.count) == (pytest.approx(0.09), pytest.approx(0.81), 10)
    assert ten.describe() == "+9% to +81%" and ten.to_json() == {"p10": 0.09, "p90": 0.81, "count": 10}
    assert Interval.of([-0.25]) == Interval(-0.25, -0.25, 1) and Interval(-0.25, -0.25, 1).describe() == "-25%"
    assert Interval(-0.123456, 0.654321, 2).to_json() == {"p10": -0.1235, "p90": 0.6543, "count": 2}


def _error(**changes: object) -> ExpectedError:
    """The H100-like device's expected error, as test_a_device_gets_... works it out."""
    fields: dict[str, object] = dict(
        tables="tensorflow",
        architecture="Hopper",
        nearest="Ampere",
        held_out=("a1", "a2"),
        left_out=("device", "model"),
        images_per_s=Interval(-0.34, 0.24, 4),
        gain=Interval(-0.07, 0.17, 3),
        out_of_sample=OutOfSample(("amx", "mx"), ("a1", "a2"), Interval(-0.07, 0.34, 4), Interval(-0.24, 0.08, 3)),
        copy=CopyCheck(63.008, (0.5, 0.8), ("mlserver", "triton-tf-trt"), ("t1", "a1")),
    )
    fields.update(changes)
    return ExpectedError(**fields)  # type: ignore[arg-type]


def test_the_expected_error_prints_in_lines_of_at_most_76_columns():
    """The head wrapped at 76 columns, hyphenated words kept whole (held-out, triton-tf-trt); the copy
    at 16 × 3.938 = 63.0 GB/s against .5-.8 GB/s: 63.008 / .8 = 79 to 63.008 / .5 = 126 times slower."""
    assert _error().lines() == [
        "expected error, predicted/published - 1 (10th-90th percentile of the",
        "held-out errors of Ampere, the nearest calibrated architecture: a1 a2,",
        "device or model left out of the fit):",
        "  images/s -34% to +24%, batching gain -7% to +17%",
        "no table of this architecture (Hopper): expect more",
        "on tables no fit saw (amx, mx: a1 a2):",
        "  images/s -7% to +34%, batching gain -24% to +8%",
        "the copy, at PCIe's 63.0 GB/s: refuted by served tables (mlserver,",
        "triton-tf-trt: t1 a1), whose images arrived at 0.50-0.80 GB/s (79-126x",
        "slower, over HTTP on the same host): a served request's transfer costs far",
        "more than this copy",
    ]
    covered = _error(
        tables="tensorrt",
        architecture="Ampere",
        left_out=("device",),
        out_of_sample=None,
        copy=CopyCheck(31.504, (10.0, 20.0), ("t",), ("a1",)),
    )
    assert covered.covered
    assert covered.lines()[:2] == [
        "expected error, predicted/published - 1 (10th-90th percentile of the",
        "held-out errors of Ampere: a1 a2, device left out of the fit):",
    ]
    assert covered.lines()[3:5] == [
        "no model left out (the tensorrt tables have one model): expect more",
        "the copy, at PCIe's 31.5 GB/s: checked by served tables (t: a1), whose",
    ]
    # "held-out errors of Blackwell, the nearest calibrated architecture: a1 a2," is 73 columns: within 76
    assert _error(nearest="Blackwell").lines()[1] == (
        "held-out errors of Blackwell, the nearest calibrated architecture: a1 a2,"
    )
    unserved = _error(copy=CopyCheck(15.76, None, (), ()))
    assert unserved.copy_sentence() == "the copy, at PCIe's 15.8 GB/s, is unvalidated until a served table validates it"
    assert all(len(line) <= 76 for e in (_error(), covered, unserved) for line in e.lines())


def test_the_expected_error_is_saved_with_its_figures_rounded():
    assert _error().to_json() == {
        "runtime": "tensorflow",
        "architecture": "Hopper",
        "nearest_calibrated": "Ampere",
        "covered": False,
        "held_out": ["a1", "a2"],
        "left_out": ["device", "model"],
        "percentiles": [10, 90],
        "images_per_s": {"p10": -0.34, "p90": 0.24, "count": 4},
        "gain": {"p10": -0.07, "p90": 0.17, "count": 3},
        "out_of_sample": {
            "tables": ["amx", "mx"],
            "devices": ["a1", "a2"],
            "images_per_s": {"p10": -0.07, "p90": 0.34, "count": 4},
            "gain": {"p10": -0.24, "p90": 0.08, "count": 3},
        },
        "copy": {
            "pcie_gbs": 63.01,
            "served_gbs": [0.5, 0.8],
            "tables": ["mlserver", "triton-tf-trt"],
            "devices": ["t1", "a1"],
            "refuted": True,
        },
    }
    unserved = _error(out_of_sample=None, copy=CopyCheck(15.7644, (0.12345, 0.4), ("t",), ("d",)))
    assert unserved.to_json()["out_of_sample"] is None
    assert unserved.to_json()["copy"] == {
        "pcie_gbs": 15.76,
        "served_gbs": [0.123, 0.4],
        "tables": ["t"],
        "devices": ["d"],
        "refuted": True,
    }
    assert _error(copy=CopyCheck(15.76, None, (), ())).to_json()["copy"]["served_gbs"] is None
