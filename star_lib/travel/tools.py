"""The six TravelPlanner tools over a :class:`~star_lib.travel.world.World`, as one registry.

``ToolRegistry(world).call(name, arguments)`` returns an :class:`~star_lib.types.Observation` and never
raises: an unknown tool, arguments that are not a JSON object, a missing, extra or ill-typed argument,
an unknown city or state, or a malformed date each give a one-sentence error observation
(``ok=False``) that says what to change. A search with no result says so and asks the agent to
rethink (``error="no_result"``). Argument names follow the STAR prompt (spec §3).

Each call is a hash lookup; the city-keyed observations are rendered once and cached (the world is
immutable). Result tables are one header line and one row per item, fields separated by ``" | "``;
the name comes first and may itself contain ``" | "`` (a few official names do), the other fields
never do — so split a row from the right. Line breaks inside a name are shown as spaces.

Example:
    >>> tools = ToolRegistry(World.synthetic(seed=0, scale="tiny"))  # doctest: +SKIP
    >>> print(tools.call("SearchCity", {"state": tools.world.states[0]}).text)  # doctest: +SKIP

"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from star_lib.io import DuplicateKeyError, loads_strict
from star_lib.travel.world import FlightRecord, World
from star_lib.types import Observation

__all__ = ["TOOL_NAMES", "TOOL_SPECS", "ToolRegistry", "ToolSpec"]

TOOL_NAMES: tuple[str, ...] = (
    "SearchFlight",
    "GoogleDistanceMatrix",
    "SearchAccommodation",
    "SearchRestaurant",
    "SearchAttraction",
    "SearchCity",
)

DRIVING_MODES: dict[str, str] = {"driving": "self-driving", "self-driving": "self-driving", "taxi": "taxi"}
"""Accepted ``mode`` values → the label used in the observation (as in the reference information)."""

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MAX_REPR = 60
_BREAKS = re.compile(r"\r\n|[\r\n\t]")


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, what it does, and its (all required, all string) arguments."""

    name: str
    """Tool name the agent calls."""
    description: str
    """One-sentence description for the system prompt."""
    arguments: tuple[tuple[str, str], ...]
    """``(argument name, description)`` pairs, in prompt order."""
    enums: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Arguments restricted to a fixed set of values."""

    def schema(self) -> dict[str, Any]:
        """Return the OpenAI function schema of this tool."""
        enums = dict(self.enums)
        properties: dict[str, Any] = {}
        for arg, text in self.arguments:
            properties[arg] = {"type": "string", "description": text}
            if arg in enums:
                properties[arg]["enum"] = list(enums[arg])
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": [arg for arg, _ in self.arguments],
                    "additionalProperties": False,
                },
            },
        }


TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "SearchFlight",
            "Search the flights from one city to another on a date; lists number, price per person, "
            "departure and arrival times, duration and distance of each flight.",
            (
                ("departure", "Departure city, spelled as in the database (e.g. 'St. Petersburg')."),
                ("destination", "Destination city."),
                ("date", "Travel date, YYYY-MM-DD."),
            ),
        ),
        ToolSpec(
            "GoogleDistanceMatrix",
            "Estimate the duration, distance and cost of driving yourself (per car, up to 5 people) "
            "or taking a taxi (per taxi, up to 4 people) between two cities.",
            (
                ("departure", "Departure city."),
                ("destination", "Destination city."),
                ("mode", "'driving' (self-driving) or 'taxi'."),
            ),
            (("mode", tuple(DRIVING_MODES)),),
        ),
        ToolSpec(
            "SearchAccommodation",
            "List the accommodations of a city with nightly price, room type, house rules, minimum nights, "
            "maximum occupancy and rating.",
            (("city", "City name, spelled as in the database."),),
        ),
        ToolSpec(
            "SearchRestaurant",
            "List the restaurants of a city with cuisines, average cost per person and rating.",
            (("city", "City name, spelled as in the database."),),
        ),
        ToolSpec(
            "SearchAttraction",
            "List the attractions of a city with their addresses.",
            (("city", "City name, spelled as in the database."),),
        ),
        ToolSpec(
            "SearchCity",
            "List the cities of a state that can be visited.",
            (("state", "State name, spelled as in the database."),),
        ),
    )
}


def _short(value: Any) -> str:
    """Return a bounded repr of an untrusted value for error messages."""
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _one_line(text: str) -> str:
    """Keep a table row on one line: a few official names hold line breaks or tabs."""
    return _BREAKS.sub(" ", text) if "\n" in text or "\r" in text or "\t" in text else text


def _num(value: float) -> str:
    """Render 131.0 as '131' and 4.5 as '4.5'."""
    return str(int(value)) if float(value).is_integer() else str(value)


def _error(text: str, kind: str = "bad_arguments") -> Observation:
    return Observation(text=text, ok=False, error=kind)


def _no_result(text: str) -> Observation:
    return Observation(text=text, ok=False, error="no_result")


def _flight_lines(records: list[FlightRecord]) -> list[str]:
    """Render flight rows (one comprehension: this is the hot path of the largest table)."""
    return [
        f"{number} | {price} | {dep} | {arr} | {elapsed} | {int(miles) if miles.is_integer() else miles}"
        for number, price, dep, arr, elapsed, _, _, _, miles in records
    ]


class ToolRegistry:
    """The six TravelPlanner tools over one world; implements :class:`~star_lib.types.Tools`."""

    def __init__(self, world: World, *, prerender: bool = True) -> None:
        """Bind the tools to ``world``.

        Args:
            world: the database the tools answer from.
            prerender: render every city's and state's observation now (a few ms even for the full
                world), so that those calls are a single dict lookup; else render on first use.

        """
        self.world = world
        self._handlers: dict[str, Callable[..., Observation]] = {
            "SearchFlight": self._search_flight,
            "GoogleDistanceMatrix": self._distance,
            "SearchAccommodation": self._accommodations,
            "SearchRestaurant": self._restaurants,
            "SearchAttraction": self._attractions,
            "SearchCity": self._cities,
        }
        self._required = {name: tuple(arg for arg, _ in spec.arguments) for name, spec in TOOL_SPECS.items()}
        self._cache: dict[tuple[str, str], Observation] = {}
        self._casefold: dict[str, str] | None = None
        self._schemas = [TOOL_SPECS[name].schema() for name in TOOL_NAMES]
        if prerender:
            self._prerender()

    # ── Tools protocol ──

    def schemas(self) -> list[dict[str, Any]]:
        """Return the OpenAI function schemas of the six tools (fresh copies)."""
        return json.loads(json.dumps(self._schemas))

    def call(self, name: Any, arguments: Any) -> Observation:
        """Run one tool call; any mistake in ``name`` or ``arguments`` comes back as an error observation."""
        handler = self._handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            return _error(
                f"Error: unknown tool {_short(name)}. Available tools: {', '.join(TOOL_NAMES)}.",
                "unknown_tool",
            )
        args = self._check_arguments(name, arguments)
        if isinstance(args, Observation):
            return args
        return handler(*args)

    def _prerender(self) -> None:
        """Fill the observation cache for every known city and every state."""
        for city in sorted(self.world.known_cities):
            self._accommodations(city)
            self._restaurants(city)
            self._attractions(city)
        for state in self.world.states:
            self._cities(state)

    # ── argument checking ──

    def _check_arguments(self, name: str, arguments: Any) -> tuple[str, ...] | Observation:
        """Return the required argument values in order, or an error observation."""
        required = self._required[name]
        if isinstance(arguments, str):
            try:
                arguments = loads_strict(arguments)  # no RecursionError on deep JSON, no duplicate keys
            except DuplicateKeyError as exc:
                return _error(f"Error: {name} arguments: {exc}; give each argument once.")
            except ValueError:
                pass
        if not isinstance(arguments, dict):
            shape = ", ".join(f'"{a}": "..."' for a in required)
            return _error(
                f"Error: {name} needs a JSON object of arguments {{{shape}}}, got {type(arguments).__name__} "
                f"{_short(arguments)}."
            )
        missing = [a for a in required if a not in arguments]
        if missing:
            return _error(
                f"Error: {name} is missing argument(s) {', '.join(missing)}; it needs {', '.join(required)}."
            )
        if len(arguments) != len(required):
            extra = [_short(k) for k in arguments if k not in required]
            return _error(
                f"Error: {name} got unexpected argument(s) {', '.join(extra)}; it takes only "
                f"{', '.join(required)}."
            )
        values = tuple(arguments[a] for a in required)
        for arg, value in zip(required, values, strict=True):
            if not isinstance(value, str):
                return _error(
                    f"Error: argument '{arg}' of {name} must be a string, "
                    f"got {type(value).__name__} {_short(value)}."
                )
        return values

    def _unknown_city(self, city: str, role: str) -> Observation:
        if self._casefold is None:
            self._casefold = {c.casefold(): c for c in sorted(self.world.known_cities)}
        guess = self._casefold.get(city.strip().casefold())
        hint = (
            f" Did you mean '{guess}'?" if guess else " Check the spelling against the query or SearchCity."
        )
        return _error(
            f"Error: unknown city {_short(city)} for {role}; "
            f"city names must match the database exactly.{hint}"
        )

    # ── the tools ──

    def _search_flight(self, departure: str, destination: str, date: str) -> Observation:
        world = self.world
        if not world.knows_city(departure):
            return self._unknown_city(departure, "departure")
        if not world.knows_city(destination):
            return self._unknown_city(destination, "destination")
        if not _valid_date(date):
            return _error(f"Error: invalid date {_short(date)}; write it as YYYY-MM-DD, e.g. '2022-03-16'.")
        flights = world.flight_records(departure, destination, date)
        if not flights:
            dates = world.dates
            span = f" Flights in this database run from {dates[0]} to {dates[-1]}." if dates else ""
            return _no_result(
                f"There is no flight from {departure} to {destination} on {date}.{span} "
                "Please rethink: try another date, another city, or ground transportation."
            )
        lines = [
            f"Flights from {departure} to {destination} on {date}:",
            "Flight Number | Price | DepTime | ArrTime | ActualElapsedTime | Distance",
        ]
        lines.extend(_flight_lines(flights))
        return Observation("\n".join(lines))

    def _distance(self, departure: str, destination: str, mode: str) -> Observation:
        label = DRIVING_MODES.get(mode)
        if label is None:
            return _error(
                f"Error: invalid mode {_short(mode)} for GoogleDistanceMatrix; use 'driving' or 'taxi'."
            )
        world = self.world
        if not world.knows_city(departure):
            return self._unknown_city(departure, "departure")
        if not world.knows_city(destination):
            return self._unknown_city(destination, "destination")
        row = world.distance(departure, destination)
        if row is None or not row.valid:
            return _no_result(
                f"{label}, from {departure} to {destination}, no valid information. "
                "Please rethink: this trip cannot be made by road; consider a flight or another city."
            )
        cost = row.cost("taxi" if label == "taxi" else "driving")
        return Observation(
            f"{label}, from {departure} to {destination}, duration: {row.duration}, "
            f"distance: {row.distance}, cost: {cost}"
        )

    def _cached(self, tool: str, key: str, render: Callable[[str], Observation]) -> Observation:
        obs = self._cache.get((tool, key))
        if obs is None:
            obs = render(key)
            if obs.error != "bad_arguments":  # cache only real cities/states, not arbitrary input
                self._cache[(tool, key)] = obs
        return obs

    def _accommodations(self, city: str) -> Observation:
        return self._cached("SearchAccommodation", city, self._render_accommodations)

    def _render_accommodations(self, city: str) -> Observation:
        if not self.world.knows_city(city):
            return self._unknown_city(city, "city")
        rows = self.world.accommodations(city)
        if not rows:
            return _no_result(f"There is no accommodation in {city}. Please rethink: choose another city.")
        lines = [
            f"Accommodations in {city}:",
            "Name | Price per night | Room type | House rules | Minimum nights | Maximum occupancy | Rating",
        ]
        lines.extend(
            f"{_one_line(a.name)} | {_num(a.price)} | {a.room_type} | {a.house_rules or '-'} | "
            f"{_num(a.minimum_nights)} | {a.maximum_occupancy} | {_num(a.review_rate)}"
            for a in rows
        )
        return Observation("\n".join(lines))

    def _restaurants(self, city: str) -> Observation:
        return self._cached("SearchRestaurant", city, self._render_restaurants)

    def _render_restaurants(self, city: str) -> Observation:
        if not self.world.knows_city(city):
            return self._unknown_city(city, "city")
        rows = self.world.restaurants(city)
        if not rows:
            return _no_result(f"There is no restaurant in {city}. Please rethink: choose another city.")
        lines = [f"Restaurants in {city}:", "Name | Cuisines | Average cost | Rating"]
        lines.extend(
            f"{_one_line(r.name)} | {r.cuisines} | {_num(r.average_cost)} | {_num(r.rating)}" for r in rows
        )
        return Observation("\n".join(lines))

    def _attractions(self, city: str) -> Observation:
        return self._cached("SearchAttraction", city, self._render_attractions)

    def _render_attractions(self, city: str) -> Observation:
        if not self.world.knows_city(city):
            return self._unknown_city(city, "city")
        rows = self.world.attractions(city)
        if not rows:
            return _no_result(f"There is no attraction in {city}. Please rethink: choose another city.")
        lines = [f"Attractions in {city}:", "Name | Address"]
        lines.extend(f"{_one_line(a.name)} | {_one_line(a.address)}" for a in rows)
        return Observation("\n".join(lines))

    def _cities(self, state: str) -> Observation:
        return self._cached("SearchCity", state, self._render_cities)

    def _render_cities(self, state: str) -> Observation:
        cities = self.world.cities_in(state)
        if cities:
            return Observation(f"Cities in {state}: {', '.join(cities)}.")
        guess = {s.casefold(): s for s in self.world.states}.get(state.strip().casefold())
        hint = f" Did you mean '{guess}'?" if guess else " Use the state name as written in the query."
        return _error(f"Error: unknown state {_short(state)}.{hint}")


def _valid_date(text: str) -> bool:
    """Whether ``text`` is a real calendar date written YYYY-MM-DD."""
    if _DATE_RE.match(text) is None:
        return False
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True
