"""The error to expect of one device's prediction (issue 32, item 3).

Not a pooled median read as ±: the signed held-out errors (predicted / published - 1) of the
calibrated architecture nearest the device, from the fits that left each of its devices (and, where
the tables hold several, each model) out, shown as their 10th-90th percentiles so a skew stays
visible. A device whose own architecture no table covers gets the nearest one's interval and the
warning that it should expect more. Beside it: how the same fit did on published tables no fit has
used (``_outofsample``), and what a served table says of the copy term.
"""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from serve_bench.predict._devices import GENERATIONS, Device, device_table, precision_class
from serve_bench.predict._model import PCIE_GBS_PER_LANE
from serve_bench.predict._outofsample import Scored, score
from serve_bench.predict._published import calibration, published_observations

__all__ = ["PERCENTILES", "CopyCheck", "ExpectedError", "Interval", "expected_error", "nearest_architecture"]

PERCENTILES = (10, 90)


@dataclass(frozen=True)
class Interval:
    """The 10th and 90th percentiles of signed relative errors, and how many errors they were taken over."""

    low: float
    high: float
    count: int

    @classmethod
    def of(cls, errors: Sequence[float]) -> Interval:
        values = sorted(errors)
        if len(values) < 2:
            return cls(values[0], values[0], len(values))
        cuts = statistics.quantiles(values, n=100, method="inclusive")
        return cls(cuts[PERCENTILES[0] - 1], cuts[PERCENTILES[1] - 1], len(values))

    def describe(self) -> str:
        """``-18% to +25%``; one figure where there was one error."""
        if self.count == 1:
            return f"{self.low:+.0%}"
        return f"{self.low:+.0%} to {self.high:+.0%}"

    def to_json(self) -> dict[str, Any]:
        return {"p10": round(self.low, 4), "p90": round(self.high, 4), "count": self.count}


@dataclass(frozen=True)
class OutOfSample:
    """How the same fit did on tables no fit has used, for the device's (or the nearest) architecture."""

    tables: tuple[str, ...]
    devices: tuple[str, ...]
    images_per_s: Interval
    gain: Interval

    def to_json(self) -> dict[str, Any]:
        return {
            "tables": list(self.tables),
            "devices": list(self.devices),
            "images_per_s": self.images_per_s.to_json(),
            "gain": self.gain.to_json(),
        }


@dataclass(frozen=True)
class CopyCheck:
    """What served tables say of the copy term: the rate their images arrived at, against the device's PCIe."""

    pcie_gbs: float  # the rate a prediction copies at (the device's lanes)
    served_gbs: tuple[float, float] | None  # lowest and highest served rate; None: no served table
    tables: tuple[str, ...]
    devices: tuple[str, ...]

    @property
    def refuted(self) -> bool:
        """Every served table's images arrived at under half the rate the copy term assumes."""
        return self.served_gbs is not None and self.served_gbs[1] < self.pcie_gbs / 2

    def to_json(self) -> dict[str, Any]:
        served = None if self.served_gbs is None else [round(v, 3) for v in self.served_gbs]
        return {
            "pcie_gbs": round(self.pcie_gbs, 2),
            "served_gbs": served,
            "tables": list(self.tables),
            "devices": list(self.devices),
            "refuted": self.refuted,
        }


@dataclass(frozen=True)
class ExpectedError:
    """The error to expect of a prediction for one device, precision class and calibration (``--tables``)."""

    tables: str
    architecture: str  # the device's
    nearest: str  # the nearest architecture the calibration's tables cover (the device's own where covered)
    held_out: tuple[str, ...]  # the tables' devices of that architecture, each left out of the fit in turn
    left_out: tuple[str, ...]  # what was left out: ("device", "model") or ("device",)
    images_per_s: Interval
    gain: Interval  # of the batching gain at the best batch, one error per (model, device)
    out_of_sample: OutOfSample | None
    copy: CopyCheck

    @property
    def covered(self) -> bool:
        """Whether a table of the calibration measured a device of this architecture."""
        return self.architecture == self.nearest

    def lines(self) -> list[str]:
        """What ``serve-bench predict`` prints of it, each line within 76 columns."""
        nearest = self.nearest if self.covered else f"{self.nearest}, the nearest calibrated architecture"
        head = (
            f"expected error, predicted/published - 1 ({PERCENTILES[0]}th-{PERCENTILES[1]}th percentile of the "
            f"held-out errors of {nearest}: {' '.join(self.held_out)}, {' or '.join(self.left_out)} left out "
            "of the fit):"
        )
        out = [
            *textwrap.wrap(head, 76, break_on_hyphens=False),
            f"  images/s {self.images_per_s.describe()}, batching gain {self.gain.describe()}",
        ]
        if not self.covered:
            out.append(f"no table of this architecture ({self.architecture}): expect more")
        if "model" not in self.left_out:
            out.append(f"no model left out (the {self.tables} tables have one model): expect more")
        if self.out_of_sample is not None:
            o = self.out_of_sample
            out += [
                f"on tables no fit saw ({', '.join(o.tables)}: {' '.join(o.devices)}):",
                f"  images/s {o.images_per_s.describe()}, batching gain {o.gain.describe()}",
            ]
        return out + textwrap.wrap(self.copy_sentence(), 76, break_on_hyphens=False)

    def copy_sentence(self) -> str:
        """What the served tables say of the copy term (unvalidated where there are none)."""
        c = self.copy
        if c.served_gbs is None:
            return f"the copy, at PCIe's {c.pcie_gbs:.1f} GB/s, is unvalidated until a served table validates it"
        low, high = c.served_gbs
        verdict = "refuted" if c.refuted else "checked"
        return (
            f"the copy, at PCIe's {c.pcie_gbs:.1f} GB/s: {verdict} by served tables ({', '.join(c.tables)}: "
            f"{' '.join(c.devices)}), whose images arrived at {low:.2f}-{high:.2f} GB/s "
            f"({c.pcie_gbs / high:.0f}-{c.pcie_gbs / low:.0f}x slower, over HTTP on the same host): a served "
            "request's transfer costs far more than this copy"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "runtime": self.tables,  # the file's key since it was written (report reads it)
            "architecture": self.architecture,
            "nearest_calibrated": self.nearest,
            "covered": self.covered,
            "held_out": list(self.held_out),
            "left_out": list(self.left_out),
            "percentiles": list(PERCENTILES),
            "images_per_s": self.images_per_s.to_json(),
            "gain": self.gain.to_json(),
            "out_of_sample": None if self.out_of_sample is None else self.out_of_sample.to_json(),
            "copy": self.copy.to_json(),
        }


def nearest_architecture(architecture: str, covered: Sequence[str]) -> str:
    """The architecture of ``covered`` nearest ``architecture`` by compute capability (GENERATIONS); itself
    when covered, the newer of two equally near."""
    if architecture in covered:
        return architecture
    return min(covered, key=lambda a: (abs(GENERATIONS[a] - GENERATIONS[architecture]), -GENERATIONS[a]))


def _out_of_sample(device: Device, nearest: str, klass: str, tables: str) -> OutOfSample | None:
    devices = device_table()
    scored = [s for s in score() if s.table.tables == tables and precision_class(s.precision) == klass]
    for architecture in (device.architecture, nearest):
        chosen = [s for s in scored if devices[s.device].architecture == architecture]
        if chosen:
            return OutOfSample(
                tuple(sorted({s.table.name for s in chosen})),
                tuple(sorted({s.device for s in chosen})),
                Interval.of([e for s in chosen for e in s.errors]),
                Interval.of([s.gain_error for s in chosen]),
            )
    return None


def _copy_check(device: Device) -> CopyCheck:
    served: list[tuple[Scored, float]] = []
    for s in score():
        rate = s.served_transfer_gbs()
        if rate is not None:
            served.append((s, rate))
    pcie = PCIE_GBS_PER_LANE[device.pcie_gen] * device.pcie_lanes
    if not served:
        return CopyCheck(pcie, None, (), ())
    rates = [r for _, r in served]
    return CopyCheck(
        pcie,
        (min(rates), max(rates)),
        tuple(sorted({s.table.name for s, _ in served})),
        tuple(dict.fromkeys(s.device for s, _ in served)),
    )


def expected_error(device: Device, precision: str, tables: str) -> ExpectedError:
    """The held-out errors of the calibration's architecture nearest ``device``, at ``precision``'s class."""
    klass = precision_class(precision)
    devices = device_table()
    measured = sorted({o.device for o in published_observations(tables)})
    nearest = nearest_architecture(device.architecture, sorted({devices[d].architecture for d in measured}))
    fitted = calibration(klass, tables)
    runs = [fitted.device_out, *([fitted.model_out] if fitted.model_out is not None else [])]
    held = [h for run in runs for h in run.held if devices[h.device].architecture == nearest]
    return ExpectedError(
        tables,
        device.architecture,
        nearest,
        tuple(d for d in measured if devices[d].architecture == nearest),
        tuple(run.left_out for run in runs),
        Interval.of([e for h in held for e in h.errors]),
        Interval.of([h.gain_error for h in held]),
        _out_of_sample(device, nearest, klass, tables),
        _copy_check(device),
    )
