"""Token bookkeeping through the real Qwen2.5 tokenizer and chat template."""

from __future__ import annotations

import math

import pytest

from star_lib.agent.chat import ChatRenderer
from star_lib.agent.config import RolloutConfig
from star_lib.agent.policies import Generation
from star_lib.agent.rollout import run_episodes

from .conftest import ScriptedPolicy

CALL = (
    '<think>Find food in {city}.</think><tool_call>{{"name": "SearchRestaurant", '
    '"arguments": {{"city": "{city}"}}}}</tool_call>'
)
ANSWER = '<think>Done — café ☕ booked.</think><answer>[{"days": 1, "current_city": "Denver"}]</answer>'
TURNS = [
    CALL.format(city="Denver"),
    "\n\n  " + CALL.format(city="Boulder") + "\n",  # whitespace around the turn
    "not a valid turn",  # format error → observation
    ANSWER,
]
CFG = RolloutConfig(evaluate=False, reward="none", max_new_tokens=64, max_context_tokens=20_000)


def _run(qwen_tokenizer, fake_tools, query, policy=None, cfg=CFG):
    policy = policy or ScriptedPolicy(TURNS, tokenizer=qwen_tokenizer)
    return run_episodes(policy, [query], None, cfg, tools=fake_tools, tokenizer=qwen_tokenizer)[0]


def _full_ids(tok, episode):
    text = tok.apply_chat_template(episode.messages, tools=episode.tool_schemas, tokenize=False)
    return tok.encode(text, add_special_tokens=False)


def test_chat_round_trip_equals_tokenised_template(qwen_tokenizer, fake_tools, query):
    ep = _run(qwen_tokenizer, fake_tools, query)
    assert [m["role"] for m in ep.messages] == ["system", "user"] + ["assistant", "tool"] * 3 + ["assistant"]
    full = _full_ids(qwen_tokenizer, ep)
    assert ep.prompt_ids + ep.completion_ids == full[:-1]
    assert qwen_tokenizer.decode(full[-1:]) == "\n"  # the template's newline after the final <|im_end|>
    assert ep.completion_ids[-1] == qwen_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert qwen_tokenizer.decode(ep.prompt_ids).endswith("<|im_start|>assistant\n")
    assert '"name": "SearchRestaurant"' in qwen_tokenizer.decode(ep.prompt_ids)  # tools rendered by template


def _runs(mask):
    """(value, start, stop) of each run of equal mask values."""
    runs, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((mask[start], start, i))
            start = i
    return runs


def test_chat_env_mask_is_one_exactly_on_assistant_tokens(qwen_tokenizer, fake_tools, query):
    ep = _run(qwen_tokenizer, fake_tools, query)
    assert len(ep.env_mask) == len(ep.completion_ids)
    runs = _runs(ep.env_mask)
    model_text = [qwen_tokenizer.decode(ep.completion_ids[a:b]) for v, a, b in runs if v == 1]
    env_text = [qwen_tokenizer.decode(ep.completion_ids[a:b]) for v, a, b in runs if v == 0]
    contents = [m["content"] for m in ep.messages if m["role"] == "assistant"]
    assert model_text == [c + "<|im_end|>" for c in contents]
    assert contents[1] == CALL.format(city="Boulder")  # recorded stripped
    observations = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert env_text == [
        f"\n<|im_start|>user\n<tool_response>\n{o}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        for o in observations
    ]


def test_chat_logprobs_follow_ids_in_canonical_and_sampled_modes(qwen_tokenizer, fake_tools, query):
    policy = ScriptedPolicy(TURNS, tokenizer=qwen_tokenizer, with_ids=True)
    ep = _run(qwen_tokenizer, fake_tools, query, policy)
    assert len(ep.logprobs) == len(ep.completion_ids)
    for lp, m in zip(ep.logprobs, ep.env_mask, strict=True):
        assert lp == (-0.5 if m else 0.0) or (m and math.isnan(lp))
    # the whitespace-wrapped turn was sampled with different ids than its stripped re-tokenisation
    assert ep.retokenized_turns == 1
    assert sum(math.isnan(x) for x in ep.logprobs) == len(qwen_tokenizer.encode(TURNS[1].strip())) + 1

    class Ragged(ScriptedPolicy):
        def generate(self, conversations, *, max_new_tokens):
            gens = super().generate(conversations, max_new_tokens=max_new_tokens)
            # split the first token into its characters: same text, non-canonical ids
            out = []
            for g in gens:
                first = qwen_tokenizer.decode(g.token_ids[:1])
                ids = [qwen_tokenizer.convert_tokens_to_ids(c) for c in first] + g.token_ids[1:]
                out.append(Generation(text=g.text, token_ids=ids, logprobs=[-0.25] * len(ids)))
            return out

    sampled = RolloutConfig(**{**CFG.__dict__, "token_ids": "sampled"})
    ep = _run(
        qwen_tokenizer,
        fake_tools,
        query,
        Ragged([CALL.format(city="Denver"), ANSWER], qwen_tokenizer, True),
        sampled,
    )
    assert ep.retokenized_turns == 0
    assert all(lp == -0.25 for lp, m in zip(ep.logprobs, ep.env_mask, strict=True) if m)
    assert qwen_tokenizer.decode(ep.prompt_ids + ep.completion_ids) == qwen_tokenizer.decode(
        _full_ids(qwen_tokenizer, ep)[:-1]
    )
    assert ep.prompt_ids + ep.completion_ids != _full_ids(qwen_tokenizer, ep)[:-1]


def test_chat_renderer_rejects_template_without_turn_end(qwen_tokenizer):
    import copy

    tok = copy.deepcopy(qwen_tokenizer)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    with pytest.raises(ValueError, match="special token"):
        ChatRenderer(tok)
    tok.chat_template = None
    with pytest.raises(ValueError, match="chat_template"):
        ChatRenderer(tok)
