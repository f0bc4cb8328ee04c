"""The paper path, rehearsed: `star submit <paper grid>` on real Slurm, two training processes per job.

`star submit algorithm-paper --rehearse --cluster slurm/rehearsal-cpu.yaml` runs the paper grid's own configs
(stages, protocol, rewards, algorithms, whole groups per rank, checkpointing, the evaluation's decoding, modes
and official splits — the real train split standing in for the validation set) with only the model swapped
for a tiny preset, vLLM off and rehearsal budgets. Each training stage goes through
`python -m accelerate.commands.launch --multi_gpu --num_processes 2` on CPU (gloo), the path a GPU job
takes. What a GPU cluster would hit first, this hits first:

- every array task finishes; SFT, GRPO, DAPO and ARPO train data-parallel over both ranks (each rank its own
  share of the batch, the step's metrics gathered over both, one set of weights at the end);
- rank 0 alone writes (one row per step in the logs, no file of another rank);
- a job preempted mid-RL is requeued and resumes from its mid-run checkpoint, ending with the metrics of the
  same run submitted uninterrupted beside it;
- the 7B runs on the 8-GPU DDP profile are refused before any `sbatch`.

The same grid under DeepSpeed ZeRO-3 (`slurm/rehearsal-cpu-zero3.yaml`, the path of `a100-8gpu-zero3.yaml`):
DeepSpeed's CPU accelerator shards the training state over the two gloo ranks; every rank's gathered
weights are one set, and the set the run saved.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import polars as pl
import pytest
import submitit

from star_lib.cli import main as star
from star_lib.experiments.grids import Grid, load_grid, rehearsal
from star_lib.experiments.profiles import load_profile
from star_lib.experiments.runner import read_run_record, submit_grid
from star_lib.train.finish import RANKS_FILE

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "slurm" / "rehearsal-cpu.yaml"
ZERO3 = ROOT / "slurm" / "rehearsal-cpu-zero3.yaml"
GRID = "algorithm-paper"


def submitted(runs: Path) -> dict[str, submitit.Job]:
    """The submitit job of every run a `star submit` wrote, by run name."""
    jobs = {}
    for record in sorted((runs / GRID).glob("*/job.json")):
        job = json.loads(record.read_text())
        jobs[record.parent.name] = submitit.SlurmJob(folder=job["folder"], job_id=job["id"])
    return jobs


def stage_dir(runs: Path, run: str, stage: str) -> Path:
    outcome = read_run_record(runs / GRID / run)
    key = {s["stage"]: s["key"] for s in outcome["stages"]}[stage]
    return runs / "_stages" / stage / key


def test_the_7b_runs_are_refused_on_the_8_gpu_ddp_profile_before_any_sbatch(slurm_cluster, tmp_path, capsys):
    ddp = ROOT / "slurm" / "a100-8gpu.yaml"
    code = star(["submit", GRID, "--cluster", str(ddp), "--runs", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "qwen2.5-7b" in err and "qwen2.5-1.5b" not in err.split("do not fit")[1].split(".")[0], err
    assert "a100-16gpu-2node.yaml" in err
    # nothing of this grid reached the queue (another test's finished jobs may still be listed)
    assert slurm_cluster.run("squeue", "-h", "--name", GRID, "-o", "%i") == ""
    assert not (tmp_path / GRID).exists()


def test_paper_grid_rehearsal_on_slurm_with_two_processes_per_job(
    slurm_cluster, wait_for, tmp_path, capsys, stable_metrics, same_metrics
):
    runs, reference = tmp_path / "runs", tmp_path / "reference"
    command = ["submit", GRID, "--rehearse", "--cluster", str(PROFILE)]
    assert star([*command, "--runs", str(runs)]) == 0
    jobs = submitted(runs)
    grid = rehearsal(load_grid(GRID))
    assert sorted(jobs) == sorted(r.name for r in grid.runs)
    [preempted] = [name for name in jobs if name.startswith(f"{GRID}__grpo_qwen2.5-1.5b")]
    # the same run, never interrupted, in its own runs folder and stage cache
    [uninterrupted] = submit_grid(Grid(GRID, (grid.run(preempted),)), load_profile(PROFILE), reference)

    # preempt the first job once its RL has saved a complete mid-run checkpoint (of 3, one every step;
    # star_counters.json is the checkpoint's last file)
    mid_run = "rl/*.partial/checkpoints/checkpoint-1/star_counters.json"
    wait_for(
        lambda: bool(list((runs / "_stages").glob(mid_run))),
        600,
        "RL to save its first checkpoint",
    )
    # USR2, as submitit's `_interrupt(timeout=True)` sends it: checkpoint and requeue. Not through that
    # method: scancel can report "Job can not be altered now" when the job's own requeue wins the race with
    # scancel's signalling of the job's other steps — the signal has landed; `restarts` below proves it.
    subprocess.run(["scancel", "--signal", "USR2", jobs[preempted].job_id], check=False)
    outcomes = {name: job.result() for name, job in jobs.items()}
    assert {name: o["status"] for name, o in outcomes.items()} == dict.fromkeys(jobs, "done")
    assert uninterrupted.result()["status"] == "done"

    # SFT: data-parallel over two gloo ranks, each iterating its half of the rows, one set of weights
    sft = json.loads((stage_dir(runs, preempted, "sft") / RANKS_FILE).read_text())["ranks"]
    assert [r["rank"] for r in sft] == [0, 1] and {r["world_size"] for r in sft} == {2}
    assert {r["backend"] for r in sft} == {"gloo"} and len({r["weights_sha256"] for r in sft}) == 1
    # GRPO, DAPO, ARPO: each rank rolled out its own whole groups; the logged step covers both ranks
    for algorithm in ("grpo", "dapo", "arpo"):
        name = f"{GRID}__{algorithm}_qwen2.5-1.5b__s0"
        rl = stage_dir(runs, name, "rl")
        ranks = json.loads((rl / RANKS_FILE).read_text())["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1] and len({r["weights_sha256"] for r in ranks}) == 1, name
        calls = [r["queries_per_call"] for r in ranks]
        assert calls[0] and len(calls[0]) == len(calls[1]), name  # DAPO's refills decided on gathered counts
        assert all(not set(a) & set(b) for a, b in zip(*calls, strict=True)), calls  # own groups
        log = pl.read_parquet(rl / "metrics.parquet")
        n = log.filter(pl.col("metric") == "env/n")
        assert n["value"].min() >= 4, (name, n)  # 2 prompts × G 2, both ranks' episodes
        steps = log.filter(pl.col("metric") == "train/loss")["step"].to_list()
        assert sorted(steps) == sorted(set(steps)), name  # one writer: no step logged twice
        assert not list(rl.rglob("*rank1*")), name
        exploration = {"dapo": "dapo/refill_rounds", "arpo": "arpo/branches_per_group"}.get(algorithm)
        assert exploration is None or exploration in set(log["metric"]), (name, exploration)
        if exploration:  # the summary's per-step mean (issue 21: exploration visible in the findings)
            per_step = log.filter((pl.col("metric") == exploration) & pl.col("step").is_not_null())["value"]
            mean = log.filter((pl.col("metric") == f"rl/mean/{exploration}") & pl.col("step").is_null())
            assert mean["value"].to_list() == [pytest.approx(per_step.mean())], (name, mean)

    # the preempted run resumed from its mid-run checkpoint and matches the uninterrupted one
    run_dir = runs / GRID / preempted
    assert read_run_record(run_dir)["restarts"] == 1
    record = json.loads((stage_dir(runs, preempted, "rl") / "stage.json").read_text())
    assert record["resumed_from"] not in (None, "checkpoint-3"), record
    rows = stable_metrics(run_dir)
    same_metrics(rows, stable_metrics(reference / GRID / preempted))
    # scored as the paper scores: the 45 real train queries stand in for the official validation set
    assert {"eval/official/final_pass", "validation/official/final_pass"} <= {r["metric"] for r in rows}


def test_paper_grid_rehearsal_under_deepspeed_zero3_shards_and_saves_one_set_of_weights(tmp_path):
    """ZeRO-3 through the job's own launch (``accelerate launch --config_file zero3-cpu.yaml``).

    Slurm's side of the path, and the other algorithms, are the test above; here submitit's local executor
    runs one GRPO run of the grid to the end of RL, so the DeepSpeed path costs two to three minutes.
    """
    from transformers import AutoModelForCausalLM

    from star_lib.train.finish import weights_digest

    local = dataclasses.replace(load_profile(ZERO3), cluster="local")
    grid = rehearsal(load_grid(GRID)).with_stages(["world", "synth", "teacher", "sft", "rl"])
    run = grid.run(f"{GRID}__grpo_qwen2.5-1.5b__s0")
    runs = tmp_path / "runs"
    [job] = submit_grid(Grid(GRID, (run,)), local, runs)
    assert job.result()["status"] == "done"
    for stage in ("sft", "rl"):
        folder = stage_dir(runs, run.name, stage)
        ranks = json.loads((folder / RANKS_FILE).read_text())["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1] and {r["backend"] for r in ranks} == {"gloo"}, stage
        assert {r["distributed_type"] for r in ranks} == {"DistributedType.DEEPSPEED"}, (stage, ranks)
        # each rank's gathered parameters: one set of weights, the one saved to model/
        saved = weights_digest(AutoModelForCausalLM.from_pretrained(folder / "model"))
        assert {r["weights_sha256"] for r in ranks} == {saved}, stage
    sft = stage_dir(runs, run.name, "sft")
    base = weights_digest(AutoModelForCausalLM.from_pretrained(sft / "base"))
    assert base != json.loads((sft / RANKS_FILE).read_text())["ranks"][0]["weights_sha256"]  # SFT trained
