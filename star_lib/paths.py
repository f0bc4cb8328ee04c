"""Output paths checked against input paths: no command writes over, into or around what it reads.

A user who names an output that is one of the command's inputs (``star eval --queries q.jsonl --per-plan
q.jsonl``), lies inside one (a verdict file in the ``--db`` folder), or holds one (``star teacher --queries
D/train.jsonl --out D``) would lose that input; :func:`refuse_overlap` refuses it before any work.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from star_lib.io import OutputError

PathOption = str | os.PathLike[str] | None
"""A path given to an option (None: the option was not given)."""


def refuse_overlap(
    inputs: Mapping[str, PathOption | Iterable[PathOption]], outputs: Mapping[str, PathOption]
) -> None:
    """Refuse, before any work, an output that is, lies inside or contains an input, or two equal outputs.

    Both mappings are keyed by option name (``"--queries"``); an input may be a list of paths (``--queries
    a.jsonl b.jsonl``). Paths are compared after resolving symbolic links (and by inode, so a hard link is
    the same file); an input that does not exist (a preset name, ``synthetic:tiny:0``) is no path and is
    skipped, and an output need not exist yet.

    Raises:
        OutputError: one sentence naming both options and the paths, e.g. ``--per-plan runs/q.jsonl is the
            --queries input; give another path``.

    """
    given = [(option, Path(path)) for option, path in outputs.items() if path is not None]
    for number, (option, target) in enumerate(given):
        for other, earlier in given[:number]:
            if _same_path(target, earlier):
                raise OutputError(f"{other} and {option} both name {target}; give two different paths")
    for source_option, value in inputs.items():
        values = [value] if value is None or isinstance(value, (str, os.PathLike)) else list(value)
        for raw in values:
            if raw is None or not os.path.lexists(raw):
                continue
            source = Path(raw)
            for option, target in given:
                if _same_path(target, source):
                    raise OutputError(f"{option} {target} is the {source_option} input; give another path")
                inside = _real(source) in _real(target).parents
                if inside or _real(target) in _real(source).parents:
                    how = "lies inside" if inside else "contains"
                    message = f"{option} {target} {how} the {source_option} input {source}; give another path"
                    raise OutputError(message)


def _real(path: Path) -> Path:
    """``path`` absolute, with every symbolic link of its existing part resolved.

    Raises:
        OSError: ``ELOOP`` naming ``path`` when it is, or lies under, a symbolic link loop.

    """
    try:
        return Path(os.path.abspath(path)).resolve()
    except RuntimeError:  # Python < 3.13 reports a loop so (3.13: OSError ELOOP)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path)) from None


def _same_path(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same file or folder (same resolved path, or same inode)."""
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
