"""Content-addressed stage outputs: a stage whose config and inputs are unchanged is reused, not rerun.

A stage's output folder is ``<cache>/<stage>/<key>/`` where ``key`` hashes the stage name, its code version,
its resolved config and the content hashes of the input artifacts it reads. A grid that varies only the
reward therefore shares one world, one synthesised data set, one teacher set and one SFT checkpoint.

Building a stage (:meth:`StageStore.build`):

1. take an exclusive ``flock`` on ``<key>.lock`` (concurrent jobs of a job array wait instead of duplicating);
2. run the stage into ``<key>.partial/`` — kept across a crash or a Slurm requeue, so a checkpointed stage
   resumes from what it saved there (files under ``_checkpoints/`` are dropped once it finishes);
3. write ``manifest.json`` (SHA-256 of every output file), ``stage.json`` (config, inputs, wall time), and the
   ``done`` marker last;
4. rename ``<key>.partial`` to ``<key>`` — the commit point: a folder named ``<key>`` is always complete.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from star_lib.io import file_sha256, read_json, write_json_atomic, write_text_atomic

CHECKPOINT_DIR = "_checkpoints"
"""Sub-folder of a stage's work folder for resumable state; removed when the stage finishes."""
_META_FILES = frozenset({"manifest.json", "stage.json", "done"})


def stable_hash(obj: Any, length: int = 20) -> str:
    """Hex SHA-256 of the canonical JSON form of ``obj`` (sorted keys), truncated to ``length``."""
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def machine_facts() -> dict[str, str]:
    """Return what a stage's numbers may depend on beyond its inputs: the CPU model and library versions.

    A seeded training stage reruns to the same numbers on one machine, but another CPU's kernels may round
    differently, so a stage record names the machine that produced it (torch only if already imported).
    """
    cpu, flags = platform.processor() or platform.machine(), set()
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        info = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in lines if ":" in line)}
        cpu, flags = info.get("model name", cpu), set(info.get("flags", "").split())
    widest = next((f for f in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if f in flags), "")
    facts = {"cpu": cpu + (f" ({widest})" if widest else ""), "python": platform.python_version()}
    for name in ("torch", "transformers"):
        module = sys.modules.get(name)
        if module is not None:
            facts[name] = str(getattr(module, "__version__", "?"))
    return facts


@dataclass(frozen=True)
class StageOutput:
    """A finished stage output folder."""

    stage: str
    """Stage name."""
    key: str
    """Content key (folder name)."""
    path: Path
    """The folder holding the outputs."""
    reused: bool
    """True when the output existed already and nothing ran."""
    info: dict[str, Any]
    """Contents of ``stage.json`` (config, inputs, wall_s, gpus, …)."""

    def file_hash(self, rel: str = ".") -> str:
        """Content hash of one output file, or of every file under a sub-folder (``"."`` = all outputs)."""
        manifest: dict[str, str] = read_json(self.path / "manifest.json")
        rel = rel.strip("/")
        if rel in manifest:
            return manifest[rel]
        prefix = "" if rel in ("", ".") else rel + "/"
        entries = {k: v for k, v in manifest.items() if k.startswith(prefix)}
        if not entries:
            raise FileNotFoundError(
                f"stage {self.stage} ({self.path}) has no output {rel!r}; it has {sorted(manifest)}"
            )
        return stable_hash(entries, length=64)


class StageStore:
    """The content-addressed folder of stage outputs (default ``runs/_stages``)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def key(self, stage: str, version: str, config: Any, input_hashes: dict[str, str]) -> str:
        """Return the content key of a stage run."""
        return stable_hash({"stage": stage, "version": version, "config": config, "inputs": input_hashes})

    def path(self, stage: str, key: str) -> Path:
        """Return final folder of a stage output (complete whenever it exists with its ``done`` marker)."""
        return self.root / stage / key

    def lookup(self, stage: str, key: str) -> StageOutput | None:
        """Return the finished output for ``key``, or None."""
        final = self.path(stage, key)
        if not (final / "done").is_file():
            return None
        return StageOutput(stage, key, final, True, read_json(final / "stage.json"))

    @contextmanager
    def _locked(self, stage: str, key: str) -> Iterator[None]:
        lock_path = self.root / stage / f"{key}.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "a+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def build(
        self,
        stage: str,
        key: str,
        produce: Callable[[Path], dict[str, Any] | None],
        info: dict[str, Any],
    ) -> StageOutput:
        """Return the output for ``key``, running ``produce(work_dir)`` first unless it already exists.

        Args:
            stage: Stage name.
            key: Content key from :meth:`key`.
            produce: Writes the stage's files into the work folder it is given; may return extra
                information (e.g. ``{"gpus": 8}``) merged into ``stage.json``.
            info: What ``stage.json`` records (config, input hashes).

        """
        found = self.lookup(stage, key)
        if found is not None:
            return found
        with self._locked(stage, key):
            found = self.lookup(stage, key)
            if found is not None:
                return found
            work = self.root / stage / f"{key}.partial"
            work.mkdir(parents=True, exist_ok=True)
            started = time.time()
            elapsed_file = work / ".elapsed_s"
            before = float(elapsed_file.read_text()) if elapsed_file.is_file() else 0.0
            try:
                extra = produce(work) or {}
            except BaseException:  # crash, preemption (SystemExit from submitit), Ctrl-C: keep the time spent
                write_text_atomic(elapsed_file, repr(before + time.time() - started))
                raise
            shutil.rmtree(work / CHECKPOINT_DIR, ignore_errors=True)
            record = {
                **info,
                **extra,
                "stage": stage,
                "key": key,
                "host": socket.gethostname(),
                "machine": machine_facts(),
                "started": started,
                "wall_s": before + time.time() - started,
                "wall_s_before_resume": before,
            }
            elapsed_file.unlink(missing_ok=True)
            write_json_atomic(work / "manifest.json", _manifest(work))
            write_json_atomic(work / "stage.json", record)
            write_text_atomic(work / "done", f"{key}\n")
            final = self.path(stage, key)
            if final.exists():  # a stale incomplete folder (no done marker) from an older layout
                shutil.rmtree(final)
            os.replace(work, final)
            return StageOutput(stage, key, final, False, record)


def _manifest(folder: Path) -> dict[str, str]:
    """SHA-256 of every output file under ``folder`` (metadata files and temporaries excluded)."""
    out: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(folder).as_posix()
        if rel in _META_FILES or path.name.startswith(".") or rel.startswith(CHECKPOINT_DIR + "/"):
            continue
        out[rel] = file_sha256(path)
    return out
