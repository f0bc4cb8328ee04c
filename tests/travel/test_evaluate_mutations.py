"""Real gold plans edited to break one check each, and the documented strict-only cases.

Part 1: for each of the 13 checks, a real gold plan (or its query) is edited so that exactly that check
breaks; it must fail in both modes with a reason. Part 2: for every rule of ``STRICT_RULES``, a case where
``official`` and ``strict`` disagree on one check, and ``official`` + that single rule agrees with ``strict``
(so the rule, and nothing else, makes the difference).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest

from star_lib.travel.checks import STRICT_RULES, before_paren, from_to, split_name_city
from star_lib.travel.evaluate import Evaluator
from star_lib.travel.plan import parse_plan
from star_lib.travel.world import World
from star_lib.types import COMMONSENSE_KEYS, CUISINES, DayPlan, QueryRecord

MODES = ("official", "strict")


@pytest.fixture(scope="module")
def world(real_db_dir) -> World:
    return World.from_csv_dir(real_db_dir)


@pytest.fixture(scope="module")
def gold(tp_dir) -> list[tuple[QueryRecord, tuple[DayPlan, ...]]]:
    items = []
    for line in (tp_dir / "train.jsonl").read_text().splitlines():
        record = json.loads(line)
        items.append((QueryRecord.from_dict(record), parse_plan(record["annotated_plan"])))
    return items


@pytest.fixture(scope="module")
def evaluators(world) -> dict[str, Evaluator]:
    return {mode: Evaluator(world, mode) for mode in MODES}


def result(report, key):
    if key in report.commonsense:
        return report.commonsense[key]
    assert report.hard is not None, f"hard checks were skipped: {report.commonsense}"
    return report.hard[key]


def set_day(plan, index, **fields):
    days = list(plan)
    days[index] = replace(days[index], **fields)
    return tuple(days)


def set_constraint(query, **fields):
    return replace(query, local_constraint=replace(query.local_constraint, **fields))


def hotel_city(text: str) -> str:
    return split_name_city(text)[1]


def unique_name(rows, name) -> bool:
    return sum(1 for r in rows if name in r.name) == 1


def flight_plan(gold):
    return next((q, p) for q, p in gold if q.days == 3 and "Flight Number" in p[0].transportation)


# ───────────────────────────── part 1: each check broken in both modes ─────────────────────────────


def broken_loop(world, gold):
    query, plan = flight_plan(gold)
    last = plan[-1]
    a, _ = from_to(last.current_city)
    other = next(c for c in world.cities if c not in (query.org, query.dest))
    return query, set_day(plan, len(plan) - 1, current_city=f"from {a} to {other}"), "closed circle"


def wrong_state(world, gold):
    query, plan = next((q, p) for q, p in gold if q.days == 5)
    stay = next(i for i, d in enumerate(plan) if "from" not in d.current_city)
    outsider = next(c for c in world.cities if world.state_of(c) != query.dest and c != query.org)
    days = list(plan)
    old = before_paren(days[stay].current_city)
    days = [replace(d, current_city=d.current_city.replace(old, outsider)) for d in days]
    return query, tuple(days), f"is not in {query.dest}"


def repeated_restaurant(world, gold):
    query, plan = flight_plan(gold)
    return query, set_day(plan, 1, lunch=plan[1].breakfast), "repeated"


def repeated_attraction(world, gold):
    query, plan = flight_plan(gold)
    first = plan[1].attraction.split(";")[0]
    return query, set_day(plan, 2, attraction=f"{first};{plan[2].attraction}"), "repeated"


def short_stay(world, gold):
    for query, plan in gold:
        nights = [d.accommodation for d in plan]
        run = nights.count(nights[0])
        city = hotel_city(nights[0])
        for row in world.accommodations(city):
            if row.minimum_nights > run and unique_name(world.accommodations(city), row.name):
                text = f"{row.name}, {nights[0].rsplit(',', 1)[1].strip()}"
                days = tuple(
                    replace(d, accommodation=text) if d.accommodation == nights[0] else d for d in plan
                )
                return query, days, "minimum nights"
    raise AssertionError("no gold plan admits a too-short stay")


def mixed_transport(world, gold):
    query, plan = flight_plan(gold)
    a, b = from_to(plan[-1].current_city)
    text = f"Self-driving, from {a} to {b}, duration: 5 hours, distance: 500 km, cost: 25"
    return query, set_day(plan, len(plan) - 1, transportation=text), "conflicting"


def empty_first_transport(world, gold):
    query, plan = flight_plan(gold)
    return query, set_day(plan, 0, transportation="-"), "day 1 should not be empty"


def wrong_city_restaurant(world, gold):
    query, plan = flight_plan(gold)
    a, b = (before_paren(c) for c in from_to(plan[0].current_city))
    for city in world.cities:
        for row in world.restaurants(city):
            text = f"{row.name}, {city}"
            if city not in (a, b) and a not in text and b not in text and row.name not in {
                split_name_city(getattr(d, s))[0] for d in plan for s in ("breakfast", "lunch", "dinner")
                if getattr(d, s) != "-"
            }:  # fmt: skip
                return query, set_day(plan, 0, dinner=text), "invalid city choice"
    raise AssertionError("no restaurant outside the day's cities")


def unknown_flight(world, gold):
    query, plan = flight_plan(gold)
    text = plan[0].transportation.replace("Flight Number: F", "Flight Number: F9", 1)
    assert world.flight(text.split("Flight Number: ")[1].split(",")[0]) is None
    return query, set_day(plan, 0, transportation=text), "invalid in the sandbox"


def missing_meal(world, gold):
    query, plan = flight_plan(gold)
    return query, set_day(plan, 1, lunch="-"), "No meal in day 2"


def wrong_city_count(world, gold):
    query, plan = flight_plan(gold)
    return replace(query, visiting_city_number=2), plan, "Invalid City Number"


def missing_day(world, gold):
    query, plan = flight_plan(gold)
    return query, plan[:-1], "Invalid Days"


def over_budget(world, gold):
    query, plan = gold[0]
    return replace(query, budget=100), plan, "exceeds the budget"


def forbidden_house_rule(world, gold):
    for query, plan in gold:
        rule = query.local_constraint.house_rule
        if rule is None:
            continue
        city = hotel_city(plan[0].accommodation)
        rows = world.accommodations(city)
        for row in rows:
            if f"No {rule}" in row.house_rules and unique_name(rows, row.name):
                text = f"{row.name}, {plan[0].accommodation.rsplit(',', 1)[1].strip()}"
                old = plan[0].accommodation
                days = tuple(replace(d, accommodation=text) if d.accommodation == old else d for d in plan)
                return query, days, f"house rule should be {rule}"
    raise AssertionError("no gold plan with a house rule and a forbidding hotel")


def wrong_room_type(world, gold):
    wanted = {"shared room": "Shared room", "private room": "Private room", "entire room": "Entire home/apt"}
    for query, plan in gold:
        room = query.local_constraint.room_type
        if room is None:
            continue
        city = hotel_city(plan[0].accommodation)
        rows = world.accommodations(city)
        for row in rows:
            bad = (
                row.room_type == "Shared room" if room == "not shared room" else row.room_type != wanted[room]
            )
            if bad and unique_name(rows, row.name):
                text = f"{row.name}, {plan[0].accommodation.rsplit(',', 1)[1].strip()}"
                old = plan[0].accommodation
                days = tuple(replace(d, accommodation=text) if d.accommodation == old else d for d in plan)
                return query, days, f"room type should be {room}"
    raise AssertionError("no gold plan with a room type and a wrong-type hotel")


def missing_cuisine(world, gold):
    query, plan = gold[0]
    served = set()
    for day in plan:
        for slot in ("breakfast", "lunch", "dinner"):
            text = getattr(day, slot)
            if text != "-":
                name, city = split_name_city(text)
                served |= {
                    c
                    for c in CUISINES
                    if c in next(r for r in world.restaurants(city) if r.name == name).cuisines
                }
    absent = next(c for c in CUISINES if c not in served)
    return set_constraint(query, cuisine=(absent,)), plan, f"cuisine {absent} is not satisfied"


def forbidden_transport(world, gold):
    query, plan = flight_plan(gold)
    return set_constraint(query, transportation="no flight"), plan, "should not be no flight"


def forbidden_self_driving(world, gold):
    query, plan = next((q, p) for q, p in gold if p[0].transportation.startswith("Self-driving"))
    return set_constraint(query, transportation="no self-driving"), plan, "should not be no self-driving"


BREAKERS: list[tuple[str, Callable]] = [
    ("is_reasonable_visiting_city", broken_loop),
    ("is_reasonable_visiting_city", wrong_state),
    ("is_valid_restaurants", repeated_restaurant),
    ("is_valid_attractions", repeated_attraction),
    ("is_valid_accommodation", short_stay),
    ("is_valid_transportation", mixed_transport),
    ("is_valid_transportation", empty_first_transport),
    ("is_valid_information_in_current_city", wrong_city_restaurant),
    ("is_valid_information_in_sandbox", unknown_flight),
    ("is_not_absent", missing_meal),
    ("is_not_absent", wrong_city_count),
    ("is_not_absent", missing_day),
    ("valid_cost", over_budget),
    ("valid_room_rule", forbidden_house_rule),
    ("valid_room_type", wrong_room_type),
    ("valid_cuisine", missing_cuisine),
    ("valid_transportation", forbidden_transport),
    ("valid_transportation", forbidden_self_driving),
]

ISOLATED = {
    "repeated_restaurant",
    "repeated_attraction",
    "short_stay",
    "missing_meal",
    "wrong_city_count",
    "over_budget",
    "missing_cuisine",
    "forbidden_transport",
    "forbidden_self_driving",
    "wrong_city_restaurant",
}
"""Edits that break nothing but their target (other checks still pass in both modes)."""


def test_mutations_cover_all_thirteen_checks() -> None:
    from star_lib.types import HARD_KEYS

    assert {key for key, _ in BREAKERS} == set(COMMONSENSE_KEYS) | set(HARD_KEYS)


@pytest.mark.parametrize(("key", "breaker"), BREAKERS, ids=[b.__name__ for _, b in BREAKERS])
def test_mutations_break_the_target_check_in_both_modes(world, gold, evaluators, key, breaker) -> None:
    query, plan, fragment = breaker(world, gold)
    for mode, evaluator in evaluators.items():
        report = evaluator.evaluate(query, plan)
        verdict = result(report, key)
        assert verdict.passed is False, (mode, key)
        assert fragment in verdict.reason, (mode, verdict.reason)
        assert not report.final_pass
        if breaker.__name__ in ISOLATED and key in COMMONSENSE_KEYS:
            others = [k for k, v in report.commonsense.items() if v.passed is False and k != key]
            assert others == [], (mode, others)
        if breaker.__name__ in ISOLATED and key not in COMMONSENSE_KEYS:
            assert report.commonsense_all, mode
            assert [k for k, v in report.hard.items() if v.passed is False] == [key], mode


# ───────────────────────────── part 2: the strict-only cases ─────────────────────────────


@dataclass
class StrictCase:
    rule: str
    key: str
    build: Callable
    official_passes: bool = True
    """Most rules close a hole (official passes, strict fails); a few fix an official over-rejection."""


def _driving_word(world, gold):
    query, plan = flight_plan(gold)
    a, b = from_to(plan[-1].current_city)
    return query, set_day(plan, len(plan) - 1, transportation=f"Driving, from {a} to {b}, cost: 0")


def _self_driving_capital(world, gold):
    query, plan = next((q, p) for q, p in gold if p[0].transportation.startswith("Self-driving"))
    days = tuple(
        replace(d, transportation=d.transportation.replace("Self-driving", "Self-Driving")) for d in plan
    )
    return set_constraint(query, transportation="no self-driving"), days


def _partial_hotel(world, gold):
    query, plan = gold[0]
    name, city = split_name_city(plan[0].accommodation)
    part = name[: len(name) // 2]
    assert unique_name(world.accommodations(city), part)
    old = plan[0].accommodation
    return query, tuple(
        replace(d, accommodation=f"{part}, {city}") if d.accommodation == old else d for d in plan
    )


def _one_city_day(world, gold):
    query, plan = flight_plan(gold)
    stay = next(i for i, d in enumerate(plan) if "from" not in d.current_city)
    city = before_paren(plan[stay].current_city)
    other = next(c for c in world.cities if c != city and world.restaurants(c) and city not in c)
    return query, set_day(plan, stay, lunch=f"{world.restaurants(other)[0].name}, {other}")


def _name_mentions_city(world, gold):
    for query, plan in gold:
        for i, day in enumerate(plan):
            pair = from_to(day.current_city)
            if not pair:
                continue
            cities = [before_paren(c) for c in pair]
            for other in world.cities:
                if other in cities:
                    continue
                for row in world.restaurants(other):
                    if any(c in row.name for c in cities):
                        return query, set_day(plan, i, dinner=f"{row.name}, {other}")
    raise AssertionError("no restaurant whose name mentions another city")


def _attraction_without_semicolon(world, gold):
    query, plan = flight_plan(gold)
    return query, set_day(plan, 1, attraction=plan[1].attraction + "Made Up Place, Nowhere")


def _spaced_repeat(world, gold):
    query, plan = flight_plan(gold)
    return query, set_day(plan, 1, lunch=plan[1].breakfast.replace(", ", ",  "))


def _extra_day(world, gold):
    query, plan = flight_plan(gold)
    return query, (*plan, replace(plan[-1], days=len(plan) + 1))


def _other_dest_city(world, gold):
    query, plan = next((q, p) for q, p in gold if q.days == 3)
    other = next(c for c in world.cities if c not in (query.org, query.dest))
    return replace(query, dest=other), plan  # the gold plan now visits a city the query does not ask for


def _placeholder_meal(world, gold):
    query, plan = gold[0]
    stay = next(i for i, d in enumerate(plan) if d.lunch not in ("", "-"))
    city = plan[stay].lunch.rpartition(",")[2].strip()
    return query, set_day(plan, stay, lunch=f"TBD, {city}")


def _start_elsewhere(world, gold):
    query, plan = flight_plan(gold)
    dest = before_paren(from_to(plan[-1].current_city)[0])
    start = next(c for c in world.cities if c not in (query.org, dest))
    days = set_day(plan, 0, current_city=start)  # a one-city first day: official never compares it to org
    return query, set_day(days, len(days) - 1, current_city=f"from {dest} to {start}")


def _other_date_flight(world, gold):
    for query, plan in gold:
        text = plan[0].transportation
        if "Flight Number" not in text:
            continue
        flight = world.flight(text.split("Flight Number: ")[1].split(",")[0])
        for date in sorted(world.flight_routes().get((flight.origin, flight.dest), ())):
            if date != flight.date:
                other = world.flights(flight.origin, flight.dest, date)[0]
                return query, set_day(plan, 0, transportation=text.replace(flight.number, other.number))
    raise AssertionError("no route flown on two dates")


def _flight_without_number(world, gold):
    query, plan = flight_plan(gold)
    a, b = from_to(plan[0].current_city)
    return query, set_day(plan, 0, transportation=f"Flight from {a} to {b}")


def _duplicate_listing(world, gold):
    query, plan = gold[0]
    city = next(
        c
        for c in world.cities
        if len({a.name for a in world.accommodations(c)}) < len(world.accommodations(c))
    )
    names = [a.name for a in world.accommodations(city)]
    twin = next(n for n in names if names.count(n) > 1)
    days = tuple(replace(d, accommodation=f"{twin}, {city}") if d.accommodation != "-" else d for d in plan)
    return query, days


def _cuisine_after_org_breakfast(world, gold):
    query, plan = flight_plan(gold)
    last = len(plan) - 1
    dest = before_paren(from_to(plan[last].current_city)[0])
    org_food = next(r for r in world.restaurants(query.org))
    used = {getattr(d, s) for d in plan for s in ("breakfast", "lunch", "dinner")}
    served_elsewhere = set()
    for d in plan[:last]:
        for s in ("breakfast", "lunch", "dinner"):
            if getattr(d, s) != "-":
                name, city = split_name_city(getattr(d, s))
                served_elsewhere |= {
                    c
                    for c in CUISINES
                    if c in next(r for r in world.restaurants(city) if r.name == name).cuisines
                }
    for row in world.restaurants(dest):
        fresh = [c for c in CUISINES if c in row.cuisines and c not in served_elsewhere]
        if fresh and f"{row.name}, {dest}" not in used:
            days = set_day(plan, last, breakfast=f"{org_food.name}, {query.org}", lunch=f"{row.name}, {dest}")
            return set_constraint(query, cuisine=(fresh[0],)), days
    raise AssertionError("no restaurant with a fresh cuisine")


STRICT_CASES = [
    StrictCase("exact_names", "is_valid_information_in_sandbox", _partial_hotel),
    StrictCase("unknown_transport_is_driving", "is_valid_transportation", _driving_word),
    StrictCase("transport_by_kind", "valid_transportation", _self_driving_capital),
    StrictCase("flight_number_required", "is_valid_information_in_sandbox", _flight_without_number),
    StrictCase("flight_date", "is_valid_information_in_sandbox", _other_date_flight),
    StrictCase("one_city_day", "is_valid_information_in_current_city", _one_city_day),
    StrictCase("current_city_exact", "is_valid_information_in_current_city", _name_mentions_city),
    StrictCase("attraction_items", "is_valid_information_in_sandbox", _attraction_without_semicolon),
    StrictCase("normalised_repeats", "is_valid_restaurants", _spaced_repeat),
    StrictCase("starts_at_org", "is_reasonable_visiting_city", _start_elsewhere),
    StrictCase("extra_days", "is_not_absent", _extra_day),
    StrictCase("min_nights_any_match", "is_valid_accommodation", _duplicate_listing),
    StrictCase("cuisine_per_meal", "valid_cuisine", _cuisine_after_org_breakfast, official_passes=False),
    StrictCase("dest_city", "is_reasonable_visiting_city", _other_dest_city),
    StrictCase("named_fields", "is_not_absent", _placeholder_meal),
]


def _verdict(report, key):
    if key in report.commonsense:
        return report.commonsense[key].passed
    return "skipped" if report.hard is None else report.hard[key].passed


def test_mutations_every_strict_rule_has_a_case() -> None:
    # crash_is_failure: official mode has no verdict there (not scorable); see test_official.py
    covered = {case.rule for case in STRICT_CASES}
    # hard_needs_route skips the hard checks rather than failing one: see test_evaluate_strict_holes.py
    covered |= {"flight_cost_by_route", "all_listings", "crash_is_failure", "hard_needs_route"}
    assert covered == set(STRICT_RULES)


@pytest.mark.parametrize("case", STRICT_CASES, ids=[c.rule for c in STRICT_CASES])
def test_mutations_strict_only_case_differs_exactly_by_its_rule(world, gold, evaluators, case) -> None:
    query, plan = case.build(world, gold)
    official = _verdict(evaluators["official"].evaluate(query, plan), case.key)
    strict_report = evaluators["strict"].evaluate(query, plan)
    strict = _verdict(strict_report, case.key)
    assert official is case.official_passes, f"official verdict on {case.key}"
    assert strict is (not case.official_passes), f"strict verdict on {case.key}"
    failing = evaluators["official"].evaluate(query, plan) if strict else strict_report
    assert result(failing, case.key).reason
    single = Evaluator(world, "official", rules=frozenset({case.rule}))
    assert _verdict(single.evaluate(query, plan), case.key) is strict


def test_mutations_driving_word_escapes_only_official_checks(world, gold, evaluators) -> None:
    query, plan = _driving_word(world, gold)
    no_driving = set_constraint(query, transportation="no self-driving")
    official = evaluators["official"].evaluate(no_driving, plan)
    strict = evaluators["strict"].evaluate(no_driving, plan)
    assert official.final_pass  # quirk #51: the rename dodges conflict, sandbox, cost and constraint
    assert strict.commonsense["is_valid_transportation"].passed is False
    assert strict.commonsense["is_valid_information_in_sandbox"].passed is False  # no route priced "cost: 0"


def test_mutations_flight_cost_by_route(world, gold) -> None:
    query, plan = flight_plan(gold)
    text = plan[0].transportation
    number = text.split("Flight Number: ")[1].split(",")[0]
    flight = world.flight(number)
    stranger = next(
        f
        for (o, d), dates in world.flight_routes().items()
        if (o, d) != (flight.origin, flight.dest)
        for f in world.flights(o, d, dates[0])
    )
    swapped = set_day(plan, 0, transportation=text.replace(number, stranger.number))
    official = Evaluator(world, "official").cost(query, swapped)
    strict = Evaluator(world, "strict").cost(query, swapped)
    single = Evaluator(world, "official", rules=frozenset({"flight_cost_by_route"})).cost(query, swapped)
    assert official - strict == pytest.approx(stranger.price * query.people_number)
    assert single == pytest.approx(strict)


class _ListingWorld:
    """A two-city world whose only Rockford listing has no house rules (as a synthetic world may build)."""

    def __init__(self, real: World) -> None:
        self.real = real
        self.cities = real.cities

    def __getattr__(self, name):
        return getattr(self.real, name)

    def accommodations(self, city):
        return tuple(replace(a, house_rules="") for a in self.real.accommodations(city))


def test_mutations_all_listings(world, gold) -> None:
    fake = _ListingWorld(world)
    query, plan = gold[0]
    official = Evaluator(fake, "official").evaluate(query, plan)
    strict = Evaluator(fake, "strict").evaluate(query, plan)
    single = Evaluator(fake, "official", rules=frozenset({"all_listings"})).evaluate(query, plan)
    assert official.commonsense["is_valid_information_in_sandbox"].passed is False
    assert strict.commonsense["is_valid_information_in_sandbox"].passed is True
    assert single.commonsense["is_valid_information_in_sandbox"].passed is True
