"""Checking TOML tables of a spec (sweep or tune): unknown keys, types, and the shared number checks.

Every message names the file and the key as the user wrote it, on one line.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from serve_bench.errors import InvalidValue, UserError
from serve_bench.load import positive_number

__all__ = ["check_keys", "checked", "typed", "typed_list"]

T = TypeVar("T")


def _nearest(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})"


def check_keys(table: Mapping[str, Any], allowed: Mapping[str, Any], where: str, source: str) -> None:
    """Refuse a key of ``table`` that is not in ``allowed``, suggesting the nearest one."""
    for key in table:
        if key not in allowed:
            raise UserError(f"{source}: unknown key {key!r} in {where}{_nearest(key, list(allowed))}")


def typed(value: Any, kind: Any, where: str, source: str) -> Any:
    """``value`` when it is a ``kind`` (a type or a tuple of types; booleans are not numbers)."""
    ok = isinstance(value, kind) and not (kind in (int, float, (int, float)) and isinstance(value, bool))
    if not ok:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise UserError(f"{source}: {where} must be {names}, got {value!r}")
    return value


def typed_list(value: Any, kind: Any, where: str, source: str, positive: bool = True) -> tuple[Any, ...]:
    """A list (or one value) of ``kind``; with ``positive`` every number must be finite and > 0."""
    if not isinstance(value, list):
        value = [value]
    items = tuple(typed(v, kind, f"{where}[{i}]", source) for i, v in enumerate(value))
    if positive:
        for i, item in enumerate(items):
            checked(positive_number, where, item, where=f"{where}[{i}]", source=source)
    return items


def checked(check: Callable[..., T], *args: Any, where: str, source: str) -> T:
    """``check(*args)``, its ``InvalidValue`` re-worded with the spec key ``where``."""
    try:
        return check(*args)
    except InvalidValue as exc:
        raise UserError(f"{source}: {exc.named(where)}") from None
