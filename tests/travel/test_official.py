"""``official`` mode reads plans with exactly the official evaluator's tolerance (issue 10).

Hand-derived cases on the real gold train plan 0 (St. Petersburg → Rockford, 3 days), each citing the line
of the official code (OSU-NLP-Group/TravelPlanner ``evaluation/commonsense_constraint.py``, ``eval.py``) it
follows; the expected verdicts were derived by reading that code and confirmed by running it. Then the four
plans of the issue's table, strict mode's missing-key rule, and the generator-driven invariants.
"""

from __future__ import annotations

import ast
import copy
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from star_lib.travel.evaluate import Evaluator
from star_lib.travel.world import World
from star_lib.types import COMMONSENSE_KEYS, QueryRecord

sys.path.insert(0, str(Path(__file__).parent))
from malformed import EDITS, as_payload, malform  # noqa: E402

CS = "commonsense_constraint.py"
PLACEHOLDER = "You don't need to fill in the information for this or later days."


@pytest.fixture(scope="module")
def world(real_db_dir) -> World:
    return World.from_csv_dir(real_db_dir)


@pytest.fixture(scope="module")
def gold(tp_dir) -> list[tuple[QueryRecord, list[dict[str, Any]]]]:
    items = []
    for line in (tp_dir / "train.jsonl").read_text().splitlines():
        record = json.loads(line)
        days = [d for d in ast.literal_eval(record["annotated_plan"])[1] if d]
        items.append((QueryRecord.from_dict(record), days))
    return items


@pytest.fixture(scope="module")
def official(world) -> Evaluator:
    return Evaluator(world, "official")


@pytest.fixture(scope="module")
def strict(world) -> Evaluator:
    return Evaluator(world, "strict")


def outcome(evaluator: Evaluator, query: QueryRecord, plan: Any) -> Any:
    """``'undelivered'``, ``('crash', check)`` or ``(failing commonsense, failing hard | 'skipped')``."""
    verdict = evaluator.evaluate_payload(query, {"idx": 1, "query": query.query, "plan": plan})
    report = verdict.report
    if not report.delivered:
        return "undelivered"
    if not verdict.scorable:
        assert verdict.error and "raises in" in verdict.error
        return ("crash", verdict.error.split("raises in ")[1].split(":")[0])
    fails = frozenset(k for k, r in report.commonsense.items() if r.passed is False)
    hard = (
        "skipped"
        if report.hard is None
        else frozenset(k for k, r in report.hard.items() if r.passed is False)
    )
    return fails, hard


def edit_day(index: int, **fields: Any) -> Callable[[list], list]:
    def apply(days: list) -> list:
        for key, value in fields.items():
            days[index][key] = value
        return days

    return apply


def drop_key(index: int, key: str) -> Callable[[list], list]:
    def apply(days: list) -> list:
        del days[index][key]
        return days

    return apply


def every_day(fn: Callable[[dict], None]) -> Callable[[list], list]:
    def apply(days: list) -> list:
        for day in days:
            fn(day)
        return days

    return apply


def rename(old: str, new: str) -> Callable[[dict], None]:
    return lambda day: day.__setitem__(new, day.pop(old))


PASS = (frozenset(), frozenset())
NONE: frozenset[str] = frozenset()


def fails(*checks: str, hard: Any = "skipped") -> tuple[frozenset[str], Any]:
    return frozenset(checks), hard


CASES: list[tuple[str, str, Callable[[list], Any], Any]] = [
    ("unknown key on every day", f"{CS}: is_not_absent — `for key in unit: if unit[key] and unit[key] != '-'`"
     " (only counted; no check asks for it)", every_day(lambda d: d.__setitem__("notes", "x")), PASS),
    ("'days' written 'day'", f"{CS}: no check reads unit['days']; is_not_absent counts `for key in unit`",
     every_day(rename("days", "day")), PASS),
    ("'days' dropped everywhere",
     f"{CS}: is_not_absent — `total_valid_info * 1.0 / needed_info < 0.5` (15/18)",
     every_day(lambda d: d.pop("days")), PASS),
    ("every day numbered 7",
     f"{CS}: no check reads unit['days']", every_day(lambda d: d.__setitem__("days", 7)),
     PASS),
    ("a 4th day appended", f"{CS}: every check — `for i in range(min(question['days'],len(tested_data)))`",
     lambda days: [*days, copy.deepcopy(days[-1])], PASS),
    ("a garbage 4th day", f"{CS}: `range(min(question['days'],len(tested_data)))` never reads day 4",
     lambda days: [*days, 5], PASS),
    ("an empty 4th day",
     f"{CS}: `range(min(question['days'],len(tested_data)))`", lambda days: [*days, {}], PASS),
    ("day 2 lacks breakfast", f"{CS}: is_not_absent — `if 'breakfast' not in unit: return False`",
     drop_key(1, "breakfast"), fails("is_not_absent")),
    ("day 2 key ' breakfast'", f"{CS}: is_not_absent — `if 'breakfast' not in unit` (keys are not stripped)",
     every_day(lambda d: d.__setitem__(" breakfast", d.pop("breakfast")) if d["days"] == 2 else None),
     fails("is_not_absent")),
    ("day 2 lacks accommodation",
     f"{CS}: is_valid_accommodaton — `if 'accommodation' not in unit: return False`",
     drop_key(1, "accommodation"), fails("is_valid_accommodation", "is_not_absent")),
    ("day 1 lacks transportation", f"{CS}: is_valid_transportation — `tested_data[0]['transportation']`",
     drop_key(0, "transportation"), ("crash", "is_valid_transportation")),
    ("day 2 lacks transportation", f"{CS}: is_valid_information_in_sandbox — `if unit['transportation'] and`",
     drop_key(1, "transportation"), ("crash", "is_valid_information_in_sandbox")),
    ("day 2 lacks current_city", f"{CS}: is_reasonable_visiting_city — `tested_data[i]['current_city']`",
     drop_key(1, "current_city"), ("crash", "is_reasonable_visiting_city")),
    ("day 2 is {}", f"{CS}: is_reasonable_visiting_city — `tested_data[i]['current_city']` (KeyError)",
     lambda days: [days[0], {}, days[2]], ("crash", "is_reasonable_visiting_city")),
    ("day 3 dropped",
     f"{CS}: is_reasonable_visiting_city — `if city_list[0] != city_list[-1]`; is_valid_days",
     lambda days: days[:2], fails("is_reasonable_visiting_city", "is_not_absent")),
    ("day 2 breakfast None", f"{CS}: is_not_absent — `unit['breakfast'] in ['','-']` is False for None",
     edit_day(1, breakfast=None), PASS),
    ("day 2 breakfast ''", f"{CS}: is_not_absent — `unit['breakfast'] in ['','-']` → 'No meal in day 2'",
     edit_day(1, breakfast=""), fails("is_not_absent")),
    ("day 2 breakfast '-'", f"{CS}: is_not_absent — `(unit['breakfast'] in ['','-'] …) and 'from ' not in`",
     edit_day(1, breakfast="-"), fails("is_not_absent")),
    ("day 2 breakfast ' - '", f"{CS}: is_valid_information_in_current_city — `if city  in unit['breakfast']`;"
     " sandbox — get_valid_name_city gives ('-', '-')", edit_day(1, breakfast=" - "),
     fails("is_valid_information_in_current_city", "is_valid_information_in_sandbox")),
    ("day 1 accommodation None",
     f"{CS}: is_valid_accommodaton — `unit[0] not in ['-','']` → get_valid_name_city"
     "(None)", edit_day(0, accommodation=None), ("crash", "is_valid_accommodation")),
    ("day 2 accommodation None",
     f"{CS}: is_valid_accommodaton — returns at day 1's one-night stay (< minimum "
     "nights) before get_valid_name_city(None)", edit_day(1, accommodation=None),
     fails("is_valid_accommodation", hard=NONE)),
    ("day 2 accommodation ''",
     f"{CS}: is_not_absent — `i != question['days'] - 1 and unit['accommodation'] in"
     " ['','-']`; is_valid_accommodaton — one night < minimum nights", edit_day(1, accommodation=""),
     fails("is_valid_accommodation", "is_not_absent")),
    ("day 2 breakfast 5", f"{CS}: is_valid_information_in_current_city — `if city  in unit['breakfast']`"
     " (TypeError)", edit_day(1, breakfast=5), ("crash", "is_valid_information_in_current_city")),
    ("day 2 breakfast ['Rockford']", f"{CS}: current_city — `city in unit['breakfast']` is list membership;"
     " sandbox — get_valid_name_city(list) raises", edit_day(1, breakfast=["Rockford"]),
     ("crash", "is_valid_information_in_sandbox")),
    ("day 2 lunch {'Rockford': 1}",
     f"{CS}: is_valid_information_in_sandbox — `get_valid_name_city(unit['lunch"
     "'])` (re.search on a dict)", edit_day(1, lunch={"Rockford": 1}),
     ("crash", "is_valid_information_in_sandbox")),
    ("day 1 transportation 5", f"{CS}: is_valid_transportation — transportation_match: `text.lower()`",
     edit_day(0, transportation=5), ("crash", "is_valid_transportation")),
    ("day 1 transportation '-'",
     f"{CS}: is_valid_transportation — 'should not be empty'; is_not_absent — 'No "
     "transportation in day 1'", edit_day(0, transportation="-"),
     fails("is_valid_transportation", "is_not_absent")),
    ("day 1 'from St. Petersburg'", f"{CS}: is_reasonable_visiting_city — extract_before_parenthesis(None) of"
     " `extract_from_to(city_value)`", edit_day(0, current_city="from St. Petersburg"),
     ("crash", "is_reasonable_visiting_city")),
    ("day 1 from Dallas, day 3 unreadable", f"{CS}: is_reasonable_visiting_city — `if i==0 and city1 != "
     "question['org']: return` before day 3 is read; is_valid_visiting_city_number likewise",
     lambda days: edit_day(2, current_city="from Rockford")(
         edit_day(0, current_city="from Dallas to Rockford")(days)),
     fails("is_reasonable_visiting_city", "is_valid_information_in_current_city", "is_not_absent")),
    ("day 2 current_city 5", f"{CS}: is_reasonable_visiting_city — `if 'from' in city_value` (TypeError)",
     edit_day(1, current_city=5), ("crash", "is_reasonable_visiting_city")),
    ("day 2 current_city placeholder", f"{CS}: is_valid_days — `!= \"You don't need to fill in …\"`; "
     "current_city — iterates the placeholder's characters (quirk #50)",
     edit_day(1, current_city=PLACEHOLDER),
     fails("is_reasonable_visiting_city", "is_valid_information_in_current_city", "is_not_absent")),
    ("day 2 empty city, hotel only",
     f"{CS}: is_valid_information_in_current_city — `final_city_list[-1]` of ''"
     " (IndexError)", edit_day(1, current_city="", breakfast="-", lunch="-", dinner="-", attraction="-"),
     ("crash", "is_valid_information_in_current_city")),
    ("day 2 attraction without ';'", f"{CS}: is_valid_information_in_sandbox — `unit['attraction'].split(';')"
     "[:-1]` drops the only item", edit_day(1, attraction="Made Up Place, Rockford"), PASS),
    ("day 1 'flight number:' lowercase",
     f"{CS}: is_valid_information_in_sandbox — `value.split('Flight Number: '"
     ")[1]` (IndexError)",
     edit_day(0, transportation="flight number: F3573659, from St. Petersburg to Rockford"),
     ("crash", "is_valid_information_in_sandbox")),
    ("day 2 flight without route", f"{CS}: is_valid_information_in_sandbox — `raise ValueError(\"The "
     "transportation {} in day {} can not be parsed.\")`",
     edit_day(1, transportation="Flight Number: F3573659"),
     ("crash", "is_valid_information_in_sandbox")),
    ("day 1 'Driving from …'",
     f"{CS}: transportation_match returns None; sandbox checks only 'flight number'/"
     "'self-driving'/'taxi' (quirk #51)",
     edit_day(0, transportation="Driving from St. Petersburg to Rockford"), PASS),
    ("day 3 breakfast repeats day 2's", f"{CS}: is_valid_restaurants — `if unit['breakfast'] not in "
     "restaurants_list … else: return False`", lambda days: edit_day(2, breakfast=days[1]["breakfast"])(days),
     fails("is_valid_restaurants", hard=NONE)),
    ("plan is a dict", "eval.py: `if tested_plan['plan']:` then commonsense: `tested_data[i]` (KeyError 0)",
     lambda days: {"days": 1}, ("crash", "is_reasonable_visiting_city")),
    ("plan is []", "eval.py: `if tested_plan['plan']:` → not delivered", lambda days: [], "undelivered"),
    ("plan is None", "eval.py: `if tested_plan['plan']:` → not delivered", lambda days: None, "undelivered"),
    ("day 2 is a string", f"{CS}: is_reasonable_visiting_city — `tested_data[i]['current_city']` (TypeError)",
     lambda days: [days[0], "Rockford", days[2]], ("crash", "is_reasonable_visiting_city")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_official_mode_follows_the_official_code(gold, official, case) -> None:
    _name, citation, edit, expected = case
    assert citation
    query, days = gold[0]
    assert outcome(official, query, edit(copy.deepcopy(days))) == expected


def test_official_cases_are_many_and_cited() -> None:
    assert len(CASES) >= 30
    assert all(("commonsense_constraint.py:" in c[1]) or ("eval.py:" in c[1]) for c in CASES)


def test_duplicate_json_key_is_last_wins_officially(gold, official) -> None:
    # eval.py: `json.loads(line)` keeps the last of a repeated key
    query, days = gold[0]
    text = json.dumps({"idx": 1, "query": "", "plan": days})
    text = text.replace('"breakfast": ', '"breakfast": "Nowhere, Atlantis", "breakfast": ')
    assert outcome(official, query, json.loads(text)["plan"]) == PASS
    assert official.evaluate_payload(query, text).report.final_pass


def test_record_without_plan_is_not_scorable(gold, official) -> None:
    # eval.py: `if tested_plan['plan']:` raises KeyError on a record without 'plan'
    query, _days = gold[0]
    verdict = official.evaluate_payload(query, {"idx": 1, "query": ""})
    assert not verdict.scorable and "eval.py" in verdict.error and "'plan'" in verdict.error


# ───────────────────────────── the issue's table ─────────────────────────────


def test_issue_table_plans_get_the_official_verdicts(gold, official) -> None:
    query, days = gold[0]
    no_days = [{("day" if k == "days" else k): v for k, v in d.items()} for d in days]
    extra = [*copy.deepcopy(days), {**copy.deepcopy(days[-1]), "days": 4}]
    no_breakfast = copy.deepcopy(days)
    del no_breakfast[1]["breakfast"]
    verdicts = [
        official.evaluate_payload(query, {"idx": 1, "plan": p}) for p in (days, no_days, extra, no_breakfast)
    ]
    assert all(v.scorable and v.report.delivered for v in verdicts)
    assert [v.report.final_pass for v in verdicts] == [True, True, True, False]
    for verdict in verdicts[:3]:
        assert all(r.passed for r in verdict.report.commonsense.values())
        assert verdict.report.hard is not None and all(
            r.passed is not False for r in verdict.report.hard.values()
        )
    last = verdicts[3].report
    assert [k for k, r in last.commonsense.items() if not r.passed] == ["is_not_absent"]
    assert last.commonsense["is_not_absent"].reason == "No Breakfast Info."
    assert last.hard is None


def test_strict_mode_missing_key_fails_is_not_absent_not_delivery(gold, strict) -> None:
    query, days = gold[0]
    plan = copy.deepcopy(days)
    del plan[1]["breakfast"]
    verdict = strict.evaluate_payload(query, {"idx": 1, "plan": plan})
    report = verdict.report
    assert report.delivered and report.hard is None and not report.final_pass
    assert report.commonsense["is_not_absent"].passed is False
    assert "Day 2 lacks key(s) ['breakfast']" in report.commonsense["is_not_absent"].reason
    assert report.commonsense["is_valid_information_in_sandbox"].passed is True
    # an unknown key stays a format error in strict mode (it may smuggle text past the checks)
    renamed = [{("day" if k == "days" else k): v for k, v in d.items()} for d in days]
    assert not strict.evaluate_payload(query, {"plan": renamed}).report.delivered


def test_regular_plans_fast_path_equals_the_faithful_reading(gold, world, official) -> None:
    """The fast DayPlan checks and the raw reading agree on regular plans (gold + mutations)."""
    from star_lib.travel.checks import WorldIndex
    from star_lib.travel.official import evaluate_irregular, is_regular

    index = WorldIndex(world, frozenset())
    rng = random.Random(3)
    compared = 0
    for query, days in gold:
        for _ in range(6):
            plan = copy.deepcopy(days)
            EDITS[rng.choice(["repeat", "flight_text", "bad_route", "unicode", "drop_day", "add_day"])](
                plan, rng
            )
            if not is_regular(plan, query.days) or not plan:
                continue
            fast = official.evaluate_payload(query, {"plan": plan})
            try:
                commonsense, hard = evaluate_irregular(query, plan, index)
            except Exception as exc:  # noqa: BLE001
                assert not fast.scorable and type(exc).__name__ == "_Partial", (plan, fast)
                assert exc.check in fast.error
                continue
            assert fast.scorable, (plan, fast.error)
            assert {k: r.passed for k, r in fast.report.commonsense.items()} == {
                k: commonsense[k].passed for k in COMMONSENSE_KEYS
            }
            assert (fast.report.hard is None) == (hard is None)
            if hard is not None:
                assert {k: r.passed for k, r in fast.report.hard.items()} == {k: hard[k].passed for k in hard}
            compared += 1
    assert compared > 150


def test_generated_plans_never_raise_and_errors_name_a_check(gold, official, strict) -> None:
    rng = random.Random(11)
    outcomes = {"undelivered": 0, "crash": 0, "verdict": 0}
    checks = {*COMMONSENSE_KEYS, "valid_cost", "valid_cuisine", "valid_room_rule", "valid_room_type",
              "valid_transportation", "eval.py"}  # fmt: skip
    for i in range(1500):
        query, days = gold[i % len(gold)]
        payload = as_payload(malform(days, rng), rng, i)
        verdict = official.evaluate_payload(query, payload)
        strict.evaluate_payload(query, payload)
        if not verdict.report.delivered:
            outcomes["undelivered"] += 1
        elif not verdict.scorable:
            outcomes["crash"] += 1
            assert verdict.error.split("raises in ")[1].split(":")[0] in checks
        else:
            outcomes["verdict"] += 1
    assert outcomes["undelivered"] > 5 and outcomes["crash"] > 100 and outcomes["verdict"] > 500, outcomes


def test_string_plans_are_not_scorable_naming_where_the_official_code_raises(gold, official) -> None:
    query, _days = gold[0]
    # eval.py: `if type(tested_plan) == str: tested_plan = eval(tested_plan)` raises on a non-literal line
    line = official.evaluate_payload(query, "{'idx': 1, 'plan': [")
    assert not line.scorable and "raises in eval.py" in line.error
    # a record whose plan is text but no plan: the checks index the string (`tested_data[i]['current_city']`)
    for payload in ({"idx": 1, "plan": "plan"}, json.dumps({"idx": 1, "plan": "plan"})):
        verdict = official.evaluate_payload(query, payload)
        assert not verdict.scorable and "raises in is_reasonable_visiting_city" in verdict.error
