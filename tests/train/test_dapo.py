from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from star_lib.train.dapo import (
    DAPOConfig,
    concat_batches,
    constant_groups,
    model_token_count,
    overlong_reward,
    soft_overlong_penalty,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rl_support import ScriptedPolicy, alternating, queries, rl_config  # noqa: E402

# ───────────────────────────── overlong shaping ─────────────────────────────


def test_dapo_soft_overlong_penalty_has_three_zones():
    assert soft_overlong_penalty(0, 100, 20) == 0.0
    assert soft_overlong_penalty(80, 100, 20) == 0.0
    assert soft_overlong_penalty(90, 100, 20) == pytest.approx(-0.5)
    assert soft_overlong_penalty(100, 100, 20) == pytest.approx(-1.0)
    assert soft_overlong_penalty(500, 100, 20, penalty=2.0) == -2.0
    values = [soft_overlong_penalty(n, 100, 20) for n in range(70, 120)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))  # never rewards length
    with pytest.raises(ValueError, match="buffer_tokens"):
        soft_overlong_penalty(10, 10, 20)


def test_dapo_overlong_shaping_ignores_environment_tokens():
    from trl.rewards import get_soft_overlong_punishment

    # an episode of 1,000 tokens: 150 written by the model, 850 tool output
    env_mask = ([1] * 15 + [0] * 85) * 10
    completion_ids = [[7] * len(env_mask)]
    assert model_token_count(env_mask) == 150
    ours = overlong_reward(max_tokens=400, buffer_tokens=100)
    assert ours(["c"], completion_ids=completion_ids, env_mask=[env_mask]) == [0.0]
    assert ours(["c"], completion_ids=completion_ids, model_tokens=[150]) == [0.0]
    trl_version = get_soft_overlong_punishment(max_completion_len=400, soft_punish_cache=100)
    assert trl_version(completion_ids=completion_ids) == [-1.0]  # TRL counts the tool output too
    # the model's own tokens still count: 350 model tokens sit halfway into the buffer
    long_env_mask = [1] * 350 + [0] * 650
    assert ours(["c"], completion_ids=completion_ids, env_mask=[long_env_mask]) == [pytest.approx(-0.5)]


def test_dapo_config_validates_and_fills_overlong_defaults():
    assert DAPOConfig().overlong_limits(16000) == (8000, 2000)
    assert DAPOConfig(overlong_max_tokens=300, overlong_buffer_tokens=50).overlong_limits(16000) == (300, 50)
    for bad in ({"max_refill_rounds": -1}, {"overlong_max_tokens": 10, "overlong_buffer_tokens": 20}):
        with pytest.raises(ValueError):
            DAPOConfig(**bad)
    with pytest.raises(ValueError, match="token-level"):
        rl_config(Path("r"), Path("t"), algorithm="dapo", loss_type="grpo")
    with pytest.raises(ValueError, match="algorithm"):
        rl_config(Path("r"), Path("t"), algorithm="ppo")
    with pytest.raises(ValueError, match="unknown DAPOConfig"):
        rl_config(Path("r"), Path("t"), algorithm="dapo", dapo={"refill": 2})


# ───────────────────────────── dynamic sampling: pure parts ─────────────────────────────


def test_dapo_constant_groups_finds_all_equal_groups():
    nan = math.nan
    assert constant_groups([1, 1, 0, 1, 0.5, 0.5, nan, 0.2], 2) == [True, False, True, True]
    assert constant_groups([0.1, 0.1 + 1e-9, 0.3], 3) == [False]
    with pytest.raises(ValueError, match="groups of 2"):
        constant_groups([1, 2, 3], 2)


def test_dapo_concat_batches_repads_prompts_left_and_completions_right():
    import torch

    a = {
        "prompt_ids": torch.tensor([[5, 6]]),
        "prompt_mask": torch.tensor([[1, 1]]),
        "completion_ids": torch.tensor([[7, 8, 9]]),
        "completion_mask": torch.tensor([[1, 1, 1]]),
        "tool_mask": torch.tensor([[1, 0, 1]]),
        "advantages": torch.tensor([0.5]),
        "num_items_in_batch": torch.tensor(2),
    }
    b = {
        "prompt_ids": torch.tensor([[1, 2, 3, 4]]),
        "prompt_mask": torch.tensor([[1, 1, 1, 1]]),
        "completion_ids": torch.tensor([[9]]),
        "completion_mask": torch.tensor([[1]]),
        "tool_mask": torch.tensor([[1]]),
        "advantages": torch.tensor([-0.5]),
        "num_items_in_batch": torch.tensor(1),
    }
    out = concat_batches([a, b], pad_token_id=0)
    assert out["prompt_ids"].tolist() == [[0, 0, 5, 6], [1, 2, 3, 4]]
    assert out["prompt_mask"].tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]
    assert out["completion_ids"].tolist() == [[7, 8, 9], [9, 0, 0]]
    assert out["completion_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert out["advantages"].tolist() == [0.5, -0.5]
    assert "num_items_in_batch" not in out
    assert concat_batches([a, b], pad_token_id=0, pad_to_multiple_of=4)["completion_ids"].shape == (2, 4)


# ───────────────────────────── dynamic sampling in the trainer ─────────────────────────────


def _trainer(rl_dir, tmp_path, world, kind, **kwargs):
    from star_lib.train.rl import make_grpo_trainer

    cfg = rl_config(rl_dir, tmp_path, algorithm="dapo", prompts_per_step=2, rollouts_per_step=100, **kwargs)
    trainer = make_grpo_trainer(cfg, policy_factory=lambda t, c: ScriptedPolicy(kind), world=world)
    trainer.model.train()
    return cfg, trainer


def test_dapo_refill_drops_all_equal_groups_and_keeps_the_batch_full(rl_dir, tmp_path, world):
    import polars as pl

    records = queries(rl_dir)
    constant_idx = {records[0].idx, records[2].idx}

    def kind(query, member):  # queries 0 and 2: every episode the expert (rewards all 1): a constant group
        return "expert" if query.idx in constant_idx or member == 0 else "garbage"

    cfg, trainer = _trainer(rl_dir, tmp_path, world, kind, dapo={"overlong_shaping": False})
    prompts = [trainer.train_dataset[i]["prompt"] for i in (0, 0, 1, 1)]
    out = trainer._generate_and_score_completions([{"prompt": p} for p in prompts])
    metrics = trainer._metrics["train"]
    assert metrics["dapo/filler_rows"][-1] == 0
    assert out["advantages"].shape == (cfg.batch_size,)  # still full
    assert out["completion_ids"].shape[0] == out["prompt_ids"].shape[0] == cfg.batch_size
    pairs = out["advantages"].view(-1, 2)
    assert all(abs(a) > 0.5 and abs(b) > 0.5 for a, b in pairs.tolist())  # only informative groups
    loss_mask = out["completion_mask"] * out["tool_mask"]
    assert int(out["num_items_in_batch"]) == int(loss_mask.sum()) > 0
    # one refill round of fresh prompts (queries 2 and 3, never 0 or 1 again): 2 groups dropped, 2 kept
    assert metrics["dapo/refill_rounds"][-1] == 1 and trainer.star_state.calls == 2
    assert metrics["dapo/dropped_groups"][-1] == 2 and metrics["dapo/kept_groups"][-1] == 2
    rows = pl.read_parquet(tmp_path / "run" / "rollouts.parquet")
    assert sorted(rows["idx"].to_list()) == sorted([r.idx for r in records for _ in range(2)])


def test_dapo_refill_cap_keeps_the_batch_full_with_loss_free_rows(rl_dir, tmp_path, world):
    cfg, trainer = _trainer(
        rl_dir,
        tmp_path,
        world,
        lambda q, m: "expert",
        dapo={"max_refill_rounds": 1, "overlong_shaping": False},
    )
    prompts = [trainer.train_dataset[i]["prompt"] for i in (0, 0, 1, 1)]
    out = trainer._generate_and_score_completions([{"prompt": p} for p in prompts])
    metrics = trainer._metrics["train"]
    assert metrics["dapo/refill_rounds"][-1] == 1  # capped
    assert metrics["dapo/dropped_groups"][-1] == 4 and metrics["dapo/kept_groups"][-1] == 0
    assert metrics["dapo/filler_rows"][-1] == cfg.batch_size
    assert out["advantages"].shape == (cfg.batch_size,)
    assert int(out["completion_mask"].sum()) == 0 and int(out["num_items_in_batch"]) == 0


def test_dapo_overlong_reward_counts_model_tokens_of_real_episodes(rl_dir, tmp_path, world):
    import polars as pl

    dapo = {"overlong_max_tokens": 300, "overlong_buffer_tokens": 250, "max_refill_rounds": 0}
    cfg, trainer = _trainer(rl_dir, tmp_path, world, alternating, dapo=dapo)
    prompts = [trainer.train_dataset[i]["prompt"] for i in (0, 0, 1, 1)]
    trainer._generate_and_score_completions([{"prompt": p} for p in prompts])
    rows = pl.read_parquet(tmp_path / "run" / "rollouts.parquet").sort("index")
    assert (rows["model_tokens"] < rows["completion_tokens"]).all()  # tool output is not the model's
    expected = [soft_overlong_penalty(n, 300, 250) for n in rows["model_tokens"]]
    assert list(trainer._logs["rewards"]["overlong_reward"]) == pytest.approx(expected)
    assert any(e < 0 for e in expected)  # the expert's long episodes do reach the buffer zone


def test_dapo_one_step_runs_and_changes_the_weights(rl_dir, tmp_path):
    import polars as pl
    import torch

    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.rl import run_rl

    cfg = rl_config(rl_dir, tmp_path, algorithm="dapo", learning_rate=1e-2, prompts_per_step=2)
    result = run_rl(cfg, policy_factory=lambda t, c: ScriptedPolicy(alternating))
    before, _ = load_model_and_tokenizer("tiny", path=rl_dir / "model")
    after, _ = load_model_and_tokenizer("tiny", path=result.model_dir)
    assert any(not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters(), strict=True))
    row = pl.read_parquet(result.metrics_path).filter(pl.col("stage") == "rl").row(0, named=True)
    for key in ("dapo/refill_rounds", "dapo/dropped_groups", "dapo/kept_groups", "dapo/filler_rows"):
        assert row[key] is not None, key
    assert row["dapo/dropped_groups"] == 0 and row["rewards/overlong_reward/mean"] == 0.0


def _fake_rank(rank: int, world_size: int, rewards, group: int = 2):
    """A stand-in trainer on rank ``rank`` of ``world_size`` (only what the dynamic-sampling helpers read)."""
    from types import SimpleNamespace

    import torch

    from star_lib.train.dapo import DynamicSamplingMixin

    fake = SimpleNamespace(
        num_generations=group,
        accelerator=SimpleNamespace(process_index=rank, num_processes=world_size),
        train_dataset=[{"prompt": f"q{i}"} for i in range(10)],
        args=SimpleNamespace(seed=3),
        state=SimpleNamespace(global_step=5),
        _star_rewards=torch.tensor(rewards, dtype=torch.float32).unsqueeze(1),
        reward_weights=torch.ones(1),
    )
    fake._refill_inputs = DynamicSamplingMixin._refill_inputs.__get__(fake)
    fake._local_keep_rows = DynamicSamplingMixin._local_keep_rows.__get__(fake)
    return fake


def test_dapo_decisions_are_the_same_on_every_rank():
    # 4 groups of 2 spread over 2 ranks (4 rows each); groups 0 and 3 are all-equal
    rewards = [1.0, 1.0, 0.0, 1.0, 0.5, 0.0, 0.2, 0.2]
    keeps, refills = [], []
    for rank in (0, 1):
        fake = _fake_rank(rank, 2, rewards)
        counts = {"dropped": 0, "kept": 0, "generated": 0}
        keeps.append(fake._local_keep_rows(4, counts))
        assert counts == {"dropped": 2, "kept": 2, "generated": 4}  # every rank counts the global batch
        refills.append(fake._refill_inputs(4, 1, {"q0", "q1"}))
    assert keeps == [[2, 3], [0, 1]]  # rank 0 keeps group 1, rank 1 keeps group 2
    rows = [r["prompt"] for part in refills for r in part]  # the ranks' slices form one global choice
    assert len(rows) == 8 and rows[::2] == rows[1::2]  # whole groups of G=2
    assert not {"q0", "q1"} & set(rows) and len(set(rows)) == 4  # fresh prompts, no repeats
    again = [
        r["prompt"]
        for part in (_fake_rank(k, 2, rewards)._refill_inputs(4, 1, {"q0", "q1"}) for k in (0, 1))
        for r in part
    ]
    assert again == rows  # seeded by (seed, step): reproducible after a resume
