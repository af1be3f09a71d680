"""Errors that mean "the user asked for something that cannot be done".

The CLI prints these as one line and exits with status 2; they never carry a
traceback. Errors talking to a server live in ``serve_bench.client``.

Library code says what is wrong in its own terms (the parameter's Python name);
a front end (the CLI's flags, the sweep spec's keys) renames the parameter into
the words its user typed, with ``InvalidValue.named``.
"""

from __future__ import annotations

__all__ = ["InvalidValue", "UserError"]


class UserError(Exception):
    """Bad input from the user: the message names the problem and what to do.

    ``parameter`` is the library parameter the problem is about, when there is one
    (``out``, ``force``): a front end adds the name its user knows it by (the CLI: the flag).
    """

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class InvalidValue(UserError):
    """One parameter's value is refused.

    ``name`` is the library's name for the parameter (``min_duration_s``, ``rate``),
    ``requirement`` what a valid value is ("a finite number > 0").
    """

    def __init__(self, name: str, value: object, requirement: str) -> None:
        self.name = name
        self.value = value
        self.requirement = requirement
        super().__init__(f"{name} must be {requirement}, got {_show(value)}", parameter=name)

    def named(self, label: str) -> UserError:
        """The same refusal with the parameter called ``label`` (a flag, a spec key)."""
        return UserError(f"{label} must be {self.requirement}, got {_show(self.value)}")


def _show(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value)
