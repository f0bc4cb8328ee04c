"""The rules that set ``official`` and ``strict`` mode apart, and the verdicts every check shares.

:data:`STRICT_RULES` is the complete list of differences between the modes: each place where they differ
tests ``RULE in ctx.rules`` and nowhere else. Where the official evaluator *raises* (a ``"from …"`` city
that the pattern cannot read, a ``"flight number"`` without the exact ``"Flight Number: "`` prefix, an
accommodation on a day whose city is empty), ``official`` mode raises :class:`OfficialError` naming the
check, and the evaluator reports the plan as not scorable; ``strict`` mode (rule ``crash_is_failure``)
fails that check and says why.
"""

from __future__ import annotations

from star_lib.types import CheckResult

VERDICTS_VERSION = 2
"""Bumped whenever a change to the checks alters a verdict on some plan, in either mode (2: the strict rules
``dest_city``, ``named_fields`` and ``hard_needs_route``). The experiment stages that score plans put it in
their cache key, so a cached output scored by older checks is rebuilt instead of reused."""

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
    "dest_city": (
        "A trip of at most 3 days must visit the query's dest city (or, when dest is a state, cities in it); "
        "official checks the destination only when days > 3, so a 3-day plan to any other city passes."
    ),
    "hard_needs_route": (
        "The hard checks run only when is_reasonable_visiting_city passes too (the plan goes where the "
        "query asks, in a closed loop); official runs them whenever is_not_absent and the sandbox pass, so "
        "a plan to the wrong state earns every hard check (MACRO 0.5, SUM 0.575)."
    ),
    "named_fields": (
        "is_not_absent counts a field as filled only when it names something in the database: every city "
        "of current_city (which every day needs), a restaurant for a meal, at least one attraction, a "
        "listing for the accommodation, a flight on that route or a route with a cost for the "
        "transportation; official counts any text but '' and '-', so placeholders ('N/A', 'TBD, City') "
        "complete a plan."
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


class OfficialError(Exception):
    """The official evaluator raises on this plan, in check ``check``: the plan has no official verdict.

    Attributes:
        check: the official check (commonsense or hard key) that raises.

    """

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"the official evaluator raises in {check}: {detail}")
        self.check = check
