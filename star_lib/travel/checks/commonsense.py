"""The 8 commonsense checks (official keys ``is_*``): ``check(ctx) -> CheckResult`` over a plan context."""

from __future__ import annotations

from typing import Any

from star_lib.travel.checks.context import Check, Day, PlanContext, crash, leg_kind, transport_kind_for
from star_lib.travel.checks.rules import PASS, PLACEHOLDER_CITY
from star_lib.travel.checks.text import (
    MEALS,
    Split,
    before_paren,
    filled,
    flight_number,
    is_valid_city_sequence,
)
from star_lib.types import CheckResult


def _route_cities(ctx: PlanContext) -> tuple[list[str], CheckResult | None]:
    """Return the official city list (two entries per travel day), or the failing result."""
    cities: list[str] = []
    for day in ctx.days:
        if day.cities is None:
            return cities, _unreadable_city(ctx, day, "is_reasonable_visiting_city")
        if day.moving and day.index == 0 and day.cities[0] != ctx.query.org:
            return cities, CheckResult(False, f"The first day's city should be {ctx.query.org}.")
        cities.extend(day.cities)
    return cities, None


def _unreadable_city(ctx: PlanContext, day: Day, check: str) -> CheckResult:
    """Judge a travel day whose ``from A to B`` cannot be read (officially ``before_parenthesis(None)``)."""
    return crash(
        ctx,
        check,
        f"TypeError: day {day.index + 1}'s current_city {day.raw.current_city[:80]!r} contains 'from' "
        "but does not read as 'from A to B'",
        f"The current city of day {day.index + 1} cannot be parsed.",
    )


def check_reasonable_visiting_city(ctx: PlanContext) -> CheckResult:
    """``is_reasonable_visiting_city``: a closed loop from the origin, contiguous stays, valid cities."""
    cities, failure = _route_cities(ctx)
    if failure is not None:
        return failure
    if "starts_at_org" in ctx.rules and cities[0] != ctx.query.org:
        return CheckResult(False, f"The first day's city should be {ctx.query.org}.")
    if cities[0] != cities[-1]:
        return CheckResult(False, "The trip should be a closed circle.")
    if not is_valid_city_sequence(cities):
        return CheckResult(False, "The city sequence is invalid.")
    last = len(cities) - 1
    state_of = ctx.index.state_of
    dest = ctx.query.dest
    short_trip = ctx.query.days <= 3 and "dest_city" in ctx.rules
    for position, city in enumerate(cities):
        state = state_of.get(city)
        if state is None:
            return CheckResult(False, f"{city} is not a valid city.")
        if 0 < position < last and ctx.query.days > 3 and state != dest:
            return CheckResult(False, f"{city} is not in {dest}.")
        if 0 < position < last and short_trip and city != dest and (dest in state_of or state != dest):
            return CheckResult(False, f"{city} is not {dest}.")
    return PASS


def check_restaurants(ctx: PlanContext) -> CheckResult:
    """``is_valid_restaurants``: no restaurant twice in the whole trip."""
    seen: set[Any] = set()
    for day in ctx.days:
        for key, (slot, text, _split) in zip(day.meal_keys, day.meals, strict=True):
            if key in seen:
                return CheckResult(
                    False, f"The restaurant in day {day.index + 1} {slot} ({text}) is repeated."
                )
            seen.add(key)
    return PASS


def check_attractions(ctx: PlanContext) -> CheckResult:
    """``is_valid_attractions``: no attraction twice in the whole trip."""
    seen: set[Any] = set()
    for day in ctx.days:
        for key, (text, _split) in zip(day.attraction_keys, day.attractions, strict=True):
            if key in seen:
                return CheckResult(False, f"The attraction '{text}' in day {day.index + 1} is repeated.")
            seen.add(key)
    return PASS


def check_accommodation(ctx: PlanContext) -> CheckResult:
    """``is_valid_accommodation``: each hotel's consecutive nights reach its minimum nights."""
    runs: list[tuple[Any, Split | None, str, int]] = []
    for day in ctx.days:
        text, key = day.raw.accommodation, day.hotel_key
        if runs and runs[-1][0] == key:
            runs[-1] = (key, runs[-1][1], runs[-1][2], runs[-1][3] + 1)
        else:
            runs.append((key, day.hotel, text, 1))
    any_match = "min_nights_any_match" in ctx.rules
    for _key, split, text, nights in runs:
        if not filled(text):
            continue
        rows = ctx.index.match("accommodation", split)
        if (len(rows) == 1 or (any_match and rows)) and nights < rows[0].minimum_nights:
            return CheckResult(
                False,
                f"The accommodation {text} do not obey the minimum nights rule "
                f"({nights} < {rows[0].minimum_nights:g}).",
            )
    return PASS


def check_transportation(ctx: PlanContext) -> CheckResult:
    """``is_valid_transportation``: day 1 has transport; no self-driving mixed with flights or taxis."""
    first = ctx.plan[0].transportation
    if not filled(first):
        return CheckResult(False, "The transportation in day 1 should not be empty.")
    kinds = {transport_kind_for(first, ctx.rules)}
    kinds.update(day.kind for day in ctx.days if filled(day.transport))
    if "self-driving" in kinds and ("flight" in kinds or "taxi" in kinds):
        return CheckResult(False, "The transportation is conflicting.")
    return PASS


def _in_cities(text: str, split: Split | None, cities: Any, exact: bool) -> bool:
    """Whether an item belongs to one of the day's cities (exact city, or any city substring of the text)."""
    if exact:
        return split is not None and split[1] in cities
    return any(city in text for city in cities)


def check_information_in_current_city(ctx: PlanContext) -> CheckResult:
    """``is_valid_information_in_current_city``: everything of a day happens in that day's cities."""
    for day in ctx.days:
        verdict = day.memo.get("city")
        if verdict is None:
            verdict = day.memo["city"] = _day_in_current_city(ctx, day)
        if verdict is not PASS:
            return verdict
    return PASS


def _day_in_current_city(ctx: PlanContext, day: Day) -> CheckResult:
    """Judge one day's current-city consistency (depends on nothing but the day)."""
    exact = "current_city_exact" in ctx.rules
    number = day.index + 1
    if day.cities is None:
        return _unreadable_city(ctx, day, "is_valid_information_in_current_city")
    # quirk #50: on a one-city day the official code iterates the characters of the city name
    fixed = day.moving or exact or "one_city_day" in ctx.rules
    cities: Any = day.cities if fixed else day.cities[0]
    if filled(day.transport) and not all(city in day.transport for city in cities):
        return CheckResult(False, f"The transportation in day {number} is invalid city choice.")
    for slot, text, split in day.meals:
        if not _in_cities(text, split, cities, exact):
            return CheckResult(False, f"The {slot} in day {number} is invalid city choice.")
    for text, split in day.attractions:
        if not _in_cities(text, split, cities, exact):
            return CheckResult(False, f"The attraction in day {number} is invalid city choice.")
    hotel_text = day.raw.accommodation
    if filled(hotel_text):
        if not cities:  # an empty one-city day: official crashes on cities[-1]
            return crash(
                ctx,
                "is_valid_information_in_current_city",
                f"IndexError: day {number} has an accommodation but an empty current_city",
                f"The current city of day {number} is empty.",
            )
        last = cities[-1]
        ok = (day.hotel is not None and day.hotel[1] == last) if exact else last in hotel_text
        if not ok:
            return CheckResult(False, f"The accommodation in day {number} is invalid city choice.")
    return PASS


def _check_flight(ctx: PlanContext, day: Day) -> str | None:
    """Sandbox failure reason of a flight day, or None."""
    number = day.index + 1
    if day.leg is None:
        reason = f"The transportation {day.transport} in day {number} can not be parsed."
        return crash(ctx, "is_valid_information_in_sandbox", f"ValueError: {reason[:200]}", reason).reason
    code = flight_number(day.transport, ctx.rules)
    if code is None:
        return crash(
            ctx,
            "is_valid_information_in_sandbox",
            f"IndexError: day {number}'s transportation names a flight number without 'Flight Number: '",
            f"The flight number in day {number} can not be parsed.",
        ).reason
    flight = ctx.index.world.flight(code)
    origin, dest = before_paren(day.leg[0]), before_paren(day.leg[1])
    if flight is None or flight.origin != origin or flight.dest != dest:
        return f"The flight number in day {number} is invalid in the sandbox."
    dates = ctx.query.date
    if "flight_date" in ctx.rules and day.index < len(dates) and flight.date != dates[day.index]:
        return f"The flight {code} in day {number} departs on {flight.date}, not {dates[day.index]}."
    return None


def _sandbox_transport(ctx: PlanContext, day: Day) -> str | None:
    """Sandbox failure reason of a day's transportation, or None."""
    kind = leg_kind(ctx, day)
    if kind == "flight":
        if "flight_number_required" in ctx.rules or "flight number" in day.transport.lower():
            return _check_flight(ctx, day)
        return None
    if kind is None:
        return None
    leg = day.leg or ("-", "-")
    if ctx.index.route_cost(leg[0], leg[1], kind) is None:
        return f"The {kind} in day {day.index + 1} is invalid in the sandbox."
    return None


def check_information_in_sandbox(ctx: PlanContext) -> CheckResult:
    """``is_valid_information_in_sandbox``: every flight, route, restaurant, attraction and hotel exists."""
    dated = "flight_date" in ctx.rules
    dates = ctx.query.date
    for day in ctx.days:
        key = ("sandbox", dates[day.index] if dated and day.index < len(dates) else None)
        verdict = day.memo.get(key)
        if verdict is None:
            verdict = day.memo[key] = _day_in_sandbox(ctx, day)
        if verdict is not PASS:
            return verdict
    return PASS


def _day_in_sandbox(ctx: PlanContext, day: Day) -> CheckResult:
    """Judge one day against the sandbox (depends on the day and, under ``flight_date``, its date)."""
    match = ctx.index.match
    number = day.index + 1
    if filled(day.transport):
        reason = _sandbox_transport(ctx, day)
        if reason is not None:
            return CheckResult(False, reason)
    for slot, _text, split in day.meals:
        if not match("restaurant", split):
            return CheckResult(False, f"The {slot} in day {number} is invalid in the sandbox.")
    for text, split in day.attractions:
        if not match("attraction", split):
            return CheckResult(False, f"The attraction {text} in day {number} is invalid in the sandbox.")
    if filled(day.raw.accommodation) and not match("accommodation", day.hotel):
        return CheckResult(False, f"The accommodation in day {number} is invalid in the sandbox.")
    return PASS


def _visiting_city_number(ctx: PlanContext) -> bool:
    """Official ``is_valid_visiting_city_number``: distinct cities other than the origin."""
    seen: set[str] = set()
    for day in ctx.days:
        if day.cities is None:
            _unreadable_city(ctx, day, "is_not_absent")
            return False
        if day.moving and day.index == 0 and day.cities[0] != ctx.query.org:
            return False
        seen.update(day.cities)
    seen.discard(ctx.query.org)
    return len(seen) == ctx.query.visiting_city_number


def check_not_absent(ctx: PlanContext) -> CheckResult:
    """``is_not_absent``: right number of days and cities, required fields present, ≥50 % of fields filled."""
    query = ctx.query
    if "extra_days" in ctx.rules and len(ctx.plan) > query.days:
        return CheckResult(False, f"The plan has {len(ctx.plan)} days; the trip has {query.days}.")
    counted = sum(1 for day in ctx.days if day.raw.current_city != PLACEHOLDER_CITY)
    if counted != query.days:
        return CheckResult(False, "Invalid Days")
    if not _visiting_city_number(ctx):
        return CheckResult(False, "Invalid City Number")
    total = 0
    for day in ctx.days:
        raw, has = day.raw, _present(ctx, day)
        city, number = raw.current_city, day.index + 1
        if not has["current_city"] and "named_fields" in ctx.rules:
            return CheckResult(False, f"The current city of day {number} names no city of the database.")
        if ("from " in city or "to " in city) and not has["transportation"]:
            return CheckResult(False, f"No transportation in day {number} is not allowed.")
        if "from " not in city and " to " not in city and not has["attraction"]:
            return CheckResult(False, f"No attaction in day {number} is not allowed.")
        if day.index != query.days - 1 and not has["accommodation"]:
            return CheckResult(False, f"No accommodation in day {number} is not allowed.")
        if "from " not in city and not all(has[slot] for slot in MEALS):
            return CheckResult(False, f"No meal in day {number} is not allowed.")
        total += (raw.days != 0) + sum(has.values())
    if total / max(1, 6 * query.days) < 0.5:
        return CheckResult(False, "The absent information is more than 50%.")
    return PASS


def _present(ctx: PlanContext, day: Day) -> dict[str, bool]:
    """Which text fields of a day count as filled: not ``''``/``'-'`` (``named_fields``: and in the DB)."""
    raw = day.raw
    has = {key: filled(getattr(raw, key)) for key in _TEXT_FIELDS}
    if "named_fields" not in ctx.rules:
        return has
    named = day.memo.get("named")
    if named is None:
        named = day.memo["named"] = _named(ctx, day)
    return {key: has[key] and named[key] for key in _TEXT_FIELDS}


_TEXT_FIELDS = ("current_city", "transportation", *MEALS, "attraction", "accommodation")


def _named(ctx: PlanContext, day: Day) -> dict[str, bool]:
    """Whether each text field of a day names something in the database (rule ``named_fields``)."""
    match = ctx.index.match
    named = {slot: bool(match("restaurant", split)) for slot, _text, split in day.meals}
    return {
        **dict.fromkeys(MEALS, False),
        **named,
        "current_city": day.cities is not None and all(c in ctx.index.state_of for c in day.cities),
        "transportation": filled(day.transport) and _names_transport(ctx, day),
        "attraction": any(match("attraction", split) for _text, split in day.attractions),
        "accommodation": bool(match("accommodation", day.hotel)),
    }


def _names_transport(ctx: PlanContext, day: Day) -> bool:
    """Whether a day's transportation names a flight on its route, or a drive/taxi route with a cost."""
    kind = leg_kind(ctx, day)
    if kind is None or day.leg is None:
        return False
    if kind != "flight":
        return ctx.index.route_cost(day.leg[0], day.leg[1], kind) is not None
    code = flight_number(day.transport, ctx.rules)
    flight = ctx.index.world.flight(code) if code is not None else None
    route = (before_paren(day.leg[0]), before_paren(day.leg[1]))
    return flight is not None and (flight.origin, flight.dest) == route


COMMONSENSE_CHECKS: dict[str, Check] = {
    "is_reasonable_visiting_city": check_reasonable_visiting_city,
    "is_valid_restaurants": check_restaurants,
    "is_valid_attractions": check_attractions,
    "is_valid_accommodation": check_accommodation,
    "is_valid_transportation": check_transportation,
    "is_valid_information_in_current_city": check_information_in_current_city,
    "is_valid_information_in_sandbox": check_information_in_sandbox,
    "is_not_absent": check_not_absent,
}
"""Official commonsense key → check (order of :data:`star_lib.types.COMMONSENSE_KEYS`)."""
