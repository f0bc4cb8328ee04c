"""The lockstep runner: batching, limits, group ids, outputs, and the expert on the real train set."""

from __future__ import annotations

import dataclasses
import json

import polars as pl
import pytest

from star_lib.agent.config import RolloutConfig
from star_lib.agent.expert import ExpertPolicy
from star_lib.agent.react import CONTEXT_LIMIT_PROMPT
from star_lib.agent.rollout import RolloutStats, episodes_frame, run_episodes, trl_rollout_output
from star_lib.types import Termination

from .conftest import ScriptedPolicy

CALL = '<think>t</think><tool_call>{"name": "SearchRestaurant", "arguments": {"city": "Denver"}}</tool_call>'
ANSWER = '<think>done</think><answer>[{"days": 1}]</answer>'
CFG = RolloutConfig(evaluate=False, reward="none", max_turns=6, max_new_tokens=64, max_context_tokens=20_000)


def test_rollout_runs_live_episodes_in_lockstep(fake_tools, query):
    scripts = {0: [ANSWER], 1: [CALL, ANSWER], 2: [CALL, CALL, CALL, ANSWER]}
    policy = ScriptedPolicy(scripts)
    stats = RolloutStats()
    episodes = run_episodes(policy, [query] * 3, None, CFG, tools=fake_tools, stats=stats)
    assert policy.batch_sizes == [3, 2, 1, 1]
    assert [ep.turns for ep in episodes] == [1, 2, 4]
    assert [ep.index for ep in episodes] == [0, 1, 2]
    assert stats.turns == 4 and stats.episodes == 3 and stats.total_s >= stats.generation_s


def test_rollout_group_ids_and_validation(fake_tools, query):
    episodes = run_episodes(
        ScriptedPolicy([ANSWER]), [query] * 4, None, CFG, tools=fake_tools, group_ids=[0, 0, 1, 1]
    )
    assert [ep.group_id for ep in episodes] == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="group_ids"):
        run_episodes(ScriptedPolicy([ANSWER]), [query] * 2, None, CFG, tools=fake_tools, group_ids=[0])


def test_rollout_turn_limit(fake_tools, query):
    ep = run_episodes(ScriptedPolicy([CALL]), [query], None, CFG, tools=fake_tools)[0]
    assert ep.termination is Termination.TURN_LIMIT and ep.turns == CFG.max_turns and ep.malformed


def test_rollout_context_limit_asks_for_plan_once(fake_tools, query, qwen_tokenizer):
    fake_tools.answers["SearchRestaurant"] = "restaurant " * 1000  # 1000 tokens per observation
    prompt = run_episodes(
        ScriptedPolicy([ANSWER]), [query], None, CFG, tools=fake_tools, tokenizer=qwen_tokenizer
    )
    budget = len(prompt[0].prompt_ids) + 2500  # room for two observations, not three
    cfg = dataclasses.replace(CFG, max_context_tokens=budget, max_new_tokens=64)
    policy = ScriptedPolicy([CALL] * 3 + [ANSWER], tokenizer=qwen_tokenizer)
    ep = run_episodes(policy, [query], None, cfg, tools=fake_tools)[0]
    assert ep.termination is Termination.CONTEXT_LIMIT
    assert [m["role"] for m in ep.messages[2:]] == [
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert ep.messages[-2] == {"role": "user", "content": CONTEXT_LIMIT_PROMPT}
    assert len(ep.prompt_ids) + len(ep.completion_ids) <= cfg.max_context_tokens
    assert ep.malformed  # truncated episodes fail the format gate


def test_rollout_context_limit_without_tokenizer_uses_char_estimate(fake_tools, query):
    fake_tools.answers["SearchRestaurant"] = "x" * 20_000
    cfg = dataclasses.replace(CFG, max_context_tokens=4000, max_new_tokens=64)
    ep = run_episodes(ScriptedPolicy([CALL, ANSWER]), [query], None, cfg, tools=fake_tools)[0]
    assert ep.termination is Termination.CONTEXT_LIMIT and ep.prompt_ids == []


def test_rollout_backend_error_ends_episode(fake_tools, query):
    from star_lib.agent.policies import Generation

    class Broken:
        tokenizer = None

        def generate(self, conversations, *, max_new_tokens):
            return [Generation(text="", finish_reason="error", error="HTTP 503") for _ in conversations]

    ep = run_episodes(Broken(), [query], None, CFG, tools=fake_tools)[0]
    assert ep.termination is Termination.MALFORMED and ep.error == "HTTP 503"


def test_rollout_trl_output_rows(fake_tools, query, qwen_tokenizer):
    policy = ScriptedPolicy([CALL, ANSWER], tokenizer=qwen_tokenizer, with_ids=True)
    episodes = run_episodes(policy, [query] * 2, None, CFG, tools=fake_tools)
    out = trl_rollout_output(episodes)
    assert {"prompt_ids", "completion_ids", "logprobs", "env_mask"} <= set(out)
    for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "reward"):
        assert len(out[key]) == 2
    assert all(
        len(c) == len(m) == len(lp)
        for c, m, lp in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True)
    )
    with pytest.raises(ValueError, match="tokenizer"):
        trl_rollout_output(run_episodes(ScriptedPolicy([ANSWER]), [query], None, CFG, tools=fake_tools))


@pytest.fixture(scope="module")
def train_set(real_db_dir, tp_dir):
    from star_lib.travel.plan import parse_plan
    from star_lib.travel.world import World
    from star_lib.types import QueryRecord

    rows = [json.loads(line) for line in (tp_dir / "train.jsonl").read_text().splitlines()]
    records = [
        dataclasses.replace(QueryRecord.from_dict(r), idx=i, reference_plan=parse_plan(r["annotated_plan"]))
        for i, r in enumerate(rows)
    ]
    return World.from_csv_dir(real_db_dir), records


def test_rollout_expert_reproduces_gold_plans_on_real_train_set(train_set, tmp_path):
    from star_lib.travel.evaluate import evaluate_plan

    world, records = train_set
    episodes = run_episodes(ExpertPolicy(), records, world, RolloutConfig())
    assert all(ep.termination is Termination.ANSWER and ep.format_errors == 0 for ep in episodes)
    assert [ep.plan for ep in episodes] == [r.reference_plan for r in records]
    gold = [evaluate_plan(r, r.reference_plan, world, "strict").final_pass for r in records]
    assert [ep.report.final_pass for ep in episodes] == gold and sum(gold) >= 40
    assert all(ep.tool_calls == ep.valid_tool_calls for ep in episodes)
    frame = episodes_frame(episodes)
    frame.write_parquet(tmp_path / "r.parquet")
    back = pl.read_parquet(tmp_path / "r.parquet")
    assert back.height == 45 and back["final_pass"].sum() == sum(gold)
    assert back["cs/is_not_absent"].dtype == pl.Boolean and back["termination"].unique().to_list() == [
        "answer"
    ]
