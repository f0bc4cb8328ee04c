"""The 8 commonsense and 5 hard TravelPlanner checks, in ``official`` and ``strict`` mode (spec §5–§6).

Every check is a small named function ``check(ctx) -> CheckResult`` over a :class:`PlanContext` (the plan,
parsed once). ``official`` mode reproduces the verdicts of the official evaluator
(OSU-NLP-Group/TravelPlanner ``evaluation/commonsense_constraint.py`` and ``hard_constraint.py``), quirks
included. ``strict`` mode is ``official`` plus every rule of :data:`STRICT_RULES`; each place where the modes
differ tests ``RULE in ctx.rules`` and nowhere else, so the table below is the complete list of differences.

Text semantics shared by both modes (as officially):

* ``"from A to B"`` is read with the official pattern (``from`` / ``to`` surrounded by whitespace, the
  destination ends at the next comma); a parenthesised suffix such as ``"Dallas(Texas)"`` is cut off.
* ``"Name, City"`` is split on the **last** comma; text without a comma (or with nothing after the last
  comma) cannot be split and matches no row.
* Hard checks run only when ``is_not_absent`` and ``is_valid_information_in_sandbox`` pass; an unrequested
  constraint gives ``CheckResult(None)``; items that match no row cost 0.

Where the official evaluator *raises* (a ``"from …"`` city that the pattern cannot read, a ``"flight
number"`` without the exact ``"Flight Number: "`` prefix, an accommodation on a day whose city is empty),
``official`` mode raises :class:`OfficialError` naming the check, and the evaluator reports the plan as not
scorable; ``strict`` mode (rule ``crash_is_failure``) fails that check and says why.

Every pattern applied to plan text runs in linear time: ``"from A to B"`` is read by a scanner with the
official pattern's exact semantics (:func:`from_to`), not by a backtracking regex.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from star_lib.types import HOUSE_RULES, CheckResult, DayPlan, QueryRecord

# ───────────────────────────── the documented mode differences ─────────────────────────────

STRICT_RULES: dict[str, str] = {
    "exact_names": (
        "Names match a database row exactly after whitespace normalisation; official: the name only has to "
        "be a (regex-escaped) substring of a row name of that city, so 'Pure' matches "
        "'Pure luxury one bdrm …'."
    ),
    "unknown_transport_is_driving": (
        "Any filled transportation that is neither a taxi nor a flight is self-driving; official (quirk "
        "#51): text without 'taxi'/'self-driving'/'flight' (e.g. 'Driving from A to B') has no type, so it "
        "escapes the sandbox, conflict, budget and transport-constraint checks."
    ),
    "transport_by_kind": (
        "One transport kind per text (taxi > self-driving > flight, case-insensitive) drives every check: "
        "the sandbox lookup, the cost, and the hard 'no flight'/'no self-driving' check; official mixes "
        "'flight number' (sandbox, cost), the kind (conflicts) and case-sensitive 'Flight'/'Self-driving' "
        "substrings (hard transport)."
    ),
    "flight_number_required": (
        "A flight must name a 'Flight Number: …' that exists on that route; official lets flight text "
        "without 'flight number' pass the sandbox (and cost 0)."
    ),
    "flight_date": "A flight must depart on the date of the day it is listed on; official ignores the date.",
    "flight_cost_by_route": (
        "A flight's price is looked up by number and route; official looks it up by number only."
    ),
    "one_city_day": (
        "On a one-city day the day's cities are [city]; official (quirk #50) iterates the city *string*, so "
        "a meal passes if any single character of the city name occurs in it, and an accommodation if the "
        "city's last character does."
    ),
    "current_city_exact": (
        "A meal's/attraction's city (after the last comma) must equal one of the day's cities and the "
        "hotel's city the day's last city; official only asks that the city name occurs somewhere in the "
        "text."
    ),
    "attraction_items": (
        "Attractions are the non-empty ';'-separated items; official drops the last item "
        "(split(';')[:-1]), so an attraction without a trailing ';' is never checked."
    ),
    "normalised_repeats": (
        "Repeated restaurants/attractions and consecutive hotel nights compare the normalised (name, city); "
        "official compares raw strings, so extra spaces dodge the repetition checks."
    ),
    "starts_at_org": (
        "Day 1 must start at the origin even when its current_city is a single city; official checks the "
        "origin only when day 1 reads 'from …'."
    ),
    "extra_days": "A plan longer than the trip is incomplete; official silently ignores the extra days.",
    "min_nights_any_match": (
        "The minimum-nights rule uses the first matching row whenever one matches; official applies it only "
        "when exactly one row matches the (substring) name."
    ),
    "cuisine_per_meal": (
        "A meal in the origin city is skipped for the cuisine check on its own; official's 'continue' skips "
        "the rest of that day's meals too."
    ),
    "crash_is_failure": (
        "Where the official evaluator raises on a plan (an unreadable 'from …' city, a 'flight number' "
        "without the exact 'Flight Number: ' prefix, an accommodation on a day whose city is empty), the "
        "check fails with the reason; official mode reports the plan as not scorable, naming the check "
        "that raises."
    ),
    "all_listings": (
        "Every accommodation listing of the world is in the sandbox; official loads the table with "
        "pandas dropna(), so listings with any missing field (e.g. no house rules) do not exist."
    ),
}
"""Rule name → what strict mode does and what the official evaluator does instead."""

MODE_RULES: dict[str, frozenset[str]] = {
    "official": frozenset(),
    "strict": frozenset(STRICT_RULES),
}
"""The strict rules each mode applies."""

PLACEHOLDER_CITY = "You don't need to fill in the information for this or later days."
"""The official placeholder ``current_city`` of unused days (does not count as a day)."""

PASS = CheckResult(True, None)
NOT_APPLICABLE = CheckResult(None, None)

MEALS: tuple[str, ...] = ("breakfast", "lunch", "dinner")
_EMPTY = ("", "-")
_FLIGHT_NUMBER = re.compile(r"flight number:\s*([^,]*)", re.IGNORECASE)
_ROOM_TYPES = {"shared room": "Shared room", "private room": "Private room", "entire room": "Entire home/apt"}

Split = tuple[str, str]
"""``(name, city)`` of a ``"Name, City"`` entry."""


class OfficialError(Exception):
    """The official evaluator raises on this plan, in check ``check``: the plan has no official verdict.

    Attributes:
        check: the official check (commonsense or hard key) that raises.

    """

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"the official evaluator raises in {check}: {detail}")
        self.check = check


def crash(ctx: PlanContext, check: str, detail: str, reason: str) -> CheckResult:
    """Fail ``check`` with ``reason`` under ``crash_is_failure``; otherwise raise :class:`OfficialError`."""
    if "crash_is_failure" in ctx.rules:
        return CheckResult(False, reason)
    raise OfficialError(check, detail)


# ───────────────────────────── text helpers (official semantics) ─────────────────────────────


def filled(text: str) -> bool:
    """Tell whether a field holds something (officially: not empty and not ``'-'``)."""
    return text not in _EMPTY


def normalise(text: str) -> str:
    """Collapse runs of whitespace and strip (strict name comparison)."""
    return " ".join(text.split())


def before_paren(text: str) -> str:
    """Cut a parenthesised suffix: ``'Dallas(Texas)'`` → ``'Dallas'`` (official semantics, newline-aware).

    >>> before_paren("Dallas(Texas)"), before_paren("Dallas (TX"), before_paren("Dallas")
    ('Dallas', 'Dallas (TX', 'Dallas')
    """
    cut = text.find("(")
    if cut < 0 or "\n" in text[:cut] or text.find(")", cut + 1) < 0:
        return text
    return text[:cut]


def from_to(text: str) -> tuple[str, str] | None:
    r"""``'from A to B, …'`` → ``('A', 'B')`` (raw, parentheses kept); None when the pattern does not match.

    Exactly the groups of the official ``re.search(r"from\s+(.+?)\s+to\s+([^,]+)", text)``, found in
    linear time (the regex backtracks cubically on long runs of spaces). The match starts at the first
    ``from`` that can start one; ``A`` is the shortest newline-free text (preferring the latest start inside
    the whitespace after ``from``) that is followed by whitespace, ``to`` and whitespace; ``B`` runs to the
    next comma.

    >>> from_to("Flight Number: F1, from St. Petersburg to Rockford, Departure Time: 15:40")
    ('St. Petersburg', 'Rockford')

    Raises:
        TypeError: when ``text`` is not a string (as the official ``re.search`` does).

    """
    if not isinstance(text, str):
        raise TypeError(f"expected string, got {type(text).__name__}")
    start = text.find("from")
    if start < 0:
        return None
    scan = _ToScanner(text)
    size = len(text)
    while start >= 0:
        first = start + 4
        if first < size and text[first].isspace():
            last = _WS.match(text, first).end()  # \s+ greedy: group 1 starts at `last` first
            if last < size:
                to = scan.first_valid(last + 2)
                if to is not None and scan.next_newline(last) >= to[1]:
                    return text[last : to[1]], scan.group2(to)
            # backtracking \s+ by one leaves group 1 one whitespace character, ended by a `to` at `last`
            here = scan.valid(last) if last + 2 <= size else None
            if here is not None:
                for begin in range(last - 2, first, -1):
                    if text[begin] != "\n":
                        return text[begin], scan.group2(here)
        start = text.find("from", start + 1)
    return None


_WS = re.compile(r"\s*")
"""Whitespace run (linear: a single greedy class)."""


class _ToScanner:
    r"""Where ``\s+to\s+([^,]+)`` can match in one text; every scan moves forward only (linear overall)."""

    __slots__ = ("_found", "_newline", "_scanned", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._found: tuple[int, int, int] | None = None
        self._scanned = 0
        self._newline = -1

    def valid(self, at: int) -> tuple[int, int, int] | None:
        """Return ``(at, run, group)`` when a ``to`` at ``at`` can end the pattern, else None.

        ``run`` starts the whitespace before the ``to``; ``group`` is where group 2 starts.
        """
        text = self.text
        after = at + 2
        if not (text.startswith("to", at) and at > 0 and text[at - 1].isspace()):
            return None
        if after >= len(text) or not text[after].isspace():
            return None
        end = _WS.match(text, after).end()
        if end < len(text) and text[end] != ",":
            group = end
        elif end - after >= 2:
            group = end - 1
        else:
            return None
        run = at - 1
        while run > 0 and text[run - 1].isspace():
            run -= 1
        return at, run, group

    def first_valid(self, start: int) -> tuple[int, int, int] | None:
        """Return the first valid ``to`` at or after ``start`` (``start`` never decreases between calls)."""
        if self._found is not None and self._found[0] >= start:
            return self._found
        at = self.text.find("to", max(start, self._scanned))
        while at >= 0:
            found = self.valid(at)
            if found is not None:
                self._found, self._scanned = found, at
                return found
            at = self.text.find("to", at + 1)
        self._found, self._scanned = None, len(self.text)
        return None

    def next_newline(self, start: int) -> int:
        """Return the first newline at or after ``start`` (``len`` when none; ``start`` never decreases)."""
        if self._newline < start:
            found = self.text.find("\n", start)
            self._newline = len(self.text) if found < 0 else found
        return self._newline

    def group2(self, to: tuple[int, int, int]) -> str:
        """Return group 2 of the match ending at ``to``: up to the next comma."""
        comma = self.text.find(",", to[2])
        return self.text[to[2] : len(self.text) if comma < 0 else comma]


def split_name_city(text: str) -> Split | None:
    """Split ``'Name, City'`` on the last comma (official semantics); None when impossible.

    >>> split_name_city("Pizza, Pasta & More, New York(NY)")
    ('Pizza, Pasta & More', 'New York')
    >>> split_name_city("Coco Bambu") is None
    True
    """
    cut = text.rfind(",")
    if cut < 0 or cut == len(text) - 1:
        return None
    head = text[:cut]
    name = head[head.rfind("\n") + 1 :].strip()
    city = before_paren(text[cut + 1 :].strip()).strip()
    return name, city


def official_kind(text: str) -> str | None:
    """Classify transport officially: taxi, then self-driving, then flight (case-insensitive), else None."""
    lower = text.lower()
    if "taxi" in lower:
        return "taxi"
    if "self-driving" in lower:
        return "self-driving"
    if "flight" in lower:
        return "flight"
    return None


def is_valid_city_sequence(cities: Sequence[str]) -> bool:
    """Apply the official route rule: ≥3 entries; a city recurs only first/last; no single interior entry."""
    if len(cities) < 3:
        return False
    last = len(cities) - 1
    seen: set[str] = set()
    start = 0
    while start < len(cities):
        city = cities[start]
        if city in seen and start not in (0, last):
            return False
        end = start
        while end < len(cities) and cities[end] == city:
            end += 1
        if end - start == 1 and 0 < end - 1 < last:
            return False
        seen.add(city)
        start = end
    return True


# ───────────────────────────── the world index ─────────────────────────────


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


def _text_value(value: Any) -> bool:
    return isinstance(value, str) and value != "" and value.lower() != "nan"


def official_listing(row: Any) -> bool:
    """Whether an accommodation row survives the official loader's ``dropna()`` (no missing field)."""
    return (
        _text_value(row.name)
        and _text_value(row.room_type)
        and _text_value(row.house_rules)
        and _number(row.price)
        and _number(row.minimum_nights)
        and _number(row.maximum_occupancy)
        and _number(row.review_rate)
    )


class WorldIndex:
    """Name lookups over one World for one rule set, built lazily per city and memoised per query string.

    ``exact_names``: one dict ``normalised name → rows`` per (table, city). Otherwise (official substring
    semantics) a lookup scans only the few rows of that city once; the answer is memoised, so repeated names
    (the common case across rollouts) cost one dict hit.
    """

    MEMO_LIMIT = 200_000

    def __init__(self, world: Any, rules: frozenset[str]) -> None:
        self.world = world
        self.exact = "exact_names" in rules
        self.all_listings = "all_listings" in rules
        self.state_of: dict[str, str] = {}
        for city in world.cities:
            state = world.state_of(city)
            if state is not None:
                self.state_of[city] = state
        self._rows: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._by_name: dict[tuple[str, str], dict[str, tuple[Any, ...]]] = {}
        self._memo: dict[tuple[str, str, str], tuple[Any, ...]] = {}
        self._routes: dict[tuple[str, str, str], int | None] = {}

    def clear_memo(self) -> None:
        """Forget memoised lookups (the per-city rows and name dicts stay)."""
        self._memo.clear()
        self._routes.clear()

    def rows(self, table: str, city: str) -> tuple[Any, ...]:
        """Rows of ``table`` (restaurant | attraction | accommodation) in ``city``, in database order."""
        key = (table, city)
        rows = self._rows.get(key)
        if rows is None:
            if table == "restaurant":
                rows = tuple(self.world.restaurants(city))
            elif table == "attraction":
                rows = tuple(self.world.attractions(city))
            else:
                rows = tuple(self.world.accommodations(city))
                if not self.all_listings:
                    rows = tuple(r for r in rows if official_listing(r))
            self._rows[key] = rows
        return rows

    def match(self, table: str, split: Split | None) -> tuple[Any, ...]:
        """Rows whose name matches ``split = (name, city)`` (exact or substring per the rule set)."""
        if split is None:
            return ()
        name, city = split
        key = (table, name, city)
        found = self._memo.get(key)
        if found is not None:
            return found
        if self.exact:
            found = self._name_dict(table, city).get(normalise(name), ())
        else:
            found = tuple(r for r in self.rows(table, city) if name in r.name)
        if len(self._memo) >= self.MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = found
        return found

    def _name_dict(self, table: str, city: str) -> dict[str, tuple[Any, ...]]:
        key = (table, city)
        names = self._by_name.get(key)
        if names is None:
            grouped: dict[str, list[Any]] = {}
            for row in self.rows(table, city):
                grouped.setdefault(normalise(row.name), []).append(row)
            names = {name: tuple(rows) for name, rows in grouped.items()}
            self._by_name[key] = names
        return names

    def route_cost(self, origin: str, dest: str, kind: str) -> int | None:
        """Return the per-vehicle cost of a self-driving/taxi route (official semantics); None if invalid."""
        key = (origin, dest, kind)
        if key in self._routes:
            return self._routes[key]
        cost: int | None = None
        route = self.world.distance(before_paren(origin), before_paren(dest))
        if route is not None and route.duration and route.distance and _number(route.km):
            cost = route.cost("driving" if kind == "self-driving" else "taxi")
        if len(self._routes) >= self.MEMO_LIMIT:
            self._routes.clear()
        self._routes[key] = cost
        return cost


# ───────────────────────────── the parsed plan ─────────────────────────────


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


# ───────────────────────────── commonsense checks ─────────────────────────────


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
    for position, city in enumerate(cities):
        state = state_of.get(city)
        if state is None:
            return CheckResult(False, f"{city} is not a valid city.")
        if 0 < position < last and ctx.query.days > 3 and state != ctx.query.dest:
            return CheckResult(False, f"{city} is not in {ctx.query.dest}.")
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


def _flight_number(text: str, rules: frozenset[str]) -> str | None:
    """Extract the flight number; official needs the exact prefix ``'Flight Number: '``."""
    if "transport_by_kind" in rules:
        match = _FLIGHT_NUMBER.search(text)
        return match.group(1).strip() if match else None
    parts = text.split("Flight Number: ")
    return parts[1].split(",")[0] if len(parts) > 1 else None


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


def _check_flight(ctx: PlanContext, day: Day) -> str | None:
    """Sandbox failure reason of a flight day, or None."""
    number = day.index + 1
    if day.leg is None:
        reason = f"The transportation {day.transport} in day {number} can not be parsed."
        return crash(ctx, "is_valid_information_in_sandbox", f"ValueError: {reason[:200]}", reason).reason
    code = _flight_number(day.transport, ctx.rules)
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
        raw = day.raw
        city, number = raw.current_city, day.index + 1
        if ("from " in city or "to " in city) and not filled(raw.transportation):
            return CheckResult(False, f"No transportation in day {number} is not allowed.")
        if "from " not in city and " to " not in city and not filled(raw.attraction):
            return CheckResult(False, f"No attaction in day {number} is not allowed.")
        if day.index != query.days - 1 and not filled(raw.accommodation):
            return CheckResult(False, f"No accommodation in day {number} is not allowed.")
        if "from " not in city and not all(filled(getattr(raw, slot)) for slot in MEALS):
            return CheckResult(False, f"No meal in day {number} is not allowed.")
        total += (raw.days != 0) + filled(city) + filled(raw.transportation) + filled(raw.breakfast)
        total += filled(raw.attraction) + filled(raw.lunch) + filled(raw.dinner) + filled(raw.accommodation)
    if total / max(1, 6 * query.days) < 0.5:
        return CheckResult(False, "The absent information is more than 50%.")
    return PASS


# ───────────────────────────── hard checks ─────────────────────────────


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
        code = _flight_number(day.transport, ctx.rules)
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
        if wanted == "not shared room":
            bad = row.room_type == "Shared room"
        elif wanted in _ROOM_TYPES:
            bad = row.room_type != _ROOM_TYPES[wanted]
        else:
            bad = False
        if bad:
            return CheckResult(False, f"The room type should be {wanted} (day {number}: {row.room_type}).")
    return PASS


def check_cuisine(ctx: PlanContext) -> CheckResult:
    """``valid_cuisine``: every requested cuisine is served by some meal outside the origin city."""
    wanted = ctx.query.local_constraint.cuisine
    if not wanted:
        return NOT_APPLICABLE
    per_meal = "cuisine_per_meal" in ctx.rules
    org = ctx.query.org
    served: set[str] = set()
    for day in ctx.days:
        for _slot, _text, split in day.meals:
            if split is not None and split[1] == org:
                if per_meal:
                    continue
                break  # official: `continue` of the day loop skips the rest of that day's meals
            rows = ctx.index.match("restaurant", split)
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


Check = Callable[[PlanContext], CheckResult]

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

HARD_CHECKS: dict[str, Check] = {
    "valid_cost": check_cost,
    "valid_room_rule": check_room_rule,
    "valid_cuisine": check_cuisine,
    "valid_room_type": check_room_type,
    "valid_transportation": check_transportation_constraint,
}
"""Official hard key → check (order of :data:`star_lib.types.HARD_KEYS`)."""
