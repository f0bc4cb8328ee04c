"""The compact protocol: turns, observations, the plan mapping (round trip through the strict evaluator)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from star_lib.agent import FinalAnswer, FormatError, RolloutConfig, TravelEnv, run_episodes
from star_lib.agent.compact import (
    CompactExpert,
    CompactPlanError,
    CompactTools,
    compact_rollout_config,
    encode_plan,
    expand_plan,
    expert_note,
    parse_turn,
    user_prompt,
)
from star_lib.synth import SynthConfig, synthesize
from star_lib.travel.evaluate import evaluate_plan
from star_lib.travel.faults import FaultConfig
from star_lib.travel.tools import ToolRegistry
from star_lib.travel.world import World
from star_lib.types import ToolCall


@pytest.fixture(scope="module")
def world() -> World:
    return World.synthetic(seed=11, scale="tiny")


@pytest.fixture(scope="module")
def records(world: World) -> list:
    """Easy 3/5/7-day and medium records with reference plans in one tiny world."""
    easy = synthesize(world, SynthConfig(n=12, mix="easy", seed=3, splits=(1.0, 0.0, 0.0)))
    medium = synthesize(world, SynthConfig(n=6, mix="medium", seed=4, splits=(1.0, 0.0, 0.0)))
    return [r for result in (easy, medium) for split in result.splits.values() for r in split]


def test_compact_round_trip_reproduces_reference_plans(world: World, records: list) -> None:
    assert {r.days for r in records} >= {3, 5, 7}
    for record in records:
        text = encode_plan(record, record.reference_plan)
        assert len(text) < len(str([d.to_dict() for d in record.reference_plan])) / 2
        plan = expand_plan(text, record, world)
        assert plan == record.reference_plan
        assert evaluate_plan(record, plan, world, "strict").final_pass


def test_compact_expert_notes_say_what_the_plan_takes() -> None:
    from star_lib.agent.compact import _Step

    hotel = _Step(ToolCall("SearchAccommodation", {"city": "X"}), ("B",))
    assert expert_note(hotel, "A min3\nB min1\nC min1") == "A min3;B min1"
    food = _Step(ToolCall("SearchRestaurant", {"city": "X"}), ("P", "Q"))
    assert expert_note(food, "P\nQ\nR") == "P;Q"


def test_compact_expert_trajectories_pass_strict_evaluation(world: World, records: list) -> None:
    episodes = run_episodes(
        CompactExpert(), records, world, compact_rollout_config(reward="sum", max_turns=30)
    )
    assert [ep.reward for ep in episodes] == [1.0] * len(records)
    for ep in episodes:
        assert ep.messages[0]["content"] == "plan"
        assert ep.messages[1]["content"] == user_prompt(ep.query)
        assert ep.valid_tool_calls == ep.tool_calls > 0
        assert ep.plan == ep.query.reference_plan


def test_compact_expert_retries_through_injected_failures(world: World, records: list) -> None:
    faults = FaultConfig(failure_rate=0.3, seed=5)
    cfg = compact_rollout_config(reward="sum", max_turns=60)
    episodes = run_episodes(CompactExpert(), records[:6], world, cfg, faults)
    assert sum(sum(ep.faults.values()) for ep in episodes) > 0
    assert all(ep.reward == 1.0 for ep in episodes)


def test_compact_parse_turn_accepts_calls_and_answers_and_rejects_the_rest() -> None:
    call = parse_turn("<think>best F1</think><tool_call>SearchFlight|A b|C|2022-03-02</tool_call>")
    assert call == ToolCall("SearchFlight", {"departure": "A b", "destination": "C", "date": "2022-03-02"})
    answer = parse_turn("<think></think><answer>A>B|F1|-|-|-|-|-</answer>")
    assert isinstance(answer, FinalAnswer) and answer.text == "A>B|F1|-|-|-|-|-"
    assert parse_turn("<think>x</think><tool_call>Nope|1|2</tool_call>") == ToolCall(
        "Nope", {"arg0": "1", "arg1": "2"}
    )
    for bad in (
        "SearchCity|X",
        "<think>a</think>",
        "<think>a</think><answer> </answer>",
        "<think>a</think><tool_call>SearchCity|X</tool_call><answer>x</answer>",
        "<think>a</think><think>b</think><answer>x</answer>",
        "<think>a</think>junk<answer>x</answer>",
        None,
    ):
        assert isinstance(parse_turn(bad), FormatError), bad


def test_compact_tools_list_cheapest_first_and_keep_errors_as_data(world: World) -> None:
    tools = CompactTools(ToolRegistry(world))
    city = next(c for c in world.cities if len(world.accommodations(c)) > 1)
    hotels = tools.call("SearchAccommodation", {"city": city}).text.split("\n")
    rows = {h.name: h for h in world.accommodations(city)}
    names = [line.rsplit(" ", 1)[0] for line in hotels]
    assert set(names) == set(rows) and [rows[n].price for n in names] == sorted(
        h.price for h in rows.values()
    )
    assert all(
        line.endswith(f" min{int(rows[n].minimum_nights)}") for line, n in zip(hotels, names, strict=True)
    )
    food = tools.call("SearchRestaurant", {"city": city}).text.split("\n")
    cost = {r.name: r.average_cost for r in world.restaurants(city)}
    assert set(food) == set(cost) and [cost[x] for x in food] == sorted(cost.values())
    date = next(iter(world.flight_routes().items()))
    (a, b), dates = date
    flights = tools.call("SearchFlight", {"departure": a, "destination": b, "date": dates[0]}).text.split(
        "\n"
    )
    price = {f.number: f.price for f in world.flights(a, b, dates[0])}
    assert set(flights) == set(price) and [price[f] for f in flights] == sorted(price.values())
    missing = tools.call("SearchAccommodation", {"city": "Atlantis"})
    assert (
        not missing.ok and missing.error == "bad_arguments" and missing.text.startswith("error unknown city")
    )
    unknown = tools.call("Teleport", {})
    assert unknown.error == "unknown_tool"


def test_compact_expand_plan_maps_flights_by_the_days_cities(world: World, records: list) -> None:
    record = next(r for r in records if r.days == 3 and "Flight" in r.reference_plan[0].transportation)
    lines = encode_plan(record, record.reference_plan).split("\n")
    number = lines[0].split("|")[1]
    swapped = "\n".join([lines[0], lines[1], lines[2].replace(lines[2].split("|")[1], number)])
    plan = expand_plan(swapped, record, world)
    assert "Departure Time" not in plan[2].transportation  # the outbound flight does not fly home
    report = evaluate_plan(record, plan, world, "strict")
    assert not report.commonsense["is_valid_information_in_sandbox"].passed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("A>B|F1|-|-|-|-", "has 6 fields"),
        ("A>B|plane|-|-|-|-|-", "transport must be"),
        ("A>B>C|-|-|-|-|-|-", "the city must be"),
        ("A>B||-|-|-|-|-", "is empty"),
    ],
)
def test_compact_expand_plan_rejects_malformed_plans(records: list, text: str, message: str) -> None:
    with pytest.raises(CompactPlanError, match=message):
        expand_plan(text, records[0], None)


def test_compact_plan_with_too_many_days_is_rejected(records: list) -> None:
    record = next(r for r in records if r.days == 3)
    with pytest.raises(CompactPlanError, match="has 4 days"):
        expand_plan("\n".join(["A|-|-|-|-|-|-"] * 4), record, None)


def test_compact_protocol_needs_no_tool_schemas_and_env_uses_it(world: World, records: list) -> None:
    with pytest.raises(ValueError, match="protocol must be one of"):
        RolloutConfig(protocol="telepathy")
    # the protocol name alone decides the opening: no schemas, the one-word system message, its own ask
    bare = TravelEnv(world, RolloutConfig(protocol="compact"))
    assert bare.reset(options={"query": records[0]})[0][0] == {"role": "system", "content": "plan"}
    assert bare.episode.tool_schemas == [] and bare.request_final_answer()[0]["content"] == "answer now"
    env = TravelEnv(world, compact_rollout_config())
    messages, _ = env.reset(options={"query": records[0]})
    assert messages[1]["content"].startswith(f"{records[0].org}>{records[0].dest}|")
    assert env.episode.tool_schemas == [] and env.episode.protocol == "compact"
    obs, *_ = env.step("no tags at all")
    assert obs[0]["content"].startswith("format error")
    react = TravelEnv(world, RolloutConfig())
    messages, _ = react.reset(options={"query": records[0]})
    assert "travel planner" in messages[0]["content"]  # the default protocol is untouched


def test_compact_user_prompt_lists_constraints(records: list) -> None:
    record = next(r for r in records if r.level == "medium")
    text = user_prompt(record)
    wants = {k for k, v in record.local_constraint.to_dict().items() if v is not None}
    assert wants and all(f"{k}=" in text for k in wants)
    assert user_prompt(replace(record, budget=123)).split("|")[3] == "123"
