"""The plan parsed once for all checks: :class:`Day`, :class:`PlanContext`, and how a day's transport reads.

Also what every check module shares: :func:`crash` (an official crash under the mode's rule) and
:func:`leg_kind` (the transport kind the sandbox and the budget see).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from star_lib.travel.checks.index import WorldIndex
from star_lib.travel.checks.rules import OfficialError
from star_lib.travel.checks.text import MEALS, Split, before_paren, filled, from_to, normalise, official_kind
from star_lib.types import CheckResult, DayPlan, QueryRecord


@dataclass(slots=True)
class Day:
    """One day of the plan, parsed once for all checks."""

    index: int
    """0-based position."""
    raw: DayPlan
    moving: bool
    """``'from'`` occurs in current_city (official travel-day test)."""
    cities: tuple[str, ...] | None
    """The day's cities (before parentheses); None when a travel day cannot be read (official crash)."""
    transport: str
    kind: str | None
    """Transport type under the rule set (see :func:`transport_kind`)."""
    leg: tuple[str, str] | None
    """(origin, dest) of the transport text, else of current_city; raw (parentheses kept)."""
    meals: tuple[tuple[str, str, Split | None], ...]
    """(slot, text, split) of each filled meal."""
    attractions: tuple[tuple[str, Split | None], ...]
    """(text, split) of each attraction item."""
    hotel: Split | None
    """Split of the filled accommodation (None when empty or not splittable)."""
    meal_keys: tuple[Any, ...] = ()
    """What the repetition check compares for each meal (raw text, or normalised (name, city))."""
    attraction_keys: tuple[Any, ...] = ()
    """Same for each attraction item."""
    hotel_key: Any = None
    """Same for the accommodation (consecutive-night runs)."""
    memo: dict[Any, Any] = field(default_factory=dict)
    """Per-day verdicts that depend only on the day (and the date/group size): the evaluator shares parsed
    days across plans, so an unchanged day is checked once."""


def transport_kind_for(text: str, rules: frozenset[str]) -> str | None:
    """Transport kind of ``text`` under a rule set: ``flight`` | ``taxi`` | ``self-driving`` | None."""
    if not filled(text):
        return None
    kind = official_kind(text)
    if kind is None and "unknown_transport_is_driving" in rules:
        return "self-driving"
    return kind


def _name_key(text: str, split: Split | None, rules: frozenset[str]) -> Any:
    """Return what repetition checks compare: the raw text, or the normalised (name, city) in strict mode."""
    if "normalised_repeats" not in rules:
        return text
    if split is None:
        return normalise(text)
    if "exact_names" in rules:
        return split  # already normalised by the evaluator's splitter
    return normalise(split[0]), normalise(split[1])


def parse_day(
    index: int, day: DayPlan, rules: frozenset[str], splitter: Callable[[str], Split | None]
) -> Day:
    """Parse one day's texts once (cities, transport, meal/attraction/hotel splits)."""
    city_text = day.current_city
    moving = "from" in city_text
    cities: tuple[str, ...] | None
    if moving:
        pair = from_to(city_text)
        cities = (before_paren(pair[0]), before_paren(pair[1])) if pair else None
    else:
        cities = (before_paren(city_text),)
    transport = day.transportation
    leg = None
    if filled(transport):
        leg = from_to(transport) or from_to(city_text)
    meals = tuple((slot, text, splitter(text)) for slot in MEALS if filled(text := getattr(day, slot)))
    attraction_text = day.attraction
    attractions: tuple[tuple[str, Split | None], ...] = ()
    if filled(attraction_text):
        if "attraction_items" in rules:
            items = [item.strip() for item in attraction_text.split(";") if item.strip()]
        else:
            items = attraction_text.split(";")[:-1]
        attractions = tuple((item, splitter(item)) for item in items)
    hotel_text = day.accommodation
    hotel = splitter(hotel_text) if filled(hotel_text) else None
    return Day(
        index=index,
        raw=day,
        moving=moving,
        cities=cities,
        transport=transport,
        kind=transport_kind_for(transport, rules),
        leg=leg,
        meals=meals,
        attractions=attractions,
        hotel=hotel,
        meal_keys=tuple(_name_key(text, split, rules) for _slot, text, split in meals),
        attraction_keys=tuple(_name_key(text, split, rules) for text, split in attractions),
        hotel_key=_name_key(hotel_text, hotel, rules) if filled(hotel_text) else hotel_text,
    )


@dataclass(slots=True)
class PlanContext:
    """Everything the checks read: query, parsed days (the first ``min(days, len(plan))``), index, rules."""

    query: QueryRecord
    plan: tuple[DayPlan, ...]
    days: list[Day]
    index: WorldIndex
    rules: frozenset[str]


Check = Callable[[PlanContext], CheckResult]
"""A check: the plan context in, one verdict out."""


def crash(ctx: PlanContext, check: str, detail: str, reason: str) -> CheckResult:
    """Fail ``check`` with ``reason`` under ``crash_is_failure``; otherwise raise :class:`OfficialError`."""
    if "crash_is_failure" in ctx.rules:
        return CheckResult(False, reason)
    raise OfficialError(check, detail)


def leg_kind(ctx: PlanContext, day: Day) -> str | None:
    """How the sandbox and the budget read a day's transportation.

    Official: ``'flight number'`` in the text → flight, else ``'self-driving'`` → self-driving, else
    ``'taxi'``    → taxi (note: self-driving before taxi here, unlike the conflict check), else unchecked.
    ``transport_by_kind``: the day's single kind.
    """
    if "transport_by_kind" in ctx.rules:
        return day.kind
    lower = day.transport.lower()
    if "flight number" in lower:
        return "flight"
    if "self-driving" in lower:
        return "self-driving"
    if "taxi" in lower:
        return "taxi"
    if day.kind == "flight" and "flight_number_required" in ctx.rules:
        return "flight"
    return "self-driving" if day.kind == "self-driving" else None
