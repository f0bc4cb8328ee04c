"""The paper grids train and score what the paper did (issue 20, defect 5), read from the configs a job runs.

Every run of every paper grid is resolved as ``star submit`` resolves it (the RL run config on the 8 GPUs of
``slurm/a100-8gpu.yaml``, the SFT preset, the eval section): the budgets must let each arm express its
finding, and the decoding must be the paper's.
"""

from __future__ import annotations

import pytest

from star_lib.experiments.grids import FINDINGS, finding_grid
from star_lib.experiments.preflight import rl_plan_config
from star_lib.train.models import get_preset

PAPER_GRIDS = [finding_grid(finding, "paper") for finding in FINDINGS]
RUNS = [run for grid in PAPER_GRIDS for run in grid.runs]


@pytest.mark.parametrize("run", RUNS, ids=lambda run: run.name)  # the recipe: shared/STACK.md (Agent-STAR)
def test_every_paper_run_draws_its_pool_checkpoints_often_and_decodes_as_the_paper(run):
    rl = rl_plan_config(run.section("rl"), run.model, run.algorithm, 8, run.name)
    draws = rl.max_steps * rl.prompts_per_step
    assert draws >= run.rl_data_size, f"{draws} prompt draws never reach {run.rl_data_size} prompts"
    b1, b2 = run.curriculum_boundaries
    assert min(b1, b2 - b1, 1 - b2) * rl.max_steps >= 40  # every CURRICULUM phase gets >= 40 steps
    assert rl.save_steps <= 5 and rl.max_steps % rl.save_steps == 0  # a requeue resumes from a mid-run step
    assert rl._pick("max_turns") == 60
    sft = get_preset(run.model).sft
    assert (sft.learning_rate, sft.num_train_epochs, sft.max_length) == (5e-6, 4.0, 20480)
    assert run.section("sft").get("save_steps", 500) <= 20
    assert run.section("synth")["n_base"] >= 1000  # Agent-STAR's ~1 k SFT trajectories
    evaluation = run.section("eval")
    assert (evaluation["temperature"], evaluation["top_p"], evaluation["max_turns"]) == (0.6, 0.95, 60)
    assert "official" in evaluation["also_modes"]
    # the paper's numbers are on the official splits (defect 6): validation always, test when reachable
    assert evaluation["splits"] == {"validation": "hub", "test": "hub?"} and evaluation["split_db"] == "hub"
    # with Agent-STAR's engine in bf16, not transformers' fp32 generate over 60-turn, 32k-token episodes
    assert evaluation["policy"] == "vllm" and evaluation["vllm"]["dtype"] == "bfloat16"


def test_a_rehearsal_scores_the_real_train_split_in_place_of_the_validation_set():
    from star_lib.experiments.grids import OFFICIAL_DATA, rehearsal

    for run in rehearsal(PAPER_GRIDS[0]).runs:
        evaluation = run.section("eval")
        assert evaluation["splits"] == {"validation": str((OFFICIAL_DATA / "train.jsonl").resolve())}
        assert evaluation["split_db"] == str((OFFICIAL_DATA / "database").resolve())
        assert evaluation["policy"] == "transformers" and "vllm" not in evaluation  # CPU: no engine


def test_the_data_arms_differ_in_epochs_over_the_same_draws():
    [grid] = [g for g in PAPER_GRIDS if g.finding == "data"]
    epochs = {}
    for run in grid.runs:
        rl = rl_plan_config(run.section("rl"), run.model, run.algorithm, 8, run.name)
        epochs[run.rl_data_size] = rl.max_steps * rl.prompts_per_step / run.rl_data_size
    assert epochs[min(epochs)] >= 10 * epochs[max(epochs)] >= 10  # the smallest pool repeated many times
