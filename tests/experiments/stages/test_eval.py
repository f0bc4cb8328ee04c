"""The eval stage end to end: its results do not depend on chunking, and the reward axis only rescores."""

from __future__ import annotations

import polars as pl

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.runner import run_experiment

BASE = {
    "stages": ["world", "synth", "teacher", "eval"],
    "rl_data_size": 10,
    "synth": {"n_base": 60},
    "tool_failure_rate": 0.2,
    "tool_corruption_rate": 0.1,
}


def eval_rows(run_dir):
    frame = pl.read_parquet(run_dir / "eval.parquet").sort("query_index")
    return frame.select("query_index", "turns", "faults", "final_pass", "run_reward").rows()


def test_eval_results_do_not_depend_on_chunking(tmp_path):
    one = run_experiment(
        ExperimentConfig.from_dict({**BASE, "eval": {"chunk_size": 1}}), tmp_path / "g" / "one"
    )
    four = run_experiment(
        ExperimentConfig.from_dict({**BASE, "eval": {"chunk_size": 4}}), tmp_path / "g" / "four"
    )
    assert one.status == four.status == "done"
    rows = eval_rows(tmp_path / "g" / "one")
    assert rows == eval_rows(tmp_path / "g" / "four")
    assert any(r[2] != "{}" for r in rows)  # faults were injected, with the same draws per query


def test_eval_reward_axis_scores_the_same_episodes(tmp_path):
    runs = {}
    for reward in ("success", "sum"):
        cfg = ExperimentConfig.from_dict({**BASE, "reward": reward, "name": reward})
        run_experiment(cfg, tmp_path / "g" / reward)
        runs[reward] = pl.read_parquet(tmp_path / "g" / reward / "eval.parquet").sort("query_index")
    assert runs["success"]["final_pass"].to_list() == runs["sum"]["final_pass"].to_list()
    assert (runs["success"]["run_reward"] == runs["success"]["final_pass"].cast(pl.Float64)).all()
    assert (runs["sum"]["run_reward"] >= runs["success"]["run_reward"]).all()
