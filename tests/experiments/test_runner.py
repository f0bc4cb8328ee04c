"""Local runs through the real stages: world → synth → teacher (expert) → eval of the expert's plans."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from star_lib.experiments.config import CONFIGS_DIR, ConfigError, ExperimentConfig
from star_lib.experiments.grids import factorial
from star_lib.experiments.results import load_results
from star_lib.experiments.runner import read_run_record, run_experiment, run_grid_local
from star_lib.experiments.stages import Registry, Stage
from star_lib.experiments.status import grid_status

STAGES = ["world", "synth", "teacher", "eval"]
BASE = {"stages": STAGES, "rl_data_size": 10, "synth": {"n_base": 30}, "world": {"scale": "small"}}


def stage_dirs(cache: Path) -> set[str]:
    return {f"{p.parent.name}/{p.name}" for p in cache.glob("*/*") if p.is_dir()}


def test_runner_tiny_grid_gives_four_runs_and_rerun_reruns_nothing(tmp_path, training_experiment):
    grid = factorial("rewards", training_experiment, {"reward": ["sum", "success"]}, seeds=[0, 1])
    results = run_grid_local(grid, tmp_path / "runs")
    assert [r.status for r in results] == ["done"] * 4, [r.error for r in results]

    # shared stages ran once: world, synth, teacher and SFT (none reads the reward or the seed)
    computed = [(s["stage"], s["reused"]) for r in results for s in r.stages]
    for stage in ("world", "synth", "teacher", "sft"):
        assert computed.count((stage, False)) == 1, stage
    assert computed.count(("rl", False)) == 4  # RL and eval read the seed and the reward axes
    assert computed.count(("eval", False)) == 4

    table = load_results(tmp_path / "runs")
    assert table.runs == 4
    final = table.frame.filter(pl.col("metric") == "eval/final_pass")
    assert final.height == 4
    assert sorted(zip(final["reward"], final["seed"], strict=True)) == [
        ("success", 0),
        ("success", 1),
        ("sum", 0),
        ("sum", 1),
    ]
    assert final["value"].is_between(0.0, 1.0).all()
    steps = table.frame.filter(pl.col("metric").is_in(["sft/steps", "rl/steps"]))
    assert sorted(set(zip(steps["metric"], steps["value"], strict=True))) == [
        ("rl/steps", 4.0),
        ("sft/steps", 6.0),
    ]
    assert table.problems.height == 0
    head = subprocess.run(["git", "-C", str(CONFIGS_DIR.parent), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "unknown"  # fmt: skip
    for run in grid.runs:
        run_dir = tmp_path / "runs" / "rewards" / run.name
        for name in ("config.yaml", "metrics.parquet", "rollouts.parquet", "eval.parquet", "run.json"):
            assert (run_dir / name).is_file(), name
        record = read_run_record(run_dir)
        assert record["status"] == "done" and record["wall_s"] > 0 and record["gpu_hours"] == 0.0
        assert record["commit"] == head and isinstance(record["dirty"], bool)  # the code that made it

    # running it again reruns nothing
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("*") if p.is_file()}
    again = run_grid_local(grid, tmp_path / "runs")
    assert [r.status for r in again] == ["skipped"] * 4
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").rglob("*") if p.is_file()}
    changed = [p for p in after if before.get(p) != after[p] and p.name != "grid.yaml"]
    assert changed == []
    assert [s.state for s in grid_status(tmp_path / "runs" / "rewards")] == ["done"] * 4


def test_runner_changed_axis_reruns_only_the_stages_that_read_it(tmp_path):
    cache = tmp_path / "cache"
    first = run_experiment(
        ExperimentConfig.from_dict({**BASE, "name": "a"}), tmp_path / "g" / "a", cache=cache
    )
    second = run_experiment(
        ExperimentConfig.from_dict({**BASE, "name": "b", "rl_data_size": 12}),
        tmp_path / "g" / "b",
        cache=cache,
    )
    reused = {s["stage"]: s["reused"] for s in second.stages}
    # the RL prompt count changes synth's output, but not the SFT pool the teacher reads, nor the test split
    assert reused == {"world": True, "synth": False, "teacher": True, "eval": True}
    assert {s["stage"]: s["key"] for s in first.stages}["teacher"] == {
        s["stage"]: s["key"] for s in second.stages
    }["teacher"]


def test_runner_rebuilds_the_stages_that_score_plans_when_the_checks_change(tmp_path, monkeypatch):
    from star_lib.experiments.stages import registry as stage_registry

    cache = tmp_path / "cache"
    run_experiment(ExperimentConfig.from_dict({**BASE, "name": "a"}), tmp_path / "g" / "a", cache=cache)
    monkeypatch.setattr(stage_registry, "VERDICTS_VERSION", stage_registry.VERDICTS_VERSION + 1)
    second = run_experiment(
        ExperimentConfig.from_dict({**BASE, "name": "b"}), tmp_path / "g" / "b", cache=cache
    )
    reused = {s["stage"]: s["reused"] for s in second.stages}
    # synth verifies its reference plans, the teacher keeps passing episodes, eval scores: all rebuilt
    assert reused == {"world": True, "synth": False, "teacher": False, "eval": False}


def test_runner_failed_stage_is_recorded_and_reported(tmp_path):
    config = ExperimentConfig.from_dict(
        {**BASE, "name": "broken", "world": {"source": "csv", "csv_dir": str(tmp_path / "no-such-db")}}
    )
    run_dir = tmp_path / "runs" / "g" / "broken"
    with pytest.raises(FileNotFoundError):
        run_experiment(config, run_dir)
    record = read_run_record(run_dir)
    assert record["status"] == "failed"
    assert "no-such-db" in record["error"]
    [status] = grid_status(tmp_path / "runs" / "g")
    assert status.state == "failed" and status.error == record["error"]
    table = load_results(tmp_path / "runs")
    assert table.runs == 0
    assert table.problems.rows(named=True)[0]["status"] == "failed"


RUNNER = textwrap.dedent(
    """
    import sys, json
    from star_lib.experiments.config import ExperimentConfig
    from star_lib.experiments.runner import run_experiment
    run_experiment(ExperimentConfig.from_dict(json.loads(sys.argv[1])), sys.argv[2], cache=sys.argv[3])
    """
)


def kill_when(config: dict, run_dir: Path, cache: Path, pattern: str, timeout: float) -> None:
    """Run ``config`` in a child process and SIGKILL it as soon as a file matching ``pattern`` exists."""
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, json.dumps(config), str(run_dir), str(cache)])
    try:
        deadline = time.monotonic() + timeout
        while not list(cache.glob(pattern)):
            assert proc.poll() is None, f"the run ended before {pattern} appeared"
            assert time.monotonic() < deadline, f"no {pattern} after {timeout} s"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def test_runner_killed_run_resumes_eval_from_its_checkpoint_with_equal_metrics(tmp_path):
    config = {
        **BASE,
        "name": "slow",
        "tool_latency_ms": 40.0,
        "tool_failure_rate": 0.1,
        "synth": {"n_base": 60},
        "eval": {"chunk_size": 1},
    }
    cache = tmp_path / "cache"
    kill_when(config, tmp_path / "g" / "slow", cache, "eval/*.partial/_checkpoints/chunks/*.parquet", 900)
    [partial] = list(cache.glob("eval/*.partial"))
    saved = len(list((partial / "_checkpoints" / "chunks").glob("*.parquet")))
    assert read_run_record(tmp_path / "g" / "slow")["status"] == "running"  # killed: no chance to record
    [status] = grid_status(tmp_path / "g")
    assert status.state == "failed" and "ended before the run finished" in status.error

    resumed = run_experiment(ExperimentConfig.from_dict(config), tmp_path / "g" / "slow", cache=cache)
    assert not partial.exists()  # the work folder was committed (renamed) after the resume
    eval_stage = {s["stage"]: s for s in resumed.stages}["eval"]
    assert eval_stage["reused"] is False
    pids = {entry["pid"] for entry in _progress(cache, eval_stage["key"])}
    starts = [entry["start"] for entry in _progress(cache, eval_stage["key"])]
    assert len(pids) == 2 and len(starts) == len(set(starts))  # two processes, no chunk computed twice
    assert saved >= 1

    fresh = run_experiment(
        ExperimentConfig.from_dict(config), tmp_path / "h" / "slow", cache=tmp_path / "cache2"
    )
    assert _final_metrics(tmp_path / "g" / "slow") == _final_metrics(tmp_path / "h" / "slow")
    assert fresh.status == "done"


def _progress(cache: Path, key: str) -> list[dict]:
    return json.loads((cache / "eval" / key / "stage.json").read_text())["chunk_log"]


def _final_metrics(run_dir: Path) -> dict[str, float]:
    frame = pl.read_parquet(run_dir / "metrics.parquet").filter(
        pl.col("metric").str.starts_with("eval/") | (pl.col("metric") == "reward/mean")
    )
    return dict(zip(frame["metric"], frame["value"], strict=True))


def test_runner_killed_run_resumes_rl_training_from_its_checkpoint_with_equal_metrics(
    tmp_path, training_experiment, stable_metrics, same_metrics
):
    config = {**training_experiment, "name": "train", "tool_failure_rate": 0.2}
    cache = tmp_path / "cache"
    kill_when(
        config, tmp_path / "g" / "train", cache, "rl/*.partial/checkpoints/checkpoint-2/star_state.json", 1200
    )

    resumed = run_experiment(ExperimentConfig.from_dict(config), tmp_path / "g" / "train", cache=cache)
    assert resumed.status == "done"
    stages = {s["stage"]: s for s in resumed.stages}
    assert stages["sft"]["reused"] and not stages["rl"]["reused"]
    record = json.loads((cache / "rl" / stages["rl"]["key"] / "stage.json").read_text())
    assert record["resumed_from"] in ("checkpoint-2", "checkpoint-3")
    log = pl.read_parquet(cache / "rl" / stages["rl"]["key"] / "train_log.parquet")
    assert sorted(log.filter(pl.col("train/loss").is_not_null())["step"].to_list()) == [1, 2, 3, 4]

    # the uninterrupted reference: the same run in a cache holding the stages before RL (they are
    # content-keyed; SFT's own kill-and-resume is test_sft_resumed_run_equals_an_uninterrupted_one's)
    fresh_cache = tmp_path / "c2"
    before_rl = lambda folder, names: {"rl", "eval"} if folder == str(cache) else ()  # noqa: E731
    shutil.copytree(cache, fresh_cache, ignore=before_rl)
    fresh = run_experiment(ExperimentConfig.from_dict(config), tmp_path / "h" / "train", cache=fresh_cache)
    assert fresh.status == "done"
    assert {s["stage"] for s in fresh.stages if not s["reused"]} == {"rl", "eval"}
    expected = stable_metrics(tmp_path / "h" / "train")
    same_metrics(stable_metrics(tmp_path / "g" / "train"), expected)
    tokens = [r["value"] for r in expected if r["metric"] == "env/model_tokens" and r["stage"] == "rl"]
    assert len(tokens) == 4 and len(set(tokens)) > 1  # sampled episodes differ per step: the RNG was restored


@dataclass(frozen=True)
class _NoOptions:
    pass


def test_runner_computes_stages_with_the_configured_torch_threads_and_restores_them(tmp_path):
    import torch

    seen: list[int] = []

    def world(cfg, inputs, out):
        seen.append(torch.get_num_threads())
        return {}

    registry = Registry()
    registry.add(Stage("world", world, _NoOptions))
    before = torch.get_num_threads()
    config = ExperimentConfig(name="t", stages=("world",), threads=1)
    result = run_experiment(config, tmp_path / "g" / "t", cache=tmp_path / "cache", registry=registry)
    assert result.status == "done" and seen == [1]
    assert torch.get_num_threads() == before
    [stage] = (tmp_path / "cache" / "world").glob("*/stage.json")
    assert json.loads(stage.read_text())["threads"] == 1  # recorded, though no part of the key


def test_config_threads_must_be_a_non_negative_integer():
    with pytest.raises(ConfigError, match="threads: -1"):
        ExperimentConfig(threads=-1)
    with pytest.raises(ConfigError, match="threads: '2'"):
        ExperimentConfig(threads="2")
