"""The one validator of a point's settings, load and batch size, used by the CLI, the sweep and tune specs
and ``PointPlan`` (which checks its batch size and load where it is built, and nowhere else).

Each check raises ``InvalidValue`` naming the library's parameter (``min_duration_s``,
``rate``); the CLI and the spec parser rename it into their flag or key.
"""

from __future__ import annotations

import math

from serve_bench.errors import InvalidValue
from serve_bench.load._generators import PointSettings
from serve_bench.load._schedule import ARRIVALS, MAX_RATE
from serve_bench.stats import LoadInfo

__all__ = [
    "MAX_TIMEOUT_S",
    "MAX_WINDOWS",
    "check_batch_size",
    "check_load",
    "check_seed",
    "check_settings",
    "check_timeout",
    "positive_int",
    "positive_number",
]

# A per-request deadline past a day measures nothing a shorter one would not; past ~7e9 s gRPC's deadline
# (now + timeout, in int64 nanoseconds) overflows and every call fails DEADLINE_EXCEEDED at once.
MAX_TIMEOUT_S = 86_400.0
# Each window needs MIN_WINDOW_REQUESTS answers and the stability check keeps an entry per window: a
# billion windows cost gigabytes and minutes per check, and no point has more than a few hundred slices.
MAX_WINDOWS = 1000


def positive_number(name: str, value: object, *, allow_zero: bool = False) -> float:
    """A finite number > 0 (>= 0 with ``allow_zero``): NaN and infinities are refused."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number) and (number > 0 or (allow_zero and number == 0)):
            return number
    raise InvalidValue(name, value, "a finite number >= 0" if allow_zero else "a finite number > 0")


def positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidValue(name, value, f"a whole number >= {minimum}")
    return value


def at_most(name: str, value: object, number: float, most: float, reason: str) -> float:
    """``number`` (``value`` already checked) when it is at most ``most``; else InvalidValue "at most <reason>"."""
    if number > most:
        raise InvalidValue(name, value, f"at most {reason}")
    return number


def check_batch_size(batch_size: object) -> int:
    return positive_int("batch_size", batch_size)


def check_seed(seed: object) -> int:
    """A whole number >= 0 (numpy's generators take no negative seed)."""
    return positive_int("seed", seed, minimum=0)


def check_timeout(name: str, value: object) -> float:
    """A per-request deadline: a finite number of seconds > 0, at most ``MAX_TIMEOUT_S``."""
    seconds = positive_number(name, value)
    reason = f"{MAX_TIMEOUT_S:g} s (a day): past ~7e9 s gRPC's deadline overflows and every request fails"
    return at_most(name, value, seconds, MAX_TIMEOUT_S, reason + " DEADLINE_EXCEEDED")


def check_settings(settings: PointSettings) -> PointSettings:
    """Refuse durations, counts and tolerances that cannot make a measurement; return ``settings``."""
    positive_number("warmup_s", settings.warmup_s, allow_zero=True)
    positive_number("min_duration_s", settings.min_duration_s)
    positive_int("min_requests", settings.min_requests)
    windows = positive_int("windows", settings.windows)
    reason = f"{MAX_WINDOWS}: each window needs at least 10 answered requests to judge stability, and the check"
    at_most("windows", settings.windows, windows, MAX_WINDOWS, reason + " keeps an entry per window")
    positive_number("tolerance", settings.tolerance)
    positive_number("max_duration_s", settings.max_duration_s)
    check_timeout("timeout_s", settings.timeout_s)
    positive_int("safety_cap", settings.safety_cap)
    positive_number("drain_s", settings.drain_s, allow_zero=True)
    if settings.until_stable and settings.max_duration_s < settings.min_duration_s:
        raise InvalidValue(
            "max_duration_s",
            settings.max_duration_s,
            f"at least min_duration_s ({settings.min_duration_s:g}) when running until stable",
        )
    return settings


def check_load(load: LoadInfo) -> LoadInfo:
    """Closed loop needs concurrency >= 1; open loop a rate in (0, MAX_RATE] and a known arrival."""
    if load.mode == "open":
        reason = f"{MAX_RATE:g} requests/s: no generator gets near that (one process sends ~10^4 requests/s,"
        reason += " benchmarks/README.md), so give a rate it can send"
        at_most("rate", load.rate, positive_number("rate", load.rate), MAX_RATE, reason)
        if load.arrival not in ARRIVALS:
            raise InvalidValue("arrival", load.arrival, f"one of {', '.join(ARRIVALS)}")
    elif load.mode == "closed":
        positive_int("concurrency", load.concurrency)
    else:
        raise InvalidValue("mode", load.mode, "closed or open")
    positive_int("processes", load.processes)
    return load
