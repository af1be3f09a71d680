"""Runtimes, one record each: what runs the model, where its copy lives, what it needs and accepts.

``RECORDS`` holds the runtimes that have moved here (the jax runtime first); ``record(name)`` finds
one. Nothing here imports a runtime's package until a runner is made.
"""

from __future__ import annotations

from serve_bench.runtimes._jax import JAX, JaxRunner, features_in_child, keras_on_jax, write_copy, write_random_copy
from serve_bench.runtimes._record import RuntimeRecord

__all__ = [
    "JAX",
    "RECORDS",
    "JaxRunner",
    "RuntimeRecord",
    "features_in_child",
    "keras_on_jax",
    "record",
    "write_copy",
    "write_random_copy",
]

RECORDS: dict[str, RuntimeRecord] = {JAX.name: JAX}


def record(name: str) -> RuntimeRecord | None:
    """The record of runtime ``name``, or None for one that keeps its facts in export/ still."""
    return RECORDS.get(name)
