"""The official evaluator's reading of *irregular* plans: raw day objects, as ``official`` mode scores them.

The official TravelPlanner evaluator (``evaluation/commonsense_constraint.py``, ``hard_constraint.py``,
``eval.py``) never validates a plan: it indexes the raw JSON. Keys it does not know are ignored (but count as
filled information in ``is_not_absent``), a missing key is skipped where the code asks ``key in unit`` and
raises where it does not, days after the trip's length are never read, ``None``/``0``/``[]`` are empty for
every check but are *not* ``''``/``'-'`` for the emptiness tests of ``is_not_absent``, and a non-string
value behaves as Python makes it behave (``'Dallas' in ['Dallas']`` is true; ``5 .lower()`` raises).

:func:`evaluate_irregular` reproduces that, check by check and in the official order, for any decoded plan
(a list of anything). Regular plans (every read day a dict with exactly the official keys and string texts)
go through the fast evaluator in :mod:`star_lib.travel.checks` instead, which gives the same verdicts;
:func:`is_regular` tells them apart. Where the official code raises, :class:`OfficialError` names the
check: such a plan has no official verdict.

The name/route lookups are the fast evaluator's (:class:`~star_lib.travel.checks.WorldIndex` with the
official rules: substring names, the official ``dropna()`` listings).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from star_lib.travel.checks import (
    NOT_APPLICABLE,
    PASS,
    PLACEHOLDER_CITY,
    OfficialError,
    WorldIndex,
    before_paren,
    cuisine_verdict,
    from_to,
    is_valid_city_sequence,
    official_kind,
    split_name_city,
    wrong_room_type,
)
from star_lib.types import HOUSE_RULES, PLAN_KEYS, CheckResult, QueryRecord

__all__ = ["COMMONSENSE_ORDER", "HARD_ORDER", "evaluate_irregular", "is_regular"]

_MEALS = ("breakfast", "lunch", "dinner")
_TEXT_KEYS = frozenset(PLAN_KEYS[1:])
_KEYS = frozenset(PLAN_KEYS)
_EMPTY = ("", "-")


def is_regular(plan: Any, days: int) -> bool:
    """Tell whether the fast evaluator reads ``plan`` exactly as the official code does.

    True for a non-empty list whose first ``min(days, len)`` items are dicts with exactly the official keys
    and string values for the seven text keys (``days`` may hold anything: officially it is only counted).
    """
    if not isinstance(plan, (list, tuple)) or not plan:
        return False
    for unit in plan[: max(0, days)]:
        if type(unit) is not dict or unit.keys() != _KEYS:
            return False
        for key in _TEXT_KEYS:
            if type(unit[key]) is not str:
                return False
    return True


def _name_city(text: Any) -> tuple[str, str]:
    """Official ``get_valid_name_city``: ``('-', '-')`` when the text has no ``', City'`` part."""
    if not isinstance(text, str):
        raise TypeError(f"expected string, got {type(text).__name__}")
    return split_name_city(text) or ("-", "-")


def _paren(text: Any) -> str:
    """Official ``extract_before_parenthesis`` (raises on a non-string, e.g. an unreadable ``from``)."""
    if not isinstance(text, str):
        raise TypeError(f"expected string, got {type(text).__name__}")
    return before_paren(text)


def _pair(text: Any) -> tuple[Any, Any]:
    """Official ``extract_from_to``: ``(None, None)`` when there is no ``from A to B``."""
    return from_to(text) or (None, None)


def _filled(unit: Any, key: str) -> bool:
    """Official ``key in unit and unit[key] and unit[key] != '-'``."""
    return key in unit and bool(unit[key]) and unit[key] != "-"


class _Plan:
    """One decoded plan with the query and the lookups: what every official check reads."""

    def __init__(self, query: QueryRecord, plan: Any, index: WorldIndex) -> None:
        self.query = query
        self.plan = plan
        self.index = index
        self.n = min(query.days, len(plan))

    def units(self) -> Any:
        """Yield the days the official checks read: ``tested_data[i]`` for ``i < min(days, len)``."""
        for i in range(self.n):
            yield i, self.plan[i]

    def day_cities(self, unit: Any) -> Any:
        """``final_city_list``: ``[A, B]`` of a travel day, else the city *string* (quirk #50)."""
        value = unit["current_city"]
        if "from" in value:
            first, second = _pair(value)
            return [_paren(first), _paren(second)]
        return _paren(value)

    def rows(self, table: str, text: Any) -> tuple[Any, ...]:
        """Database rows an item names (official substring match within the item's city)."""
        return self.index.match(table, _name_city(text))


# ───────────────────────────── commonsense checks (official order) ─────────────────────────────


def _reasonable_visiting_city(p: _Plan) -> CheckResult:
    cities: list[Any] = []
    for i, unit in p.units():
        value = unit["current_city"]
        if "from" in value:
            first, second = _pair(value)
            first, second = _paren(first), _paren(second)
            if i == 0 and first != p.query.org:
                return CheckResult(False, f"The first day's city should be {p.query.org}.")
            cities += [first, second]
        else:
            cities.append(_paren(value))
    if cities[0] != cities[-1]:
        return CheckResult(False, "The trip should be a closed circle.")
    if not is_valid_city_sequence(cities):
        return CheckResult(False, "The city sequence is invalid.")
    last = len(cities) - 1
    for position, city in enumerate(cities):
        state = p.index.state_of.get(city)
        if state is None:
            return CheckResult(False, f"{city} is not a valid city.")
        if position not in (0, last) and p.query.days > 3 and state != p.query.dest:
            return CheckResult(False, f"{city} is not in {p.query.dest}.")
    return PASS


def _restaurants(p: _Plan) -> CheckResult:
    seen: list[Any] = []  # a list, as officially: values need not be hashable
    for i, unit in p.units():
        for slot in _MEALS:
            if _filled(unit, slot):
                if unit[slot] in seen:
                    return CheckResult(False, f"The restaurant in day {i + 1} {slot} is repeated.")
                seen.append(unit[slot])
    return PASS


def _attractions(p: _Plan) -> CheckResult:
    seen: set[str] = set()  # officially a list; the items of str.split are strings, so a set is the same test
    for i, unit in p.units():
        if _filled(unit, "attraction"):
            for item in unit["attraction"].split(";")[:-1]:
                if item in seen:
                    return CheckResult(False, f"The attraction '{item}' in day {i + 1} is repeated.")
                seen.add(item)
    return PASS


def _accommodation(p: _Plan) -> CheckResult:
    stays: list[Any] = []
    for _i, unit in p.units():
        if "accommodation" not in unit:
            return CheckResult(False, "No Accommodation Info.")
        stays.append(unit["accommodation"])
    runs: list[list[Any]] = []
    for value in stays:
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    for value, nights in runs:
        if value not in _EMPTY:
            rows = p.rows("accommodation", value)
            if len(rows) == 1 and nights < rows[0].minimum_nights:
                return CheckResult(False, f"The accommodation {value} do not obey the minumum nights rule.")
    return PASS


def _transportation(p: _Plan) -> CheckResult:
    first = p.plan[0]["transportation"]
    if not first or first == "-":
        return CheckResult(False, "The transportation in day 1 should not be empty.")
    kinds = [official_kind(first)]  # official `transportation_match`, lower-cased
    for _i, unit in p.units():
        if _filled(unit, "transportation"):
            kinds.append(official_kind(unit["transportation"]))
    if "self-driving" in kinds and ("flight" in kinds or "taxi" in kinds):
        return CheckResult(False, "The transportation is conflicting.")
    return PASS


def _in_current_city(p: _Plan) -> CheckResult:
    for i, unit in p.units():
        cities = p.day_cities(unit)
        if _filled(unit, "transportation"):
            for city in cities:
                if city not in unit["transportation"]:
                    return CheckResult(False, f"The transportation in day {i + 1} is invalid city choice.")
        for slot in _MEALS:
            if _filled(unit, slot):
                found = [city in unit[slot] for city in cities]
                if not any(found):
                    return CheckResult(False, f"The {slot} in day {i + 1} is invalid city choice.")
        if _filled(unit, "attraction"):
            for item in unit["attraction"].split(";")[:-1]:
                if not any([city in item for city in cities]):
                    return CheckResult(False, f"The attraction in day {i + 1} is invalid city choice.")
        if _filled(unit, "accommodation") and cities[-1] not in unit["accommodation"]:
            return CheckResult(False, f"The accommodation in day {i + 1} is invalid city choice.")
    return PASS


def _sandbox_transport(p: _Plan, i: int, unit: Any) -> CheckResult | None:
    value = unit["transportation"]
    if not value or value == "-":
        return None
    origin, dest = _pair(value)
    if origin is None or dest is None:
        origin, dest = _pair(unit["current_city"])
    lower = value.lower()
    if "flight number" in lower:
        if origin is None or dest is None:
            raise ValueError(f"The transportation {value} in day {i + 1} can not be parsed.")
        origin, dest = _paren(origin), _paren(dest)
        flight = p.index.world.flight(value.split("Flight Number: ")[1].split(",")[0])
        if flight is None or flight.origin != origin or flight.dest != dest:
            return CheckResult(False, f"The flight number in day {i + 1} is invalid in the sandbox.")
    elif "self-driving" in lower or "taxi" in lower:
        if origin is None or dest is None:
            origin = dest = "-"
        kind = "self-driving" if "self-driving" in lower else "taxi"
        if p.index.route_cost(_paren(origin), _paren(dest), kind) is None:
            return CheckResult(False, f"The {kind} in day {i + 1} is invalid in the sandbox.")
    return None


def _in_sandbox(p: _Plan) -> CheckResult:
    for i, unit in p.units():
        failed = _sandbox_transport(p, i, unit)
        if failed is not None:
            return failed
        for slot in _MEALS:
            if _filled(unit, slot) and not p.rows("restaurant", unit[slot]):
                return CheckResult(False, f"The {slot} in day {i + 1} is invalid in the sandbox.")
        if _filled(unit, "attraction"):
            for item in unit["attraction"].split(";")[:-1]:
                if not p.rows("attraction", item):
                    return CheckResult(
                        False, f"The attraction {item} in day {i + 1} is invalid in the sandbox."
                    )
        if _filled(unit, "accommodation") and not p.rows("accommodation", unit["accommodation"]):
            return CheckResult(False, f"The accommodation in day {i + 1} is invalid in the sandbox.")
    return PASS


_PRESENCE = (
    ("transportation", "No Transportation Info."),
    ("breakfast", "No Breakfast Info."),
    ("lunch", "No Lunch Info."),
    ("dinner", "No Dinner Info."),
    ("attraction", "No Attraction Info."),
    ("accommodation", "No Accommodation Info."),
)


def _visiting_city_number(p: _Plan) -> bool:
    cities: set[str] = set()
    for i, unit in p.units():
        value = unit["current_city"]
        if "from" in value:
            first, second = _pair(value)
            first, second = _paren(first), _paren(second)
            if i == 0 and first != p.query.org:
                return False
            cities.update((first, second))
        else:
            cities.add(_paren(value))
    cities.discard(p.query.org)
    return len(cities) == p.query.visiting_city_number


def _not_absent(p: _Plan) -> CheckResult:
    counted = sum(1 for _i, unit in p.units() if unit != {} and unit["current_city"] != PLACEHOLDER_CITY)
    if counted != p.query.days:
        return CheckResult(False, "Invalid Days")
    if not _visiting_city_number(p):
        return CheckResult(False, "Invalid City Number")
    total = 0
    for i, unit in p.units():
        for key, message in _PRESENCE:
            if key not in unit:
                return CheckResult(False, message)
        city = unit["current_city"]
        travel = "from " in city or "to " in city
        if travel and unit["transportation"] in _EMPTY:
            return CheckResult(False, f"No transportation in day {i + 1} is not allowed.")
        if "from " not in city and " to " not in city and unit["attraction"] in _EMPTY:
            return CheckResult(False, f"No attaction in day {i + 1} is not allowed.")
        if i != p.query.days - 1 and unit["accommodation"] in _EMPTY:
            return CheckResult(False, f"No accommodation in day {i + 1} is not allowed.")
        if any(unit[slot] in _EMPTY for slot in _MEALS) and "from " not in city:
            return CheckResult(False, f"No meal in day {i + 1} is not allowed.")
        total += sum(1 for key in unit if unit[key] and unit[key] != "-")
    if total / (6 * p.query.days) < 0.5:
        return CheckResult(False, "The absent information is more than 50%.")
    return PASS


COMMONSENSE_ORDER: tuple[tuple[str, Callable[[_Plan], CheckResult]], ...] = (
    ("is_reasonable_visiting_city", _reasonable_visiting_city),
    ("is_valid_restaurants", _restaurants),
    ("is_valid_attractions", _attractions),
    ("is_valid_accommodation", _accommodation),
    ("is_valid_transportation", _transportation),
    ("is_valid_information_in_current_city", _in_current_city),
    ("is_valid_information_in_sandbox", _in_sandbox),
    ("is_not_absent", _not_absent),
)
"""The commonsense checks in the order the official ``evaluation()`` runs them."""


# ───────────────────────────── hard checks (official order) ─────────────────────────────


def _hotels(p: _Plan) -> Any:
    """``(day, first row)`` of each filled accommodation that names a database row."""
    for i, unit in p.units():
        value = unit["accommodation"]
        if value and value != "-":
            rows = p.rows("accommodation", value)
            if rows:
                yield i, rows[0]


def _cuisine(p: _Plan) -> CheckResult:
    wanted = p.query.local_constraint.cuisine
    if not wanted:
        return NOT_APPLICABLE
    return cuisine_verdict(wanted, _meal_rows_outside_origin(p))


def _meal_rows_outside_origin(p: _Plan) -> Iterator[Any]:
    """Yield the matching rows of each filled meal, each day up to its first meal in the origin city."""
    for _i, unit in p.units():
        for slot in _MEALS:
            value = unit[slot]
            if value and value != "-":
                if _name_city(value)[1] == p.query.org:
                    break  # official `continue` of the day loop: the day's later meals are skipped
                yield p.rows("restaurant", value)


def _room_rule(p: _Plan) -> CheckResult:
    rule = p.query.local_constraint.house_rule
    if rule is None:
        return NOT_APPLICABLE
    for _i, row in _hotels(p):
        if rule in HOUSE_RULES and f"No {rule}" in str(row.house_rules):
            return CheckResult(False, f"The house rule should be {rule}.")
    return PASS


def _transport_constraint(p: _Plan) -> CheckResult:
    wanted = p.query.local_constraint.transportation
    if wanted is None:
        return NOT_APPLICABLE
    for _i, unit in p.units():
        value = unit["transportation"]
        if value and value != "-":
            if (wanted == "no flight" and "Flight" in value) or (
                wanted == "no self-driving" and "Self-driving" in value
            ):
                return CheckResult(False, f"The transportation should not be {wanted}.")
    return PASS


def _room_type(p: _Plan) -> CheckResult:
    wanted = p.query.local_constraint.room_type
    if wanted is None:
        return NOT_APPLICABLE
    for _i, row in _hotels(p):
        if wrong_room_type(wanted, row.room_type):
            return CheckResult(False, f"The room type should be {wanted}.")
    return PASS


def _total_cost(p: _Plan) -> float:
    people = p.query.people_number
    total = 0.0
    for _i, unit in p.units():
        value = unit["transportation"]
        if value and value != "-":
            origin, dest = _pair(value)
            if origin is None or dest is None:
                origin, dest = _pair(unit["current_city"])
            if origin is not None and dest is not None:
                lower = value.lower()
                if "flight number" in lower:
                    flight = p.index.world.flight(value.split("Flight Number: ")[1].split(",")[0])
                    if flight is not None:
                        total += flight.price * people
                elif "self-driving" in lower or "taxi" in lower:
                    kind = "self-driving" if "self-driving" in lower else "taxi"
                    cost = p.index.route_cost(_paren(origin), _paren(dest), kind)
                    total += cost * math.ceil(people / (5 if kind == "self-driving" else 4))
        for slot in _MEALS:
            value = unit[slot]
            if value and value != "-":
                rows = p.rows("restaurant", value)
                if rows:
                    total += rows[0].average_cost * people
        value = unit["accommodation"]
        if value and value != "-":
            rows = p.rows("accommodation", value)
            if rows:
                total += rows[0].price * math.ceil(people / rows[0].maximum_occupancy)
    return total


def _cost(p: _Plan) -> CheckResult:
    cost = _total_cost(p)
    if cost <= p.query.budget:
        return PASS
    return CheckResult(False, f"The total cost {cost:g} exceeds the budget {p.query.budget}.")


HARD_ORDER: tuple[tuple[str, Callable[[_Plan], CheckResult]], ...] = (
    ("valid_cuisine", _cuisine),
    ("valid_room_rule", _room_rule),
    ("valid_transportation", _transport_constraint),
    ("valid_room_type", _room_type),
    ("valid_cost", _cost),
)
"""The hard checks in the order the official ``evaluation()`` runs them."""


def _run(name: str, check: Callable[[_Plan], CheckResult], plan: _Plan, done: dict[str, CheckResult]) -> None:
    try:
        done[name] = check(plan)
    except OfficialError:
        raise
    except Exception as exc:  # noqa: BLE001 - the official code raising here is the verdict we report
        detail = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise _Partial(name, f"{type(exc).__name__}: {detail}", done) from None


class _Partial(OfficialError):
    """An :class:`OfficialError` that also carries the verdicts computed before the raising check."""

    def __init__(self, check: str, detail: str, done: dict[str, CheckResult]) -> None:
        super().__init__(check, detail)
        self.done = dict(done)


def evaluate_irregular(
    query: QueryRecord, plan: Any, index: WorldIndex
) -> tuple[dict[str, CheckResult], dict[str, CheckResult] | None]:
    """Run the official checks on a decoded, non-empty plan, exactly as the official code reads it.

    Args:
        query: the query.
        plan: the decoded ``plan`` value of a submission record (truthy; any type).
        index: a :class:`WorldIndex` built with the official rules.

    Returns:
        ``(commonsense, hard)``; ``hard`` is None when the official rule skips it.

    Raises:
        OfficialError: where the official code raises; its ``done`` attribute (when present) holds the
            verdicts of the checks that ran before.

    """
    try:
        state = _Plan(query, plan, index)
    except Exception as exc:  # noqa: BLE001 - e.g. len() of a number
        raise _Partial("is_reasonable_visiting_city", f"{type(exc).__name__}: {exc}", {}) from None
    commonsense: dict[str, CheckResult] = {}
    for name, check in COMMONSENSE_ORDER:
        _run(name, check, state, commonsense)
    if not (commonsense["is_not_absent"].passed and commonsense["is_valid_information_in_sandbox"].passed):
        return commonsense, None
    hard: dict[str, CheckResult] = {}
    for name, check in HARD_ORDER:
        _run(name, check, state, hard)
    return commonsense, hard
