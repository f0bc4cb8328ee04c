"""The training stages' metrics: what ``train_and_record`` turns a trainer's log into."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import pytest

from star_lib.experiments.stages.training import FIRST_STEPS, train_and_record


def test_the_rl_stage_averages_exploration_over_every_step_and_the_rollouts_over_the_first(tmp_path):
    # the trainer's log as run_rl writes it: one row per logged step, one column per metric
    steps = list(range(1, 2 * FIRST_STEPS + 1))
    log = pl.DataFrame(
        {
            "step": steps,
            "stage": ["rl"] * len(steps),
            "dapo/refill_rounds": [float(s % 3) for s in steps],
            "env/final_pass": [1.0 if s > FIRST_STEPS else 0.0 for s in steps],  # nothing passes at first
            "train/reward": [s / 100 for s in steps],
        }
    )

    def run(cfg) -> None:
        log.write_parquet(tmp_path / "metrics.parquet")

    train_and_record(SimpleNamespace(), tmp_path, "rl", run)
    final = dict(
        pl.read_parquet(tmp_path / "metrics.parquet")
        .filter(pl.col("step").is_null())
        .select("metric", "value")
        .iter_rows()
    )
    assert final["rl/mean/dapo/refill_rounds"] == pytest.approx(sum(s % 3 for s in steps) / len(steps))
    assert final["rl/first/env/final_pass"] == 0.0 and final["rl/final/env/final_pass"] == 1.0
    assert final["rl/first/train/reward"] == pytest.approx(sum(range(1, FIRST_STEPS + 1)) / FIRST_STEPS / 100)
    assert "rl/mean/arpo/branches_per_group" not in final  # never logged: left out, not 0
    assert (tmp_path / "train_log.parquet").is_file()
