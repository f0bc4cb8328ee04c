"""Per-world lookup tables the sampler and the solver share (built lazily, cached per ``World``).

The index adds nothing to the world; it only precomputes what synthesis asks for again and again:
usable rows per city (names that any evaluator matches to exactly one row), flight counts per route
and date, road legs, the world's date range, and sampling candidates per trip shape.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from star_lib.travel.checks import official_listing
from star_lib.types import Accommodation, Attraction, Distance, Flight, LocalConstraint, Restaurant

FALLBACK_DATES: tuple[str, str] = ("2022-03-01", "2022-03-31")
"""Date range used when a world has no flights at all (the official data covers March 2022)."""


def _norm(name: str) -> str:
    return " ".join(name.split())


def _clean_name(name: Any, forbid: str = "") -> bool:
    """Tell whether we can write a name as ``Name, City`` and every evaluator parses back to this row."""
    if not isinstance(name, str) or not name.strip():
        return False
    return not any(ch in name for ch in forbid + "\n\t")


def unambiguous(names: Sequence[str]) -> set[str]:
    """Names that match exactly one row both by exact match and by the official substring match.

    Names are compared after whitespace normalisation (the strict evaluator's rule; the official one
    strips the name it parses).

    >>> sorted(unambiguous(["Subway", "Subway Express", "Cafe", "Cafe ", "Deli"]))
    ['Deli', 'Subway Express']
    """
    counts: dict[str, int] = defaultdict(int)
    for name in names:
        counts[_norm(name)] += 1
    distinct = list(counts)
    clashes = {n for n in distinct if counts[n] != 1 or any(n != o and n in o for o in distinct)}
    return {name for name in names if _norm(name) not in clashes}


ROOM_TYPE_ROWS: dict[str, Callable[[str], bool]] = {
    "shared room": lambda t: t == "Shared room",
    "not shared room": lambda t: t != "Shared room",
    "private room": lambda t: t == "Private room",
    "entire room": lambda t: t == "Entire home/apt",
}


def hotel_allowed(row: Accommodation, constraint: LocalConstraint) -> bool:
    """House rule and room type of a listing against a record's constraint (official semantics)."""
    rule = constraint.house_rule
    if rule and f"No {rule}" in str(row.house_rules or ""):
        return False
    check = ROOM_TYPE_ROWS.get(constraint.room_type or "")
    return check is None or check(row.room_type)


@functools.lru_cache(maxsize=65536)
def add_days(date: str, n: int) -> str:
    """ISO date ``n`` days after ``date``.

    >>> add_days("2022-03-30", 2)
    '2022-04-01'
    """
    return (dt.date.fromisoformat(date) + dt.timedelta(days=n)).isoformat()


def date_span(first: str, last: str) -> tuple[str, ...]:
    """All ISO dates from ``first`` to ``last`` inclusive."""
    start, end = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    return tuple((start + dt.timedelta(days=i)).isoformat() for i in range((end - start).days + 1))


@dataclass(frozen=True)
class Leg:
    """A usable road leg: the distance row and its per-vehicle costs (both >= 1, as the evaluators need)."""

    row: Distance
    drive_cost: int
    """Self-driving cost of one car (5 people)."""
    taxi_cost: int
    """Taxi cost of one taxi (4 people)."""


class WorldIndex:
    """Cached lookups over one ``World`` for synthesis."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self._hotels: dict[str, tuple[Accommodation, ...]] = {}
        self._restaurants: dict[str, tuple[Restaurant, ...]] = {}
        self._attractions: dict[str, tuple[Attraction, ...]] = {}
        self._legs: dict[tuple[str, str], Leg | None] = {}
        self._flights: dict[tuple[str, str, str], tuple[Flight, ...]] = {}
        self._routes: dict[tuple[str, str], tuple[str, ...]] | None = None
        self._dates: tuple[str, ...] | None = None
        self._candidates: dict[tuple, Any] = {}
        self._usable_in: dict[str, tuple[str, ...]] = {}
        self._usable: dict[str, bool] = {}
        self.cities: tuple[str, ...] = tuple(sorted(world.cities))
        self.states: tuple[str, ...] = tuple(sorted(world.states))
        self._state_of = {c: world.state_of(c) for c in self.cities}

    # ── rows a plan may name ──────────────────────────────────────────────

    def hotels(self, city: str) -> tuple[Accommodation, ...]:
        """Accommodations of ``city`` with clean, unambiguous names that the official loader keeps."""
        if city not in self._hotels:
            rows = tuple(self.world.accommodations(city))
            ok = unambiguous([r.name for r in rows])
            self._hotels[city] = tuple(
                r
                for r in rows
                if r.name in ok
                and _clean_name(r.name)
                and not math.isnan(float(r.minimum_nights))
                and not math.isnan(float(r.price))
                and int(r.maximum_occupancy or 0) >= 1
                and official_listing(r)
            )
        return self._hotels[city]

    def restaurants(self, city: str) -> tuple[Restaurant, ...]:
        """Restaurants of ``city`` with clean, unambiguous names and a known average cost."""
        if city not in self._restaurants:
            rows = tuple(self.world.restaurants(city))
            ok = unambiguous([r.name for r in rows])
            self._restaurants[city] = tuple(
                r
                for r in rows
                if r.name in ok and _clean_name(r.name) and not math.isnan(float(r.average_cost))
            )
        return self._restaurants[city]

    def attractions(self, city: str) -> tuple[Attraction, ...]:
        """Attractions of ``city`` with clean, unambiguous names (no ``;``, which separates them in plans)."""
        if city not in self._attractions:
            rows = tuple(self.world.attractions(city))
            ok = unambiguous([r.name for r in rows])
            self._attractions[city] = tuple(
                r for r in rows if r.name in ok and _clean_name(r.name, forbid=";")
            )
        return self._attractions[city]

    def usable(self, city: str) -> bool:
        """Tell whether a trip can stay in ``city``: some hotel, a full day of meals, and an attraction."""
        ok = self._usable.get(city)
        if ok is None:
            ok = bool(self.hotels(city)) and len(self.restaurants(city)) >= 3 and bool(self.attractions(city))
            self._usable[city] = ok
        return ok

    def state_of(self, city: str) -> str | None:
        """State of ``city`` (None when unknown)."""
        if city in self._state_of:
            return self._state_of[city]
        return self.world.state_of(city)

    def usable_cities_in(self, state: str, exclude: Iterable[str] = ()) -> tuple[str, ...]:
        """Usable cities of ``state``, sorted, without ``exclude``."""
        cities = self._usable_in.get(state)
        if cities is None:
            cities = tuple(sorted(c for c in self.world.cities_in(state) if self.usable(c)))
            self._usable_in[state] = cities
        skip = set(exclude)
        return tuple(c for c in cities if c not in skip) if skip & set(cities) else cities

    # ── transport ─────────────────────────────────────────────────────────

    def leg(self, origin: str, dest: str) -> Leg | None:
        """Return the road leg when it exists, is valid and costs at least 1 both by car and by taxi."""
        key = (origin, dest)
        if key not in self._legs:
            row = self.world.distance(origin, dest)
            leg = None
            if row is not None and row.valid:
                drive, taxi = row.cost("driving"), row.cost("taxi")
                if drive and taxi and drive >= 1 and taxi >= 1:
                    leg = Leg(row, int(drive), int(taxi))
            self._legs[key] = leg
        return self._legs[key]

    def flights(self, origin: str, dest: str, date: str) -> tuple[Flight, ...]:
        """Flights on a route and date (cached)."""
        key = (origin, dest, date)
        if key not in self._flights:
            self._flights[key] = tuple(self.world.flights(origin, dest, date))
        return self._flights[key]

    def route_dates(self, origin: str, dest: str) -> frozenset[str]:
        """Dates with at least one flight on a route (cached set)."""
        key = ("route-dates", origin, dest)
        if key not in self._candidates:
            self._candidates[key] = frozenset(self.routes.get((origin, dest), ()))
        return self._candidates[key]

    @property
    def routes(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """``World.flight_routes()`` (cached)."""
        if self._routes is None:
            self._routes = dict(self.world.flight_routes())
        return self._routes

    @property
    def dates(self) -> tuple[str, ...]:
        """Every date of the world's flight range (or of :data:`FALLBACK_DATES` when it has no flights)."""
        if self._dates is None:
            all_dates = sorted({d for ds in self.routes.values() for d in ds})
            first, last = (all_dates[0], all_dates[-1]) if all_dates else FALLBACK_DATES
            self._dates = date_span(first, last)
        return self._dates

    # ── candidates, cached by key ─────────────────────────────────────────

    def cached(self, key: tuple, build: Any) -> Any:
        """Memoise ``build()`` under ``key`` (used for sampling candidate lists)."""
        if key not in self._candidates:
            self._candidates[key] = build()
        return self._candidates[key]


_INDEXES: dict[int, tuple[Any, WorldIndex]] = {}


def index_for(world: Any) -> WorldIndex:
    """Return the cached :class:`WorldIndex` of ``world`` (the last few worlds are kept)."""
    hit = _INDEXES.get(id(world))
    if hit is not None and hit[0] is world:
        return hit[1]
    if len(_INDEXES) >= 4:
        _INDEXES.pop(next(iter(_INDEXES)))
    index = WorldIndex(world)
    _INDEXES[id(world)] = (world, index)
    return index
