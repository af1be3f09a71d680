"""The layout docs/architecture.md draws, checked on the source: no import cycle, dependencies one way.

docs/architecture.md ("Who may import whom"): cli -> tune -> sweep -> {load, metrics} -> client -> stats;
cli -> pipeline -> client; cli -> report -> stats (report never imports load, client or server); the server
shares only the public tensor codec with the client; only client/ and server/ import gRPC or aiohttp; only
export/ and server/ import TensorFlow. Every import counts, including those inside functions (a lazy import is
still a dependency, and a cycle through one is still a cycle: two modules that need each other), except those
under ``if TYPE_CHECKING:``, which never run and do not make a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "serve_bench"

# Shared leaves every part may use: the error base class, the generated-proto loader, the version, and the
# few facts of the servers that layers which may not import each other all need (_server_facts.py).
_LEAVES = {"errors", "_protos", "_server_facts", "__init__"}

# Which parts of serve_bench each part may import (besides itself and the leaves), from DESIGN.md's
# arrows. Where the code has a reason DESIGN.md does not draw yet, the reason is written beside it.
ALLOWED: dict[str, set[str]] = {
    "stats": set(),
    "codec": set(),
    "media": set(),  # video and image decoding (PyAV, Pillow) for load's input data and the pipeline
    "_tf": set(),  # the one place TensorFlow is imported, with its start-up logs silenced
    "client": {"codec", "stats"},
    "load": {"client", "stats", "media"},  # media: --input-data reads images and videos
    "metrics": {"client", "stats"},
    # the models serve-bench knows (Keras definitions and preprocessing, no TensorFlow): what export writes, what
    # a runtime builds where it runs without a SavedModel, and what the local server describes then
    "catalogue": set(),
    # runtimes: each runtime's record (layout, packages, converter) that export writes copies for
    "export": {"_tf", "runtimes", "catalogue"},
    # catalogue: the model a runtime builds where it runs without a SavedModel (jax); runtimes sit below export;
    # stats: the floor's interval, the block bootstrap a served point's throughput gets
    "runtimes": {"catalogue", "stats"},
    # export: the SavedModel layout and warm-up records it serves; runtimes: the record of what runs the model
    "server": {"codec", "export", "_tf", "runtimes", "catalogue"},
    # export: the model's facts for run.json; servers: a target the spec asks serve-bench to start (launch = ...)
    # runtimes: the runtime a target names is checked against the runtimes' registry
    "sweep": {"load", "metrics", "client", "stats", "export", "servers", "runtimes"},
    "tune": {"sweep", "load", "metrics", "client", "stats", "export", "servers", "runtimes"},
    # one way to start, wait for and stop a server (local, Triton, MLServer); export: the model files it serves;
    # runtimes: which package a runtime needs in the servers' environment
    "servers": {"export", "runtimes"},
    # the pipeline decodes videos (media) and runs the model in-process (_tf, lazily) for its comparison;
    # it measures through the one engine (load: the recorder, the analysis, the payloads) and reads
    # batch-size lists as export does (export)
    # runtimes: the display name of a runtime with a record of its own
    "pipeline": {"client", "stats", "media", "_tf", "load", "export", "runtimes"},
    # export: FLOPs per image of the exported model; runtimes: the default runtime, which a target naming none ran
    "report": {"stats", "export", "runtimes"},
    "predict": {"_tf", "stats"},  # _tf: freezing the serving graph; stats: a run's CPU points to calibrate on
    "_progress": {"sweep", "load", "stats"},  # load: the PointPlan each progress line names
    "demo": {"export", "report", "sweep", "_progress", "servers"},
}
# The command line sits on top: it may import everything.
TOP = {"cli", "_cli_args", "_cli_commands", "__main__"}

# Third-party libraries that belong to one room only.
THIRD_PARTY = {
    "grpc": {"client", "server"},
    "aiohttp": {"client", "server"},
    "tensorflow": {"_tf", "export", "server"},
}


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return rel.parts[0]


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = ("serve_bench", *rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, *, type_checking: bool = True) -> Iterator[str]:
    """Absolute names imported anywhere, inside functions too (``from a.b import c`` yields a.b and a.b.c);
    without ``type_checking``, none of those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module and node.level == 0:
                yield node.module
                yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.If) and _type_checking(node.test) and not type_checking:
            yield from _imports(ast.Module(node.orelse, []), type_checking=False)
        else:
            yield from _imports(node, type_checking=type_checking)


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_dependencies_point_the_way_the_architecture_draws() -> None:
    wrong = []
    for path in _sources():
        source = _part(path)
        if source in TOP:
            continue
        assert source in ALLOWED or source in _LEAVES, f"{source}: a new part of serve_bench; add it to ALLOWED"
        allowed = ALLOWED.get(source, set()) | _LEAVES | {source}
        for name in _imports(ast.parse(path.read_text())):
            if not name.startswith("serve_bench."):
                continue
            target = name.split(".")[1]
            if target.startswith("__version__"):
                continue
            if (PACKAGE / target).is_dir() or (PACKAGE / f"{target}.py").exists():
                if target not in allowed:
                    wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {name} ({source} -> {target})")
    assert not wrong, "\n".join(wrong)


def test_third_party_libraries_stay_in_their_rooms() -> None:
    wrong = []
    for path in _sources():
        source = _part(path)
        for name in _imports(ast.parse(path.read_text())):
            library = name.split(".")[0]
            if library in THIRD_PARTY and source not in THIRD_PARTY[library]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {library}")
    assert not wrong, "\n".join(wrong)


def test_no_part_imports_another_parts_private_modules() -> None:
    """Parts talk through each other's __init__ (their public API), never through a private module."""
    wrong = []
    for path in _sources():
        source = _part(path)
        for name in _imports(ast.parse(path.read_text())):
            parts = name.split(".")
            if (
                len(parts) >= 3
                and parts[0] == "serve_bench"
                and parts[2].startswith("_")
                and parts[1] != source
                and (PACKAGE / parts[1]).is_dir()
            ):
                wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {'.'.join(parts[:3])}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def _module_graph() -> dict[str, set[str]]:
    return _graph({_module(p): ast.parse(p.read_text()) for p in _sources()})


def _graph(trees: dict[str, ast.AST]) -> dict[str, set[str]]:
    """Which of ``trees``' modules each one imports, at any time (type-checking imports aside)."""
    graph: dict[str, set[str]] = {}
    for module, tree in trees.items():
        edges = set()
        for name in _imports(tree, type_checking=False):
            # the longest imported prefix that is a module of ours (`from pkg import name` -> pkg)
            while name and name not in trees:
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.add(name)
        graph[module] = edges
    # importing a.b.c runs a and a.b first
    for module in list(graph):
        parts = module.split(".")
        for i in range(2, len(parts)):
            parent = ".".join(parts[:i])
            if parent in graph and parent != module:
                graph[module].add(parent)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle (as a list of modules, first == last), or []."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def _cycle_ignoring_package_parents(graph: dict[str, set[str]]) -> list[str]:
    # a package's __init__ importing its own submodules, which import the package back, is how
    # every package works; a cycle counts when it leaves and re-enters a package
    trimmed = {m: {t for t in edges if not m.startswith(t + ".")} for m, edges in graph.items()}
    return _cycle(trimmed)


def test_no_import_cycle_inside_serve_bench() -> None:
    cycle = _cycle_ignoring_package_parents(_module_graph())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a graph with a cycle is reported, one without is not."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_a_cycle_through_an_import_inside_a_function_is_a_cycle() -> None:
    """Two modules that need each other, one of them only once a function runs, are found; an import that only
    type-checking runs is no edge."""
    lazy = {
        "p.a": ast.parse("from p.b import g\n"),
        "p.b": ast.parse("def g():\n    from p.a import f\n"),
    }
    assert _cycle_ignoring_package_parents(_graph(lazy)) == ["p.a", "p.b", "p.a"]
    typed = {**lazy, "p.b": ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a import f\n")}
    assert _cycle_ignoring_package_parents(_graph(typed)) == []


@pytest.mark.parametrize(
    "code, type_checking, expected",
    [
        ("import serve_bench.client\n", False, ["serve_bench.client"]),
        ("from serve_bench.stats import Point\n", False, ["serve_bench.stats", "serve_bench.stats.Point"]),
        ("def f():\n    from serve_bench import load\n", False, ["serve_bench", "serve_bench.load"]),
        ("class C:\n    async def f(self):\n        import serve_bench.load\n", False, ["serve_bench.load"]),
        ("try:\n    import serve_bench.load\nexcept ImportError:\n    pass\n", False, ["serve_bench.load"]),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import serve_bench.load\n",
            False,
            ["typing", "typing.TYPE_CHECKING"],
        ),
        (
            "import typing\nif typing.TYPE_CHECKING:\n    import serve_bench.load\nelse:\n    import os\n",
            False,
            ["typing", "os"],
        ),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import serve_bench.load\n",
            True,
            ["typing", "typing.TYPE_CHECKING", "serve_bench.load"],
        ),
    ],
)
def test_imports_are_read_wherever_they_are(code: str, type_checking: bool, expected: list[str]) -> None:
    assert list(_imports(ast.parse(code), type_checking=type_checking)) == expected
