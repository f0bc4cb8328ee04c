"""The folder tree is the architecture: every import of ``star_lib`` points down a layer, and none loops.

Each module is parsed with :mod:`ast` (nothing is imported): module-level imports, function-local ones,
``TYPE_CHECKING`` blocks and ``importlib.import_module("star_lib…")`` calls all count. A failure names the
importing file, its line and what it imported.

Layers, lowest first (a module may import its own layer and the ones below)::

    types, io, paths  <  travel  <  rewards, synth  <  agent  <  train, qa  <  experiments  <  viz  <  cli

Beside the packages, the package root holds only ``types``, ``io``, ``paths`` and ``rewards``; the
orchestration of ``star demo`` and ``star report`` lives with the command line that runs it
(``star_lib/cli/``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "star_lib"
LAYERS: tuple[tuple[str, ...], ...] = (
    ("types", "io", "paths"),
    ("travel",),
    ("rewards", "synth"),
    ("agent",),
    ("train", "qa"),
    ("experiments",),
    ("viz",),
    ("cli",),
)
"""Top-level parts of ``star_lib`` by layer, lowest first."""
RANK: dict[str, int] = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` (a module) imports ``target`` (a module) at ``path:line``."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} imports {self.target}"


def module_name(path: Path, root: Path = ROOT) -> str:
    """``star_lib/agent/env.py`` → ``star_lib.agent.env``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``star_lib`` (the package at ``root``) by name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def _resolve(name: str, root: Path) -> str | None:
    """The ``star_lib`` module an imported name lives in (``a.b.c`` → ``a.b`` when ``c`` is not a module)."""
    known = modules(root)
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.AST, source: str, is_package: bool, root: Path = ROOT) -> Iterator[str]:
    """The dotted names one import statement (or ``import_module`` call) brings in."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: climb from the importing module's package
            package = source.split(".") if is_package else source.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        for alias in node.names:  # `from pkg import sub` imports the submodule when there is one
            yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules(root) else base
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, (ast.Attribute, ast.Name))
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        yield node.args[0].value


@cache
def edges(root: Path = ROOT) -> tuple[Edge, ...]:
    """Every import between two ``star_lib`` modules."""
    found = []
    for source, path in modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = str(path.relative_to(root.parent))
        for node in ast.walk(tree):
            for name in _targets(node, source, path.name == "__init__.py", root):
                if name == "star_lib" or name.startswith("star_lib."):
                    target = _resolve(name, root)
                    if target and target != source:
                        found.append(Edge(source, target, rel, node.lineno))
    return tuple(dict.fromkeys(found))  # one per (source, target, line)


def part(module: str) -> str | None:
    """The top-level part of ``star_lib`` a module belongs to (None for ``star_lib`` itself)."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else None


def upward_imports(root: Path = ROOT) -> list[Edge]:
    """Imports from a lower layer into a higher one."""
    bad = []
    for edge in edges(root):
        src, dst = part(edge.source), part(edge.target)
        if src is None or dst is None:
            continue  # the package's own __init__ (it imports nothing heavy) and imports of it
        if RANK[dst] > RANK[src]:
            bad.append(edge)
    return bad


def import_cycles(root: Path = ROOT) -> list[list[str]]:
    """Strongly connected groups of modules (Tarjan), each a cycle of imports; sorted for stable output."""
    graph: dict[str, set[str]] = {m: set() for m in modules(root)}
    for edge in edges(root):
        graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # recursion depth is bounded by the module count (~100)
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def describe(group: list[str], root: Path = ROOT) -> str:
    """The imports that close a cycle, one per line."""
    members = set(group)
    inside = [e for e in edges(root) if e.source in members and e.target in members]
    return "\n".join(str(e) for e in sorted(inside, key=lambda e: (e.path, e.line)))


def _experiments_only(group: list[str]) -> bool:
    return all(part(m) == "experiments" for m in group)


# ───────────────────────────── tests ─────────────────────────────


def test_every_top_level_part_has_a_layer() -> None:
    parts = {part(m) for m in modules()} - {None}
    assert parts <= set(RANK), f"give these parts of star_lib a layer in LAYERS: {sorted(parts - set(RANK))}"


def test_the_walker_sees_function_local_relative_and_dynamic_imports() -> None:
    source = (
        "from . import policies\n"
        "def f():\n"
        "    from ..train.rl import RLRunConfig\n"
        "    import importlib\n"
        "    importlib.import_module('star_lib.cli')\n"
    )
    names = {n for node in ast.walk(ast.parse(source)) for n in _targets(node, "star_lib.agent.env", False)}
    assert {"star_lib.agent.policies", "star_lib.train.rl", "star_lib.cli"} <= names
    local = [e for e in edges() if e.path == "star_lib/agent/env.py" and e.target == "star_lib.travel.faults"]
    assert local, "the function-local import of star_lib.travel.faults in agent/env.py was not seen"


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "agent/__init__.py": "",
        "agent/policies.py": "def load():\n    from star_lib.train.tokenizer import load_tokenizer\n",
        "train/__init__.py": "",
        "train/tokenizer.py": "from star_lib.agent import policies\nimport star_lib.train.rl\n",
        "train/rl.py": "from .tokenizer import load_tokenizer\n",
    }
    root = tmp_path / "star_lib"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert [str(e) for e in upward_imports(root)] == [
        "star_lib/agent/policies.py:2: star_lib.agent.policies imports star_lib.train.tokenizer"
    ]
    cycles = import_cycles(root)
    assert cycles == [["star_lib.agent.policies", "star_lib.train.rl", "star_lib.train.tokenizer"]]
    assert "star_lib/train/rl.py:1: star_lib.train.rl imports star_lib.train.tokenizer" in describe(
        cycles[0], root
    )


def test_no_import_goes_up_a_layer() -> None:
    bad = upward_imports()
    assert not bad, "imports from a lower layer into a higher one:\n" + "\n".join(
        f"{e}  ({part(e.source)} < {part(e.target)})" for e in bad
    )


def test_no_import_cycle_between_modules() -> None:
    cycles = [g for g in import_cycles() if not _experiments_only(g)]
    assert not cycles, "import cycles:\n" + "\n\n".join(describe(g) for g in cycles)


def test_no_import_cycle_inside_experiments() -> None:
    cycles = [g for g in import_cycles() if _experiments_only(g)]
    assert not cycles, "import cycles in star_lib/experiments:\n" + "\n\n".join(describe(g) for g in cycles)
