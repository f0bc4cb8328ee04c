"""The whole tiny pipeline world → synth → teacher → sft → rl → eval through the runner (slow)."""

from __future__ import annotations

import polars as pl
import pytest

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.runner import run_experiment


@pytest.mark.slow
def test_pipeline_whole_tiny_pipeline_with_sft_and_rl(tmp_path):
    cfg = ExperimentConfig.from_dict(
        {
            "rl_data_size": 8,
            "synth": {"n_base": 30},
            "stages": ["world", "synth", "teacher", "sft", "rl", "eval"],
            "sft": {"max_steps": 2, "logging_steps": 1, "save_steps": 1},
            "rl": {
                "max_steps": 2,
                "num_generations": 2,
                "prompts_per_step": 1,
                "max_turns": 2,
                "max_new_tokens": 32,
                "rollouts_per_step": 1,
                "eval_data": "held-out",  # the learning curve: the held-out tasks after every step
                "eval_steps": 1,
                "eval_limit": 2,
            },
            "eval": {"max_queries": 1, "max_turns": 30, "max_new_tokens": 32},
        }
    )
    result = run_experiment(cfg, tmp_path / "g" / "full")
    assert [s["stage"] for s in result.stages] == ["world", "synth", "teacher", "sft", "rl", "eval"]
    metrics = pl.read_parquet(tmp_path / "g" / "full" / "metrics.parquet")
    final = metrics.filter(pl.col("step").is_null())
    assert final.filter(pl.col("metric") == "sft/steps")["value"].to_list() == [2.0]
    assert final.filter(pl.col("metric") == "rl/steps")["value"].to_list() == [2.0]
    # the RL stage's held-out curve: a score after every step (rows of stage rl, beside the eval stage's)
    curve = metrics.filter((pl.col("stage") == "rl") & (pl.col("metric") == "eval/final_pass"))
    assert curve["step"].to_list() == [1, 2]
    assert metrics.filter((pl.col("stage") == "sft") & pl.col("step").is_not_null()).height > 0
    assert final.filter(pl.col("metric") == "eval/final_pass").height == 1
    rollouts = pl.read_parquet(tmp_path / "g" / "full" / "rollouts.parquet")
    assert {"teacher", "rl", "eval"} <= set(rollouts["stage"])
    assert (tmp_path / "_stages" / "rl").is_dir()
