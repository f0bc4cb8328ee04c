"""FastPolicy: the same logits and greedy turns as Hugging Face, a cache that survives turns, sampling."""

from __future__ import annotations

import math

import pytest
import torch

from star_lib.agent.fastgen import FastPolicy, FastQwen2, check_against_transformers, sample_tokens
from star_lib.agent.policies import Conversation, EntropyGeneration, SamplingParams, TransformersPolicy
from star_lib.train.tokenizer import train_tokenizer

from .conftest import tiny_qwen2


@pytest.fixture(scope="module")
def tok():
    texts = ["Pellmont to Elmstead on 2022-03-02, flight F123 costs 93 <think>best</think>"] * 20
    return train_tokenizer(texts)


@pytest.fixture(scope="module")
def model(tok):
    model = tiny_qwen2(tok, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    with torch.no_grad():  # sharpen the random model so greedy continuations are not all ties
        for p in model.parameters():
            p.mul_(8.0)
    return model


def conversations(tok, n: int = 5) -> list[Conversation]:
    out = []
    for i in range(n):
        messages = [
            {"role": "system", "content": "plan"},
            {"role": "user", "content": f"trip {i} " * (i + 1)},
        ]
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        out.append(
            Conversation(messages=messages, prompt_ids=tok.encode(ids, add_special_tokens=False), key=i)
        )
    return out


def test_fastgen_logits_equal_the_transformers_forward(model, tok) -> None:
    seqs = [c.prompt_ids for c in conversations(tok)]
    assert check_against_transformers(model, seqs) < 1e-4


def test_fastgen_greedy_turns_equal_transformers_generate(model, tok) -> None:
    greedy = SamplingParams(temperature=0.0)
    convs = conversations(tok)
    ours = FastPolicy(model, tok, greedy).generate(convs, max_new_tokens=12)
    theirs = TransformersPolicy(model, tok, greedy).generate(convs, max_new_tokens=12)
    assert [g.token_ids for g in ours] == [g.token_ids for g in theirs]
    assert [g.text for g in ours] == [g.text for g in theirs]
    for a, b in zip(ours, theirs, strict=True):
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4


def test_fastgen_and_transformers_report_the_same_leading_entropies(model, tok) -> None:
    greedy = SamplingParams(temperature=0.0)
    convs = conversations(tok)
    assert not isinstance(
        FastPolicy(model, tok, greedy).generate(convs[:1], max_new_tokens=4)[0], EntropyGeneration
    )
    ours = FastPolicy(model, tok, greedy, entropy_tokens=4).generate(convs, max_new_tokens=12)
    theirs = TransformersPolicy(model, tok, greedy, entropy_tokens=4).generate(convs, max_new_tokens=12)
    for a, b in zip(ours, theirs, strict=True):
        assert isinstance(a, EntropyGeneration) and isinstance(b, EntropyGeneration)
        assert a.token_ids == b.token_ids
        assert len(a.entropies) == len(b.entropies) == min(4, len(a.token_ids))
        assert max(abs(x - y) for x, y in zip(a.entropies, b.entropies, strict=True)) < 1e-4
        assert all(0.0 <= h <= 1.0 for h in a.entropies)
    with pytest.raises(ValueError, match="entropy_tokens must be >= 0"):
        FastPolicy(model, tok, greedy, entropy_tokens=-1)


def test_fastgen_cache_reuse_gives_the_same_next_turn(model, tok) -> None:
    greedy = SamplingParams(temperature=0.0)
    cached, fresh = FastPolicy(model, tok, greedy), FastPolicy(model, tok, greedy, reuse_cache=False)
    convs = conversations(tok)
    first = cached.generate(convs, max_new_tokens=6)
    tail = tok.encode(
        "<|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False
    )
    for conv, gen in zip(convs, first, strict=True):
        body = [t for t in gen.token_ids if t != tok.eos_token_id]
        conv.prompt_ids = conv.prompt_ids + body + tail
    convs = convs[::-1][:4]  # a different order and one episode finished: rows must follow their keys
    before = cached.stats.prefill_tokens
    again, scratch = cached.generate(convs, max_new_tokens=6), fresh.generate(convs, max_new_tokens=6)
    assert [g.token_ids for g in again] == [g.token_ids for g in scratch]
    assert cached.stats.reused_tokens > 0 and fresh.stats.reused_tokens == 0
    assert cached.stats.prefill_tokens - before < fresh.stats.prefill_tokens / 2


def test_fastgen_sampling_is_seeded_and_logprobs_are_log_probabilities(model, tok) -> None:
    convs = conversations(tok)
    runs = [
        FastPolicy(model, tok, SamplingParams(temperature=1.0, top_p=0.9, seed=3)).generate(
            convs, max_new_tokens=8
        )
        for _ in range(2)
    ]
    assert [g.token_ids for g in runs[0]] == [g.token_ids for g in runs[1]]
    for gen in runs[0]:
        assert len(gen.logprobs) == len(gen.token_ids) and all(
            lp <= 0 and math.isfinite(lp) for lp in gen.logprobs
        )


def test_fastgen_refuses_other_architectures(model) -> None:
    model.config.model_type = "llama"
    try:
        with pytest.raises(ValueError, match="Qwen2"):
            FastQwen2(model)
    finally:
        model.config.model_type = "qwen2"


def test_fastgen_sampler_draws_the_processed_distribution() -> None:
    # inverse-CDF sampling (one uniform per row) must match softmax(logits / T) after top-p, and never pick
    # a token top-p removed or one of probability 0
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -float("inf")]]).repeat(40_000, 1)
    sampling = SamplingParams(temperature=1.0, top_p=0.9)
    token, logprob = sample_tokens(logits, sampling, torch.Generator().manual_seed(0))
    kept = torch.softmax(torch.tensor([2.0, 1.0, 0.0]), -1)  # 0.64 + 0.24 < 0.9: the third token stays
    freq = torch.bincount(token, minlength=5).double() / len(token)
    assert torch.allclose(freq[:3], kept.double(), atol=0.01) and freq[3:].sum() == 0
    assert torch.allclose(logprob, kept.log()[token], atol=1e-5)
