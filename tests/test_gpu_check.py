"""slurm/gpu_check.py: its wheel list covers every import the check makes on a bare GPU machine.

A lent GPU machine has torch, transformers, accelerate, peft, tokenizers and safetensors (``BARE_MACHINE``,
with their own requirements) and nothing fetchable; everything else the check imports must travel as one of
``WHEELS``. The import test builds that machine's view of this venv (symlinks to the allowed distributions
only), then imports, in a subprocess that sees nothing else, every star_lib module the check can reach and
every outside name those modules import. A few seconds: no model is built.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "slurm" / "gpu_check.py"

OFF_PATH = {
    "vllm": "star_lib.agent.policies' vLLM backend: the machine has no vLLM, the check uses model.generate",
    "openai": "the OpenAI-compatible policy and LLM back-translation: the check uses neither",
    "submitit": "Slurm submission (experiments.runner / profiles / status): the check runs in-process",
    "bm25s": "the QA retriever: the check runs no QA evaluation",
    "Stemmer": "the QA retriever's stemmer",
    "sentence_transformers": "the QA dense retriever",
    "deepspeed": "gathering ZeRO-3 shards (train.finish.weights_digest): the check runs no ZeRO-3",
}
"""Outside packages imported only inside functions the check never calls, and why."""


def load_check():
    spec = importlib.util.spec_from_file_location("gpu_check", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_closure(names) -> set[str]:
    """Return ``names`` and what they need: non-extra requirements whose markers hold here."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [canonical(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # a platform-only requirement (nvidia-*, triton) this CPU venv lacks
        seen.add(name)
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonical(req.name))
    return seen


def wheel_names(check) -> dict[str, str]:
    return {canonical(w.split("==")[0]): w.split("==")[1] for w in check.WHEELS}


def star_lib_module_path(name: str) -> Path | None:
    path = REPO.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def import_statements(tree: ast.AST):
    """Every import in ``tree``, at any depth, except those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (i for child in node.orelse for i in import_statements(ast.Module([child], [])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from import_statements(node)


def reachable_imports() -> tuple[set[str], set[tuple[str, str | None]]]:
    """Star_lib modules the check can reach, and the outside ``(module, name)`` pairs they import."""
    modules: set[str] = set()
    outside: set[tuple[str, str | None]] = set()
    todo = [CHECK]
    while todo:
        for node in import_statements(ast.parse(todo.pop().read_text(encoding="utf-8"))):
            pairs = (
                [(alias.name, None) for alias in node.names]
                if isinstance(node, ast.Import)
                else [(node.module, alias.name) for alias in node.names]
            )
            for module, name in pairs:
                if module.split(".")[0] != "star_lib":
                    outside.add((module, name))
                    continue
                parts = f"{module}.{name}".split(".") if name else module.split(".")
                for end in range(1, len(parts) + 1):
                    sub = ".".join(parts[:end])
                    path = star_lib_module_path(sub)
                    if path is not None and sub not in modules:
                        modules.add(sub)
                        todo.append(path)
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    return modules, {(m, n) for m, n in outside if m.split(".")[0] not in stdlib}


def bare_machine_site(distributions: set[str], site: Path) -> None:
    """Link the top-level files of ``distributions`` (packages, modules, dist-info) into ``site``."""
    for name in sorted(distributions):
        dist = metadata.distribution(name)
        for top in {Path(f).parts[0] for f in dist.files or ()}:
            target = site / top
            if top == ".." or top.endswith(".pth") or target.exists():
                continue
            source = Path(dist.locate_file(top))
            if source.exists():
                target.symlink_to(source)


def test_gpu_check_wheels_are_the_versions_this_suite_runs():
    check = load_check()
    pinned = wheel_names(check)
    installed = {name: metadata.version(name) for name in pinned}
    assert installed == pinned, "make install constrains the venv to WHEELS (slurm/gpu_check.py): rerun it"


def test_gpu_check_wheels_bring_every_requirement_a_bare_machine_lacks():
    check = load_check()
    bare = requirement_closure(check.BARE_MACHINE)
    wheels = set(wheel_names(check))
    missing = requirement_closure(wheels) - bare - wheels
    assert not missing, f"add these to WHEELS in slurm/gpu_check.py: {sorted(missing)}"


def test_gpu_check_imports_everything_it_reaches_from_bare_machine_and_wheels(tmp_path):
    check = load_check()
    site = tmp_path / "site"
    site.mkdir()
    bare_machine_site(requirement_closure(check.BARE_MACHINE) | set(wheel_names(check)), site)
    modules, outside = reachable_imports()
    statements = [f"import {m}" for m in sorted(modules)]
    for module, name in sorted(outside, key=str):
        if module.split(".")[0] not in OFF_PATH:
            statements.append(f"from {module} import {name}" if name else f"import {module}")
    code = f"import sys; sys.path += {[str(site), str(REPO)]!r}\nfailed = []\nfor s in {statements!r}:\n"
    code += "    try:\n        exec(s)\n    except Exception as e:\n        failed.append(f'{s}: {e!r}')\n"
    code += "print('\\n'.join(failed)); sys.exit(1 if failed else 0)\n"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, f"missing on a bare machine with WHEELS:\n{out.stdout}{out.stderr[-2000:]}"
    assert len(modules) > 20 and any(m == "star_lib.train.rl" for m in modules)


def test_gpu_check_prints_its_wheel_list_for_fetch_wheels():
    out = subprocess.run([sys.executable, str(CHECK), "--wheels"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == list(load_check().WHEELS)
