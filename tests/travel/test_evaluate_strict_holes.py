"""Strict mode gives no reward for a plan to the wrong place, a placeholder plan or a repeated key (issue 22).

On real gold train plans: a 3-day plan re-scored for another dest city (rule ``dest_city``), a 5/7-day plan
re-scored for another state (rule ``hard_needs_route``: it earned every hard check, MACRO 0.5), plans whose
every field is a distinct placeholder (rule ``named_fields``: they counted as complete, SUM 0.15 and the
milestone reward 0.575), and a day that names ``accommodation`` twice (strict parse error). Official mode
keeps the official verdicts in every case.
"""

from __future__ import annotations

import ast
import json
from dataclasses import replace

import pytest

from star_lib import rewards
from star_lib.travel.evaluate import Evaluator
from star_lib.travel.plan import PlanParseError, parse_plan, parse_plan_keys
from star_lib.travel.world import World
from star_lib.types import Observation, QueryRecord, ToolCall

TEXT_KEYS = ("transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")


@pytest.fixture(scope="module")
def world(real_db_dir) -> World:
    return World.from_csv_dir(real_db_dir)


@pytest.fixture(scope="module")
def evaluators(world) -> dict[str, Evaluator]:
    return {mode: Evaluator(world, mode) for mode in ("official", "strict")}


@pytest.fixture(scope="module")
def gold(tp_dir) -> dict[int, tuple[QueryRecord, list[dict]]]:
    """The first gold train plan of each trip length (raw day dicts)."""
    found: dict[int, tuple[QueryRecord, list[dict]]] = {}
    for line in (tp_dir / "train.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["days"] not in found:
            days = [d for d in ast.literal_eval(record["annotated_plan"])[1] if d]
            found[record["days"]] = (QueryRecord.from_dict(record), days)
    return found


def _rewards(report) -> tuple[float, float, float]:
    return (
        rewards.sum_reward(report, False),
        rewards.macro_reward(report, False),
        rewards.success_reward(report, False),
    )


def _other_state(world: World, query: QueryRecord) -> str:
    states = sorted({world.state_of(c) for c in world.cities} - {None, query.dest, world.state_of(query.org)})
    return states[0]


def test_evaluate_strict_fails_a_3_day_plan_for_another_dest_city(world, evaluators, gold) -> None:
    query, plan = gold[3]
    other = next(c for c in sorted(world.cities) if c not in (query.org, query.dest))
    moved = replace(query, dest=other)
    official = evaluators["official"].evaluate_payload(moved, plan).report
    strict = evaluators["strict"].evaluate_payload(moved, plan).report
    assert official.final_pass  # official checks the destination only when days > 3
    assert _rewards(official) == (1.0, 1.0, 1.0)
    verdict = strict.commonsense["is_reasonable_visiting_city"]
    assert verdict.passed is False and other in verdict.reason
    assert _rewards(strict)[1:] == (0.0, 0.0) and _rewards(strict)[0] < 0.2
    assert evaluators["strict"].evaluate_payload(query, plan).report.final_pass  # the gold query still passes


@pytest.mark.parametrize("days", [5, 7])
def test_evaluate_strict_gives_no_macro_credit_to_a_plan_in_another_state(
    world, evaluators, gold, days
) -> None:
    query, plan = gold[days]
    moved = replace(query, dest=_other_state(world, query))
    official = evaluators["official"].evaluate_payload(moved, plan).report
    strict = evaluators["strict"].evaluate_payload(moved, plan).report
    for report in (official, strict):
        assert report.commonsense["is_reasonable_visiting_city"].passed is False
    assert official.hard_all and _rewards(official) == (0.575, 0.5, 0.0)  # official: every hard check passes
    assert strict.hard is None and not strict.hard_all  # hard_needs_route: no hard credit without the route
    assert _rewards(strict)[1:] == (0.0, 0.0) and _rewards(strict)[0] < 0.2


def _placeholders(query: QueryRecord, plan: list[dict]) -> list[dict]:
    """Every field of every day a distinct placeholder ('N/A …' or 'TBD …, <dest>'); the cities kept."""
    out = []
    for i, day in enumerate(plan):
        new = dict(day)
        for key in TEXT_KEYS:
            distinct = f"{key} {i}"
            new[key] = (
                f"N/A {distinct}"
                if key in ("transportation", "breakfast")
                else f"TBD {distinct}, {query.dest}"
            )
        out.append(new)
    return out


def _all_retrievals(plan, query) -> list[tuple[ToolCall, Observation]]:
    """One successful tool call per retrieval the plan needed, its observation naming the plan's items."""
    steps = []
    for key, mentions in rewards.plan_milestones(plan, query).items():
        tool, *args = key
        names = {
            "SearchFlight": ("departure", "destination", "date"),
            "GoogleDistanceMatrix": ("departure", "destination"),
            "SearchCity": ("state",),
        }.get(tool, ("city",))
        steps.append(
            (ToolCall(tool, dict(zip(names, args, strict=False))), Observation(" | ".join(mentions)))
        )
    return steps


@pytest.mark.parametrize("days", [3, 5, 7])
def test_evaluate_strict_placeholder_plans_earn_nothing(evaluators, gold, days) -> None:
    query, plan = gold[days]
    payload = _placeholders(query, plan)
    official = evaluators["official"].evaluate_payload(query, payload).report
    strict = evaluators["strict"].evaluate_payload(query, payload).report
    assert official.commonsense["is_not_absent"].passed  # officially any text but '-' is information
    assert rewards.sum_reward(official, False) == pytest.approx(0.15)
    assert strict.commonsense["is_not_absent"].passed is False
    assert _rewards(strict) == (0.0, 0.0, 0.0)
    days_plan = parse_plan(payload)
    steps = _all_retrievals(days_plan, query)
    assert sum(rewards.milestone_credits(days_plan, steps, query)) == pytest.approx(1.0)  # without the report
    assert rewards.milestone_reward(days_plan, steps, query, report=strict) == 0.0
    assert rewards.reward_value("milestone", strict, False, credit=1.0) == 0.0


@pytest.mark.parametrize(
    "key", ["breakfast", "attraction", "accommodation", "transportation", "current_city"]
)
def test_evaluate_strict_one_placeholder_field_is_absent(evaluators, gold, key) -> None:
    query, plan = gold[3]
    edited = [dict(day) for day in plan]
    if key == "current_city":  # a made-up dest on every day keeps the official city count right
        edited = [dict(day, current_city=day["current_city"].replace(query.dest, "Atlantis")) for day in plan]
    elif key == "transportation":
        edited[0][key] = "N/A"  # strict reads unknown transport as self-driving: not a route with a cost
    else:
        edited[1][key] = f"TBD, {query.dest}"  # day 2 stays in the dest: it needs meals, attractions, a hotel
    official = evaluators["official"].evaluate_payload(query, edited).report
    strict = evaluators["strict"].evaluate_payload(query, edited).report
    assert official.commonsense["is_not_absent"].passed
    assert strict.commonsense["is_not_absent"].passed is False
    day = 2 if key in ("breakfast", "attraction", "accommodation") else 1
    assert f"day {day}" in strict.commonsense["is_not_absent"].reason
    assert evaluators["strict"].evaluate_payload(query, plan).report.final_pass


def test_evaluate_strict_refuses_a_day_that_repeats_a_key(evaluators, gold) -> None:
    query, plan = gold[3]
    first, rest = plan[0], [json.dumps(d) for d in plan[1:]]
    repeated = '{"accommodation": "-", ' + json.dumps(first)[1:]  # "-" first; JSON keeps the last value
    payload = "[" + ", ".join([repeated, *rest]) + "]"
    with pytest.raises(PlanParseError, match="accommodation"):
        parse_plan_keys(payload)
    strict = evaluators["strict"].evaluate_payload(query, payload)
    assert not strict.report.delivered and "accommodation" in strict.error
    record = json.dumps({"idx": 1, "query": "", "plan": payload})  # the plan as a string field
    assert not evaluators["strict"].evaluate_payload(query, record).report.delivered
    assert evaluators["official"].evaluate_payload(query, payload).report.final_pass  # last value wins
    literal = "[{'accommodation': '-', " + repr(first)[1:] + ", " + ", ".join(map(repr, plan[1:])) + "]"
    with pytest.raises(PlanParseError, match="accommodation"):
        parse_plan_keys(literal)
    assert parse_plan_keys(repr(plan))[0][0].accommodation == first["accommodation"]
