"""A full disk ends a writing command in one line naming the output, leaving nothing half-written.

A write that fails for lack of space raises an ``OSError`` that names no file (polars names none either,
and puts the code only in its text). The atomic writers attach the output's path, so the command's error
boundary can say which output failed. The real case mounts a 32 kB tmpfs (root only, as in CI); the other
fakes the failing ``fsync`` so it runs anywhere.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from star_lib.cli import main


@pytest.fixture()
def eval_inputs(tmp_path: Path, tp_dir: Path) -> list[str]:
    """``star eval`` arguments for three real queries and their gold plans."""
    queries, plans = tmp_path / "queries.jsonl", tmp_path / "plans.jsonl"
    with queries.open("w") as q_out, plans.open("w") as p_out:
        for idx, line in enumerate((tp_dir / "train.jsonl").read_text().splitlines()[:3]):
            record = json.loads(line)
            q_out.write(json.dumps({k: v for k, v in record.items() if k != "annotated_plan"}) + "\n")
            days = [d for d in ast.literal_eval(record["annotated_plan"])[1] if d]
            p_out.write(json.dumps({"idx": idx, "query": record["query"], "plan": days}) + "\n")
    return ["eval", "--queries", str(queries), "--plans", str(plans), "--db", str(tp_dir / "database")]


@pytest.fixture()
def full_disk(tmp_path: Path):
    """A 32 kB tmpfs folder (skipped where this process may not mount one)."""
    folder = tmp_path / "full"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(folder)], check=False)
    if mounted.returncode != 0:
        pytest.skip("this machine refuses to mount a tmpfs")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


def _says_disk_full(err: str, output: Path) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "No space left on device" in lines[0] and str(output) in lines[0], lines[0]


def test_world_synth_on_a_full_disk_names_the_output(full_disk: Path, capsys) -> None:
    out = full_disk / "world"
    assert main(["world", "synth", "--out", str(out)]) == 2
    _says_disk_full(capsys.readouterr().err, out)
    assert not out.exists() and not any(full_disk.iterdir())  # no half-written database, no temp folder


def test_eval_per_plan_on_a_full_disk_names_the_output(full_disk: Path, eval_inputs, capsys) -> None:
    with (full_disk / "filler").open("wb", buffering=0) as filler:  # fill the disk to the last byte
        try:
            while True:
                filler.write(b"x" * 1024)
        except OSError:
            pass
    verdicts = full_disk / "verdicts.jsonl"
    assert main([*eval_inputs, "--per-plan", str(verdicts)]) == 2
    _says_disk_full(capsys.readouterr().err, verdicts)
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


def test_a_write_error_without_a_file_name_names_the_output(tmp_path: Path, eval_inputs, monkeypatch, capsys):
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("star_lib.io.os.fsync", no_space)
    verdicts = tmp_path / "out" / "verdicts.jsonl"
    assert main([*eval_inputs, "--per-plan", str(verdicts)]) == 2
    _says_disk_full(capsys.readouterr().err, verdicts)
    assert list(verdicts.parent.iterdir()) == []
