"""Grids on a real single-node Slurm cluster through submitit (job arrays, cancel, checkpoint + requeue).

The runs execute the real stages world → synth → teacher (expert) → eval. The requeue test preempts a job
inside the eval stage, which checkpoints every chunk of episodes; the requeued job resumes after the last
saved chunk (RL does not exist yet in this checkout, so eval is the checkpointed stage exercised here).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import polars as pl
import pytest

from star_lib.cli import main as star
from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.grids import factorial
from star_lib.experiments.profiles import ClusterProfile
from star_lib.experiments.results import load_results
from star_lib.experiments.runner import read_run_record, run_experiment, submit_grid
from star_lib.experiments.status import grid_status

pytestmark = pytest.mark.slurm

PROFILE = ClusterProfile(
    name="test-a100", cluster="slurm", partition="a100", cpus_per_task=1, mem_gb=1, timeout_min=10
)
BASE = {"stages": ["world", "synth", "teacher", "eval"], "rl_data_size": 10, "synth": {"n_base": 30}}
SLOW = {
    **BASE,
    "tool_latency_ms": 60.0,
    "tool_failure_rate": 0.1,
    "synth": {"n_base": 60},
    "eval": {"chunk_size": 1},
}


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def test_slurm_grid_as_job_array_on_a100_reaches_the_results_store(slurm_cluster, tmp_path):
    grid = factorial("array", BASE, {"reward": ["sum", "success"]})
    jobs = submit_grid(grid, PROFILE, tmp_path / "runs")
    assert len(jobs) == 2
    parents = {job.job_id.split("_")[0] for job in jobs}
    assert len(parents) == 1 and all("_" in job.job_id for job in jobs)  # one array, two tasks
    outcomes = [job.result() for job in jobs]
    assert [o["status"] for o in outcomes] == ["done", "done"]

    parent = parents.pop()

    def accounting() -> list[list[str]]:
        out = slurm_cluster.run(
            "sacct", "-X", "-n", "--parsable2", "-o", "JobID,Partition,State", "-j", parent
        )
        return [line.split("|") for line in out.splitlines() if line]

    tasks = {f"{parent}_0": "COMPLETED", f"{parent}_1": "COMPLETED"}
    # slurmdbd learns the array task ids and final states a moment after the jobs end
    wait_for(
        lambda: {r[0]: r[2] for r in accounting()} == tasks, 30, "sacct to show both array tasks COMPLETED"
    )
    assert {r[1] for r in accounting()} == {"a100"}

    table = load_results(tmp_path / "runs")
    assert table.runs == 2
    final = table.frame.filter(pl.col("metric") == "eval/final_pass")
    assert sorted(final["reward"].to_list()) == ["success", "sum"]
    assert [s.state for s in grid_status(tmp_path / "runs" / "array")] == ["done", "done"]
    assert submit_grid(grid, PROFILE, tmp_path / "runs") == []  # complete runs are not resubmitted


def test_slurm_cancelled_job_surfaces_as_failed_in_star_status(slurm_cluster, tmp_path, capsys):
    grid = factorial("cancel", SLOW, {"reward": ["sum"]})
    [job] = submit_grid(grid, PROFILE, tmp_path / "runs")
    run_dir = tmp_path / "runs" / "cancel" / grid.runs[0].name
    wait_for(lambda: (read_run_record(run_dir) or {}).get("status") == "running", 60, "the run to start")
    slurm_cluster.run("scancel", job.job_id)
    wait_for(lambda: grid_status(run_dir.parent)[0].state == "failed", 30, "the cancel to reach sacct")

    assert star(["status", str(run_dir.parent)]) == 1
    out = capsys.readouterr().out
    assert "failed" in out and "CANCELLED" in out
    [status] = grid_status(run_dir.parent)
    assert status.slurm_state.startswith("CANCELLED") and "CANCELLED" in status.error


def test_slurm_requeued_job_resumes_eval_checkpoint_with_uninterrupted_metrics(slurm_cluster, tmp_path):
    grid = factorial("requeue", SLOW, {"reward": ["macro"]})
    cache = tmp_path / "runs" / "_stages"
    [job] = submit_grid(grid, PROFILE, tmp_path / "runs")
    wait_for(
        lambda: bool(list(cache.glob("eval/*.partial/_checkpoints/chunks/*.parquet"))),
        90,
        "the eval stage to checkpoint a chunk",
    )
    # submitit's signal (USR2) → checkpoint + `scontrol requeue`. The preemption variant (`_interrupt()`) also
    # sends SIGTERM, which linuxproc delivers to the whole step: it can race with and kill that scontrol.
    job._interrupt(timeout=True)

    # meanwhile, the same run uninterrupted, locally, in its own cache
    config = ExperimentConfig.from_dict(grid.runs[0].to_dict())
    run_experiment(config, tmp_path / "local" / "requeue" / config.name, cache=tmp_path / "local" / "_stages")

    outcome = job.result()
    assert outcome["status"] == "done"
    run_dir = tmp_path / "runs" / "requeue" / config.name
    assert read_run_record(run_dir)["restarts"] == 1
    eval_key = {s["stage"]: s["key"] for s in outcome["stages"]}["eval"]
    log = json.loads((cache / "eval" / eval_key / "stage.json").read_text())["chunk_log"]
    restarts = {entry["restart"] for entry in log}
    starts = [entry["start"] for entry in log]
    assert restarts == {0, 1}, log  # chunks from before and after the requeue
    assert len(starts) == len(set(starts))  # nothing computed twice
    assert metrics(run_dir) == metrics(tmp_path / "local" / "requeue" / config.name)


def metrics(run_dir: Path) -> dict[str, float]:
    frame = pl.read_parquet(run_dir / "metrics.parquet").filter(
        pl.col("metric").str.starts_with("eval/") | (pl.col("metric") == "reward/mean")
    )
    return dict(zip(frame["metric"], frame["value"], strict=True))
