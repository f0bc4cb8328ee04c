from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from star_lib.train.rl import RLRunConfig, build_grpo_config, make_grpo_trainer, run_rl
from star_lib.train.rollouts import group_ids, prompt_dataset, query_from_prompt

WORLD = "synthetic:small:0"


class MixedPolicy:
    """Episode ``k`` of a batch acts as ``plan[k % len(plan)]``: expert, garbage, loop, typo-then-expert."""

    tokenizer = None

    def __init__(self, plan: list[str]) -> None:
        from star_lib.agent.expert import ExpertPolicy

        self.plan, self.expert, self.turns = plan, ExpertPolicy(), {}

    def generate(self, conversations, *, max_new_tokens):
        from star_lib.agent.policies import Generation

        out = []
        for conv in conversations:
            kind = self.plan[conv.key % len(self.plan)]
            turn = self.turns.get(conv.key, 0)
            self.turns[conv.key] = turn + 1
            if kind == "garbage" or (kind == "typo" and turn == 0):
                out.append(Generation(text="Sure! Here is my plan, no tags needed."))
            elif kind == "loop":  # the same valid first call forever: hits the turn limit
                out.append(Generation(text=self.expert.next_turn(conv.query, conv.messages[:2])))
            else:
                messages = [m for m in conv.messages if "Sure! Here is" not in m["content"]]
                out.append(Generation(text=self.expert.next_turn(conv.query, messages)))
        return out


def config(rl_dir: Path, tmp_path: Path, **kwargs: Any) -> RLRunConfig:
    base = dict(
        data=str(rl_dir / "data" / "train.jsonl"),
        output_dir=str(tmp_path / "run"),
        model_path=str(rl_dir / "model"),
        world=WORLD,
        num_generations=2,
        prompts_per_step=1,
        max_steps=1,
        max_turns=10,
        max_new_tokens=64,
        max_context_tokens=16000,
    )
    base.update(kwargs)
    return RLRunConfig(**base)


def score_one_group(cfg: RLRunConfig, plan: list[str], world) -> tuple[Any, dict[str, Any]]:
    """One rollout batch through TRL's scoring (rewards, advantages, masks) without an update."""
    trainer = make_grpo_trainer(cfg, policy_factory=lambda t, c: MixedPolicy(plan), world=world)
    trainer.model.train()
    prompt = trainer.train_dataset[0]["prompt"]
    out = trainer._generate_and_score_completions([{"prompt": prompt} for _ in range(cfg.group_size)])
    return trainer, out


def test_rl_grpo_config_has_the_paper_modifications(native_bf16):
    cfg = RLRunConfig(
        data="q.jsonl", output_dir="runs/x", model_path="m", num_generations=4, prompts_per_step=3
    )
    args = build_grpo_config(cfg)
    assert args.beta == 0.0 and args.epsilon_high > args.epsilon and args.mask_truncated_completions
    assert args.loss_type == "dapo" and args.num_generations == 4
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 12
    assert args.steps_per_generation == args.gradient_accumulation_steps and args.num_iterations == 1
    micro = build_grpo_config(
        RLRunConfig(data="q", output_dir="o", model_path="m", num_generations=4, micro_batch_size=2)
    )
    assert (micro.per_device_train_batch_size, micro.gradient_accumulation_steps) == (2, 4)
    qwen = build_grpo_config(RLRunConfig(data="q", output_dir="o", model_path="m", preset="qwen2.5-7b"))
    assert qwen.learning_rate == 1e-6 and qwen.num_generations == 8


@pytest.mark.parametrize(
    "kwargs",
    [
        {"reward": "bleu"},
        {"epsilon": 0.3, "epsilon_high": 0.2},
        {"beta": -1.0},
        {"num_generations": 1},
        {"micro_batch_size": 3},
        {"faults": {"failure_rate": 2.0}},
        {"reward": "curriculum", "curriculum_boundaries": (0.7, 0.2)},
        {"protocol": "json"},
        {"rollout_overrides": {"on_format_eror": "stop"}},
        {"rollout_overrides": {"max_turns": 3}},  # an RLRunConfig field: set it there
    ],
)
def test_rl_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        RLRunConfig(data="q", output_dir="o", model_path="m", **kwargs)


def test_rl_config_compact_protocol_builds_compact_episodes():
    from star_lib.agent.compact import SYSTEM_PROMPT

    cfg = RLRunConfig(
        data="q",
        output_dir="o",
        model_path="m",
        protocol="compact",
        max_turns=7,
        rollout_overrides={"on_format_error": "stop"},
    )
    episodes = cfg.rollout_config(seed_offset=3)
    assert (episodes.protocol, episodes.system_prompt, episodes.tools_in_system_prompt) == (
        "compact",
        SYSTEM_PROMPT,
        True,
    )
    assert (episodes.max_turns, episodes.on_format_error, episodes.seed) == (7, "stop", 3)
    react = RLRunConfig(data="q", output_dir="o", model_path="m").rollout_config()
    assert react.protocol == "react" and react.on_format_error == "observe"


def test_rl_fast_generation_rolls_out_with_fast_policy(rl_dir, tmp_path, world):
    from star_lib.agent.fastgen import FastPolicy
    from star_lib.agent.policies import TransformersPolicy
    from star_lib.train.rollouts import default_policy

    fast = config(rl_dir, tmp_path, fast_generation=True)
    assert isinstance(default_policy(make_grpo_trainer(fast, world=world), fast), FastPolicy)
    plain = config(rl_dir, tmp_path)
    assert isinstance(default_policy(make_grpo_trainer(plain, world=world), plain), TransformersPolicy)


def test_rl_config_reads_yaml(tmp_path: Path):
    path = tmp_path / "rl.yaml"
    path.write_text("rl:\n  data: q.jsonl\n  output_dir: o\n  model_path: m\n  faults: {failure_rate: 0.1}\n")
    cfg = RLRunConfig.from_yaml(path, max_steps=7)
    assert cfg.max_steps == 7 and cfg.faults.failure_rate == 0.1
    path.write_text("data: q\noutput_dir: o\nmodel_path: m\nlearning_rat: 1\n")
    with pytest.raises(ValueError, match="learning_rat"):
        RLRunConfig.from_yaml(path)


def test_rl_prompts_carry_queries_in_groups(rl_dir: Path):
    from star_lib.synth.dataset import read_dataset

    queries = read_dataset(rl_dir / "data" / "train.jsonl")
    prompts = prompt_dataset(queries)["prompt"]
    assert query_from_prompt(prompts[1]) == queries[1]
    assert group_ids([prompts[0]] * 2 + [prompts[1]] * 2, 2) == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="consecutive"):
        group_ids([prompts[0], prompts[1], prompts[0], prompts[1]], 2)


def test_rl_truncated_episode_has_no_loss_weight_but_counts_in_the_group_mean(rl_dir, tmp_path, world):
    cfg = config(rl_dir, tmp_path, num_generations=3, max_turns=8)
    trainer, out = score_one_group(cfg, ["expert", "expert", "loop"], world)
    rewards = list(trainer._logs["rewards"]["sum_reward"])
    assert rewards == [1.0, 1.0, 0.0]  # the looping episode is unfinished: format gate
    weights = (out["completion_mask"] * out["tool_mask"]).sum(dim=1).tolist()
    assert weights[0] > 0 and weights[1] > 0 and weights[2] == 0
    advantages = out["advantages"].tolist()
    # had the truncated reward left the group, both experts would have advantage 0
    assert advantages[0] == pytest.approx(advantages[1]) and advantages[0] > 0.5 and advantages[2] < -1.0
    assert trainer._metrics["train"]["env/truncation_rate"][-1] == pytest.approx(1 / 3)


def test_rl_format_invalid_episode_gets_zero_reward(rl_dir, tmp_path, world):
    import polars as pl

    cfg = config(rl_dir, tmp_path)
    trainer, out = score_one_group(cfg, ["expert", "typo"], world)
    assert list(trainer._logs["rewards"]["sum_reward"]) == [1.0, 0.0]
    rows = pl.read_parquet(tmp_path / "run" / "rollouts.parquet").sort("index")
    typo = rows.row(1, named=True)
    assert typo["format_errors"] == 1 and typo["malformed"] and typo["final_pass"]  # a good plan, still 0
    assert out["advantages"][1] < 0
    assert (out["completion_mask"] * out["tool_mask"])[
        1
    ].sum() > 0  # a malformed episode is trained away from


def test_rl_tool_failures_reach_the_rollouts(rl_dir, tmp_path, world):
    import polars as pl

    cfg = config(rl_dir, tmp_path, faults={"failure_rate": 1.0, "sleep": False})
    trainer, _ = score_one_group(cfg, ["expert", "expert"], world)
    assert trainer._metrics["train"]["env/faults"][-1] > 0
    faults = [json.loads(f) for f in pl.read_parquet(tmp_path / "run" / "rollouts.parquet")["faults"]]
    assert all(f.get("failure", 0) > 0 for f in faults)
    assert list(trainer._logs["rewards"]["sum_reward"]) == [0.0, 0.0]  # every call failed: no valid plan


def test_rl_one_grpo_step_changes_the_weights(rl_dir, tmp_path, world):
    import polars as pl
    import torch

    from star_lib.train.models import load_model_and_tokenizer

    cfg = config(rl_dir, tmp_path, learning_rate=1e-2)
    result = run_rl(cfg, policy_factory=lambda t, c: MixedPolicy(["expert", "garbage"]))
    assert result.steps == 1 and result.rewards == [0.5]
    before, _ = load_model_and_tokenizer("tiny", path=rl_dir / "model")
    after, _ = load_model_and_tokenizer("tiny", path=result.model_dir)
    assert any(not torch.equal(p, q) for p, q in zip(before.parameters(), after.parameters(), strict=True))
    row = pl.read_parquet(result.metrics_path).filter(pl.col("stage") == "rl").row(0, named=True)
    for key in (
        "train/reward",
        "train/frac_reward_zero_std",
        "train/entropy",
        "env/final_pass",
        "env/tool_calls",
        "env/format_error_rate",
        "env/truncation_rate",
        "env/faults",
        "env/model_tokens",
        "reward/cs_micro",
        "time/step_s",
        "time/rollout_s",
    ):
        assert row[key] is not None, key
    assert any(k.startswith("clip_ratio/") for k in row)
    assert row["env/final_pass"] == 0.5
    assert (result.output_dir / "config.yaml").is_file()


# ───────────────────────────── paper scale: batch per world size, vLLM settings ─────────────────────────────


@pytest.mark.parametrize(
    ("world_size", "per_rank", "micro", "accumulation"),
    [(1, 128, 1, 128), (8, 16, 1, 16), (16, 8, 1, 8)],
)
def test_rl_paper_batch_is_global_and_splits_per_world_size(
    world_size, per_rank, micro, accumulation, native_bf16
):
    cfg = RLRunConfig(
        data="q",
        output_dir="o",
        model_path="m",
        preset="qwen2.5-7b",
        prompts_per_step=16,
        world_size=world_size,
    )
    layout = cfg.batch_layout()
    assert (layout.global_batch, layout.per_rank) == (128, per_rank)
    assert (layout.micro_batch, layout.accumulation) == (micro, accumulation)  # preset: micro-batch 1
    args = build_grpo_config(cfg)
    assert args.per_device_train_batch_size == micro and args.gradient_accumulation_steps == accumulation
    assert args.steps_per_generation == accumulation
    # TRL's generation batch = per-device batch × processes × steps per generation = the configured batch
    assert args.per_device_train_batch_size * world_size * args.steps_per_generation == 128


def test_rl_world_size_comes_from_the_launcher_environment(monkeypatch):
    from star_lib.train.batching import env_world_size

    monkeypatch.setenv("WORLD_SIZE", "8")
    cfg = RLRunConfig(data="q", output_dir="o", model_path="m", num_generations=4, prompts_per_step=8)
    layout = cfg.batch_layout()
    assert env_world_size() == 8 and (layout.per_rank, layout.micro_batch) == (4, 4)  # tiny: the rank's share


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"prompts_per_step": 3, "world_size": 16}, "does not divide over 16 GPUs"),  # 24 episodes
        ({"prompts_per_step": 4, "world_size": 8}, "not whole groups"),  # 32 episodes: 4 per GPU, G = 8
        ({"prompts_per_step": 8, "world_size": 8, "micro_batch_size": 3}, "micro_batch_size=3"),
    ],
)
def test_rl_batch_that_does_not_split_is_refused_naming_the_option(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        RLRunConfig(data="q", output_dir="o", model_path="m", num_generations=8, **kwargs)


def test_rl_vllm_settings_reach_grpo_config(native_bf16):
    cfg = RLRunConfig(
        data="q",
        output_dir="o",
        model_path="m",
        preset="qwen2.5-1.5b",
        prompts_per_step=8,
        use_vllm=True,
        vllm_importance_sampling="sequence_mask",
    )
    args = build_grpo_config(cfg)
    assert args.use_vllm and args.vllm_mode == "colocate" and args.vllm_enable_sleep_mode
    assert args.vllm_importance_sampling_mode == "sequence_mask"
    assert args.vllm_importance_sampling_clip_max == 3.0 and args.vllm_max_model_length == 32768
    default = build_grpo_config(RLRunConfig(data="q", output_dir="o", model_path="m", use_vllm=True))
    assert default.vllm_importance_sampling_mode == "token_truncate"  # never drops whole 32k episodes
    off = build_grpo_config(
        RLRunConfig(data="q", output_dir="o", model_path="m", use_vllm=True, vllm_importance_sampling="off")
    )
    assert not off.vllm_importance_sampling_correction
    assert not build_grpo_config(RLRunConfig(data="q", output_dir="o", model_path="m")).use_vllm


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"use_vllm": True, "vllm_mode": "server"}, "vllm_mode: server is not supported"),
        ({"use_vllm": True, "algorithm": "arpo", "arpo": {"top_logprobs": 50}}, "max_logprobs"),
        ({"trl_overrides": {"vllm_mode": "server"}}, "trl_overrides"),
        ({"trl_overrides": {"per_device_train_batch_size": 64}}, "trl_overrides"),
        ({"vllm_importance_sampling": "tis"}, "vllm_importance_sampling"),
        ({"vllm_tensor_parallel_size": 3, "world_size": 8, "prompts_per_step": 32}, "divide the world size"),
    ],
)
def test_rl_vllm_settings_it_cannot_honour_are_refused(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        RLRunConfig(data="q", output_dir="o", model_path="m", **kwargs)
    if "arpo" in kwargs:  # without vLLM the entropy comes from the full logits: any top_logprobs is fine
        RLRunConfig(data="q", output_dir="o", model_path="m", algorithm="arpo", arpo={"top_logprobs": 50})


def test_rl_importance_sampling_counts_masked_and_clipped_tokens():
    import torch

    from star_lib.train.importance_sampling import importance_sampling_counts

    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])  # third row: a truncated episode
    seq = importance_sampling_counts(torch.tensor([[0.0], [1.2], [0.0]]), mask, "sequence_mask", 3.0)
    assert seq == {
        "sampling/is_masked_tokens": 3.0,
        "sampling/is_masked_episodes": 1.0,
        "sampling/is_tokens": 5.0,
        "sampling/is_episodes": 2.0,
    }
    token_ratio = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    tok = importance_sampling_counts(token_ratio, mask, "token_mask", 3.0)
    assert tok["sampling/is_masked_tokens"] == 4.0 and tok["sampling/is_masked_episodes"] == 1.0
    ratio = torch.tensor([[3.0, 1.0, 3.0, 9.0]] * 3)  # TRL clipped these at the cap
    clipped = importance_sampling_counts(ratio, mask, "token_truncate", 3.0)
    assert clipped["sampling/is_clipped_tokens"] == 3.0 and clipped["sampling/is_clipped_episodes"] == 2.0


def test_rl_importance_sampling_counts_reach_the_step_metrics():
    from collections import defaultdict
    from types import SimpleNamespace

    import torch

    from star_lib.train.importance_sampling import log_importance_sampling

    output = {
        "importance_sampling_ratio": torch.tensor([[0.0], [1.0]]),
        "completion_mask": torch.tensor([[1, 1], [1, 1]]),
        "tool_mask": torch.tensor([[1, 0], [1, 1]]),
    }
    trainer = SimpleNamespace(
        _generate_and_score_completions=lambda inputs: output,
        accelerator=SimpleNamespace(gather=lambda t: t),
        model=SimpleNamespace(training=True),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )
    log_importance_sampling(trainer, "sequence_mask", 3.0)
    assert trainer._generate_and_score_completions([]) is output
    metrics = trainer._metrics["train"]
    assert metrics["sampling/is_masked_episodes"] == [1.0] and metrics["sampling/is_masked_tokens"] == [1.0]
    assert metrics["sampling/is_tokens"] == [3.0]


# ───────────────────────────── rank 0 writes the run files ─────────────────────────────


def test_rl_only_rank_zero_writes_rollouts(monkeypatch, tmp_path):
    from star_lib.train.rollouts import RolloutLog

    class Episode:  # episodes_frame is never reached on a non-zero rank
        pass

    from accelerate.state import PartialState

    monkeypatch.setattr(PartialState, "_shared_state", {})  # no accelerator yet: $RANK decides
    monkeypatch.setenv("RANK", "3")
    log = RolloutLog(tmp_path / "rollouts.parquet")
    log.append(0, "train", [Episode()])
    assert not log.write and not log.path.exists() and not log.frames
    monkeypatch.setenv("RANK", "0")
    assert RolloutLog(tmp_path / "rollouts.parquet").write


def test_rl_turn_cut_at_max_new_tokens_leaves_its_end_of_turn_token_out_of_the_loss(qwen_tokenizer_dir):
    from star_lib.agent.chat import ChatRenderer, TokenTrace
    from star_lib.agent.policies import Generation
    from star_lib.train.tokenizer import load_tokenizer

    tok = load_tokenizer(qwen_tokenizer_dir)
    tok.chat_template = (qwen_tokenizer_dir / "qwen2.5_instruct_chat_template.jinja").read_text()
    renderer = ChatRenderer(tok)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    text = "<think>I will look up the fli"  # a turn cut mid-word
    sampled = tok.encode(text, add_special_tokens=False)
    for mode in ("canonical", "sampled"):
        for reason, last_mask in (("length", 0), ("stop", 1)):
            trace = TokenTrace()
            trace.start(renderer, messages)
            ids = sampled if reason == "length" else [*sampled, renderer.eot_id]
            generation = Generation(text, token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason=reason)
            turn = [*messages, {"role": "assistant", "content": text}]
            trace.add_assistant(renderer, turn, generation, mode)
            assert trace.completion_ids[-1] == renderer.eot_id  # the template still closes the turn
            assert trace.env_mask[-1] == last_mask, (mode, reason)
            assert set(trace.env_mask[:-1]) == {1}


@pytest.mark.slow  # ~100 s of CPU, 3.5 min on 2 shared cores (151,680 logits a token; every turn in full)
def test_gpu_check_script_runs_its_cpu_tiny_mode_and_prints_one_json_line(tmp_path):
    """slurm/gpu_check.sh (the device check) is the same code on CPU with a small model: one JSON line."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    argv = ["--cpu", "--tiny", "--steps", "2", "--prompts", "1", "--group", "2", "--max-turns", "2"]
    argv += ["--max-new-tokens", "8", "--work", str(tmp_path)]
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(
        ["bash", str(repo / "slurm" / "gpu_check.sh"), *argv],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PYTHON": sys.executable},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    line = json.loads(out.stdout.strip().splitlines()[-1])
    assert line["ok"] and line["steps"] == 2 and line["episodes_per_step"] == 2 and line["device"] == "cpu"
    assert line["rollout_tokens_per_s"] > 0 and len(line["step_s"]) == 2 and line["generated_tokens"] > 0
    assert line["undecodable_ids"] == 0 and line["suppressed_ids"] > 0  # the real Qwen2.5 tokenizer's ids


class AnswerOnlyPolicy:
    """Compact protocol: episode 0 of a group is the compact expert (it retrieves what its plan needs),
    episode 1 answers the same reference plan at once, with no tool call (same plan, no retrieval)."""

    tokenizer = None

    def __init__(self) -> None:
        from star_lib.agent.compact import CompactExpert

        self.expert = CompactExpert()

    def generate(self, conversations, *, max_new_tokens):
        from star_lib.agent.compact import encode_plan, format_answer_turn
        from star_lib.agent.policies import Generation

        out = []
        for conv in conversations:
            if conv.key % 2 == 0:
                out.append(Generation(text=self.expert.next_turn(conv.query, conv.messages)))
            else:
                out.append(
                    Generation(
                        text=format_answer_turn("", encode_plan(conv.query, conv.query.reference_plan))
                    )
                )
        return out


def test_rl_milestone_reward_separates_a_group_that_sum_cannot_on_the_compact_protocol(
    rl_dir, tmp_path, world
):
    from star_lib.train.rl import REWARD_NAMES

    assert "milestone" in REWARD_NAMES
    rewards = {}
    for reward in ("sum", "milestone"):
        cfg = config(rl_dir, tmp_path / reward, reward=reward, protocol="compact", max_turns=20)
        trainer = make_grpo_trainer(cfg, policy_factory=lambda t, c: AnswerOnlyPolicy(), world=world)
        trainer.model.train()
        prompt = trainer.train_dataset[0]["prompt"]
        out = trainer._generate_and_score_completions([{"prompt": prompt} for _ in range(cfg.group_size)])
        rewards[reward] = (
            list(trainer._logs["rewards"][f"{reward}_reward"]),
            out["advantages"].tolist(),
            trainer,
        )
    assert rewards["sum"][0] == [1.0, 1.0]  # both plans pass: SUM gives this group no advantage
    assert rewards["sum"][1] == pytest.approx([0.0, 0.0])
    # MILESTONE = (SUM + credit) / 2: the expert retrieved every needed item (credit 1), the other none (0)
    assert rewards["milestone"][0] == pytest.approx([1.0, 0.5])
    assert rewards["milestone"][1][0] > 0 > rewards["milestone"][1][1]
    logged = rewards["milestone"][2]._metrics["train"]["reward/milestone_credit"][-1]
    assert logged == pytest.approx(0.5)
