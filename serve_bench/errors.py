"""Errors that mean "the user asked for something that cannot be done".

The CLI prints these as one line and exits with status 2; they never carry a
traceback. Errors talking to a server live in ``serve_bench.client``.

Library code says what is wrong in its own terms (the parameter's Python name);
a front end (the CLI's flags, the sweep spec's keys) renames the parameter into
the words its user typed, with ``InvalidValue.named``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["InvalidValue", "Renamed", "Terminated", "UserError", "first_line", "interrupted_status", "say_renamed"]


def first_line(exc: BaseException) -> str:
    """An exception's first non-blank line (its type's name when it says nothing): a one-line reason."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Terminated(KeyboardInterrupt):
    """SIGTERM (what ``timeout``, a CI's cancel and ``docker stop`` send), raised by the CLI's handler where the
    command is, so that it unwinds as from Ctrl-C: the servers it launched stopped (they run in sessions of their
    own, so a signal to serve-bench's process group does not reach them), the points measured so far kept."""


def interrupted_status(exc: KeyboardInterrupt) -> int:
    """The exit status of a command stopped by a signal, as a shell reports one: 143 for SIGTERM, 130 for Ctrl-C."""
    return 143 if isinstance(exc, Terminated) else 130


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


# Each renamed name is pointed out once per process, however often it is typed.
_SAID: set[str] = set()


def say_renamed(old: str, new: str, where: str) -> None:
    """Tell the user, in one line on stderr, that ``old`` is now called ``new`` (once per process).

    ``where`` is what the name was typed into: a command (``serve-bench bench``) or a spec file.
    The old name keeps working; this line is the only difference.
    """
    line = f"{where}: {old} is now {new} ({old} still works for now)"
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


class Renamed(argparse.Action):
    """An old flag kept as an alias of its new name: stores into the new flag's ``dest`` and says the new name.

    Hidden from ``--help``, so each concept shows one flag: add it with ``help=argparse.SUPPRESS``
    and ``new="--new-name"``.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        say_renamed(option_string or self.option_strings[0], self.new, parser.prog)
        setattr(namespace, self.dest, values)
