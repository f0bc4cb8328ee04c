"""Name and route lookups over one World for one rule set (the evaluator's database side)."""

from __future__ import annotations

import math
from typing import Any

from star_lib.travel.checks.text import Split, before_paren, normalise


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
