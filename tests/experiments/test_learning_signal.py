"""The learning recipe through the experiment runner: one protocol for every stage, three models compared."""

from __future__ import annotations

import json

import polars as pl
import pytest

from star_lib.cli import main
from star_lib.experiments.config import ExperimentConfig, read_config
from star_lib.experiments.runner import run_experiment
from star_lib.experiments.signal import MODELS, learning_signal, quick_config


def toy_recipe(**changes) -> ExperimentConfig:
    """``configs/learning-signal.yaml`` with a few steps per stage (seconds on 2 cores)."""
    data = read_config("learning-signal").to_dict()
    data["rl_data_size"] = 4
    data["synth"].update(n_base=16, n_test=4)
    data["sft"].update(max_steps=4, per_device_train_batch_size=4, logging_steps=2, save_steps=2)
    data["sft"]["copy_warmup"] = {**data["sft"]["copy_warmup"], "steps": 10}
    data["rl"].update(max_steps=2, num_generations=2, max_new_tokens=24, save_steps=1)
    data["eval"].update(max_new_tokens=24, chunk_size=4)
    data.update(changes)
    return ExperimentConfig.from_dict(data)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("signal")
    result = run_experiment(toy_recipe(), root / "g" / "toy", cache=root / "_stages")
    assert result.status == "done", result.error
    return root


def test_recipe_runs_every_stage_in_the_compact_protocol(toy_run):
    from star_lib.agent.compact import SYSTEM_PROMPT
    from star_lib.agent.protocol import read_protocol

    stages = toy_run / "_stages"
    (teacher,) = [p for p in (stages / "teacher").iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (teacher / "train.jsonl").read_text().splitlines()]
    assert rows and all(r["messages"][0]["content"] == SYSTEM_PROMPT for r in rows)  # compact teacher data
    (sft,) = [p for p in (stages / "sft").iterdir() if p.is_dir()]
    (rl,) = [p for p in (stages / "rl").iterdir() if p.is_dir()]
    assert read_protocol(sft / "model") == read_protocol(rl / "model") == "compact"
    rollouts = pl.read_parquet(toy_run / "g" / "toy" / "rollouts.parquet")
    for stage in ("rl", "eval"):
        messages = rollouts.filter(pl.col("stage") == stage)["messages"].to_list()
        assert messages and all(json.loads(m)[0]["content"] == SYSTEM_PROMPT for m in messages), stage


def test_recipe_evaluates_base_sft_and_rl_on_the_same_tasks_with_their_paired_difference(toy_run):
    signal = learning_signal(toy_run / "g" / "toy")
    assert set(signal.models) == set(MODELS) and all(m["n"] == 4.0 for m in signal.models.values())
    assert 0.0 <= signal.models["rl"]["final_pass"] <= 1.0 and "termination/turn_limit" in signal.models["rl"]
    assert signal.paired["se"] >= 0.0 and signal.rl_curve and signal.rl_curve[-1][0] == 2
    keys = {"cs_micro_base", "cs_micro_sft", "sum_sft", "sum_rl", "sum_rl_se", "success_sft", "success_rl"}
    assert set(signal.final_json()) == keys | {"minutes"}
    (evaluated,) = [p for p in (toy_run / "_stages" / "eval").iterdir() if p.is_dir()]
    every = pl.read_parquet(evaluated / "eval_models.parquet")
    by_model = {m: sorted(every.filter(pl.col("model") == m)["idx"].to_list()) for m in MODELS}
    assert by_model["base"] == by_model["sft"] == by_model["rl"]  # the same held-out tasks


def test_a_compact_checkpoint_evaluated_in_the_react_protocol_is_refused(toy_run, tmp_path):
    from star_lib.agent.protocol import ProtocolMismatchError
    from star_lib.experiments.stages.eval import EvalStageConfig
    from star_lib.experiments.stages.evaluation import load_policy

    (sft,) = [p for p in (toy_run / "_stages" / "sft").iterdir() if p.is_dir()]
    with pytest.raises(ProtocolMismatchError, match="compact"):
        load_policy(EvalStageConfig(protocol="react"), sft / "model")


def test_quick_config_keeps_the_recipe_and_shrinks_the_budgets():
    full = read_config("learning-signal")
    quick = quick_config(full)
    assert quick.protocol == full.protocol == "compact" and quick.sft["max_steps"] < full.sft["max_steps"]
    assert quick.sft["copy_warmup"]["pool"] == "all" and quick.sft["copy_warmup"]["steps"] == 80


def test_star_run_knows_the_named_configs(tmp_path, capsys):
    assert main(["run", "no-such-config", "--runs", str(tmp_path)]) == 2
    assert "learning-signal" in capsys.readouterr().err


def test_an_eval_turn_limit_the_expert_cannot_finish_in_is_refused_naming_both_numbers(tmp_path):
    from star_lib.experiments.config import ConfigError
    from star_lib.experiments.stages.eval import EvalStageConfig
    from star_lib.experiments.stages.evaluation import check_turn_budget
    from star_lib.synth.per_world import synthesize_per_world
    from star_lib.travel.worldset import WorldSet

    worlds = WorldSet("tiny")
    tasks = synthesize_per_world(worlds, [3, 4], per_world=2, options={"days_choices": [3]})
    need = check_turn_budget(EvalStageConfig(protocol="compact", options={"max_turns": 16}), tasks, worlds)
    assert need > 4
    with pytest.raises(ConfigError, match=rf"eval.max_turns is 4 but the compact expert needs {need} turns"):
        check_turn_budget(EvalStageConfig(protocol="compact", options={"max_turns": 4}), tasks, worlds)


def test_star_pipeline_is_an_alias_of_star_run_on_the_recipe(toy_run, capsys):
    from star_lib.experiments.config import save_config

    path = save_config(toy_recipe(), toy_run / "toy.yaml")
    assert main(["pipeline", "--preset", "tiny", "--config", str(path), "--runs", str(toy_run)]) == 0
    out = capsys.readouterr().out
    assert "SFT + RL" in out and "RL − SFT mean SUM reward per task" in out
    final = json.loads(out.strip().splitlines()[-1])
    signal = learning_signal(toy_run / "learning-signal" / "learning-signal__s0")
    assert final == signal.final_json()
    assert signal.models == learning_signal(toy_run / "g" / "toy").models  # every stage reused from the cache


def test_eval_stage_is_greedy_and_seeded_by_default(toy_run):
    from star_lib.experiments.stages.eval import EvalStageConfig
    from star_lib.experiments.stages.evaluation import load_policy

    assert EvalStageConfig().temperature == 0.0
    (sft,) = [p for p in (toy_run / "_stages" / "sft").iterdir() if p.is_dir()]
    policy = load_policy(EvalStageConfig(protocol="compact", seed=7, policy="fast"), sft / "model")
    assert policy.sampling.temperature == 0.0 and policy.sampling.seed == 7
    with pytest.raises(ValueError, match="temperature"):
        EvalStageConfig(temperature=-1.0)
