"""Policy backends: a tiny random transformers model on CPU, the OpenAI client wrapper, vLLM guard."""

from __future__ import annotations

import importlib.util
import math

import pytest

from star_lib.agent.config import RolloutConfig
from star_lib.agent.openai_policy import OpenAIConfig, OpenAIPolicy
from star_lib.agent.policies import (
    Conversation,
    Policy,
    SamplingParams,
    TransformersPolicy,
    VLLMPolicy,
    render_prompt_ids,
)
from star_lib.agent.rollout import run_episodes

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Plan a trip to Denver."}]


def _convs(tok, n=3):
    convs = []
    for i in range(n):
        messages = [*MESSAGES[:1], {"role": "user", "content": "Plan a trip. " * (i + 1)}]
        conv = Conversation(messages=messages, key=i)
        conv.prompt_ids = render_prompt_ids(tok, conv)
        convs.append(conv)
    return convs


def test_policies_transformers_batch_returns_ids_and_logprobs(tiny_model, qwen_tokenizer):
    policy = TransformersPolicy(tiny_model, qwen_tokenizer, SamplingParams(temperature=1.0, seed=0))
    assert isinstance(policy, Policy)
    gens = policy.generate(_convs(qwen_tokenizer), max_new_tokens=12)
    assert len(gens) == 3
    for g in gens:
        assert 0 < len(g.token_ids) <= 12 and len(g.logprobs) == len(g.token_ids)
        assert all(lp <= 0.0 and math.isfinite(lp) for lp in g.logprobs)
        assert g.finish_reason in ("stop", "length")
        if g.finish_reason == "stop":
            assert g.token_ids[-1] in policy.stop_ids
        assert g.text == qwen_tokenizer.decode(g.token_ids[:-1] if g.finish_reason == "stop" else g.token_ids)


def test_policies_transformers_logprobs_match_a_forward_pass(tiny_model, qwen_tokenizer):
    import torch

    policy = TransformersPolicy(tiny_model, qwen_tokenizer, SamplingParams(temperature=1.0, seed=3))
    conv = _convs(qwen_tokenizer, 2)[1]
    gen = policy.generate([_convs(qwen_tokenizer, 1)[0], conv], max_new_tokens=8)[1]  # left-padded row
    ids = torch.tensor([conv.prompt_ids + gen.token_ids])
    with torch.no_grad():
        logits = tiny_model(ids).logits[0, len(conv.prompt_ids) - 1 : -1]  # (new, V)
    expected = torch.log_softmax(logits.float(), -1).gather(1, ids[0, len(conv.prompt_ids) :, None])[:, 0]
    assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)


def test_policies_transformers_greedy_is_deterministic_and_batch_invariant(tiny_model, qwen_tokenizer):
    policy = TransformersPolicy(tiny_model, qwen_tokenizer, SamplingParams(temperature=0.0), batch_size=2)
    convs = _convs(qwen_tokenizer)
    batched = policy.generate(convs, max_new_tokens=6)
    again = policy.generate(convs, max_new_tokens=6)
    alone = [policy.generate([c], max_new_tokens=6)[0] for c in convs]
    assert [g.token_ids for g in batched] == [g.token_ids for g in again] == [g.token_ids for g in alone]


def test_policies_transformers_runs_episodes_with_env_mask_and_logprobs(
    tiny_model, qwen_tokenizer, fake_tools, query
):
    policy = TransformersPolicy(tiny_model, qwen_tokenizer, SamplingParams(seed=0))
    cfg = RolloutConfig(evaluate=False, reward="none", max_turns=3, max_new_tokens=8, token_ids="sampled")
    episodes = run_episodes(policy, [query] * 2, None, cfg, tools=fake_tools)
    for ep in episodes:
        assert ep.turns >= 1 and len(ep.completion_ids) == len(ep.env_mask) == len(ep.logprobs)
        assert all(lp == 0.0 for lp, m in zip(ep.logprobs, ep.env_mask, strict=True) if m == 0)
        assert ep.model_tokens <= ep.turns * (cfg.max_new_tokens + 1)


def test_policies_sampling_params_validate():
    for bad in ({"temperature": -1}, {"top_p": 0}, {"top_k": -2}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)


def test_policies_openai_key_from_named_env_var(monkeypatch):
    monkeypatch.delenv("STAR_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="STAR_TEST_KEY"):
        OpenAIPolicy(
            OpenAIConfig(model="m", base_url="https://api.example.com/v1", api_key_env="STAR_TEST_KEY")
        )
    monkeypatch.setenv("STAR_TEST_KEY", "sk-secret-value")
    policy = OpenAIPolicy(
        OpenAIConfig(model="m", base_url="https://api.example.com/v1", api_key_env="STAR_TEST_KEY")
    )
    assert "sk-secret" not in repr(policy) and "sk-secret" not in repr(policy.config)
    local = OpenAIPolicy(
        OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="STAR_UNSET_KEY")
    )
    assert local._client.api_key == "EMPTY"


def test_policies_openai_request_body_modes():
    tools = [{"type": "function", "function": {"name": "SearchCity", "parameters": {}}}]
    conv = Conversation(
        messages=[
            *MESSAGES,
            {"role": "assistant", "content": "<think>a</think><tool_call>{}</tool_call>"},
            {"role": "tool", "content": "Cities: A"},
        ],
        tools=tools,
    )
    hosted = OpenAIPolicy(
        OpenAIConfig(model="m", base_url="http://localhost:1/v1"), SamplingParams(top_k=20, seed=1)
    )
    body = hosted.request_body(conv, 64)
    assert "tools" not in body and '"name": "SearchCity"' in body["messages"][0]["content"]
    assert body["messages"][-1] == {"role": "user", "content": "<tool_response>\nCities: A\n</tool_response>"}
    assert body["extra_body"] == {"top_k": 20} and body["seed"] == 1 and body["max_tokens"] == 64
    assert conv.messages[0]["content"] == "Be brief."  # the conversation itself is untouched
    local = OpenAIPolicy(
        OpenAIConfig(model="m", base_url="http://localhost:1/v1", tools_mode="template", tool_messages="tool")
    )
    body = local.request_body(conv, 64)
    assert body["tools"] == tools and body["messages"][-1]["role"] == "tool"


def test_policies_openai_unreachable_endpoint_is_an_error_generation():
    policy = OpenAIPolicy(
        OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1", max_retries=1, backoff_s=0.0, timeout_s=2)
    )
    gen = policy.generate([Conversation(messages=MESSAGES)], max_new_tokens=4)[0]
    assert gen.finish_reason == "error" and gen.text == "" and "Connection" in gen.error


def test_policies_openai_config_validates():
    with pytest.raises(ValueError):
        OpenAIConfig(model="m", concurrency=0)
    with pytest.raises(ValueError):
        OpenAIConfig(model="m", tools_mode="inline")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_policies_vllm_is_import_guarded():
    with pytest.raises(ImportError, match="star-lab\\[gpu\\]"):
        VLLMPolicy("any-model")


@pytest.mark.gpu
def test_policies_vllm_generates_with_logprobs(tmp_path, tiny_model, qwen_tokenizer):
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    tiny_model.save_pretrained(tmp_path)
    qwen_tokenizer.save_pretrained(tmp_path)
    policy = VLLMPolicy(
        str(tmp_path), sampling=SamplingParams(seed=0), gpu_memory_utilization=0.2, max_model_len=4096
    )
    gens = policy.generate(_convs(qwen_tokenizer), max_new_tokens=8)
    assert all(len(g.token_ids) == len(g.logprobs) > 0 for g in gens)
