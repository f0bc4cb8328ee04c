"""The 5 hard-constraint checks (official keys ``valid_*``) and the trip's cost."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from star_lib.travel.checks.context import Check, Day, PlanContext, leg_kind
from star_lib.travel.checks.rules import NOT_APPLICABLE, PASS
from star_lib.travel.checks.text import before_paren, filled, flight_number
from star_lib.types import HOUSE_RULES, CheckResult

ROOM_TYPES = {"shared room": "Shared room", "private room": "Private room", "entire room": "Entire home/apt"}
"""Requested room type → the ``room_type`` of the rows that satisfy it (``not shared room`` apart)."""


def trip_cost(ctx: PlanContext) -> float:
    """Total cost of the plan for the whole group (official ``get_total_cost``; unknown items cost 0)."""
    people = ctx.query.people_number
    total = 0.0
    for day in ctx.days:
        key = ("cost", people)
        cost = day.memo.get(key)
        if cost is None:
            cost = day.memo[key] = _day_cost(ctx, day, people)
        total += cost
    return total


def _day_cost(ctx: PlanContext, day: Day, people: int) -> float:
    """One day's cost for a group of ``people``."""
    match = ctx.index.match
    total = 0.0
    if filled(day.transport) and day.leg is not None:
        total += _transport_cost(ctx, day, people)
    for _slot, _text, split in day.meals:
        rows = match("restaurant", split)
        if rows:
            total += rows[0].average_cost * people
    if filled(day.raw.accommodation):
        rows = match("accommodation", day.hotel)
        if rows:
            total += rows[0].price * math.ceil(people / rows[0].maximum_occupancy)
    return total


def _transport_cost(ctx: PlanContext, day: Day, people: int) -> float:
    """Cost of one day's transportation for the group (0 when unknown)."""
    kind = leg_kind(ctx, day)
    if kind == "flight":
        code = flight_number(day.transport, ctx.rules)
        flight = ctx.index.world.flight(code) if code is not None else None
        if flight is None:
            return 0.0
        if "flight_cost_by_route" in ctx.rules and (
            flight.origin != before_paren(day.leg[0]) or flight.dest != before_paren(day.leg[1])
        ):
            return 0.0
        return flight.price * people
    if kind is None:
        return 0.0
    cost = ctx.index.route_cost(day.leg[0], day.leg[1], kind)
    if cost is None:
        return 0.0
    return cost * math.ceil(people / (5 if kind == "self-driving" else 4))


def check_cost(ctx: PlanContext) -> CheckResult:
    """``valid_cost``: the whole trip fits the budget."""
    cost = trip_cost(ctx)
    if cost <= ctx.query.budget:
        return PASS
    return CheckResult(False, f"The total cost {cost:g} exceeds the budget {ctx.query.budget}.")


def _hotel_rows(ctx: PlanContext) -> list[tuple[int, Any]]:
    """(day number, first matching row) of each filled accommodation that matches a row."""
    found = []
    for day in ctx.days:
        if filled(day.raw.accommodation):
            rows = ctx.index.match("accommodation", day.hotel)
            if rows:
                found.append((day.index + 1, rows[0]))
    return found


def check_room_rule(ctx: PlanContext) -> CheckResult:
    """``valid_room_rule``: no hotel forbids the requested house rule ("No <rule>")."""
    rule = ctx.query.local_constraint.house_rule
    if rule is None:
        return NOT_APPLICABLE
    if rule not in HOUSE_RULES:
        return PASS  # official: only the five known rules are checked
    forbidden = f"No {rule}"
    for number, row in _hotel_rows(ctx):
        if forbidden in str(row.house_rules):
            return CheckResult(False, f"The house rule should be {rule} (day {number}: {row.house_rules}).")
    return PASS


def check_room_type(ctx: PlanContext) -> CheckResult:
    """``valid_room_type``: every hotel has the requested room type."""
    wanted = ctx.query.local_constraint.room_type
    if wanted is None:
        return NOT_APPLICABLE
    for number, row in _hotel_rows(ctx):
        if wrong_room_type(wanted, row.room_type):
            return CheckResult(False, f"The room type should be {wanted} (day {number}: {row.room_type}).")
    return PASS


def wrong_room_type(wanted: str, room_type: str) -> bool:
    """Tell whether a listing of ``room_type`` fails the requested room type (an unknown request never does).

    >>> wrong_room_type("not shared room", "Shared room"), wrong_room_type("entire room", "Entire home/apt")
    (True, False)
    """
    if wanted == "not shared room":
        return room_type == "Shared room"
    return wanted in ROOM_TYPES and room_type != ROOM_TYPES[wanted]


def check_cuisine(ctx: PlanContext) -> CheckResult:
    """``valid_cuisine``: every requested cuisine is served by some meal outside the origin city."""
    wanted = ctx.query.local_constraint.cuisine
    if not wanted:
        return NOT_APPLICABLE
    return cuisine_verdict(wanted, _meal_rows_outside_origin(ctx))


def _meal_rows_outside_origin(ctx: PlanContext) -> Iterator[tuple[Any, ...]]:
    """Yield the matching rows of each meal the cuisine check counts (those outside the origin city)."""
    per_meal = "cuisine_per_meal" in ctx.rules
    org = ctx.query.org
    for day in ctx.days:
        for _slot, _text, split in day.meals:
            if split is not None and split[1] == org:
                if per_meal:
                    continue
                break  # official: `continue` of the day loop skips the rest of that day's meals
            yield ctx.index.match("restaurant", split)


def cuisine_verdict(wanted: Sequence[str], meal_rows: Iterable[Sequence[Any]]) -> CheckResult:
    """Judge ``valid_cuisine``: each wanted cuisine is served by the first matching row of some meal.

    Args:
        wanted: the requested cuisines.
        meal_rows: the matching restaurant rows of each counted meal (empty when none matches).

    """
    served: set[str] = set()
    for rows in meal_rows:
        if rows:
            served.update(c for c in wanted if c in rows[0].cuisines)
    for cuisine in wanted:
        if cuisine not in served:
            return CheckResult(False, f"The cuisine {cuisine} is not satisfied.")
    return PASS


def check_transportation_constraint(ctx: PlanContext) -> CheckResult:
    """``valid_transportation``: no flight for 'no flight', no self-driving for 'no self-driving'."""
    wanted = ctx.query.local_constraint.transportation
    if wanted is None:
        return NOT_APPLICABLE
    by_kind = "transport_by_kind" in ctx.rules
    for day in ctx.days:
        if not filled(day.transport):
            continue
        if wanted == "no flight":
            bad = day.kind == "flight" if by_kind else "Flight" in day.transport
        elif wanted == "no self-driving":
            bad = day.kind == "self-driving" if by_kind else "Self-driving" in day.transport
        else:
            bad = False
        if bad:
            return CheckResult(False, f"The transportation should not be {wanted} (day {day.index + 1}).")
    return PASS


HARD_CHECKS: dict[str, Check] = {
    "valid_cost": check_cost,
    "valid_room_rule": check_room_rule,
    "valid_cuisine": check_cuisine,
    "valid_room_type": check_room_type,
    "valid_transportation": check_transportation_constraint,
}
"""Official hard key → check (order of :data:`star_lib.types.HARD_KEYS`)."""
