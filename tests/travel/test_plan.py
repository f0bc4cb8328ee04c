"""Plan parsing: every accepted payload form, and precise errors for everything else."""

from __future__ import annotations

import ast
import json
import random

import pytest

from star_lib.travel.plan import MUTATIONS, PlanParseError, mutate_plan, parse_plan, plan_to_json
from star_lib.types import PLAN_KEYS, DayPlan, QueryRecord


def _day(n: int, **overrides: object) -> dict:
    day = {
        "days": n,
        "current_city": "Rockford",
        "transportation": "-",
        "breakfast": "Dial A Cake, Rockford",
        "attraction": "Burpee Museum of Natural History, Rockford;",
        "lunch": "Flying Mango, Rockford",
        "dinner": "Cafe Southall, Rockford",
        "accommodation": "Pure luxury one bdrm + sofa bed on Central Park, Rockford",
    }
    day.update(overrides)
    return day


def test_plan_parses_json_payload() -> None:
    plan = parse_plan(json.dumps([_day(1), _day(2)]))
    assert [d.days for d in plan] == [1, 2]
    assert plan[0].lunch == "Flying Mango, Rockford"
    assert isinstance(plan[1], DayPlan)


def test_plan_parses_python_list_and_dayplans() -> None:
    plan = parse_plan([_day(1), DayPlan(days=2, current_city="Rockford")])
    assert plan[1] == DayPlan(days=2, current_city="Rockford")


def test_plan_parses_submission_record_with_list_or_string_plan() -> None:
    record = {"idx": 3, "query": "…", "plan": [_day(1), {}, {}]}
    assert len(parse_plan(record)) == 1  # official padding dropped
    record["plan"] = repr([_day(1), _day(2), {}])
    assert len(parse_plan(json.dumps(record))) == 2


def test_plan_parses_every_real_annotated_plan(tp_dir) -> None:
    for line in (tp_dir / "train.jsonl").read_text().splitlines():
        record = json.loads(line)
        query = QueryRecord.from_dict(record)
        plan = parse_plan(record["annotated_plan"], days=query.days)
        assert len(plan) == query.days
        expected = [d for d in ast.literal_eval(record["annotated_plan"])[1] if d]
        assert [d.to_dict() for d in plan] == expected


def test_plan_tolerates_surrounding_whitespace() -> None:
    day = {f" {k} ": (f"  {v} " if isinstance(v, str) else v) for k, v in _day(1).items()}
    plan = parse_plan("\n " + json.dumps([day]) + " \n")
    assert plan[0].breakfast == "Dial A Cake, Rockford"


@pytest.mark.parametrize(
    ("payload", "fragment", "day", "key"),
    [
        ("", "empty string", None, None),
        ("[]", "empty", None, None),
        ("not json at all", "neither JSON nor a Python literal", None, None),
        ("__import__('os').system('true')", "neither JSON nor a Python literal", None, None),
        ('{"days": 1}', "submission record", None, None),
        ("42", "got int", None, None),
        (json.dumps([_day(1), "x"]), "day 2 must be an object", 2, None),
        (
            json.dumps([_day(1), {k: v for k, v in _day(2).items() if k != "lunch"}]),
            "lacks key(s) ['lunch']",
            2,
            "lunch",
        ),
        (json.dumps([_day(1, notes="hi")]), "unknown key 'notes'", 1, "notes"),
        (json.dumps([_day(1), _day(3)]), "days=3", 2, "days"),
        (json.dumps([_day(True)]), "days=True", 1, "days"),
        (json.dumps([_day(1, dinner=None)]), "'dinner' must be a string", 1, "dinner"),
        (json.dumps([_day(1, attraction=["a"])]), "'attraction' must be a string", 1, "attraction"),
        (json.dumps([{}]), "lacks key(s)", 1, "days"),
    ],
)
def test_plan_rejects_bad_payloads_with_day_and_key(payload, fragment, day, key) -> None:
    with pytest.raises(PlanParseError) as info:
        parse_plan(payload)
    assert fragment in str(info.value)
    assert info.value.day == day
    assert info.value.key == key


def test_plan_rejects_days_beyond_the_trip() -> None:
    with pytest.raises(PlanParseError, match="the trip has 1") as info:
        parse_plan([_day(1), _day(2)], days=1)
    assert info.value.day == 2
    assert len(parse_plan([_day(1)], days=3)) == 1  # shorter plans are a verdict, not a format error


def test_plan_rejects_oversized_payload() -> None:
    with pytest.raises(PlanParseError, match="characters"):
        parse_plan("[" + " " * 300_000 + "]")


def test_plan_accepts_digit_string_day_numbers() -> None:
    assert parse_plan([_day("1")])[0].days == 1


def test_plan_to_json_round_trips() -> None:
    plan = parse_plan([_day(1), _day(2, current_city="from Rockford to St. Petersburg")])
    assert parse_plan(plan_to_json(plan)) == plan
    assert list(json.loads(plan_to_json(plan))[0]) == list(PLAN_KEYS)


def test_plan_mutate_plan_is_seed_deterministic() -> None:
    plan = parse_plan([_day(1), _day(2), _day(3)])
    first = [mutate_plan(plan, random.Random(7)) for _ in range(5)]
    second = [mutate_plan(plan, random.Random(7)) for _ in range(5)]
    assert first == second
    kinds = {mutate_plan(plan, random.Random(s), kind=k) != plan for s in range(3) for k in MUTATIONS}
    assert True in kinds
