"""The context limit holds for every request: prompt + ``max_tokens`` never exceeds the engine's length.

vLLM refuses a request whose prompt plus ``max_tokens`` is longer than its ``max_model_len`` (RL sets it to
``max_context_tokens``), and one refusal kills the whole RL stage. The engine here is a stand-in with vLLM's
``generate`` shape that refuses exactly those requests and records every request it gets; it writes
``max_tokens`` filler tokens (a turn cut at the limit), so turns fill the context fast.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import pytest

from star_lib.agent import rollout
from star_lib.agent.config import RolloutConfig
from star_lib.agent.fastgen import FastPolicy
from star_lib.agent.policies import Conversation, SamplingParams, TransformersPolicy, VLLMPolicy
from star_lib.agent.react import CONTEXT_LIMIT_PROMPT
from star_lib.agent.rollout import run_episodes
from star_lib.types import Termination

MAX_NEW = 32
CFG = RolloutConfig(
    evaluate=False,
    reward="none",
    max_turns=12,
    max_new_tokens=MAX_NEW,
    max_format_errors=0,
    max_context_tokens=64,
)


class _Engine:
    """A ``vllm.LLM`` stand-in: refuses (raises, as vLLM does) prompt + max_tokens > ``limit``."""

    def __init__(self, limit: int, filler: int, *, report_limit: bool = False) -> None:
        self.limit, self.filler = limit, filler
        self.requests: list[tuple[int, int]] = []  # (prompt tokens, max_tokens) of each request
        if report_limit:  # what a real vllm.LLM exposes
            self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=limit))

    def generate(self, prompts: list[dict[str, Any]], params: Any, use_tqdm: bool = False) -> list[Any]:
        params = params if isinstance(params, list) else [params] * len(prompts)
        outputs = []
        for prompt, options in zip(prompts, params, strict=True):
            n, k = len(prompt["prompt_token_ids"]), options["max_tokens"]
            self.requests.append((n, k))
            if k < 1 or n + k > self.limit:
                raise ValueError(
                    f"prompt ({n}) + max_tokens ({k}) is longer than the maximum model length ({self.limit})"
                )
            completion = types.SimpleNamespace(token_ids=[self.filler] * k, logprobs=None)
            outputs.append(types.SimpleNamespace(outputs=[completion]))
        return outputs


def _vllm_policy(tokenizer: Any, engine: _Engine) -> VLLMPolicy:
    fake_vllm = types.SimpleNamespace(SamplingParams=lambda **kw: kw)
    return VLLMPolicy(engine, tokenizer, SamplingParams(temperature=0.0), vllm_module=fake_vllm)


def _prompt_tokens(qwen_tokenizer: Any, fake_tools: Any, query: Any) -> int:
    engine = _Engine(10**6, qwen_tokenizer.encode(" x")[0])
    cfg = dataclasses.replace(CFG, max_turns=1, max_context_tokens=10**6)
    ep = run_episodes(_vllm_policy(qwen_tokenizer, engine), [query], None, cfg, tools=fake_tools)[0]
    return len(ep.prompt_ids)


def test_context_limit_every_request_fits_and_full_episodes_end_truncated(qwen_tokenizer, fake_tools, query):
    filler = qwen_tokenizer.encode(" x")[0]
    prompt = _prompt_tokens(qwen_tokenizer, fake_tools, query)
    clamped, stopped_without_asking = 0, 0
    for extra in range(MAX_NEW + 2, MAX_NEW + 200, 4):  # limits from "one turn fits" to "several turns fit"
        limit = prompt + extra
        cfg = dataclasses.replace(CFG, max_context_tokens=limit)
        engine = _Engine(limit, filler)
        ep = run_episodes(_vllm_policy(qwen_tokenizer, engine), [query], None, cfg, tools=fake_tools)[0]
        for n, k in engine.requests:
            assert n + k <= limit, (limit, engine.requests)
            assert k == min(MAX_NEW, limit - n)  # max_tokens clamped to the room left, and no lower
            assert k >= rollout.MIN_REPLY_TOKENS
        clamped += sum(k < MAX_NEW for _, k in engine.requests)
        assert ep.termination is Termination.CONTEXT_LIMIT, (limit, ep.termination)
        assert ep.termination.truncated and ep.error is None  # truncated, not a crash or a backend failure
        assert ep.turns == len(engine.requests)
        assert ep.messages[-1]["role"] == "assistant"  # no message the model never saw is left
        if ep.messages[-2]["content"] != CONTEXT_LIMIT_PROMPT:
            stopped_without_asking += 1  # even the final-plan request left too little room: not sent
    assert clamped and stopped_without_asking


def test_context_limit_prompt_without_room_ends_truncated_before_any_request(
    qwen_tokenizer, fake_tools, query
):
    prompt = _prompt_tokens(qwen_tokenizer, fake_tools, query)
    for limit in (prompt - 1, prompt, prompt + 5):  # 5 < MIN_REPLY_TOKENS
        engine = _Engine(limit, qwen_tokenizer.encode(" x")[0])
        cfg = dataclasses.replace(CFG, max_context_tokens=limit)
        episodes = run_episodes(
            _vllm_policy(qwen_tokenizer, engine), [query] * 2, None, cfg, tools=fake_tools
        )
        assert engine.requests == []
        for ep in episodes:
            assert ep.termination is Termination.CONTEXT_LIMIT and ep.turns == 0 and ep.error is None
            assert [m["role"] for m in ep.messages] == ["system", "user"]


def test_context_limit_vllm_policy_clamps_to_its_engine_length(qwen_tokenizer, fake_tools, query):
    """An engine shorter than the runner's budget still never sees an oversized request."""
    prompt = _prompt_tokens(qwen_tokenizer, fake_tools, query)
    engine = _Engine(prompt + 20, qwen_tokenizer.encode(" x")[0], report_limit=True)
    policy = _vllm_policy(qwen_tokenizer, engine)
    assert policy.context_limit == prompt + 20
    cfg = dataclasses.replace(CFG, max_context_tokens=prompt + 500)
    ep = run_episodes(policy, [query], None, cfg, tools=fake_tools)[0]
    assert engine.requests and all(n + k <= engine.limit for n, k in engine.requests)
    assert engine.requests[0] == (prompt, 20)  # clamped to the engine's room
    assert ep.error is not None and "context full" in ep.error  # the backend said so as data, no exception


@pytest.mark.parametrize("backend", ["transformers", "fast"])
def test_context_limit_local_backends_cut_each_row_at_its_room(backend, qwen_tokenizer, tiny_model):
    greedy = SamplingParams(temperature=0.0)
    if backend == "transformers":
        policy: Any = TransformersPolicy(tiny_model, qwen_tokenizer, greedy, context_limit=40)
    else:
        policy = FastPolicy(tiny_model, qwen_tokenizer, greedy, reuse_cache=False, context_limit=40)
    ids = qwen_tokenizer.encode(" x" * 40)
    conversations = [
        Conversation(messages=[], prompt_ids=ids[:10], key=0),  # engine room 30, call cap 8
        Conversation(messages=[], prompt_ids=ids[:20], key=1, max_new_tokens=3),  # the runner's room
        Conversation(messages=[], prompt_ids=ids[:37], key=2),  # engine room 3
        Conversation(messages=[], prompt_ids=ids[:40], key=3),  # no room
    ]
    out = policy.generate(conversations, max_new_tokens=8)
    rooms = [8, 3, 3]
    for generation, room in zip(out[:3], rooms, strict=True):
        assert generation.error is None and 1 <= len(generation.token_ids) <= room
        assert generation.finish_reason == "stop" or len(generation.token_ids) == room
    assert out[3].finish_reason == "error" and "context full" in out[3].error
