"""The OpenAI-compatible server: a tiny transformers model behind real HTTP, driven by OpenAIPolicy."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from star_lib.agent.config import RolloutConfig
from star_lib.agent.policies import (
    Conversation,
    OpenAIConfig,
    OpenAIPolicy,
    SamplingParams,
    TransformersPolicy,
    render_prompt_ids,
)
from star_lib.agent.rollout import run_episodes
from star_lib.agent.serve import ChatServer

GREEDY = SamplingParams(temperature=0.0)
SEEDED = SamplingParams(temperature=1.0, seed=5)


@pytest.fixture(scope="module")
def server(tiny_model, qwen_tokenizer):
    with ChatServer(TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY), model_name="tiny") as srv:
        yield srv


def _post(url, body, headers=None):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_serve_openai_policy_matches_local_generation(server, tiny_model, qwen_tokenizer):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "SearchCity",
                "description": "d",
                "parameters": {
                    "type": "object",
                    "properties": {"state": {"type": "string"}},
                    "required": ["state"],
                },
            },
        }
    ]
    messages = [
        {"role": "system", "content": "Plan trips."},
        {"role": "user", "content": "Go to Ohio."},
        {
            "role": "assistant",
            "content": '<think>a</think><tool_call>{"name": "SearchCity", "arguments": {}}</tool_call>',
        },
        {"role": "tool", "content": "Cities in Ohio: Columbus."},
    ]
    cfg = OpenAIConfig(
        model="tiny", base_url=server.base_url, tools_mode="template", tool_messages="tool", logprobs=True
    )
    remote = OpenAIPolicy(cfg, SEEDED).generate(
        [Conversation(messages=messages, tools=tools)], max_new_tokens=10
    )[0]
    conv = Conversation(messages=messages, tools=tools)
    conv.prompt_ids = render_prompt_ids(qwen_tokenizer, conv)
    local = TransformersPolicy(tiny_model, qwen_tokenizer, SEEDED).generate([conv], max_new_tokens=10)[0]
    assert remote.error is None and remote.text == local.text and remote.text
    assert remote.logprobs == pytest.approx(local.logprobs, abs=1e-5)
    assert remote.finish_reason == local.finish_reason


def test_serve_runs_episodes_over_http(server, fake_tools, query):
    cfg = OpenAIConfig(
        model="tiny",
        base_url=server.base_url,
        concurrency=2,
        tools_mode="template",
        tool_messages="tool",
        retry_empty=False,
        backoff_s=0.0,
    )
    rollout = RolloutConfig(evaluate=False, reward="none", max_turns=2, max_new_tokens=6)
    episodes = run_episodes(OpenAIPolicy(cfg, SEEDED), [query] * 3, None, rollout, tools=fake_tools)
    assert len(episodes) == 3 and all(ep.error is None and ep.turns == 2 for ep in episodes)
    assert all(ep.messages[2]["role"] == "assistant" for ep in episodes)
    assert all(ep.format_errors == 2 for ep in episodes)  # a random model does not follow the protocol


def test_serve_rejects_bad_requests_and_reports_models(server):
    url = server.base_url + "/chat/completions"
    status, body = _post(url, {"model": "tiny", "messages": []})
    assert status == 400 and "messages" in body["error"]["message"]
    status, body = _post(
        url, {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**9}
    )
    assert status == 400 and "max_tokens" in body["error"]["message"]
    with urllib.request.urlopen(server.base_url + "/models", timeout=10) as response:
        assert json.loads(response.read())["data"][0]["id"] == "tiny"


def test_serve_requires_the_configured_key(tiny_model, qwen_tokenizer, monkeypatch):
    with ChatServer(TransformersPolicy(tiny_model, qwen_tokenizer, GREEDY), api_key="k-123") as srv:
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert _post(srv.base_url + "/chat/completions", body)[0] == 401
        assert _post(srv.base_url + "/chat/completions", body, {"Authorization": "Bearer k-123"})[0] == 200
        monkeypatch.setenv("STAR_SERVE_KEY", "k-123")
        cfg = OpenAIConfig(model="tiny", base_url=srv.base_url, api_key_env="STAR_SERVE_KEY", max_retries=0)
        assert (
            OpenAIPolicy(cfg).generate([Conversation(messages=body["messages"])], max_new_tokens=2)[0].error
            is None
        )
