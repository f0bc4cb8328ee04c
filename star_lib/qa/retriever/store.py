"""Where a corpus's index folders live, and how one is checked and published.

An index is built once and saved in a folder beside the corpus (``<corpus>.<kind>/``), or in
``$STAR_CACHE_DIR`` when it is set (the cache wins), or in the user cache folder when the corpus folder is
read-only — a folder whose permission bits deny writes counts as read-only even for root, so shared data is
never written to. Its ``meta.json`` fingerprints the corpus (size, mtime) and the settings; an index whose
``meta.json`` no longer matches is rebuilt, into a temporary folder moved into place at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

INDEX_FORMAT = 2
"""Bumped when the index folder layout or the analyzer changes; older indexes are rebuilt."""
CACHE_ENV = "STAR_CACHE_DIR"
"""Environment variable naming the cache folder for indexes of read-only corpora."""


def _folder_writable(folder: Path) -> bool:
    """Tell whether ``folder`` may be written: permission bits allow it (even for root) and access agrees."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return bool(mode & stat.S_IWUSR) and os.access(folder, os.W_OK)


def default_cache_dir() -> Path:
    """``$STAR_CACHE_DIR`` or ``$XDG_CACHE_HOME/star_lib`` or ``~/.cache/star_lib``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "star_lib"


def default_index_dir(
    corpus: str | os.PathLike[str], kind: str = "bm25s", cache_dir: Path | None = None
) -> Path:
    """Return where the index of ``corpus`` lives: in the cache when one is named, else beside the corpus.

    A cache named by ``cache_dir`` or by ``$STAR_CACHE_DIR`` always wins; without one the index goes beside
    the corpus when its folder is writable, else in :func:`default_cache_dir`.

    Args:
        corpus: the corpus file.
        kind: index kind, used as the folder suffix (``bm25s``, ``dense-<model>``).
        cache_dir: cache root; when given the index always goes there (default: ``$STAR_CACHE_DIR`` when
            set, else beside the corpus, or :func:`default_cache_dir` for a read-only folder).

    """
    corpus = Path(corpus).resolve()
    if cache_dir is None and os.environ.get(CACHE_ENV):
        cache_dir = Path(os.environ[CACHE_ENV])
    if cache_dir is None and _folder_writable(corpus.parent):
        return corpus.parent / f"{corpus.name}.{kind}"
    digest = hashlib.sha1(str(corpus).encode()).hexdigest()[:12]
    return Path(cache_dir or default_cache_dir()) / "qa_index" / f"{corpus.name}-{digest}.{kind}"


def fingerprint(corpus: Path) -> dict[str, Any]:
    """Identify a corpus file as an index records it: resolved path, size and modification time."""
    st = corpus.stat()
    return {"corpus": str(corpus.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def read_meta(index_dir: Path) -> dict[str, Any] | None:
    """Return an index folder's ``meta.json``, or None when it is missing or unreadable."""
    try:
        return json.loads((index_dir / "meta.json").read_text())
    except (OSError, ValueError):
        return None


def publish(tmp: Path, index_dir: Path) -> None:
    """Move a finished index folder into place (replacing a stale one)."""
    if index_dir.exists():
        shutil.rmtree(index_dir, ignore_errors=True)
    try:
        os.replace(tmp, index_dir)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process published first
        if not (index_dir / "meta.json").exists():
            raise


def optional_path(value: str | os.PathLike[str] | None) -> Path | None:
    """``Path(value)``, keeping None."""
    return Path(value) if value is not None else None
