"""Fixtures of the synthesis tests: worlds built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from star_lib.travel.world import World


@pytest.fixture(scope="session")
def small_world() -> World:
    """The seeded ``small`` synthetic world (40 cities, ~96K flights)."""
    return World.synthetic(seed=0, scale="small")


@pytest.fixture(scope="session")
def tiny_world() -> World:
    """The seeded ``tiny`` synthetic world (15 cities, 3–5 restaurants per city)."""
    return World.synthetic(seed=0, scale="tiny")


@pytest.fixture(scope="session")
def real_world(real_db_dir: Path) -> World:
    """The real TravelPlanner database with its 9,122-row flights slice."""
    return World.from_csv_dir(real_db_dir)


class _EmptyWorld:
    """Cities and states but no flights, roads or rows: nothing can be sampled."""

    cities = ("A", "B", "C", "D")
    states = ("S1", "S2")

    def state_of(self, city):
        return "S1" if city in ("A", "B") else "S2"

    def cities_in(self, state):
        return ("A", "B") if state == "S1" else ("C", "D")

    def flight_routes(self):
        return {}

    def flights(self, origin, dest, date):
        return ()

    def distance(self, origin, dest):
        return None

    def accommodations(self, city):
        return ()

    restaurants = attractions = accommodations

    def summary(self):
        return {"source": "empty"}


@pytest.fixture
def empty_world() -> _EmptyWorld:
    """A world with cities but no flights, roads or rows (nothing can be synthesised)."""
    return _EmptyWorld()
