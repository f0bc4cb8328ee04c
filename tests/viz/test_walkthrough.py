"""The quickstart's walkthrough runs a trained model as its eval stage does: its own protocol, its run's
held-out tasks and worlds, its run's budgets — beside the expert and the untrained model."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from star_lib.agent.compact import SYSTEM_PROMPT as COMPACT_PROMPT
from star_lib.agent.protocol import get_protocol, read_protocol, write_protocol
from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.grids import base_config
from star_lib.experiments.runner import run_experiment
from star_lib.io import read_queries
from star_lib.synth.per_world import world_seeds
from star_lib.train.models import build_tiny
from star_lib.travel.worldset import IDX_STRIDE, WorldSet
from star_lib.viz.walkthrough import (
    EXPERT,
    TRAINED,
    UNTRAINED,
    model_run,
    recipe_setting,
    walkthrough,
)

EXPERIMENT = {
    "name": "walk",
    "threads": 2,
    "protocol": "compact",
    "rl_data_size": 4,
    "stages": ["world", "synth", "teacher", "sft", "eval"],
    "world": {"source": "synthetic-per-query", "scale": "tiny"},
    "synth": {"n_base": 8, "n_test": 6, "test_per_world": 2, "days_choices": [3]},
    "sft": {"max_steps": 2, "logging_steps": 1, "per_device_train_batch_size": 4},
    # budgets unlike the tiny recipe's (16 turns, 128 tokens), so the test sees whose are used
    "eval": {"policy": "fast", "max_queries": 4, "max_turns": 14, "max_new_tokens": 24,
             "on_format_error": "stop"},
}  # fmt: skip
"""A compact run through SFT on per-query worlds (~15 s on 2 cores): a real trained model and its eval."""


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> tuple[Path, Path, dict[str, Path]]:
    """(runs folder, run folder, stage name → its output folder) after the run."""
    root = tmp_path_factory.mktemp("walk-runs")
    result = run_experiment(ExperimentConfig.from_dict(EXPERIMENT), root / "g" / "walk")
    assert result.status == "done", result.error
    folders = {s["stage"]: root / "_stages" / s["stage"] / s["key"] for s in result.stages}
    return root, root / "g" / "walk", folders


@pytest.fixture(scope="module")
def walk(trained_run):
    root, _, _ = trained_run
    return walkthrough(root, n_tasks=5)


def _eval_worlds(n: int) -> set[int]:
    return set(world_seeds(0, "eval", n))


def test_walkthrough_runs_the_trained_model_in_its_own_protocol_on_its_runs_held_out_tasks(trained_run, walk):
    _, run_dir, stages = trained_run
    model = stages["sft"] / "model"
    assert walk.trained_model == model and read_protocol(model) == "compact"
    assert walk.run == run_dir and walk.setting.source == "run g/walk"
    assert list(walk.episodes) == [EXPERT, UNTRAINED, TRAINED]
    assert walk.untrained_model == stages["sft"] / "base"  # the model SFT started from
    # the eval stage's own tasks: the first lines of the run's held-out file, capped by eval.max_queries
    held_out = read_queries(stages["synth"] / "base" / "test.jsonl")
    assert [q.idx for q in walk.setting.tasks] == [q.idx for q in held_out[:4]]
    assert {q.idx // IDX_STRIDE for q in walk.setting.tasks} <= _eval_worlds(10)  # no training world
    assert isinstance(walk.setting.world, WorldSet)
    # the run's eval budgets, in the compact protocol
    rollout = walk.setting.rollout
    assert (rollout.protocol, rollout.max_turns, rollout.max_new_tokens) == ("compact", 14, 24)
    assert rollout.system_prompt == COMPACT_PROMPT and walk.setting.eval_config.policy == "fast"
    for name, episodes in walk.episodes.items():
        assert [ep.query.idx for ep in episodes] == [q.idx for q in walk.setting.tasks], name
        assert all(ep.messages[0]["content"] == COMPACT_PROMPT for ep in episodes), name
        assert all(ep.turns <= 14 for ep in episodes), name
    assert walk.passes()[EXPERT] == 4  # the compact expert finishes every task within the run's budget


def test_walkthrough_replays_the_episodes_its_eval_stage_scored(trained_run, walk):
    _, _, stages = trained_run
    scored = pl.read_parquet(stages["eval"] / "rollouts.parquet").sort("query_index")
    assert [json.loads(m) for m in scored["messages"]] == [ep.messages for ep in walk.episodes[TRAINED]]


def test_walkthrough_summary_and_bought_compare_the_three_policies(walk):
    passes = walk.passes()
    summary = walk.summary()
    assert "4 held-out tasks of run g/walk" in summary and "compact protocol" in summary
    assert "at most 14 turns of 24 new tokens" in summary
    assert f"the expert passes {passes[EXPERT]} of 4" in summary
    assert f"the trained model {passes[TRAINED]}" in summary and "make demo" not in summary
    assert walk.bought().startswith("What training bought on these 4 tasks")
    table = walk.table()
    assert table.height == 12 and table["policy"].unique(maintain_order=True).to_list() == list(walk.episodes)


def test_recipe_setting_synthesises_the_tasks_its_synth_stage_writes(trained_run):
    _, _, stages = trained_run
    config = ExperimentConfig.from_dict({**EXPERIMENT, "eval": {**EXPERIMENT["eval"], "max_queries": None}})
    setting = recipe_setting(config, n_tasks=5)
    written = read_queries(stages["synth"] / "base" / "test.jsonl")[:5]
    assert [(q.idx, q.query) for q in setting.tasks] == [(q.idx, q.query) for q in written]


def _lone_model(root: Path, protocol: str) -> Path:
    """A tiny untrained model saved in a stage cache with ``protocol`` recorded, and no run that made it."""
    texts = ["Plan a 3-day trip from Austin to Denver.", "SearchFlight Austin Denver", "Thought: done"]
    model = build_tiny(texts, root / "_stages" / "rl" / "lone" / "model").path
    write_protocol(model, protocol)
    return model


@pytest.mark.parametrize("protocol", ["compact", "react"])
def test_walkthrough_honours_the_protocol_recorded_beside_the_model(tmp_path, protocol):
    model = _lone_model(tmp_path, protocol)
    assert model_run(tmp_path, model) is None  # no run: the tiny recipe's tasks and budgets
    walk = walkthrough(tmp_path, n_tasks=4, work_dir=tmp_path)
    assert walk.trained_model == model and walk.setting.protocol == protocol == walk.setting.rollout.protocol
    recipe = recipe_setting(base_config("tiny"), n_tasks=4, protocol=protocol)
    assert [q.idx for q in walk.setting.tasks] == [q.idx for q in recipe.tasks]
    assert {q.idx // IDX_STRIDE for q in walk.setting.tasks} <= _eval_worlds(10)
    assert (walk.setting.rollout.max_turns, walk.setting.rollout.max_new_tokens) == (16, 128)  # the recipe's
    expert = walk.episodes[EXPERT][0]
    assert get_protocol(protocol).recognises(expert.messages)
    assert all(get_protocol(protocol).recognises(ep.messages) for ep in walk.episodes[TRAINED])
    assert "the learning-signal recipe" in walk.summary()


def test_walkthrough_without_a_trained_model_runs_expert_and_untrained_and_points_to_make_demo(tmp_path):
    walk = walkthrough(tmp_path / "runs", n_tasks=4, work_dir=tmp_path)
    assert list(walk.episodes) == [EXPERT, UNTRAINED] and walk.trained_model is None
    assert walk.setting.protocol == "compact" and walk.model_name == UNTRAINED
    assert walk.untrained_model.parent == tmp_path  # a fresh tiny model, built here
    assert walk.passes()[EXPERT] == 4 and walk.passes()[UNTRAINED] == 0
    assert "make demo" in walk.summary() and "make demo" in walk.bought()
