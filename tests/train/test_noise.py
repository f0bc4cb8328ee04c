from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rl_support import ScriptedPolicy, rl_config  # noqa: E402

ALWAYS_FAILS = {"failure_rate": 1.0, "sleep": False}


def expert_eval(model, tokenizer):
    from star_lib.agent.expert import ExpertPolicy

    return ExpertPolicy()


@pytest.mark.parametrize(
    ("train_faults", "eval_faults"),
    [(ALWAYS_FAILS, None), (None, ALWAYS_FAILS)],
    ids=["train-noisy-test-clean", "train-clean-test-noisy"],
)
def test_noise_applies_separately_to_training_and_evaluation(rl_dir, tmp_path, train_faults, eval_faults):
    import polars as pl

    from star_lib.train.rl import run_rl

    cfg = rl_config(
        rl_dir,
        tmp_path,
        faults=train_faults,
        eval_faults=eval_faults,
        eval_data=str(rl_dir / "data" / "train.jsonl"),
        eval_limit=2,
    )
    result = run_rl(
        cfg,
        policy_factory=lambda t, c: ScriptedPolicy(lambda q, m: "expert"),
        eval_policy_factory=expert_eval,
    )
    frame = pl.read_parquet(result.metrics_path)
    train = frame.filter(pl.col("train/reward").is_not_null()).row(0, named=True)
    evaluation = frame.filter(pl.col("stage") == "eval").row(-1, named=True)
    if train_faults:  # every tool call failed in training; evaluation ran on clean tools
        assert train["env/faults"] > 0 and train["env/final_pass"] == 0.0
        assert evaluation["eval/faults"] == 0.0 and evaluation["eval/final_pass"] == 1.0
    else:
        assert train["env/faults"] == 0.0 and train["env/final_pass"] == 1.0
        assert evaluation["eval/faults"] > 0 and evaluation["eval/final_pass"] == 0.0


def test_noise_configs_are_validated_and_saved(tmp_path):
    import yaml

    from star_lib.train.rl import RLRunConfig, _save_config
    from star_lib.travel.faults import FaultConfig

    cfg = rl_config(
        tmp_path,
        tmp_path,
        faults={"failure_rate": 0.1, "latency_ms": 5.0},
        eval_faults={"corruption_rate": 0.2, "seed": 3},
    )
    assert cfg.faults == FaultConfig(failure_rate=0.1, latency_ms=5.0)
    assert cfg.eval_faults == FaultConfig(corruption_rate=0.2, seed=3)
    _save_config(cfg, tmp_path / "out")
    saved = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())["rl"]
    again = RLRunConfig(**saved)
    assert again.faults == cfg.faults and again.eval_faults == cfg.eval_faults and again.dapo == cfg.dapo
    for bad in ({"eval_faults": {"failure_rate": 1.5}}, {"eval_faults": {"rate": 0.1}}, {"faults": 0.1}):
        with pytest.raises(ValueError):
            rl_config(tmp_path, tmp_path, **bad)


def test_noise_training_fault_streams_are_seeded_per_call(rl_dir, tmp_path, world):
    from star_lib.train.rl import make_grpo_trainer

    def fault_counts(run: str, seed: int) -> list[float]:
        cfg = rl_config(rl_dir, tmp_path / run, faults={"failure_rate": 0.3, "sleep": False}, seed=seed)
        trainer = make_grpo_trainer(
            cfg, policy_factory=lambda t, c: ScriptedPolicy(lambda q, m: "expert"), world=world
        )
        trainer.model.train()
        prompt = trainer.train_dataset[0]["prompt"]
        for _ in range(3):
            trainer._generate_and_score_completions([{"prompt": prompt}] * 2)
        return list(trainer._metrics["train"]["env/faults"])

    first, second, other = fault_counts("a", 4), fault_counts("b", 4), fault_counts("c", 5)
    assert first == second  # same seed, same fault sequence
    assert other != first  # a neighbouring seed draws other faults (not the same stream shifted by one)
    assert any(first) and any(other)
