from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rl_support import ScriptedPolicy, build_rl_dir, queries, rl_config  # noqa: E402


@pytest.fixture(scope="module")
def rl_dir(tmp_path_factory, world) -> Path:
    """The micro run folder plus ``over_budget.jsonl``: the same queries with 30 % of their budget.

    The expert's plan then passes every commonsense check and fails the budget, so the three stages pay
    differently: SUM 0.4, MACRO 0.5, SUCCESS 0.
    """
    root = build_rl_dir(tmp_path_factory.mktemp("curriculum"), world)
    tight = [dataclasses.replace(q, budget=int(q.budget * 0.3)) for q in queries(root)]
    lines = [json.dumps(q.to_dict(), ensure_ascii=False) for q in tight]
    (root / "data" / "over_budget.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_curriculum_stage_follows_the_configured_boundaries():
    from star_lib.rewards import curriculum_stage

    boundaries = (0.25, 0.5)
    stages = [curriculum_stage(step / 8, boundaries) for step in range(8)]
    assert stages == ["sum", "sum", "macro", "macro", "success", "success", "success", "success"]
    with pytest.raises(ValueError):
        rl_config(Path("r"), Path("t"), reward="curriculum", curriculum_boundaries=(0.6, 0.3))


def test_curriculum_switches_rewards_at_the_boundaries_during_training(rl_dir, tmp_path):
    import polars as pl

    from star_lib.train.rl import run_rl

    cfg = rl_config(
        rl_dir,
        tmp_path,
        data=str(rl_dir / "data" / "over_budget.jsonl"),
        reward="curriculum",
        curriculum_boundaries=(0.25, 0.5),
        max_steps=4,
        save_steps=100,
    )
    result = run_rl(cfg, policy_factory=lambda t, c: ScriptedPolicy(lambda q, m: "expert"))
    rows = pl.read_parquet(result.metrics_path).filter(pl.col("train/reward").is_not_null()).sort("step")
    assert rows["step"].to_list() == [1, 2, 3, 4]
    assert rows["curriculum/stage"].to_list() == [0.0, 1.0, 2.0, 2.0]  # SUM, MACRO, SUCCESS, SUCCESS
    assert rows["curriculum/progress"].to_list() == [0.0, 0.25, 0.5, 0.75]
    assert rows["train/reward"].to_list() == pytest.approx([0.4, 0.5, 0.0, 0.0])


def test_curriculum_boundaries_shift_the_switch(rl_dir, tmp_path):
    import polars as pl

    from star_lib.train.rl import run_rl

    cfg = rl_config(
        rl_dir,
        tmp_path,
        data=str(rl_dir / "data" / "over_budget.jsonl"),
        reward="curriculum",
        curriculum_boundaries=(0.0, 0.5),
        max_steps=2,
        save_steps=100,
    )
    result = run_rl(cfg, policy_factory=lambda t, c: ScriptedPolicy(lambda q, m: "expert"))
    rows = pl.read_parquet(result.metrics_path).filter(pl.col("train/reward").is_not_null()).sort("step")
    assert rows["curriculum/stage"].to_list() == [1.0, 2.0]  # MACRO from the start, SUCCESS at half-way
    assert rows["train/reward"].to_list() == pytest.approx([0.5, 0.0])
