"""Each package's public API is what its __init__ lists in __all__ (as httpx's test_exported_members.py).

A name a package binds publicly but leaves out of __all__, or lists but does not bind, fails here;
so does a public name defined in another package (re-exports belong to their owner).
"""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "serve_bench"
PACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
# top-level modules whose names other code imports
MODULES = ["catalogue", "cli", "codec", "errors", "media"]


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }  # `from __future__ import annotations` binds a name too


@pytest.mark.parametrize("name", PACKAGES + MODULES)
def test_all_lists_exactly_the_public_names(name: str) -> None:
    module = importlib.import_module(f"serve_bench.{name}")
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"serve_bench.{name} has no __all__"
    assert len(exported) == len(set(exported)), f"serve_bench.{name}.__all__ lists a name twice"
    missing = set(exported) - set(vars(module))
    assert not missing, f"serve_bench.{name}.__all__ lists names it does not bind: {sorted(missing)}"
    if name in PACKAGES:  # a package's __init__ binds only what it exports
        unlisted = _public(module) - set(exported)
        assert not unlisted, f"serve_bench.{name} binds public names missing from __all__: {sorted(unlisted)}"


@pytest.mark.parametrize("name", PACKAGES)
def test_exported_classes_and_functions_are_defined_inside_the_package(name: str) -> None:
    module = importlib.import_module(f"serve_bench.{name}")
    foreign = []
    for member in module.__all__:
        value = getattr(module, member)
        home = getattr(value, "__module__", None)
        if isinstance(value, (type, types.FunctionType)) and home and not home.startswith(f"serve_bench.{name}"):
            foreign.append(f"{member} (from {home})")
    assert not foreign, f"serve_bench.{name} re-exports another package's names: {foreign}"


def test_the_check_sees_an_unlisted_name() -> None:
    """The check can fail: a module binding a public name it does not list is caught."""
    module = types.ModuleType("example")
    module.__all__ = ["listed"]  # type: ignore[attr-defined]
    module.listed = 1  # type: ignore[attr-defined]
    module.unlisted = 2  # type: ignore[attr-defined]
    assert _public(module) - set(module.__all__) == {"unlisted"}  # type: ignore[attr-defined]
