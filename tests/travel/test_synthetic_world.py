"""Synthetic worlds: determinism, schema round trip, tiny-pool closure, realistic values."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from star_lib.travel import names as pools
from star_lib.travel.synthetic import SCALES, generate_tables
from star_lib.travel.world import FILE_NAMES, World

_FILES = [flat for flat, _ in FILE_NAMES.values()] + ["citySet.txt", "stateSet.txt"]


@pytest.fixture(scope="module")
def tiny() -> World:
    return World.synthetic(seed=0, scale="tiny")


@pytest.fixture(scope="module")
def small() -> World:
    return World.synthetic(seed=0, scale="small")


def _bytes(world: World, path: Path) -> dict[str, bytes]:
    world.to_csv_dir(path)
    return {name: (path / name).read_bytes() for name in _FILES}


@pytest.mark.parametrize("scale", ["tiny", "small"])
def test_synthetic_world_same_seed_byte_identical_csvs(scale: str, tmp_path: Path) -> None:
    first = _bytes(World.synthetic(seed=4, scale=scale), tmp_path / "a")
    second = _bytes(World.synthetic(seed=4, scale=scale), tmp_path / "b")
    assert first == second
    other = _bytes(World.synthetic(seed=5, scale=scale), tmp_path / "c")
    assert all(other[name] != first[name] for name in _FILES if name.endswith(".csv"))


@pytest.mark.parametrize("scale", ["tiny", "small"])
def test_synthetic_world_round_trip_gives_identical_lookups(scale: str, tmp_path: Path) -> None:
    world = World.synthetic(seed=2, scale=scale)
    world.to_csv_dir(tmp_path)
    again = World.from_csv_dir(tmp_path)
    assert {k: v for k, v in again.summary().items() if k != "source"} == {
        k: v for k, v in world.summary().items() if k != "source"
    }
    assert again.cities == world.cities and again.states == world.states
    for city in world.cities:
        assert again.accommodations(city) == world.accommodations(city)
        assert again.restaurants(city) == world.restaurants(city)
        assert again.attractions(city) == world.attractions(city)
        assert again.state_of(city) == world.state_of(city)
        for other in world.cities:
            assert again.distance(city, other) == world.distance(city, other)
    routes = world.flight_routes()
    assert again.flight_routes() == routes
    for (origin, dest), dates in list(routes.items())[:: max(1, len(routes) // 40)]:
        for date in dates[:3]:
            flights = world.flights(origin, dest, date)
            assert again.flights(origin, dest, date) == flights
            assert again.flight(flights[0].number) == world.flight(flights[0].number) == flights[0]
    # and written again, the files are the same bytes
    assert _bytes(again, tmp_path / "again") == _bytes(world, tmp_path / "first")


def test_synthetic_world_tiny_sizes(tiny: World) -> None:
    spec = SCALES["tiny"]
    for seed in range(6):
        world = tiny if seed == 0 else World.synthetic(seed=seed, scale="tiny")
        assert 10 <= len(world.cities) <= 15 and 4 <= len(world.states) <= 5
        assert all(len(world.cities_in(s)) >= 3 for s in world.states)
        for city in world.cities:
            assert spec.hotels[0] <= len(world.accommodations(city)) <= spec.hotels[1]
            assert spec.restaurants[0] <= len(world.restaurants(city)) <= spec.restaurants[1]
            assert spec.attractions[0] <= len(world.attractions(city)) <= spec.attractions[1]
        dates = world.dates
        assert dates[0].startswith("2022-03") and dates[-1].startswith("2022-03") and 14 <= len(dates) <= 21


def test_synthetic_world_tiny_names_come_from_fixed_pools(tiny: World) -> None:
    vocabulary = set(pools.tiny_vocabulary())
    seen_cities: set[str] = set()
    for seed in range(5):
        world = tiny if seed == 0 else World.synthetic(seed=seed, scale="tiny")
        seen_cities |= set(world.cities)
        assert set(world.states) <= set(pools.TINY_STATES) and set(world.cities) <= set(pools.TINY_CITIES)
        for city in world.cities:
            assert {a.name for a in world.accommodations(city)} <= set(pools.TINY_HOTELS)
            assert {r.name for r in world.restaurants(city)} <= set(pools.TINY_RESTAURANTS)
            for attraction in world.attractions(city):
                assert attraction.name in pools.TINY_ATTRACTIONS
                street = re.sub(r"^\d+ ", "", attraction.address.split(", ")[0])
                assert street in pools.TINY_STREETS and street in vocabulary
        assert set(world.states) | set(world.cities) <= vocabulary
    assert len(seen_cities) > 15  # different seeds pick different subsets of the pool


def test_synthetic_world_flight_rows_are_consistent(tiny: World, small: World) -> None:
    for world in (tiny, small):
        for (origin, dest), dates in list(world.flight_routes().items())[:60]:
            for flight in world.flights(origin, dest, dates[0]):
                hours, minutes = map(int, re.fullmatch(r"(\d+) hours (\d+) minutes", flight.elapsed).groups())
                elapsed = 60 * hours + minutes
                assert abs(elapsed - (40 + 0.118 * flight.distance)) < 60  # time follows distance
                dep = int(flight.dep_time[:2]) * 60 + int(flight.dep_time[3:])
                arr = int(flight.arr_time[:2]) * 60 + int(flight.arr_time[3:])
                shift = (arr - dep - elapsed) % 1440  # whole-hour time-zone change, at most 3 hours
                assert shift in {0, 60, 120, 180, 1260, 1320, 1380}
                assert 15 <= flight.price <= 3 * flight.distance and re.fullmatch(r"F\d{7}", flight.number)


def test_synthetic_world_tiny_route_days_have_three_flights(tiny: World) -> None:
    routes = tiny.flight_routes()
    counts = [len(tiny.flights(o, d, day)) for (o, d), dates in routes.items() for day in dates]
    assert min(counts) >= 3 and max(counts) <= 5
    cross_state = [(o, d) for o, d in routes if tiny.state_of(o) != tiny.state_of(d)]
    assert len(cross_state) >= 0.5 * len(tiny.cities) * (len(tiny.cities) - 4)
    assert all((d, o) in routes for o, d in routes)  # round trips are possible


def test_synthetic_world_distance_strings(small: World) -> None:
    rows = [small.distance(a, b) for a in small.cities for b in small.cities if a != b]
    valid = [r for r in rows if r is not None]
    assert len(valid) < len(rows)  # a few pairs have no road
    day_routes = [r for r in valid if not r.valid]
    assert day_routes and min(r.km for r in day_routes) > 2000  # "day" only for very long routes
    pattern = r"(\d+ hours? \d+ mins?|\d+ mins?|\d+ days? \d+ hours?)"
    for row in valid:
        assert re.fullmatch(r"\d{1,3}(,\d{3})* km", row.distance) and re.fullmatch(pattern, row.duration)
        assert float(row.distance[:-3].replace(",", "")) == row.km
        back = small.distance(row.dest, row.origin)
        assert back is not None and abs(back.km - row.km) <= 0.01 * row.km + 1


def test_synthetic_world_hotel_and_restaurant_values(small: World) -> None:
    rules = {f"No {r}" for r in pools.HOUSE_RULE_NAMES}
    vocab = set(pools.CUISINES_COMMON + pools.CUISINES_CONSTRAINT)
    hotels = [a for c in small.cities for a in small.accommodations(c)]
    assert {a.room_type for a in hotels} == set(pools.ROOM_TYPE_NAMES)
    for hotel in hotels:
        parts = hotel.house_rules.split(" & ")
        assert set(parts) <= rules and len(parts) == len(set(parts)) <= 3
        assert 60 <= hotel.price <= 1200 and hotel.minimum_nights >= 1 and 1 <= hotel.review_rate <= 5
        limit = {"Shared room": 1, "Private room": 2, "Entire home/apt": 11}[hotel.room_type]
        assert 1 <= hotel.maximum_occupancy <= limit
    assert len({a.house_rules for a in hotels}) > 20  # many combinations, as in the real table
    restaurants = [r for c in small.cities for r in small.restaurants(c)]
    for restaurant in restaurants:
        cuisines = restaurant.cuisines.split(", ")
        assert set(cuisines) <= vocab and 2 <= len(cuisines) == len(set(cuisines)) <= 6
        assert 10 <= restaurant.average_cost <= 250 and 0 <= restaurant.rating <= 4.9
    for cuisine in pools.CUISINES_CONSTRAINT:
        assert sum(cuisine in r.cuisines for r in restaurants) > 0.05 * len(restaurants)


def test_synthetic_world_small_scale(small: World) -> None:
    summary = small.summary()
    assert summary["cities"] == 40 and summary["states"] == 10
    assert summary["date_range"] == ["2022-03-01", "2022-04-30"]
    assert summary["distances"] == 40 * 39
    assert all(len(small.cities_in(s)) >= 3 for s in small.states)


def test_synthetic_world_full_spec_is_official_order_of_magnitude() -> None:
    spec = SCALES["full"]
    assert spec.n_cities == (300, 300) and spec.target_flights == 3_800_000
    assert (spec.hotels[2], spec.restaurants[2], spec.attractions[2]) == (5_000, 9_500, 5_000)
    assert len(pools.hotel_space()) >= spec.hotels[2] and len(pools.restaurant_space()) >= spec.restaurants[2]
    assert len(pools.city_space()) >= spec.n_cities[1] and len(pools.state_space()) >= spec.n_states[1]


def test_synthetic_world_generate_tables_schema() -> None:
    tables = generate_tables(seed=1, scale="tiny")
    assert set(tables) == {
        "flights",
        "accommodations",
        "restaurants",
        "attractions",
        "distances",
        "city_states",
    }
    assert (
        tables["flights"].schema["Price"] == pl.Int64 and tables["flights"].schema["Distance"] == pl.Float64
    )
    assert tables["accommodations"].schema["maximum occupancy"] == pl.Int64
    assert tables["restaurants"].schema["Average Cost"] == pl.Int64


@pytest.mark.parametrize(("seed", "scale"), [(0, "huge"), (-1, "tiny"), (1.5, "tiny"), (True, "tiny")])
def test_synthetic_world_rejects_bad_arguments(seed, scale) -> None:
    with pytest.raises(ValueError, match="scale must be one of|seed must be a non-negative integer"):
        World.synthetic(seed=seed, scale=scale)
