"""The eval stage scores its models on official TravelPlanner splits too (``eval.splits``, issue 20 defect 6).

The 45 real train queries (with their gold plans) stand in for the validation set, on the real database
excerpt in ``../shared/data``; the test split is asked of a hub that cannot be reached, so it is skipped.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from star_lib.experiments.config import ConfigError, ExperimentConfig
from star_lib.experiments.runner import run_experiment
from star_lib.experiments.stages import build_registry

DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "travelplanner"
BASE = {
    "stages": ["world", "synth", "teacher", "eval"],
    "rl_data_size": 10,
    "synth": {"n_base": 30},
}


def split_eval(queries: str, db: str) -> dict:
    splits = {"validation": queries, "test": "hub?"}
    return {"max_queries": 6, "max_turns": 60, "splits": splits, "split_db": db}


@pytest.fixture
def no_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def test_eval_scores_the_official_validation_split_in_official_mode_and_skips_an_unreachable_test(
    tmp_path, no_hub
):
    eval_cfg = split_eval(str(DATA / "train.jsonl"), str(DATA / "database"))
    config = ExperimentConfig.from_dict({**BASE, "tool_failure_rate": 0.2, "eval": eval_cfg})
    result = run_experiment(config, tmp_path / "g" / "run")
    assert result.status == "done", result.error
    metrics = pl.read_parquet(tmp_path / "g" / "run" / "metrics.parquet")
    value = dict(zip(metrics["metric"], metrics["value"], strict=True))
    assert value["test/skipped"] == 1.0 and "test/final_pass" not in value
    [table] = tmp_path.rglob("split_validation.parquet")  # in the eval stage's output
    episodes = pl.read_parquet(table)
    assert (
        episodes.height == 6 and episodes["faults"].to_list() == ["{}"] * 6
    )  # clean tools, whatever the axis
    # the expert acts out the gold plans: the official code's verdicts pass them, as the strict ones do
    assert value["validation/official/final_pass"] == pytest.approx(episodes["official/final_pass"].mean())
    assert value["validation/official/final_pass"] >= 0.8, value
    assert value["validation/final_pass"] == pytest.approx(episodes["final_pass"].mean())
    assert "eval/final_pass" in value  # the synthetic held-out tasks are still scored


@pytest.mark.parametrize(
    ("queries", "db", "option"),
    [
        ("missing.jsonl", str(DATA / "database"), "eval.splits.validation"),
        (str(DATA / "train.jsonl"), "nowhere", "eval.split_db"),
    ],
)
def test_eval_refuses_a_required_split_it_cannot_read_naming_the_option(
    tmp_path, no_hub, queries, db, option
):
    config = ExperimentConfig.from_dict({**BASE, "eval": split_eval(queries, db)})
    with pytest.raises(ConfigError, match=option):
        run_experiment(config, tmp_path / "g" / "run")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"splits": {"dev": "hub"}, "split_db": "hub"}, r"\['dev'\] are not official splits"),
        ({"splits": {"test": "hub"}}, "splits need split_db"),
        ({"splits": {"test": "?"}, "split_db": "hub"}, r"\['test'\] name no source"),
    ],
)
def test_eval_splits_must_be_official_and_need_a_database(section, message):
    with pytest.raises(ConfigError, match=message):
        build_registry().check(ExperimentConfig.from_dict({**BASE, "eval": section}))
