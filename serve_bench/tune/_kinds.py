"""What differs between the servers tune can search: their knobs, how a [space] value is read, how a
configuration is built and checked, the baselines, the coordinate search's order and the files written.

    tfserving  [server] kind local | compose | command: batching_parameters.txt and flags (_config.py)
    triton     [server] kind triton: config.pbtxt (_v2config.py)
    mlserver   [server] kind mlserver: model-settings.json, and settings.json for the workers (_v2config.py)

The search (_search.py, _bayes.py) works on knob positions in the spec's lists and only calls
``Family.config_of``; the answer only reads ``ServerConfig.knobs``; nothing else needs to know the server.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from serve_bench import servers
from serve_bench.errors import UserError
from serve_bench.stats import BEST_BATCHING_FILE, BEST_MLSERVER_SETTINGS_FILE, BEST_TRITON_CONFIG_FILE
from serve_bench.sweep import typed_list as _list
from serve_bench.tune._config import KNOBS, RECIPE_ORDER, SIZES_WORDS, ServerConfig, TuneConfig, config_of
from serve_bench.tune._v2config import (
    MLSERVER_KNOBS,
    TRITON_KNOBS,
    MLServerConfig,
    TritonConfig,
    mlserver_config_of,
    triton_config_of,
)

__all__ = ["FAMILIES", "Family", "family_of"]


_INT64_MAX = 2**63 - 1  # TF Serving reads its batching knobs as Int64Value; Triton and MLServer less


@dataclass(frozen=True)
class Family:
    name: str
    label: str  # as a sentence names the server
    knobs: tuple[str, ...]
    value_types: Mapping[str, Any]  # knob -> the type of one value; "list" for list-valued knobs
    config_of: Callable[[dict[str, Any], str], ServerConfig]
    config_type: type[Any]
    baselines: Mapping[str, ServerConfig]
    recipe: tuple[str, ...]  # the coordinate search's knob order, after the spec's own
    config_file: str  # the configuration's file in results/<run>/configs/<id>/
    best_file: str  # the winner's file in results/<run>/
    sizes_words: tuple[str, ...] = ("none",)  # the words a list-valued knob takes besides lists of sizes

    def parse_values(self, knob: str, values: list[Any], source: str) -> tuple[Any, ...]:
        """One [space] knob's values, typed; list-valued knobs take lists (or "none") as values."""
        where = f"space.{knob}"
        kind = self.value_types[knob]
        for number in (v for value in values for v in (value if isinstance(value, list) else [value])):
            if isinstance(number, int) and not isinstance(number, bool) and abs(number) > _INT64_MAX:
                raise UserError(
                    f"{source}: {where}: {number} is past int64 (at most {_INT64_MAX}), which no server's "
                    "configuration can hold; give a smaller value"
                )
        if kind == "list":
            for value in values:
                sizes = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                if not sizes and value not in self.sizes_words:
                    named = " or ".join(f'"{word}"' for word in self.sizes_words)
                    raise UserError(f"{source}: {where}: each value must be {named} or a list of sizes, got {value!r}")
            return tuple(values)
        return _list(values, kind, where, source, positive=False)

    def config_from(self, data: Mapping[str, Any]) -> ServerConfig:
        """A configuration from its configs.jsonl record (``dataclasses.asdict``), for ``--resume``."""
        data = dict(data)
        if "allowed_batch_sizes" in data:  # TritonConfig makes its preferred sizes a tuple itself
            data["allowed_batch_sizes"] = tuple(data["allowed_batch_sizes"])
        config: ServerConfig = self.config_type(**data)
        return config

    def unknown_knob(self, knob: str, source: str) -> UserError:
        """The one-line error for a [space] key this server does not have: another server's knob says whose."""
        others = [f.label for f in FAMILIES.values() if f is not self and knob in f.knobs]
        if others:
            return UserError(
                f"{source}: [space] {knob!r} is {' and '.join(others)}'s knob, not {self.label}'s; "
                f"{self.label}'s knobs are {', '.join(self.knobs)}"
            )
        close = difflib.get_close_matches(knob, self.knobs, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return UserError(
            f"{source}: unknown key {knob!r} in [space]{hint}; {self.label}'s knobs are {', '.join(self.knobs)}"
        )


def _value_types(kind: str) -> dict[str, Any]:
    """The type of one [space] value of each of ``kind``'s knobs (its table in servers/), and the runtime."""
    types: dict[str, Any] = {"runtime": str}
    for knob in servers.kind(kind).knobs:
        types[knob.name] = "list" if knob.type is servers.SIZES else (int, float) if knob.type is float else knob.type
    return types


# TF Serving's: its BatchingParameters knobs that tune searches (servers/_tfserving.py), batching on or off, and
# the thread flags (whole numbers)
_TFSERVING_TYPES: dict[str, Any] = {knob: int for knob in KNOBS} | {"batching": bool}
_TFSERVING_TYPES.update({k: v for k, v in _value_types("tfserving").items() if k in KNOBS})

FAMILIES = {
    "tfserving": Family(
        "tfserving",
        "TF Serving",
        KNOBS,
        _TFSERVING_TYPES,
        config_of,
        TuneConfig,
        {"defaults": TuneConfig(), "no_batching": TuneConfig(batching=False)},
        RECIPE_ORDER,
        "batching_parameters.txt",
        BEST_BATCHING_FILE,
        SIZES_WORDS,  # _config.py: "powers_of_two" is tune's shorthand for TF Serving's allowed_batch_sizes
    ),
    "triton": Family(
        "triton",
        "Triton",
        TRITON_KNOBS,
        _value_types("triton"),
        triton_config_of,
        TritonConfig,
        # model_configuration.md's "Recommended Configuration Process" for the dynamic batcher: turn it on,
        # decide max_batch_size, then the delay; preferred sizes rarely; then instances (optimization.md)
        {"defaults": TritonConfig(), "no_batching": TritonConfig(dynamic_batching=False)},
        # the runtime first (the batcher is then tuned on it), then as declared
        ("runtime", *(k for k in TRITON_KNOBS if k != "runtime")),
        "config.pbtxt",
        BEST_TRITON_CONFIG_FILE,
    ),
    "mlserver": Family(
        "mlserver",
        "MLServer",
        MLSERVER_KNOBS,
        _value_types("mlserver"),
        mlserver_config_of,
        MLServerConfig,
        # MLServer's defaults do not batch (hooks.py:82-86): both baselines are the one configuration nobatch
        {"defaults": MLServerConfig(), "no_batching": MLServerConfig(max_batch_size=1)},
        # the runtime, then as declared: how many, how long to wait, how many workers
        ("runtime", *(k for k in MLSERVER_KNOBS if k != "runtime")),
        "model-settings.json",
        BEST_MLSERVER_SETTINGS_FILE,
    ),
}
assert all(set(f.recipe) == set(f.knobs) == set(f.value_types) for f in FAMILIES.values())

_BY_SERVER_KIND = {"local": "tfserving", "compose": "tfserving", "command": "tfserving"}


def family_of(server_kind: str) -> Family:
    """The family of a ``[server] kind``: local, compose and command restart TF Serving (or the local server)."""
    return FAMILIES[_BY_SERVER_KIND.get(server_kind, server_kind)]
