"""The one IO module: atomic writers and the readers of JSON, YAML, JSONL and query files.

Atomic writers: a reader never sees a half-written file, even when the writer is killed mid-write.

Every writer writes a temporary file in the destination's folder, flushes and fsyncs it, then renames it
over the destination with :func:`os.replace` (atomic on POSIX within one file system). A killed writer leaves
at most a stray ``.<name>.<pid>@<host>.*.tmp`` file: the next write of the same file removes it (its writer is
gone), and :func:`clean_stale_temps` removes every one under a folder.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import hashlib
import json
import os
import re
import shutil
import socket
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
_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname().split(".")[0])
"""This machine, in a temporary file's name: a writer on another machine (a shared folder) is never reaped."""


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
    _remove_orphan_temps(dest)
    prefix = f".{dest.name}.{os.getpid()}@{_HOST}."
    fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=TMP_SUFFIX, dir=dest.parent)
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600: give the file the mode open() would have
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _naming_output(exc, dest, tmp) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _remove_orphan_temps(dest: Path) -> None:
    """Remove the temporary files of ``dest`` (``.<name>.<pid>@<host>.<random>.tmp``) whose writer is gone.

    A writer killed between creating its temporary file and renaming it leaves the file behind; the next
    write of the same destination clears it. A file of a live writer, or of another machine's, is kept.
    """
    head = f".{dest.name}."
    pattern = re.compile(rf"{re.escape(head)}(\d+)@{_HOST}\.[A-Za-z0-9_]+{re.escape(TMP_SUFFIX)}")
    for stale in dest.parent.glob(f"{glob.escape(head)}*{TMP_SUFFIX}"):
        found = pattern.fullmatch(stale.name)
        if found and not _process_alive(int(found.group(1))) and stale.is_file() and not stale.is_symlink():
            stale.unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one we may not signal counts as existing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        pass
    return True


def _umask() -> int:
    """Return the process umask (read without changing it, via /proc where available)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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


YAML_MAX_BYTES = 1 << 20
"""Largest YAML file :func:`read_yaml` loads (a config is a few kB; a 10 MB file takes minutes to parse)."""
YAML_MAX_NODES = 100_000
"""Most values a YAML document may expand to, each alias counted at its full size ("billion laughs")."""


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """Load a YAML file safely (no tags executed), bounded in size and expansion.

    Raises:
        FileNotFoundError: when the file does not exist.
        ValueError: naming the file (and line) when it is not valid YAML, is over :data:`YAML_MAX_BYTES`,
            expands (through aliases) to more than :data:`YAML_MAX_NODES` values, holds an alias inside
            itself, or has a mapping key that is repeated or not a string.

    """
    file = Path(path)
    size = file.stat().st_size if file.is_file() else 0
    if size > YAML_MAX_BYTES:
        raise ValueError(f"{file}: {size:,} bytes is too large for a YAML config (at most 1 MiB)")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(read_text(file, "YAML"))
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_node(node, file)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ValueError(f"{file}: not valid YAML: {' '.join(str(exc).split())}") from exc
    except RecursionError:
        raise ValueError(f"{file}: YAML nested too deeply to load") from None
    finally:
        loader.dispose()


_YAML_KEY_TAGS = frozenset({"tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"})


def _check_yaml_node(root: yaml.Node, file: Path) -> None:
    """Refuse a composed YAML document that is recursive, too large once expanded, or has bad keys."""
    sizes: dict[int, int] = {}  # id(node) -> values it expands to
    open_nodes: set[int] = set()  # the nodes on the path from the root: an alias back to one is a loop
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in _yaml_children(node))
            if sizes[id(node)] > YAML_MAX_NODES:
                line = node.start_mark.line + 1
                raise ValueError(f"{file}:{line}: expands (aliases counted) to over {YAML_MAX_NODES:,} nodes")
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:
            line = node.start_mark.line + 1
            raise ValueError(f"{file}:{line}: an alias refers to a node holding it (a recursive anchor)")
        open_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            _check_yaml_keys(node, file)
        stack.append((node, True))
        stack.extend((child, False) for child in _yaml_children(node))


def _yaml_children(node: yaml.Node) -> list[yaml.Node]:
    """Return the keys and values of a mapping node, the items of a sequence node, none for a scalar."""
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _check_yaml_keys(node: yaml.MappingNode, file: Path) -> None:
    """Refuse a mapping whose keys are not plain strings or appear twice (YAML would keep the last)."""
    seen: dict[str, int] = {}
    for key, _ in node.value:
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode) or key.tag not in _YAML_KEY_TAGS:
            shown = key.value if isinstance(key, yaml.ScalarNode) else "a list or mapping"
            raise ValueError(f"{file}:{line}: key {shown!r} is not a name; quote it or rename it")
        if key.tag.endswith(":merge"):
            continue
        if key.value in seen:
            first = seen[key.value]
            raise ValueError(f"{file}:{line}: key {key.value!r} appears twice (first on line {first})")
        seen[key.value] = line


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
    if file.is_dir():
        raise ValueError(f"{file} is a folder; give a {what} file")
    if not file.is_file():
        raise FileNotFoundError(f"{what} file not found: {file}")
    records = []
    with file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{file}:{number}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except RecursionError:
                raise ValueError(f"{file}:{number}: not a JSON line (nested too deeply)") from None
            except ValueError as exc:
                raise ValueError(f"{file}:{number}: not a JSON line ({exc})") from None
    return records


QUERY_SUFFIXES: tuple[str, ...] = (".jsonl", ".csv", ".parquet")
"""File kinds :func:`read_queries` reads."""


def read_queries(path: str | os.PathLike[str], limit: int | None = None) -> list[QueryRecord]:
    """Return the query records of a JSONL, CSV or parquet file — one reader for every query file kind.

    Reads ``star synth`` splits (``QueryRecord.to_dict`` rows) and the official TravelPlanner files
    (train/validation/test, as published on the hub or saved locally): the official field names, with
    ``date``/``local_constraint`` as Python-literal strings and ``budget`` as a string or an int. Columns
    other than the record's (``annotated_plan``, ``reference_information``, an index column) are ignored.
    Every record is validated by :meth:`QueryRecord.from_dict`.

    Args:
        path: a ``.jsonl``, ``.csv`` or ``.parquet`` file.
        limit: keep the first ``limit`` records (None: all); every record is still validated.

    Raises:
        FileNotFoundError: when the file is missing.
        ValueError: naming the file and line/row of a record that is not a valid query record, a file kind
            that is not one of :data:`QUERY_SUFFIXES`, or a negative ``limit``.

    """
    file = Path(path)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit={limit!r}: keep a non-negative number of queries (or none for all)")
    if not file.is_file():
        raise FileNotFoundError(f"queries file not found: {file}")
    suffix = file.suffix.lower()
    if suffix not in QUERY_SUFFIXES:
        raise ValueError(
            f"{file}: queries are read from {', '.join(QUERY_SUFFIXES)} files, not {suffix or 'no'}"
        )
    rows = _jsonl_rows(file) if suffix == ".jsonl" else _table_rows(file, suffix)
    records = []
    for where, row in rows:
        if not isinstance(row, dict):
            raise ValueError(f"{where}: a query record must be a JSON object, got {type(row).__name__}")
        try:
            records.append(QueryRecord.from_dict(row))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{where}: {exc}") from None
    return records[:limit] if limit is not None else records


def _jsonl_rows(file: Path) -> Iterator[tuple[str, Any]]:
    """Yield ``("file:line", decoded line)`` for each non-empty line of a JSONL file."""
    with file.open(encoding="utf-8") as handle:
        number = 0
        try:
            for number, line in enumerate(handle, start=1):  # noqa: B007 (used in the error below)
                if not line.strip():
                    continue
                try:
                    row = loads_strict(line)
                except (ValueError, RecursionError) as exc:
                    raise ValueError(f"{file}:{number}: not a JSON line ({exc})") from None
                yield f"{file}:{number}", row
        except UnicodeDecodeError:
            raise ValueError(f"{file}:{number + 1}: not UTF-8 text") from None


def _table_rows(file: Path, suffix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``("file: row N", row dict)`` for each row of a CSV (read as text) or parquet table."""
    import polars as pl

    try:
        if suffix == ".csv":
            frame = pl.read_csv(file, infer_schema=False, encoding="utf8")
        else:
            frame = pl.read_parquet(file)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        kind = "CSV" if suffix == ".csv" else "parquet"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{file}: not a readable {kind} table ({first})") from None
    for number, row in enumerate(frame.iter_rows(named=True), start=1):
        yield f"{file}: row {number}", row


def read_text(path: str | os.PathLike[str], what: str = "text") -> str:
    """Return a UTF-8 text file's contents.

    Raises:
        FileNotFoundError: when the file is missing (the message says which ``what`` file).
        ValueError: when it is a folder or not UTF-8 (naming the file and the line).

    """
    file = Path(path)
    if file.is_dir():
        raise ValueError(f"{file} is a folder; give a {what} file")
    if not file.exists():
        raise FileNotFoundError(f"{what} file not found: {file}")
    data = file.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ValueError(f"{file}:{line}: not UTF-8 text (byte {data[exc.start]:#04x})") from None


def read_json(path: str | os.PathLike[str]) -> Any:
    """Load a JSON file.

    Raises:
        FileNotFoundError: when the file is missing.
        ValueError: naming the file when it is not JSON, not UTF-8 or nested too deeply.

    """
    text = read_text(path, "JSON")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to decode") from None


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


# ───────────────────────────── output checks, locks, atomic folders ─────────────────────────────


class OutputError(ValueError):
    """An output path that cannot be written; the message names the option and the path."""


class OutputLockedError(OutputError):
    """The output is being written by another process."""


def _nearest_existing(folder: Path) -> Path:
    """Return ``folder`` or its closest ancestor that exists."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _check_parent(folder: Path, option: str, target: Path) -> None:
    """Refuse a target whose (nearest existing) parent folder is a file or is not writable."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise OutputError(f"{option} {target}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {target}: folder {existing} is not writable")


def check_output_file(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """Check, before any work starts, that ``path`` can be written as a regular file; return it.

    Refused: a folder, a device or pipe (``/dev/full``), a parent that is a file, a parent folder that is
    not writable.

    Raises:
        OutputError: naming ``option`` and the path.

    """
    target = _refuse_symlink_loop(Path(path), option)
    if target.is_dir():
        raise OutputError(f"{option} {target} is a folder; give a file path")
    if target.exists() and not target.is_file():
        raise OutputError(f"{option} {target} is not a regular file (a device or pipe); give a file path")
    _check_parent(target.parent, option, target)
    return target


def check_output_dir(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """Check, before any work starts, that ``path`` can be written (and swapped in) as a folder; return it.

    Raises:
        OutputError: naming ``option`` and the path when it is a file, sits under a file, or its folder
            is not writable.

    """
    target = _refuse_symlink_loop(Path(path), option)
    if target.exists() and not target.is_dir():
        raise OutputError(f"{option} {target} is a file; give a folder")
    _refuse_enclosing(target, option)
    _check_parent(target.parent, option, target)
    if target.is_dir() and not os.access(target, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {target}: folder is not writable")
    return target


def _refuse_symlink_loop(target: Path, option: str) -> Path:
    """Return ``target`` unless it is, or lies under, a symbolic link that leads back to itself."""
    try:
        os.stat(target)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(
                f"{option} {target} is a symbolic link loop (or lies under one); give a real path"
            ) from None
    except ValueError:  # a NUL byte: the checks after this one say what is wrong
        pass
    return target


def _refuse_enclosing(target: Path, option: str) -> None:
    """Refuse an output folder that is the file-system root, the home folder or the current folder (or above).

    An output folder is swapped in as a whole; swapping the folder a process stands in is never meant.
    """
    resolved = target.resolve()
    cwd = Path.cwd().resolve()
    what = None
    if resolved == Path(resolved.anchor):
        what = "the file-system root"
    elif resolved == Path.home().resolve():
        what = "your home folder"
    elif resolved == cwd or resolved in cwd.parents:
        what = "the current folder" if resolved == cwd else "a folder above the current one"
    if what:
        raise OutputError(f"{option} {target} is {what}; give a sub-folder for the output, e.g. {option} out")


_HELD_LOCKS: dict[str, int] = {}
"""Lock files this process holds → their descriptor (a second ``lock_output`` of the same path nests)."""


def lock_path(path: str | os.PathLike[str]) -> Path:
    """Return the lock file of output ``path``: ``.<name>.lock`` beside it (it survives a folder swap)."""
    target = Path(path)
    return target.parent / f".{target.name}.lock"


@contextmanager
def lock_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold an exclusive lock on output ``path`` (a file or folder) while the body runs.

    The lock is ``fcntl.flock`` on :func:`lock_path`, which records the holder's pid; the kernel drops it
    when the holder dies, even by SIGKILL, so a stale lock file never blocks. Nested calls for the same
    path in one process share the lock.

    Raises:
        OutputLockedError: when another process holds it: ``X is being written by another process (pid N)``.

    """
    import fcntl

    target = Path(path)
    lock = lock_path(target)
    lock.parent.mkdir(parents=True, exist_ok=True)
    key = str(lock.resolve())
    if key in _HELD_LOCKS:
        yield target
        return
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise OutputLockedError(
                f"{target} is being written by another process (pid {holder}); wait for it to finish "
                "or choose another output"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file between our open and flock: lock the new one
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _HELD_LOCKS[key] = fd
    _remove_stale_temps(target)
    try:
        yield target
    finally:
        del _HELD_LOCKS[key]
        lock.unlink(missing_ok=True)
        os.close(fd)


def _remove_stale_temps(target: Path) -> None:
    """Remove the temporary files and folders a killed writer of ``target`` left beside it (lock held)."""
    for stale in target.parent.glob(f".{glob.escape(target.name)}.*{TMP_SUFFIX}"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def _fsync_tree(folder: Path) -> None:
    """Fsync every file and folder under ``folder`` (bottom-up), so a swap publishes durable data."""
    for root, _dirs, files in os.walk(folder, topdown=False):
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                os.fsync(handle.fileno())
        _fsync_dir(Path(root))


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two folders (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _carry_over(old: Path, new: Path, replaces: tuple[str, ...]) -> None:
    """Hard-link (or copy) into ``new`` the entries of ``old`` it does not write and ``replaces`` drops."""
    for entry in old.iterdir():
        if (new / entry.name).exists() or any(fnmatch.fnmatch(entry.name, p) for p in replaces):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, new / entry.name)


def _link_or_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@contextmanager
def atomic_dir(path: str | os.PathLike[str], replaces: Iterable[str] = ()) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; on success swap it in as ``path`` in one step.

    A reader (or a writer killed at any point) sees the old complete folder or the new complete one,
    never a mix. Entries of the old folder that the body did not write are carried over (hard links),
    except names matching a ``replaces`` glob: those are stale outputs and disappear (e.g. last run's
    parquet when this run writes none). The folder is locked (:func:`lock_output`) while it is written;
    temporary folders a killed writer left beside it are removed first.

    Example:
        >>> import tempfile, pathlib
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "data"
        >>> with atomic_dir(out) as tmp:
        ...     _ = (tmp / "a.txt").write_text("new")
        >>> sorted(p.name for p in out.iterdir())
        ['a.txt']

    Raises:
        OutputLockedError: when another process is writing ``path``.

    """
    dest = Path(os.path.abspath(path))
    if dest.is_symlink():  # swap the folder the link points at, keep the link
        dest = dest.resolve()
    patterns = tuple(replaces)
    if str(dest.resolve()) in _OPEN_TEMPS:  # already the private temporary folder of an outer atomic_dir
        yield dest
        return
    _refuse_enclosing(dest, "output folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with lock_output(dest):  # (which also removes what a killed writer left beside dest)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=TMP_SUFFIX, dir=dest.parent))
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700: give the folder the mode mkdir() would have
        key = str(tmp.resolve())
        _OPEN_TEMPS.add(key)
        try:
            yield tmp
            if dest.is_dir():
                _carry_over(dest, tmp, patterns)
            _fsync_tree(tmp)
            if not dest.exists():
                os.rename(tmp, dest)
            elif _exchange(tmp, dest):
                shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old folder
            else:  # no atomic exchange here: two renames, the old folder kept until the new one is in
                old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", suffix=TMP_SUFFIX, dir=dest.parent))
                os.rmdir(old)
                os.rename(dest, old)
                os.rename(tmp, dest)
                shutil.rmtree(old, ignore_errors=True)
            _fsync_dir(dest.parent)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise _naming_output(exc, dest, tmp) from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            _OPEN_TEMPS.discard(key)


def _naming_output(exc: OSError, dest: Path, tmp: Path) -> OSError:
    """Return ``exc`` naming ``dest`` where it names no file (disk full) or only the temporary one."""
    named = str(exc.filename) if exc.filename is not None else ""
    found = re.search(r"\(os error (\d+)\)", str(exc))  # polars: a plain OSError with the code in its text
    code = exc.errno if exc.errno is not None else (int(found.group(1)) if found else None)
    if code is None or (named and not named.startswith(str(tmp))):
        return exc
    return type(exc)(code, exc.strerror or os.strerror(code), str(dest))


_OPEN_TEMPS: set[str] = set()
"""Temporary folders :func:`atomic_dir` is filling in this process (a nested call writes into one)."""


# ───────────────────────────── strict JSON ─────────────────────────────


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice."""


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"duplicate key {key!r} in a JSON object")
        out[key] = value
    return out


def loads_strict(text: str | bytes) -> Any:
    """Decode JSON like :func:`json.loads`, but reject duplicate keys and nesting too deep to decode.

    ``{"a": 1, "a": 2}`` is an error here (``json.loads`` silently keeps the last value), so a tool call or
    plan that says two things never has one of them dropped.

    Example:
        >>> loads_strict('{"a": 1}')
        {'a': 1}
        >>> loads_strict('{"a": 1, "a": 2}')
        Traceback (most recent call last):
        ...
        star_lib.io.DuplicateKeyError: duplicate key 'a' in a JSON object

    Raises:
        ValueError: invalid JSON, a duplicate key (:class:`DuplicateKeyError`), or nesting too deep.

    """
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicates)
    except RecursionError:
        raise ValueError("JSON nested too deeply to decode") from None
