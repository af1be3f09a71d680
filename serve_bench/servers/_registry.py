"""The server kinds, by their one name: what sweep, tune, demo and report look up.

    kind("triton").defaults()            # every knob at Triton's own default
    kind("triton").config({"max_batch_size": 8})   # the configuration, checked
    kind("triton").start(values, models_dir, model, runtime, work_dir, timeout)   # its process

A new kind is a module of its own beside these (its knobs, configuration, writer and process), one entry here, and its
name in serve_bench/_server_facts.py: in V2 if it speaks the Open Inference Protocol (else it gets no HTTP URL and
the client does not know it by name), in TF_SERVING_PAGE if it writes TF Serving's metrics page.
"""

from __future__ import annotations

from serve_bench.errors import UserError
from serve_bench.servers._kind import Knob, ServerKind
from serve_bench.servers._local import LOCAL
from serve_bench.servers._mlserver import MLSERVER
from serve_bench.servers._tfserving import TFSERVING
from serve_bench.servers._triton import TRITON

__all__ = ["KINDS", "LAUNCHABLE", "UnknownKind", "kind", "kind_knob"]

KINDS: dict[str, ServerKind] = {k.name: k for k in (LOCAL, TFSERVING, TRITON, MLSERVER)}
LAUNCHABLE = tuple(name for name, k in KINDS.items() if k.start is not None)  # the kinds serve-bench starts


class UnknownKind(UserError):
    """A server kind serve-bench does not know (one line listing those it knows)."""


def kind(name: str, among: tuple[str, ...] = ()) -> ServerKind:
    """The kind named ``name``, among ``among`` (default: every kind); one line naming them otherwise."""
    names = among or tuple(KINDS)
    if name not in names:
        raise UnknownKind(f"unknown server kind {name!r}; the kinds are {', '.join(names)}")
    return KINDS[name]


def kind_knob(server: ServerKind, knob: str) -> Knob:
    """``server``'s knob ``knob``; one line saying whose knob it is when it is another kind's."""
    if knob in server.knob_names:
        return server.knob(knob)
    others = [k.name for k in KINDS.values() if k is not server and knob in k.knob_names]
    whose = f" (it is {' and '.join(others)}'s)" if others else ""
    raise UserError(f"{knob} is not a {server.name} knob{whose}; {server.name} takes {', '.join(server.knob_names)}")
