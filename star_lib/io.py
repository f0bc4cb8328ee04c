"""The one IO module: atomic writers and the readers of JSON, YAML, JSONL and query files.

Atomic writers: a reader never sees a half-written file, even when the writer is killed mid-write.

Every writer writes a temporary file in the destination's folder, flushes and fsyncs it, then renames it
over the destination with :func:`os.replace` (atomic on POSIX within one file system). A killed writer leaves
at most a stray ``.*.tmp`` file, which :func:`clean_stale_temps` removes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from star_lib.types import QueryRecord

if TYPE_CHECKING:
    import polars as pl

TMP_SUFFIX = ".tmp"


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it onto ``path``.

    On any exception the temporary file is removed and ``path`` is left as it was.

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
        >>> with atomic_path(target) as tmp:
        ...     _ = tmp.write_text("hello")
        >>> target.read_text()
        'hello'

    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=TMP_SUFFIX, dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fsync_dir(folder: Path) -> None:
    """Persist a rename by fsyncing its folder (best effort: some file systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; returns the path."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as indented JSON atomically; returns the path."""
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_yaml_atomic(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as block-style YAML (keys in insertion order) atomically; returns the path."""
    return write_text_atomic(path, yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))


def write_parquet_atomic(path: str | os.PathLike[str], frame: pl.DataFrame) -> Path:
    """Write a polars frame as parquet atomically; returns the path."""
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp)
    return Path(path)


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """Load a YAML file with ``yaml.safe_load``.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: when it is not valid YAML (the message names the file).

    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc


def write_jsonl_atomic(path: str | os.PathLike[str], rows: Iterable[Any]) -> Path:
    """Write ``rows`` as JSON lines (UTF-8, one object per line) atomically; returns the path."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return Path(path)


def read_jsonl(path: str | os.PathLike[str], what: str = "JSONL") -> list[Any]:
    """Return the decoded non-empty lines of a JSONL file.

    Raises:
        FileNotFoundError: when the file is missing (the message says which ``what`` file).
        ValueError: naming the file and line that is not JSON (or not UTF-8).

    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{what} file not found: {file}")
    records = []
    with file.open(encoding="utf-8") as handle:
        number = 0
        try:
            for number, line in enumerate(handle, start=1):  # noqa: B007 (used in the error below)
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except (ValueError, RecursionError) as exc:
                    raise ValueError(f"{file}:{number}: not a JSON line ({exc})") from None
        except UnicodeDecodeError:
            raise ValueError(f"{file}:{number + 1}: not UTF-8 text") from None
    return records


def read_queries(path: str | os.PathLike[str], limit: int | None = None) -> list[QueryRecord]:
    """Return the query records of a JSONL file (``QueryRecord.to_dict`` rows, official field names).

    Raises:
        FileNotFoundError: when the file is missing.
        ValueError: naming the file and line of a record that is not a query record.

    """
    records = []
    for number, row in enumerate(read_jsonl(path, "queries"), start=1):
        if not isinstance(row, dict):
            raise ValueError(f"{path}: record {number} is not a JSON object")
        try:
            records.append(QueryRecord.from_dict(row))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{path}: record {number}: {exc}") from None
    return records[:limit] if limit is not None else records


def read_json(path: str | os.PathLike[str]) -> Any:
    """Load a JSON file."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def clean_stale_temps(folder: str | os.PathLike[str]) -> int:
    """Remove temporary files a killed writer left under ``folder``; returns how many."""
    removed = 0
    for tmp in Path(folder).rglob(f".*{TMP_SUFFIX}"):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed
