"""Teacher runs → TRL conversational SFT data that SFTTrainer(assistant_only_loss=True) trains on."""

from __future__ import annotations

import json

import pytest

from star_lib.agent.config import RolloutConfig
from star_lib.agent.expert import ExpertPolicy
from star_lib.agent.rollout import run_episodes
from star_lib.agent.teacher import build_sft_dataset, keep_episode, teacher_stats

from .conftest import ScriptedPolicy


@pytest.fixture(scope="module")
def tiny_set():
    from star_lib.synth import SynthConfig, synthesize
    from star_lib.travel.world import World

    world = World.synthetic(seed=1, scale="tiny")
    return world, synthesize(world, SynthConfig(n=12, seed=1)).records


@pytest.fixture(scope="module")
def sft_dir(tiny_set, tmp_path_factory):
    world, records = tiny_set
    out = tmp_path_factory.mktemp("sft")
    stats = build_sft_dataset(ExpertPolicy(), records, world, out, chunk_size=5)
    assert stats.total == 12
    return out


def test_teacher_writes_kept_episodes_and_stats(sft_dir, tiny_set):
    import polars as pl

    _, records = tiny_set
    rows = [json.loads(line) for line in (sft_dir / "train.jsonl").read_text().splitlines()]
    stats = json.loads((sft_dir / "stats.json").read_text())
    assert stats["kept"] == len(rows) >= 11 and stats["total"] == 12
    assert stats["mean_turns"] == pytest.approx(stats["mean_tool_calls"] + 1)
    assert sum(stats["tool_histogram"].values()) == pytest.approx(stats["mean_tool_calls"] * stats["kept"])
    assert stats["mean_tokens"] is None and stats["mean_chars"] > 0
    for row in rows:
        assert set(row) == {"messages", "tools"}
        assert [m["role"] for m in row["messages"][:2]] == ["system", "user"]
        assert row["messages"][-1]["role"] == "assistant" and "<answer>" in row["messages"][-1]["content"]
        assert {t["function"]["name"] for t in json.loads(row["tools"])} >= {"SearchFlight", "SearchCity"}
    frame = pl.read_parquet(sft_dir / "episodes.parquet")
    assert frame.height == 12 and frame["index"].to_list() == list(range(12))
    assert frame["final_pass"].sum() == stats["kept"]


def test_teacher_drops_malformed_and_failed_episodes(tiny_set, tmp_path):
    world, records = tiny_set
    bad_answer = "<think>x</think><answer>[]</answer>"
    episodes = run_episodes(ScriptedPolicy(["no tags", bad_answer]), records[:2], world, RolloutConfig())
    assert not any(keep_episode(ep) for ep in episodes)
    stats = build_sft_dataset(ScriptedPolicy([bad_answer]), records[:3], world, tmp_path)
    assert stats.kept == 0 and (tmp_path / "train.jsonl").read_text() == ""
    assert teacher_stats(episodes).format_valid == 0
    with pytest.raises(ValueError, match="queries"):
        build_sft_dataset(ExpertPolicy(), [], world, tmp_path)


def test_teacher_counts_tokens_with_a_tokenizer(tiny_set, tmp_path, qwen_tokenizer):
    world, records = tiny_set
    stats = build_sft_dataset(ExpertPolicy(), records[:3], world, tmp_path, tokenizer=qwen_tokenizer)
    assert stats.mean_tokens > stats.mean_model_tokens > 0


def test_teacher_sft_set_trains_in_trl_with_assistant_only_loss(sft_dir, tmp_path):
    import torch
    from datasets import load_dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from star_lib.train.tokenizer import TokenizerConfig, train_tokenizer

    dataset = load_dataset("json", data_files=str(sft_dir / "train.jsonl"), split="train")
    texts = [m["content"] for row in dataset for m in row["messages"]] + [row["tools"] for row in dataset]
    tokenizer = train_tokenizer(texts, TokenizerConfig(vocab_size=600))
    assert tokenizer.chat_template == qwen2_5_chat_template  # TRL swaps in its {% generation %} variant
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16384,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        assistant_only_loss=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=True,
        max_length=None,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    batch = trainer.data_collator([trainer.train_dataset[0]])
    labels = batch["labels"][0]
    trained = tokenizer.decode(labels[labels != -100])
    assistant = [m["content"] for m in dataset[0]["messages"] if m["role"] == "assistant"]
    # only the assistant turns, with the newlines TRL's training template puts inside {% generation %}
    assert trained == "".join(f"\n{c}<|im_end|>\n" for c in assistant)
    trainer.train()
    assert trainer.state.global_step == 3
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())


def test_teacher_sft_mask_agrees_with_rollout_env_mask(tiny_set, qwen_tokenizer):
    """TRL's training template trains the runner's model tokens plus two template newlines per turn."""
    import copy

    from trl.chat_template_utils import qwen2_5_chat_template, qwen2_5_training_chat_template

    world, records = tiny_set
    tok = copy.deepcopy(qwen_tokenizer)
    tok.chat_template = qwen2_5_chat_template
    ep = run_episodes(ExpertPolicy(), records[:1], world, RolloutConfig(), tokenizer=tok)[0]
    out = tok.apply_chat_template(
        ep.messages,
        tools=ep.tool_schemas,
        chat_template=qwen2_5_training_chat_template,
        return_assistant_tokens_mask=True,
        return_dict=True,
        tokenize=True,
    )
    ids, sft_mask = out["input_ids"], out["assistant_masks"]
    assert ids[:-1] == ep.prompt_ids + ep.completion_ids
    rollout_mask = [0] * len(ep.prompt_ids) + ep.env_mask + [0]
    newline = tok.encode("\n", add_special_tokens=False)[0]
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    role = tok.encode("assistant", add_special_tokens=False)[0]
    differ = [i for i, (a, b) in enumerate(zip(sft_mask, rollout_mask, strict=True)) if a != b]
    # the only disagreements: the "\n" after "<|im_start|>assistant" and after each assistant "<|im_end|>"
    assert all(sft_mask[i] == 1 and ids[i] == newline and ids[i - 1] in (role, im_end) for i in differ)
    assert len(differ) == 2 * ep.turns
