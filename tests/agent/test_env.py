"""TravelEnv: Gymnasium-shaped episodes over fake and real tools."""

from __future__ import annotations

import pytest

from star_lib.agent.config import RolloutConfig
from star_lib.agent.env import TravelEnv
from star_lib.agent.react import plan_json
from star_lib.types import DayPlan, Termination

CALL = '<think>t</think><tool_call>{"name": "SearchRestaurant", "arguments": {"city": "Denver"}}</tool_call>'
BAD_TOOL = '<think>t</think><tool_call>{"name": "Teleport", "arguments": {}}</tool_call>'
NO_EVAL = RolloutConfig(evaluate=False, reward="none")


def _env(fake_tools, **overrides):
    return TravelEnv(None, RolloutConfig(**{**NO_EVAL.__dict__, **overrides}), tools=fake_tools)


def test_env_reset_needs_a_query(fake_tools):
    with pytest.raises(ValueError, match="query"):
        _env(fake_tools).reset(options={})


def test_env_step_calls_tool_and_returns_observation(fake_tools, query):
    env = _env(fake_tools)
    obs, info = env.reset(options={"query": query})
    assert [m["role"] for m in obs] == ["system", "user"] and info["query"] is query
    obs, reward, terminated, truncated, info = env.step(CALL)
    assert fake_tools.calls == [("SearchRestaurant", {"city": "Denver"})]
    assert obs == [{"role": "tool", "content": 'SearchRestaurant results for {"city": "Denver"}'}]
    assert (reward, terminated, truncated) == (0.0, False, False)
    env.step(BAD_TOOL)
    ep = env.episode
    assert (ep.tool_calls, ep.valid_tool_calls, ep.tool_histogram) == (
        2,
        1,
        {"SearchRestaurant": 1, "Teleport": 1},
    )


def test_env_format_errors_are_observed_then_stop(fake_tools, query):
    env = _env(fake_tools, max_format_errors=2)
    env.reset(options={"query": query})
    obs, _, terminated, _, _ = env.step("hello")
    assert not terminated and obs[0]["content"].startswith("Format error:")
    obs, _, terminated, truncated, info = env.step("<think>x</think>")
    assert terminated and not truncated and obs == []
    assert info["termination"] is Termination.MALFORMED
    assert env.episode.format_errors == 2 and env.episode.malformed
    with pytest.raises(RuntimeError, match="reset"):
        env.step(CALL)


def test_env_stop_on_first_format_error(fake_tools, query):
    env = _env(fake_tools, on_format_error="stop")
    env.reset(options={"query": query})
    assert env.step("<answer>x</answer>")[2] is True


def test_env_turn_limit_truncates(fake_tools, query):
    env = _env(fake_tools, max_turns=2)
    env.reset(options={"query": query})
    assert env.step(CALL)[3] is False
    obs, _, terminated, truncated, info = env.step(CALL)
    assert (terminated, truncated, obs) == (False, True, [])
    assert info["termination"] is Termination.TURN_LIMIT


def test_env_answer_terminates_and_parses_plan(fake_tools, query):
    env = _env(fake_tools)
    env.reset(options={"query": query})
    plan = plan_json([DayPlan(days=1, current_city="from Austin to Denver")])
    obs, _, terminated, truncated, info = env.step(f"<think>done</think><answer>{plan}</answer>")
    assert terminated and not truncated and info["termination"] is Termination.ANSWER
    assert env.episode.plan[0].current_city == "from Austin to Denver"
    assert env.episode.plan_error is None and not env.episode.malformed


def test_env_unparseable_plan_is_recorded(fake_tools, query):
    env = _env(fake_tools)
    env.reset(options={"query": query})
    env.step("<think>done</think><answer>[not json</answer>")
    ep = env.episode
    assert ep.plan is None and ep.plan_error and ep.malformed and ep.termination is Termination.ANSWER


def test_env_context_limit_asks_once_then_stops(fake_tools, query):
    env = _env(fake_tools)
    env.reset(options={"query": query})
    env.step(CALL)
    ask = env.request_final_answer()
    assert env.episode.messages[-1] == ask[0] and ask[0]["role"] == "user"
    assert sum(m["role"] == "tool" for m in env.episode.messages) == 0  # the tool response was replaced
    _, _, terminated, truncated, info = env.step(CALL)  # a tool call instead of the plan
    assert truncated and not terminated and info["termination"] is Termination.CONTEXT_LIMIT
    assert len(fake_tools.calls) == 1


def test_env_counts_injected_faults(fake_tools, query):
    from star_lib.travel.faults import FaultConfig

    env = TravelEnv(None, NO_EVAL, tools=fake_tools, faults=FaultConfig(failure_rate=1.0))
    env.reset(options={"query": query})
    obs, *_ = env.step(CALL)
    assert "Please retry" in obs[0]["content"] and fake_tools.calls == []
    assert env.episode.faults == {"failure": 1} and env.episode.valid_tool_calls == 1


def test_env_evaluates_and_rewards_real_plan(real_db_dir, tp_dir):
    import json

    from star_lib.agent.react import format_answer
    from star_lib.travel.plan import parse_plan
    from star_lib.travel.world import World
    from star_lib.types import QueryRecord

    world = World.from_csv_dir(real_db_dir)
    row = json.loads((tp_dir / "train.jsonl").read_text().splitlines()[0])
    record = QueryRecord.from_dict(row)
    env = TravelEnv(world, RolloutConfig(reward="success"))
    env.reset(options={"query": record})
    _, reward, terminated, _, info = env.step(format_answer("done", parse_plan(row["annotated_plan"])))
    assert terminated and info["report"].final_pass and reward == 1.0
    env.reset(options={"query": record})
    _, reward, *_ = env.step(format_answer("done", '[{"days": 1, "current_city": "Nowhere"}]'))
    assert reward == 0.0 and not env.episode.report.final_pass
