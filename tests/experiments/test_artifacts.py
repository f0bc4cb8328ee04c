"""Content-addressed stage outputs: reuse, commit by rename, resumable work folders, one builder at a time."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from star_lib.experiments.artifacts import CHECKPOINT_DIR, StageStore, stable_hash


def test_artifacts_key_depends_on_stage_version_config_and_inputs(tmp_path):
    store = StageStore(tmp_path)
    base = store.key("eval", "1", {"seed": 0}, {"world": "abc"})
    assert base == store.key("eval", "1", {"seed": 0}, {"world": "abc"})
    assert base != store.key("eval", "2", {"seed": 0}, {"world": "abc"})
    assert base != store.key("eval", "1", {"seed": 1}, {"world": "abc"})
    assert base != store.key("eval", "1", {"seed": 0}, {"world": "abd"})
    assert base != store.key("synth", "1", {"seed": 0}, {"world": "abc"})
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})


def test_artifacts_build_runs_once_then_reuses(tmp_path):
    store = StageStore(tmp_path)
    calls = []

    def produce(work: Path):
        calls.append(work)
        (work / "out.txt").write_text("hello")
        (work / "sub").mkdir()
        (work / "sub" / "a.txt").write_text("a")
        return {"gpus": 0}

    first = store.build("world", "k1", produce, {"config": {}})
    second = store.build("world", "k1", produce, {"config": {}})
    assert len(calls) == 1
    assert not first.reused and second.reused
    assert (first.path / "done").is_file() and first.path.name == "k1"
    assert not (tmp_path / "world" / "k1.partial").exists()
    assert second.file_hash("out.txt") != second.file_hash("sub")
    assert second.file_hash(".") == first.file_hash(".")
    with pytest.raises(FileNotFoundError, match="no output 'missing'"):
        second.file_hash("missing")


def test_artifacts_failed_build_keeps_work_for_resume_and_commits_nothing(tmp_path):
    store = StageStore(tmp_path)

    def crash(work: Path):
        (work / CHECKPOINT_DIR).mkdir(exist_ok=True)
        (work / CHECKPOINT_DIR / "step-1").write_text("state")
        raise RuntimeError("preempted")

    with pytest.raises(RuntimeError):
        store.build("sft", "k", crash, {})
    assert store.lookup("sft", "k") is None
    assert (tmp_path / "sft" / "k.partial" / CHECKPOINT_DIR / "step-1").is_file()
    elapsed = tmp_path / "sft" / "k.partial" / ".elapsed_s"
    assert float(elapsed.read_text()) > 0  # the time of the failed attempt is kept

    seen = []

    def resume(work: Path):
        seen.append((work / CHECKPOINT_DIR / "step-1").read_text())
        (work / "model.bin").write_text("weights")

    out = store.build("sft", "k", resume, {})
    assert seen == ["state"]
    assert not (out.path / CHECKPOINT_DIR).exists()  # checkpoints are dropped once finished
    assert out.info["wall_s"] >= out.info["wall_s_before_resume"] > 0


def _slow_builder(root: str, marker: str) -> None:
    def produce(work: Path):
        with open(marker, "a") as fh:
            fh.write("built\n")
        time.sleep(0.5)
        (work / "x").write_text("x")

    StageStore(root).build("world", "shared", produce, {})


def test_artifacts_concurrent_builders_build_once(tmp_path):
    marker = tmp_path / "calls.txt"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_slow_builder, args=(str(tmp_path / "cache"), str(marker))) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert marker.read_text().count("built") == 1
