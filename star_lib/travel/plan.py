"""Parse submitted plans into typed :class:`~star_lib.types.DayPlan` tuples (spec §4).

Accepted payloads:

* the ``<answer>`` payload: a JSON string holding a list of day objects with the official keys
  (a Python-literal string is accepted too, parsed with :func:`ast.literal_eval`, never ``eval``);
* the same list already decoded (``list`` of ``dict`` or of :class:`DayPlan`);
* the official submission record ``{"idx": …, "query": …, "plan": [...]}`` (``plan`` may itself be a string);
* the train split's ``annotated_plan`` literal ``[query_dict, [day, day, ...]]``.

The official tooling pads day lists with empty objects ``{}`` up to seven days; trailing empty objects are
dropped in the submission and ``annotated_plan`` forms only. Everything else is validated strictly and a
:class:`PlanParseError` says which day, which key and what was wrong. Surrounding whitespace of keys and
values is tolerated (stripped). :func:`parse_plan_keys` reports days that lack keys instead of raising
(the strict evaluator fails their ``is_not_absent``); :func:`decode_plan` returns the plan value
*unvalidated*, as the official evaluator reads it (``official`` mode).

>>> plan = parse_plan('[{"days": 1, "current_city": "from A to B", "transportation": "-", "breakfast": "-",'
...                   ' "attraction": "-", "lunch": "-", "dinner": "-", "accommodation": "-"}]')
>>> plan[0].current_city
'from A to B'
>>> parse_plan("[]")
Traceback (most recent call last):
...
star_lib.travel.plan.PlanParseError: the plan is empty: give one object per day of the trip
"""

from __future__ import annotations

import ast
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from star_lib.io import DuplicateKeyError, loads_strict
from star_lib.types import PLAN_KEYS, DayPlan

MAX_PAYLOAD_CHARS = 200_000
"""Longer payloads are rejected before decoding (a 7-day plan is ~3 k characters)."""

_TEXT_KEYS: tuple[str, ...] = PLAN_KEYS[1:]
_MEALS: tuple[str, ...] = ("breakfast", "lunch", "dinner")
_REQUIRED = frozenset(PLAN_KEYS)


class PlanParseError(ValueError):
    """A plan payload that cannot be turned into day plans.

    Attributes:
        day: 1-based day the problem is in, or None when it concerns the whole payload.
        key: the offending key, or None.

    """

    def __init__(self, message: str, *, day: int | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.day = day
        self.key = key


def parse_plan(payload: str | Sequence[Any] | dict[str, Any], days: int | None = None) -> tuple[DayPlan, ...]:
    """Turn a plan payload into typed day plans (strict: a day lacking a key is an error too).

    Args:
        payload: JSON/literal string, list of day dicts (or ``DayPlan``), submission record, or
            ``annotated_plan`` literal.
        days: the trip length when known; a plan with more days than this is an error.

    Returns:
        One :class:`DayPlan` per day, in order.

    Raises:
        PlanParseError: naming the day and key at fault and what to change.

    """
    plan, missing = parse_plan_keys(payload, days)
    if missing:
        raise missing[0]
    return plan


def parse_plan_keys(
    payload: str | Sequence[Any] | dict[str, Any], days: int | None = None
) -> tuple[tuple[DayPlan, ...], tuple[PlanParseError, ...]]:
    """Parse like :func:`parse_plan`, but report days that lack keys instead of raising.

    A lacking text key reads as ``'-'`` and a lacking ``days`` as the day's position; each such day gives
    one :class:`PlanParseError` (naming the day and the keys) in the second element. The strict evaluator
    turns those into a failed ``is_not_absent`` (see :data:`star_lib.travel.checks.STRICT_RULES`).

    Raises:
        PlanParseError: for everything else :func:`parse_plan` refuses.

    >>> plan, missing = parse_plan_keys('[{"days": 1, "current_city": "A"}]')
    >>> plan[0].breakfast, missing[0].key
    ('-', 'transportation')

    """
    items = _day_items(payload)
    if not items:
        raise PlanParseError("the plan is empty: give one object per day of the trip")
    if days is not None and len(items) > days:
        raise PlanParseError(
            f"the plan has {len(items)} days but the trip has {days}: remove the days after day {days}",
            day=days + 1,
        )
    plan, missing = [], []
    for position, item in enumerate(items, start=1):
        day, lacking = _parse_day(item, position)
        plan.append(day)
        if lacking is not None:
            missing.append(lacking)
    return tuple(plan), tuple(missing)


def decode_plan(payload: Any) -> Any:
    """Return the plan value the official ``eval.py`` hands to its checks, without validating it.

    A submission record gives its ``plan`` (``record['plan']``), the ``annotated_plan`` form its day list,
    anything else is the plan itself. A string (the record line or its ``plan``) is decoded as JSON, then as
    a Python literal (never ``eval``): the official ``eval.py`` ``eval()``s a string record, and our rollouts
    store the plan as JSON text.

    Raises:
        PlanParseError: for a string that is neither JSON nor a Python literal (``key='plan'`` when it is the
            record's ``plan`` field).
        KeyError: for a record (a dict) without ``plan``, as the official ``eval.py`` raises.

    >>> decode_plan('{"idx": 1, "query": "q", "plan": [{"day": 1}]}')
    [{'day': 1}]

    """
    if isinstance(payload, str):
        payload = _decode(payload, "plan payload")
    if isinstance(payload, dict):
        inner = payload["plan"]
        if not (isinstance(inner, str) and inner.strip()):
            return inner
        try:
            return _decode(inner, "'plan' field")
        except PlanParseError as exc:
            raise PlanParseError(str(exc), key="plan") from None
    if isinstance(payload, (list, tuple)) and _is_annotated(payload):
        return list(payload[1])
    return payload


def plan_to_json(plan: Sequence[DayPlan]) -> str:
    """Serialise a plan as the ``<answer>`` JSON payload (inverse of :func:`parse_plan`).

    >>> plan_to_json([DayPlan(days=1, current_city="Rockford")])[:40]
    '[{"days": 1, "current_city": "Rockford",'
    """
    return json.dumps([day.to_dict() for day in plan], ensure_ascii=False)


# ───────────────────────────── payload forms ─────────────────────────────


def _decode(text: str, what: str, unique: bool = False) -> Any:
    """JSON first, then a Python literal; never ``eval``.

    ``unique``: an object naming a key twice is an error; without it the last value wins, as
    ``json.loads`` does (the official reading).
    """
    text = text.strip()
    if not text:
        raise PlanParseError(f"the {what} is an empty string: expected a JSON list of day objects")
    if len(text) > MAX_PAYLOAD_CHARS:
        raise PlanParseError(f"the {what} has {len(text)} characters (limit {MAX_PAYLOAD_CHARS})")
    try:
        return loads_strict(text) if unique else json.loads(text)
    except DuplicateKeyError as exc:
        raise PlanParseError(f"the {what} repeats a key ({exc}): give each key of a day once") from None
    except (ValueError, RecursionError):
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in model text are not our warnings
            tree = ast.parse(text, mode="eval")
            if unique:
                _refuse_repeated_keys(tree, what)
            return ast.literal_eval(tree)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        if isinstance(exc, PlanParseError):
            raise
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PlanParseError(f"the {what} is neither JSON nor a Python literal ({detail})") from None


def _refuse_repeated_keys(tree: ast.AST, what: str) -> None:
    """Raise :class:`PlanParseError` when a dict literal in ``tree`` names one constant key twice."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            seen: set[Any] = set()
            for key in node.keys:
                if isinstance(key, ast.Constant):
                    if key.value in seen:
                        detail = f"repeats the key {key.value!r}: give each key of a day once"
                        raise PlanParseError(f"the {what} {detail}")
                    seen.add(key.value)


def _day_items(payload: Any) -> list[Any]:
    """Return the raw day items inside any accepted payload form."""
    if isinstance(payload, str):
        payload = _decode(payload, "plan payload", unique=True)
    if isinstance(payload, dict):
        if "plan" not in payload:
            keys = sorted(map(str, payload))[:8]
            raise PlanParseError(
                f"expected a list of day objects or a submission record with a 'plan' key; got an object "
                f"with keys {keys}"
            )
        inner = payload["plan"]
        if isinstance(inner, str):
            inner = _decode(inner, "'plan' field", unique=True)
        if inner is None:
            return []
        return _drop_padding(_as_list(inner, "'plan' field"))
    if isinstance(payload, (list, tuple)):
        if _is_annotated(payload):
            return _drop_padding(list(payload[1]))
        return list(payload)
    raise PlanParseError(f"expected a list of day objects, got {type(payload).__name__}")


def _is_annotated(payload: Sequence[Any]) -> bool:
    """Tell whether a payload has the ``annotated_plan`` shape ``[query_dict, [day, ...]]``."""
    return (
        len(payload) == 2
        and isinstance(payload[0], dict)
        and "org" in payload[0]
        and isinstance(payload[1], (list, tuple))
    )


def _as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise PlanParseError(f"the {what} must be a list of day objects, got {type(value).__name__}")
    return list(value)


def _drop_padding(items: list[Any]) -> list[Any]:
    """Drop the trailing ``{}`` the official tooling pads day lists with."""
    while items and isinstance(items[-1], dict) and not items[-1]:
        items.pop()
    return items


# ───────────────────────────── one day ─────────────────────────────


def _parse_day(item: Any, position: int) -> tuple[DayPlan, PlanParseError | None]:
    """Validate one day object (``position``: its 1-based place); also the error of its lacking keys."""
    if isinstance(item, DayPlan):
        item = item.to_dict()
    if not isinstance(item, dict):
        raise PlanParseError(
            f"day {position} must be an object with keys {list(PLAN_KEYS)}, got {type(item).__name__}",
            day=position,
        )
    fields: dict[str, Any] = {}
    for raw_key, value in item.items():
        key = raw_key.strip() if isinstance(raw_key, str) else raw_key
        if key not in _REQUIRED:
            raise PlanParseError(
                f"day {position} has unknown key {raw_key!r}: allowed keys are {list(PLAN_KEYS)}",
                day=position,
                key=str(raw_key),
            )
        if key in fields:
            raise PlanParseError(f"day {position} repeats key {key!r}", day=position, key=key)
        fields[key] = value
    missing = [k for k in PLAN_KEYS if k not in fields]
    lacking = None
    if missing:
        lacking = PlanParseError(
            f"day {position} lacks key(s) {missing}: every day needs {list(PLAN_KEYS)} ('-' when empty)",
            day=position,
            key=missing[0],
        )
    number = _day_number(fields["days"], position) if "days" in fields else position
    texts = {key: _text(fields[key], position, key) for key in _TEXT_KEYS if key in fields}
    return DayPlan(days=number, **{"current_city": "-", **texts}), lacking


def _day_number(value: Any, position: int) -> int:
    """Read the ``days`` field: an integer (or digit string) equal to the day's position."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        number = int(value.strip())
    if number is None:
        raise PlanParseError(
            f"day {position} has days={value!r}: it must be the integer {position}", day=position, key="days"
        )
    if number != position:
        raise PlanParseError(
            f"day {position} has days={number}: days must be numbered 1, 2, … in order (expected {position})",
            day=position,
            key="days",
        )
    return number


def _text(value: Any, position: int, key: str) -> str:
    """Read a text field, stripped; ``'-'`` marks an empty field."""
    if not isinstance(value, str):
        raise PlanParseError(
            f"day {position} {key!r} must be a string ('-' when empty), got {type(value).__name__}",
            day=position,
            key=key,
        )
    return value.strip()


# ───────────────────────────── mutations (tests, benchmarks, negative examples) ─────────────────────────────

MUTATIONS: tuple[str, ...] = (
    "meal_other_city",
    "repeat_meal",
    "repeat_attraction",
    "drop_meal",
    "bad_flight_number",
    "driving_word",
    "mixed_self_driving",
    "partial_hotel_name",
    "other_hotel",
    "attraction_no_semicolon",
    "extra_spaces",
    "drop_day",
    "extra_day",
    "other_current_city",
    "lowercase_flight",
    "garbage_name",
    "empty_transport",
    "swap_days",
)
"""Names of the random plan edits :func:`mutate_plan` draws from (each usually breaks one check)."""


def mutate_plan(
    plan: Sequence[DayPlan], rng: Any, world: Any = None, kind: str | None = None
) -> tuple[DayPlan, ...]:
    """Return a randomly edited copy of a plan: one edit from :data:`MUTATIONS` (or ``kind``).

    Used to build evaluator benchmarks, fuzz inputs and negative examples. ``rng`` is a ``random.Random``;
    ``world`` (optional) supplies real names from other cities. An edit that does not apply to the plan
    (no filled meal, no flight, …) leaves it unchanged.

    >>> import random
    >>> day = DayPlan(1, "from A to B", "Flight Number: F1, from A to B", dinner="X, B", accommodation="H, B")
    >>> len(mutate_plan([day], random.Random(0), kind="extra_day"))
    2
    """
    days = list(plan)
    if not days:
        return ()
    kind = kind or rng.choice(MUTATIONS)
    i = rng.randrange(len(days))  # drawn for every edit, so each kind sees the same random stream
    edit = _EDITS.get(kind)
    if edit is not None:
        edit(days, i, rng, world, kind)
    return tuple(days)


def _filled_meals(days: list[DayPlan]) -> list[tuple[int, str]]:
    """``(day position, slot)`` of every filled meal, in plan order."""
    return [(j, s) for j, d in enumerate(days) for s in _MEALS if getattr(d, s) not in ("", "-")]


def _edit_meal(days: list[DayPlan], i: int, rng: Any, world: Any, kind: str) -> None:
    """``meal_other_city`` | ``repeat_meal`` | ``drop_meal`` | ``extra_spaces``: edit one filled meal."""
    meals = _filled_meals(days)
    if kind == "meal_other_city" and world is not None and meals:
        j, slot = rng.choice(meals)
        city = rng.choice(world.cities)
        rows = world.restaurants(city)
        if rows:
            days[j] = replace(days[j], **{slot: f"{rng.choice(rows).name}, {city}"})
    elif kind == "repeat_meal" and len(meals) >= 2:
        (j, a), (k, b) = rng.sample(meals, 2)
        days[k] = replace(days[k], **{b: getattr(days[j], a)})
    elif kind == "drop_meal" and meals:
        j, slot = rng.choice(meals)
        days[j] = replace(days[j], **{slot: "-"})
    elif kind == "extra_spaces" and meals:
        j, slot = rng.choice(meals)
        days[j] = replace(
            days[j], **{slot: getattr(days[j], slot).replace(" ", "  ", 1).replace(",", " ,", 1)}
        )


def _edit_attraction(days: list[DayPlan], i: int, rng: Any, world: Any, kind: str) -> None:
    """``repeat_attraction`` | ``attraction_no_semicolon``: edit day ``i``'s attractions."""
    day = days[i]
    if kind == "repeat_attraction":
        spots = [a for d in days for a in d.attraction.split(";") if a.strip() and d.attraction != "-"]
        if spots:
            days[i] = replace(
                day, attraction=(day.attraction if day.attraction != "-" else "") + rng.choice(spots) + ";"
            )
    elif kind == "attraction_no_semicolon" and day.attraction not in ("", "-"):
        days[i] = replace(day, attraction=day.attraction.rstrip(";") + ";Made Up Place, Nowhere")


def _edit_transport(days: list[DayPlan], i: int, rng: Any, world: Any, kind: str) -> None:
    """Break one flight number, or rewrite one filled transportation (the other four transport edits)."""
    if kind == "bad_flight_number":
        hits = [j for j, d in enumerate(days) if "Flight Number: " in d.transportation]
        if hits:
            j = rng.choice(hits)
            days[j] = replace(
                days[j],
                transportation=days[j].transportation.replace("Flight Number: F", "Flight Number: F9", 1),
            )
        return
    moving = [j for j, d in enumerate(days) if d.transportation not in ("", "-")]
    if moving:
        j = rng.choice(moving)
        text = days[j].transportation
        pair = days[j].current_city.replace("from ", "", 1).split(" to ", 1)
        route = f"from {pair[0]} to {pair[1]}" if len(pair) == 2 else days[j].current_city
        new = {
            "driving_word": f"Driving, {route}, duration: 3 hours, distance: 300 km, cost: 15",
            "mixed_self_driving": f"Self-driving, {route}, duration: 3 hours, distance: 300 km, cost: 15",
            "empty_transport": "-",
            "lowercase_flight": text.replace("Flight", "flight"),
        }[kind]
        days[j] = replace(days[j], transportation=new)


def _edit_hotel(days: list[DayPlan], i: int, rng: Any, world: Any, kind: str) -> None:
    """``partial_hotel_name`` | ``other_hotel`` | ``garbage_name``: rename one filled accommodation."""
    hotels = [j for j, d in enumerate(days) if d.accommodation not in ("", "-")]
    if hotels:
        j = rng.choice(hotels)
        name, _, city = days[j].accommodation.rpartition(",")
        if kind == "partial_hotel_name":
            new = f"{name[: max(1, len(name) // 2)]},{city}"
        elif kind == "garbage_name":
            new = f"Hotel {rng.randrange(10**6)},{city}"
        else:
            rows = world.accommodations(before_city(city)) if world is not None else ()
            new = f"{rng.choice(rows).name},{city}" if rows else days[j].accommodation
        days[j] = replace(days[j], accommodation=new)


def _edit_days(days: list[DayPlan], i: int, rng: Any, world: Any, kind: str) -> None:
    """``drop_day`` | ``extra_day`` | ``other_current_city`` | ``swap_days``: edit the days or day ``i``."""
    day = days[i]
    if kind == "drop_day" and len(days) > 1:
        del days[i]
    elif kind == "extra_day":
        days.append(replace(days[-1], days=len(days) + 1))
    elif kind == "other_current_city" and world is not None:
        days[i] = replace(day, current_city=rng.choice(world.cities))
    elif kind == "swap_days" and len(days) > 1:
        j = rng.randrange(len(days))
        days[i], days[j] = replace(days[j], days=days[i].days), replace(days[i], days=days[j].days)


_Edit = Callable[[list[DayPlan], int, Any, Any, str], None]
_EDITS: dict[str, _Edit] = {
    **dict.fromkeys(("meal_other_city", "repeat_meal", "drop_meal", "extra_spaces"), _edit_meal),
    **dict.fromkeys(("repeat_attraction", "attraction_no_semicolon"), _edit_attraction),
    **dict.fromkeys(
        ("bad_flight_number", "driving_word", "mixed_self_driving", "empty_transport", "lowercase_flight"),
        _edit_transport,
    ),
    **dict.fromkeys(("partial_hotel_name", "other_hotel", "garbage_name"), _edit_hotel),
    **dict.fromkeys(("drop_day", "extra_day", "other_current_city", "swap_days"), _edit_days),
}
"""Each name of :data:`MUTATIONS` → the function that makes that edit in place."""


def before_city(text: str) -> str:
    """``' Dallas(Texas)'`` → ``'Dallas'`` (helper for mutations)."""
    text = text.strip()
    cut = text.find("(")
    return text[:cut].strip() if cut > 0 else text
