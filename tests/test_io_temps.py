"""A killed writer's temporary file is removed by the next write of the same file; a live writer's is kept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from star_lib.io import TMP_SUFFIX, atomic_path, write_jsonl_atomic

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, capture_output=True, text=True)


def _temps(dest: Path) -> list[Path]:
    return sorted(dest.parent.glob(f".{dest.name}.*{TMP_SUFFIX}"))


def test_atomic_write_removes_the_temp_file_of_a_killed_writer(tmp_path):
    dest = tmp_path / "per_plan.jsonl"
    killed = _python(
        "import os\nfrom star_lib.io import atomic_path\n"
        f"with atomic_path({str(dest)!r}) as tmp:\n    tmp.write_text('half')\n    os._exit(9)\n"
    )
    assert killed.returncode == 9, killed.stderr
    assert len(_temps(dest)) == 1 and not dest.exists()  # what a killed `star eval --per-plan` leaves
    write_jsonl_atomic(dest, [{"idx": 0}])
    assert _temps(dest) == []
    assert dest.read_text() == '{"idx": 0}\n'


def test_atomic_write_keeps_the_temp_file_of_a_live_writer(tmp_path):
    dest = tmp_path / "per_plan.jsonl"
    with atomic_path(dest) as mine:  # this process is writing dest while another process writes it too
        mine.write_text('{"idx": 1}\n')
        other = _python(f"from star_lib.io import write_jsonl_atomic as w\nw({str(dest)!r}, [])\n")
        assert other.returncode == 0, other.stderr
        assert mine.exists()
    assert dest.read_text() == '{"idx": 1}\n'


def test_atomic_write_keeps_temp_files_of_other_machines_and_other_files(tmp_path):
    dest = tmp_path / "per_plan.jsonl"
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    kept = [
        tmp_path / f".{dest.name}.{dead.pid}@some-other-node.abc123{TMP_SUFFIX}",  # a shared folder's writer
        tmp_path / f".other.jsonl.{dead.pid}@x.abc123{TMP_SUFFIX}",
        tmp_path / f".{dest.name}.old{TMP_SUFFIX}",  # not a writer's file of this form
    ]
    for path in kept:
        path.write_text("keep")
    write_jsonl_atomic(dest, [])
    assert all(path.read_text() == "keep" for path in kept)
