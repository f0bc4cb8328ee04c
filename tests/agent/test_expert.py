"""The programmatic expert on synthesized queries: strict pass rate, natural calls, retries under faults."""

from __future__ import annotations

from collections import Counter

import pytest

from star_lib.agent.config import RolloutConfig
from star_lib.agent.expert import ExpertPolicy, city_name, plan_steps, split_item, transport_mode
from star_lib.agent.react import FinalAnswer, ToolCall, parse_turn
from star_lib.agent.rollout import run_episodes
from star_lib.types import Termination


@pytest.fixture(scope="module")
def synth_set():
    """200 synthesized queries (4:3:3) with reference plans on the small synthetic world."""
    from star_lib.synth import SynthConfig, synthesize
    from star_lib.travel.world import World

    world = World.synthetic(seed=0, scale="small")
    records = synthesize(world, SynthConfig(n=200, seed=0)).records
    assert len(records) == 200 and all(r.reference_plan for r in records)
    return world, records


def test_expert_plan_steps_for_a_flight_trip(query):
    steps = plan_steps(query, query.reference_plan)
    assert [s.call.name for s in steps] == [
        "SearchFlight",
        "SearchAccommodation",
        "SearchRestaurant",
        "SearchAttraction",
        "SearchFlight",
    ]
    assert steps[0].call.arguments == {"departure": "Austin", "destination": "Denver", "date": "2022-03-01"}
    assert steps[-1].call.arguments["date"] == "2022-03-03" and steps[-1].expect == ("F2",)
    assert steps[2].expect == ("Eat", "Cafe", "Deli", "Grill")


def test_expert_helpers():
    assert split_item("Hotel, Nice, Denver") == ("Hotel, Nice", "Denver")
    assert split_item("-") is None
    assert city_name("Erie(Pennsylvania)") == "Erie"
    assert [transport_mode(t) for t in ("Flight Number: F1", "Taxi, from", "Self-driving, from", "-")] == [
        "flight",
        "taxi",
        "driving",
        None,
    ]


def test_expert_turns_follow_the_protocol(query):
    expert = ExpertPolicy()
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    first = parse_turn(expert.next_turn(query, messages))
    assert isinstance(first, ToolCall) and first.name == "SearchFlight"
    messages.append({"role": "assistant", "content": expert.next_turn(query, messages)})
    messages.append(
        {"role": "tool", "content": "Error: SearchFlight service temporarily unavailable (HTTP 503)."}
    )
    retry = expert.next_turn(query, messages)
    assert parse_turn(retry) == first and "again" in retry.lower() or "retry" in retry.lower()
    messages.append({"role": "user", "content": "context limit: answer now"})
    assert isinstance(parse_turn(expert.next_turn(query, messages)), FinalAnswer)


def test_expert_passes_strict_evaluation_on_synthesized_queries(synth_set):
    world, records = synth_set
    episodes = run_episodes(ExpertPolicy(), records, world, RolloutConfig())
    passed = sum(ep.report.final_pass for ep in episodes)
    assert passed / len(records) >= 0.99
    assert all(ep.format_errors == 0 and ep.termination is Termination.ANSWER for ep in episodes)
    names = Counter(name for ep in episodes for name in ep.tool_histogram)
    assert {
        "SearchFlight",
        "SearchAccommodation",
        "SearchRestaurant",
        "SearchAttraction",
        "SearchCity",
    } <= set(names)
    for ep in episodes:  # state destinations start with SearchCity; every city gets its searches
        calls = [m["content"] for m in ep.messages if m["role"] == "assistant"][:-1]
        assert ("SearchCity" in calls[0]) == (ep.query.days > 3)
        assert ep.tool_calls == ep.valid_tool_calls == len(calls)


def test_expert_retries_through_ten_percent_faults(synth_set):
    from star_lib.travel.faults import FaultConfig

    world, records = synth_set
    faults = FaultConfig(failure_rate=0.1, corruption_rate=0.1, seed=1)
    clean = run_episodes(ExpertPolicy(), records[:80], world, RolloutConfig())
    noisy = run_episodes(ExpertPolicy(), records[:80], world, RolloutConfig(max_turns=40), faults)
    assert all(ep.termination is Termination.ANSWER for ep in noisy)
    assert sum(ep.report.final_pass for ep in noisy) == sum(ep.report.final_pass for ep in clean)
    seen = [sum(ep.faults.values()) for ep in noisy]
    assert sum(seen) > 0 and max(seen) >= 1
    failures = [ep.faults.get("failure", 0) for ep in noisy]
    for ep, base, fails in zip(noisy, clean, failures, strict=True):
        assert ep.tool_calls >= base.tool_calls + fails  # every failed call was made again
    assert any(ep.tool_calls > base.tool_calls for ep, base in zip(noisy, clean, strict=True))
    again = run_episodes(ExpertPolicy(), records[:80], world, RolloutConfig(max_turns=40), faults)
    assert [ep.faults for ep in again] == [ep.faults for ep in noisy]  # seeded per episode
