"""One module per job, short functions: no ``star_lib`` module over 800 lines, no function over 80.

A function's size runs from its ``def`` line to its last line, docstring included (decorators not counted);
methods and nested functions count on their own. Each module is parsed with :mod:`ast` (nothing is
imported). A failure lists every offender as ``path:line  size  name``, largest first, so one run shows all
the work left.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "star_lib"
MAX_MODULE_LINES = 800
"""Longest a ``star_lib`` module may be, in lines."""
MAX_FUNCTION_LINES = 80
"""Longest a function or method may be, ``def`` line to last line."""


@dataclass(frozen=True)
class Oversized:
    """One module or function over its limit."""

    path: str
    """Path relative to the repository root."""
    line: int
    """Where it starts (1 for a module, the ``def`` line for a function)."""
    size: int
    """Its length in lines."""
    name: str
    """The module, or the function's qualified name (``Class.method``, ``outer.inner``)."""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}  {self.size} lines  {self.name}"


def _modules(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts]


def _relative(path: Path, root: Path) -> str:
    return str(path.relative_to(root.parent))


def oversized_modules(root: Path = ROOT, limit: int = MAX_MODULE_LINES) -> list[Oversized]:
    """Modules of the package at ``root`` longer than ``limit`` lines, largest first."""
    found = []
    for path in _modules(root):
        size = len(path.read_text(encoding="utf-8").splitlines())
        if size > limit:
            found.append(Oversized(_relative(path, root), 1, size, path.stem))
    return sorted(found, key=lambda o: (-o.size, o.path))


def _functions(node: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function under ``node`` with its qualified name, nested ones included."""
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            found.append((name, child))
            found.extend(_functions(child, f"{name}."))
        elif isinstance(child, ast.ClassDef):
            found.extend(_functions(child, f"{prefix}{child.name}."))
        else:
            found.extend(_functions(child, prefix))
    return found


def oversized_functions(root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[Oversized]:
    """Functions of the package at ``root`` longer than ``limit`` lines, largest first."""
    found = []
    for path in _modules(root):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, node in _functions(tree):
            size = node.end_lineno - node.lineno + 1
            if size > limit:
                found.append(Oversized(_relative(path, root), node.lineno, size, name))
    return sorted(found, key=lambda o: (-o.size, o.path, o.line))


def _report(what: str, found: list[Oversized]) -> str:
    return f"{len(found)} {what}:\n" + "\n".join(f"  {o}" for o in found)


# ───────────────────────────── tests ─────────────────────────────


def test_the_checks_measure_modules_and_every_kind_of_function(tmp_path: Path) -> None:
    source = [
        '"""A module."""',
        "@decorator",  # decorators are not counted
        "def top():",  # line 3: 6 lines with its docstring
        '    """Doc."""',
        *(f"    a{i} = {i}" for i in range(4)),
        "class Box:",
        "    async def method(self):",  # line 10: 7 lines, its nested function included
        "        b = 1",
        "        def inner():",  # line 12: 5 lines
        *(f"            c{i} = {i}" for i in range(4)),
        "x = 1",
    ]
    root = tmp_path / "star_lib"
    (root / "agent").mkdir(parents=True)
    (root / "agent" / "long.py").write_text("\n".join(source) + "\n")
    (root / "short.py").write_text("x = 1\n")
    assert [str(o) for o in oversized_modules(root, limit=10)] == ["star_lib/agent/long.py:1  17 lines  long"]
    sizes = {o.name: (o.path, o.line, o.size) for o in oversized_functions(root, limit=4)}
    path = "star_lib/agent/long.py"
    assert sizes == {"top": (path, 3, 6), "Box.method": (path, 10, 7), "Box.method.inner": (path, 12, 5)}
    assert oversized_functions(root, limit=6) == [oversized_functions(root, limit=4)[0]]


def test_no_module_is_over_800_lines() -> None:
    found = oversized_modules()
    assert not found, _report(f"star_lib modules over {MAX_MODULE_LINES} lines (split each by job)", found)


def test_no_function_is_over_80_lines() -> None:
    found = oversized_functions()
    assert not found, _report(
        f"star_lib functions over {MAX_FUNCTION_LINES} lines, def to last line (extract named steps)", found
    )
