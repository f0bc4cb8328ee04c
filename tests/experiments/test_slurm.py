"""Grids on a real single-node Slurm cluster through submitit (job arrays, cancel, checkpoint + requeue).

The array and cancel tests run the real stages world → synth → teacher (expert) → eval. The requeue test runs
every training stage for a few steps and preempts the job while SFT trains: the requeued job resumes SFT from
its last complete checkpoint and ends with the metrics of the same run submitted uninterrupted beside it.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from star_lib.cli import main as star
from star_lib.experiments.grids import factorial
from star_lib.experiments.profiles import ClusterProfile
from star_lib.experiments.results import load_results
from star_lib.experiments.runner import read_run_record, submit_grid
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


def test_slurm_grid_as_job_array_on_a100_reaches_the_results_store(slurm_cluster, wait_for, tmp_path):
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
        lambda: {r[0]: r[2] for r in accounting()} == tasks, 300, "sacct to show both array tasks COMPLETED"
    )
    assert {r[1] for r in accounting()} == {"a100"}

    table = load_results(tmp_path / "runs")
    assert table.runs == 2
    final = table.frame.filter(pl.col("metric") == "eval/final_pass")
    assert sorted(final["reward"].to_list()) == ["success", "sum"]
    assert [s.state for s in grid_status(tmp_path / "runs" / "array")] == ["done", "done"]
    assert submit_grid(grid, PROFILE, tmp_path / "runs") == []  # complete runs are not resubmitted


def test_slurm_cancelled_job_surfaces_as_failed_in_star_status(slurm_cluster, wait_for, tmp_path, capsys):
    grid = factorial("cancel", SLOW, {"reward": ["sum"]})
    [job] = submit_grid(grid, PROFILE, tmp_path / "runs")
    run_dir = tmp_path / "runs" / "cancel" / grid.runs[0].name
    wait_for(lambda: (read_run_record(run_dir) or {}).get("status") == "running", 600, "the run to start")
    slurm_cluster.run("scancel", job.job_id)
    wait_for(lambda: grid_status(run_dir.parent)[0].state == "failed", 300, "the cancel to reach sacct")

    assert star(["status", str(run_dir.parent)]) == 1
    out = capsys.readouterr().out
    assert "failed" in out and "CANCELLED" in out
    [status] = grid_status(run_dir.parent)
    assert status.slurm_state.startswith("CANCELLED") and "CANCELLED" in status.error


def test_slurm_requeued_training_job_resumes_from_its_checkpoint_with_uninterrupted_metrics(
    slurm_cluster, wait_for, tmp_path, training_experiment, stable_metrics, same_metrics
):
    grid = factorial("requeue", training_experiment, {"reward": ["macro"]})
    cache = tmp_path / "runs" / "_stages"
    [job] = submit_grid(grid, PROFILE, tmp_path / "runs")
    [reference] = submit_grid(grid, PROFILE, tmp_path / "reference")  # the same run, never interrupted
    wait_for(
        lambda: bool(list(cache.glob("sft/*.partial/checkpoints/checkpoint-2/trainer_state.json"))),
        1200,
        "SFT to save its second checkpoint",
    )
    # submitit's signal (USR2) → checkpoint + `scontrol requeue`. The preemption variant (`_interrupt()`) also
    # sends SIGTERM, which linuxproc delivers to the whole step: it can race with and kill that scontrol.
    job._interrupt(timeout=True)

    outcome, expected = job.result(), reference.result()
    assert outcome["status"] == "done" and expected["status"] == "done"
    run_dir = tmp_path / "runs" / "requeue" / grid.runs[0].name
    assert read_run_record(run_dir)["restarts"] == 1
    sft_key = {s["stage"]: s["key"] for s in outcome["stages"]}["sft"]
    record = json.loads((cache / "sft" / sft_key / "stage.json").read_text())
    assert record["resumed_from"] is not None and record["resumed_from"] != "checkpoint-6", record
    log = pl.read_parquet(cache / "sft" / sft_key / "train_log.parquet")
    losses = log.filter(pl.col("train/loss").is_not_null())
    assert sorted(losses["step"].to_list()) == [1, 2, 3, 4, 5, 6]  # no step trained (or logged) twice
    assert losses["train/loss"].n_unique() == 6

    rows = stable_metrics(run_dir)
    same_metrics(rows, stable_metrics(tmp_path / "reference" / "requeue" / grid.runs[0].name))
    assert {"sft/final/train/loss", "rl/steps", "eval/final_pass"} <= {r["metric"] for r in rows}
