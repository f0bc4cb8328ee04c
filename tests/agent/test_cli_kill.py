"""Kill tests: ``star synth``, ``teacher``, ``rollout`` and ``eval --per-plan`` SIGKILLed at several points.

Each command first writes an old complete output (A). A child process then reruns it with other options
(whose uninterrupted output is B) and is SIGKILLed at one point:

- ``started``: once it holds the output lock (the work has begun, nothing written yet);
- ``mid-write``: at the first fsync of a new file, after cutting that temporary file to half its size
  (a writer killed half-way through a file);
- ``before-swap``: just before the new output replaces the old one (folder exchange / file rename);
- ``after-swap``: just after it.

Afterwards the output must be exactly A (killed before the swap) or exactly B (after it) — never empty, a
mix of A's and B's files, or a truncated file — and the next run must finish and leave no temporary file or
lock behind. The child signals each point by writing a marker file and waits there; the parent waits for
the marker (no fixed sleeps; deadlines are generous for slow CI machines).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from star_lib.cli import main

POINTS = ("started", "mid-write", "before-swap", "after-swap")
DEADLINE_S = 600.0

CHILD = r"""
import json, os, stat, sys, time
from pathlib import Path

point, marker, target, argv = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4])
import star_lib.io as io

def reached():
    marker.write_text(str(os.getpid()))
    time.sleep(3600)

if point == "mid-write":
    real_fsync = os.fsync
    def fsync(fd):
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            os.ftruncate(fd, info.st_size // 2)
            reached()
        return real_fsync(fd)
    os.fsync = fsync
elif point in ("before-swap", "after-swap"):
    real_exchange, real_replace = io._exchange, os.replace
    def exchange(a, b):
        if point == "before-swap":
            reached()
        done = real_exchange(a, b)
        reached()
        return done
    def replace(src, dst, *args, **kwargs):
        ours = Path(dst) == target
        if ours and point == "before-swap":
            reached()
        out = real_replace(src, dst, *args, **kwargs)
        if ours:
            reached()
        return out
    io._exchange = exchange
    os.replace = replace

from star_lib.cli import main
sys.exit(main(argv))
"""


def _snapshot(out: Path) -> dict[str, bytes]:
    """The output's comparable content: every file's bytes (``stats.json`` without its timings)."""
    if out.is_file():
        return {out.name: out.read_bytes()}
    snap = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "stats.json":
            stats = json.loads(data)
            data = json.dumps(
                {k: v for k, v in stats.items() if "second" not in k and k != "seconds"}
            ).encode()
        snap[str(path.relative_to(out))] = data
    return snap


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(".") and out.name in p.name)


def _kill_at(point: str, argv: list[str], out: Path, tmp: Path) -> None:
    """Run ``star argv`` in a child and SIGKILL it at ``point``; fail if it ends before reaching it."""
    marker = tmp / f"reached-{point}"
    marker.unlink(missing_ok=True)
    script = tmp / "child.py"
    script.write_text(CHILD)
    lock = out.parent / f".{out.name}.lock"
    child = subprocess.Popen(
        [sys.executable, str(script), point, str(marker), str(out), json.dumps(argv)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    deadline = time.monotonic() + DEADLINE_S
    event = lock if point == "started" else marker
    while not event.exists():
        if child.poll() is not None:
            raise AssertionError(
                f"child ended (rc {child.returncode}) before {point}: {child.stderr.read()[-2000:]}"
            )
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError(f"child never reached {point} in {DEADLINE_S:.0f} s")
        time.sleep(0.005)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    child.stderr.close()


def _check_kills(
    argv_a: list[str],
    argv_b: list[str],
    out: Path,
    tmp: Path,
    points: tuple[str, ...] = POINTS,
    locked: bool = True,
) -> None:
    assert main(argv_b) == 0
    new = _snapshot(out)
    assert main(argv_a) == 0
    old = _snapshot(out)
    assert old != new and old and new
    for point in points:  # each kill starts from the old output and what the previous kill left behind
        _kill_at(point, argv_b, out, tmp)
        now = _snapshot(out)
        expected = new if point == "after-swap" else old
        assert now == expected, f"{point}: output is neither the old nor the new complete one"
    assert main(argv_a) == 0  # the next run succeeds (a dead writer's lock never blocks) …
    assert _snapshot(out) == old
    if locked:
        assert _leftovers(out) == []  # … and removes what the killed ones left
    else:  # a writer that takes no output lock cannot tell a dead writer's temporaries from a live one's
        assert all(name.endswith(".tmp") for name in _leftovers(out))


@pytest.fixture(scope="module")
def queries_file(tmp_path_factory):
    from star_lib.synth import SynthConfig, synthesize
    from star_lib.travel.world import World

    records = synthesize(World.synthetic(seed=2, scale="tiny"), SynthConfig(n=6, seed=2)).records
    path = tmp_path_factory.mktemp("q") / "train.jsonl"
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return path


def test_kill_synth_leaves_the_old_or_the_new_dataset(tmp_path):
    out = tmp_path / "queries"

    def argv(seed: int, parquet: bool) -> list[str]:
        args = ["synth", "--world", "synthetic:tiny:0", "--n", "12", "--seed", str(seed), "--out", str(out)]
        return [*args, "--no-progress", *([] if parquet else ["--no-parquet"])]

    # the new run writes no parquet: killed after its swap, the old run's parquet must be gone too
    _check_kills(argv(1, parquet=True), argv(2, parquet=False), out, tmp_path)


def test_kill_teacher_leaves_the_old_or_the_new_sft_set(queries_file, tmp_path):
    out = tmp_path / "sft"

    def argv(limit: int) -> list[str]:
        return [
            "teacher", "--queries", str(queries_file), "--world", "synthetic:tiny:2", "--limit", str(limit),
            "--out", str(out), "--no-progress",
        ]  # fmt: skip

    _check_kills(argv(2), argv(5), out, tmp_path)


def test_kill_rollout_leaves_the_old_or_the_new_parquet(queries_file, tmp_path, tiny_model, qwen_tokenizer):
    model_dir = tmp_path / "model"
    tiny_model.save_pretrained(model_dir)
    qwen_tokenizer.save_pretrained(model_dir)
    out = tmp_path / "runs" / "rollouts.parquet"

    def argv(limit: int) -> list[str]:
        return [
            "rollout", "--model", str(model_dir), "--queries", str(queries_file),
            "--world", "synthetic:tiny:2",
            "--out", str(out), "--limit", str(limit), "--max-turns", "1", "--max-new-tokens", "4",
            "--device", "cpu", "--no-progress",
        ]  # fmt: skip

    _check_kills(argv(1), argv(3), out, tmp_path)


def test_kill_eval_per_plan_leaves_the_old_or_the_new_verdicts(tmp_path):
    """``star eval --per-plan`` over an existing file (no lock: killed mid-file, before/after the rename)."""
    db = tmp_path / "db"
    assert main(["world", "synth", "--scale", "tiny", "--seed", "0", "--out", str(db)]) == 0
    data = tmp_path / "q"
    assert (
        main(["synth", "--world", str(db), "--n", "12", "--out", str(data), "--no-progress", "--no-parquet"])
        == 0
    )
    rows = [json.loads(line) for line in (data / "train.jsonl").read_text().splitlines()]
    plans_a, plans_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    plans_a.write_text("".join(json.dumps({"plan": r["reference_plan"]}) + "\n" for r in rows))
    plans_b.write_text("".join(json.dumps({"plan": r["reference_plan"][:1]}) + "\n" for r in rows))
    out = tmp_path / "verdicts.jsonl"

    def argv(plans: Path) -> list[str]:
        return ["eval", "--queries", str(data / "train.jsonl"), "--plans", str(plans), "--db", str(db),
                "--per-plan", str(out)]  # fmt: skip

    _check_kills(
        argv(plans_a),
        argv(plans_b),
        out,
        tmp_path,
        points=("mid-write", "before-swap", "after-swap"),
        locked=False,
    )
