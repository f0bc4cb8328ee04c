"""A generator of malformed plan payloads built from real gold plans (differential and fuzz tests).

:func:`malform` applies 1-3 random edits from :data:`EDITS` to a gold day list (plain dicts, as the
official submission holds them): renamed, dropped, misspelt, padded or case-changed keys; added, dropped,
emptied, placeholder or non-object days; values swapped for numbers, ``None``, lists, dicts, ``"-"`` or
``""``; unicode and very long strings; unreadable ``from``/``to`` cities and flight numbers; whole plans that
are empty, ``None``, a dict or a string. :func:`as_payload` sometimes returns the result as JSON text (with a
duplicated key now and then) so the decoding is exercised too.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from star_lib.types import PLAN_KEYS as KEYS

TEXT_KEYS = KEYS[1:]
PLACEHOLDER = "You don't need to fill in the information for this or later days."
ODD_VALUES: tuple[Any, ...] = (None, 0, 1, 2.5, True, False, "", "-", " - ", [], {}, ["x"], {"a": 1}, "null")


def _day(days: list[Any], rng: random.Random) -> dict[str, Any] | None:
    dicts = [d for d in days if isinstance(d, dict)]
    return rng.choice(dicts) if dicts else None


def _rename(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day:
        key = rng.choice(list(day))
        new = rng.choice([key[:-1], key.upper(), key.title(), f" {key}", f"{key} ", key + "s", "day", "Day"])
        day[new] = day.pop(key)


def _rename_everywhere(days: list[Any], rng: random.Random) -> None:
    key = rng.choice(KEYS)
    new = {"days": "day"}.get(key, key.replace("_", " "))
    for day in days:
        if isinstance(day, dict) and key in day:
            day[new] = day.pop(key)


def _drop_key(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day:
        day.pop(rng.choice(list(day) or ["days"]), None)


def _extra_key(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day is not None:
        day[rng.choice(["notes", "cost", "Breakfast", "day", "extra"])] = rng.choice(["x", "-", "", 5, None])


def _swap_type(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day:
        key = rng.choice(list(day))
        value = day[key]
        day[key] = rng.choice([*ODD_VALUES, [value], {"v": value}, 7])


def _dash_all(days: list[Any], rng: random.Random) -> None:
    fill = rng.choice(["-", "", None])
    for day in days:
        if isinstance(day, dict):
            for key in TEXT_KEYS:
                if key in day and (key != "current_city" or rng.random() < 0.3):
                    day[key] = fill


def _add_day(days: list[Any], rng: random.Random) -> None:
    extra = rng.choice(
        [{}, {"days": len(days) + 1, "current_city": PLACEHOLDER}, copy.deepcopy(days[-1]) if days else {}]
    )
    days.insert(rng.randrange(len(days) + 1) if rng.random() < 0.3 else len(days), extra)


def _drop_day(days: list[Any], rng: random.Random) -> None:
    if days:
        del days[rng.randrange(len(days))]


def _odd_day(days: list[Any], rng: random.Random) -> None:
    if days:
        days[rng.randrange(len(days))] = rng.choice(["day", 5, None, [], [1, 2], {}, "breakfast"])


def _unicode(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day:
        key = rng.choice([k for k in day if isinstance(day[k], str)] or ["current_city"])
        text = day.get(key) if isinstance(day.get(key), str) else ""
        cut = rng.randrange(len(text) + 1)
        day[key] = (
            text[:cut]
            + rng.choice(["é", "\u00a0", "\u200b", "🚀", "\n", "\t", "(", ")", ",", ";"])
            + text[cut:]
        )


def _long(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day:
        key = rng.choice(list(day) or ["current_city"])
        value = day.get(key)
        day[key] = (value if isinstance(value, str) else "x") * rng.choice([20, 200]) + " " * rng.choice(
            [0, 500]
        )


def _bad_route(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day:
        day[rng.choice(["current_city", "transportation"])] = rng.choice(
            ["from Dallas", "from  to ", "from Dallas to", "Dallas to Austin", "from (A) to (B)", "to Austin"]
        )


def _flight_text(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day and isinstance(day.get("transportation"), str):
        text = day["transportation"]
        day["transportation"] = rng.choice(
            [
                text.replace("Flight Number: ", "flight number: "),
                text.replace("Flight Number: ", "Flight number "),
                "Flight Number: F0000000",
                "Flight Number: ",
                "Self-driving",
                "Taxi",
                "Flight",
                text + ", Taxi",
            ]
        )


def _repeat(days: list[Any], rng: random.Random) -> None:
    a, b = _day(days, rng), _day(days, rng)
    if a and b:
        key = rng.choice(TEXT_KEYS[2:])
        if key in a:
            b[key] = a[key]


def _renumber(days: list[Any], rng: random.Random) -> None:
    day = _day(days, rng)
    if day is not None:
        day["days"] = rng.choice(["1", 0, "-", None, 99, 1.0, "one"])


EDITS = {
    "rename_key": _rename,
    "rename_everywhere": _rename_everywhere,
    "drop_key": _drop_key,
    "extra_key": _extra_key,
    "swap_type": _swap_type,
    "dash_all": _dash_all,
    "add_day": _add_day,
    "drop_day": _drop_day,
    "odd_day": _odd_day,
    "unicode": _unicode,
    "long_string": _long,
    "bad_route": _bad_route,
    "flight_text": _flight_text,
    "repeat": _repeat,
    "renumber": _renumber,
}
"""Edit name → function editing a day list in place."""


def malform(days: list[dict[str, Any]], rng: random.Random) -> Any:
    """Return a malformed copy of a gold day list (usually a list; now and then not a list at all)."""
    roll = rng.random()
    if roll < 0.02:
        return rng.choice([[], None, {}, "", {"days": 1}, 5, "plan", [[]]])
    out: list[Any] = copy.deepcopy(days)
    for _ in range(rng.randint(1, 3)):
        EDITS[rng.choice(list(EDITS))](out, rng)
    return out


def as_payload(plan: Any, rng: random.Random, idx: int = 1) -> Any:
    """The plan as a submission record, sometimes as JSON text (and then now and then with a repeated key)."""
    record = {"idx": idx, "query": "", "plan": plan}
    if rng.random() < 0.15:
        text = json.dumps(record, ensure_ascii=rng.random() < 0.5)
        if rng.random() < 0.5 and '"breakfast": ' in text:
            text = text.replace('"breakfast": ', '"breakfast": "Dup, X", "breakfast": ', 1)
        return text
    return record
