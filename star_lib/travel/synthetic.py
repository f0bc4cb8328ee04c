"""Seeded synthetic TravelPlanner worlds in the official schema (``World.synthetic(seed, scale)``).

A world is generated top-down, fully vectorised with numpy so that the ``full`` scale (≈3.8 M flights)
takes seconds:

1. **Geography** — states on a jittered grid over a continent-sized box, cities scattered around
   their state's centre (every state has ≥ 3 cities, so 5/7-day trips can be built); each city gets
   a size (Zipf-like) that drives its number of hotels/restaurants and its air traffic.
2. **Distances** — every ordered city pair: great-circle km × a road factor, a driving speed, the
   official strings (``"1,144 km"``, ``"10 hours 55 mins"``, ``"1 day 3 hours"`` when too long) and
   a few pairs with no road at all (empty duration/distance).
3. **Flights** — a route network (bigger cities, more routes), per route-day a count of flights,
   departure times, durations consistent with the distance (≈ 40 min + 0.118 min/mile, as in the
   real table), arrival times across time zones, prices ≈ $0.35/mile, official strings
   (``"2 hours 13 minutes"``).
4. **Accommodations, restaurants, attractions** — per city, with the real table's distributions
   of room types, prices, house-rule combinations, minimum nights, occupancy, cuisine lists,
   average costs, ratings, and addresses.

The same seed always gives the same tables (each part draws from its own child of one
:class:`numpy.random.SeedSequence`). ``tiny`` worlds take every name from the fixed pools of
:mod:`star_lib.travel.names`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from star_lib.travel import names as pools

__all__ = ["SCALES", "ScaleSpec", "generate_tables"]

_EARTH_KM = 6371.0
_KM_PER_MILE = 1.609344


@dataclass(frozen=True)
class ScaleSpec:
    """Sizes and densities of one synthetic scale."""

    name: str
    """``tiny`` | ``small`` | ``full``."""
    n_states: tuple[int, int]
    """Inclusive range of the number of states."""
    n_cities: tuple[int, int]
    """Inclusive range of the number of cities (each state gets at least 3)."""
    max_cities_per_state: int
    """Upper bound on cities in one state."""
    first_date: str
    """First flight date (ISO)."""
    n_days: int
    """Number of consecutive flight dates."""
    hotels: tuple[int, int, int | None]
    """Per-city (min, max, world total or None for uniform in [min, max])."""
    restaurants: tuple[int, int, int | None]
    """Per-city (min, max, world total or None)."""
    attractions: tuple[int, int, int | None]
    """Per-city (min, max, world total or None)."""
    route_pairs: float
    """Fraction of cross-state city pairs with a flight route (within-state pairs: a quarter of it)."""
    flights_per_day: tuple[float, float]
    """Range of the mean number of flights per route and day (bigger cities, more flights)."""
    target_flights: int | None
    """Rescale route frequencies to about this many flights (None: keep the range)."""
    operate_rate: float
    """Probability that a route flies on a given day."""
    min_three: bool
    """Every operating route-day has at least 3 flights (the STAR rule for flight trips)."""
    no_road_rate: float
    """Fraction of city pairs with no road information (empty duration/distance)."""
    fixed_pools: bool
    """Draw every name from the fixed tiny pools."""
    box: tuple[float, float, float, float] = (27.0, 47.5, -121.0, -71.0)
    """(lat min, lat max, lon min, lon max) of the land the states share (full: ≈4,300 × 2,400 km)."""


SCALES: dict[str, ScaleSpec] = {
    "tiny": ScaleSpec(
        name="tiny",
        n_states=(4, 5),
        n_cities=(10, 15),
        max_cities_per_state=4,
        first_date="2022-03-01",
        n_days=21,
        hotels=(2, 4, None),
        restaurants=(3, 5, None),  # a full day needs 3 distinct restaurants
        attractions=(2, 4, None),
        route_pairs=0.8,
        flights_per_day=(3.0, 5.0),
        target_flights=None,
        operate_rate=0.9,
        min_three=True,
        no_road_rate=0.02,
        fixed_pools=True,
        box=(34.0, 43.0, -100.0, -82.0),  # ≈1,650 × 1,000 km: neighbouring states are a day's drive apart
    ),
    "small": ScaleSpec(
        name="small",
        n_states=(10, 10),
        n_cities=(40, 40),
        max_cities_per_state=6,
        first_date="2022-03-01",
        n_days=61,
        hotels=(8, 20, None),
        restaurants=(15, 35, None),
        attractions=(6, 16, None),
        route_pairs=0.35,
        flights_per_day=(2.0, 8.0),
        target_flights=None,
        operate_rate=0.92,
        min_three=False,
        no_road_rate=0.03,
        fixed_pools=False,
        box=(30.0, 46.0, -112.0, -76.0),
    ),
    "full": ScaleSpec(
        name="full",
        n_states=(50, 50),
        n_cities=(300, 300),
        max_cities_per_state=14,
        first_date="2022-01-01",
        n_days=181,
        hotels=(4, 40, 5_000),
        restaurants=(12, 65, 9_500),
        attractions=(3, 20, 5_000),
        route_pairs=0.06,
        flights_per_day=(1.5, 14.0),
        target_flights=3_800_000,
        operate_rate=0.92,
        min_three=False,
        no_road_rate=0.03,
        fixed_pools=False,
    ),
}

# Real-table distributions (from the official accommodations / restaurants tables).
_MIN_NIGHTS = (1, 2, 3, 4, 5, 6, 7, 10, 14, 15, 30, 31)
_MIN_NIGHTS_P = (1047, 1064, 679, 342, 190, 56, 130, 52, 44, 33, 322, 30)
_TINY_MIN_NIGHTS_P = (45, 35, 15, 5, 0, 0, 0, 0, 0, 0, 0, 0)
_ENTIRE_OCC = tuple(range(2, 12))
_ENTIRE_OCC_P = (631, 634, 266, 192, 160, 110, 80, 60, 40, 19)
_REVIEW_P = (471, 925, 963, 951, 975)
_RULE_COUNT_P = (2161, 1408, 716)
_ROOM_P = (0.52, 0.455, 0.025)
_TINY_ROOM_P = (0.45, 0.40, 0.15)  # enough shared rooms in a world of ~40 listings
_CUISINE_COUNT = (2, 3, 4, 5, 6)
_CUISINE_COUNT_P = (769, 2396, 3218, 2387, 781)


def _p(weights: tuple[float, ...]) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    return w / w.sum()


def generate_tables(seed: int = 0, scale: str = "tiny") -> dict[str, Any]:
    """Generate the tables of one synthetic world: keyword arguments for :class:`World`.

    Raises:
        ValueError: for an unknown scale or a negative / non-integer seed.

    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {sorted(SCALES)}, got {scale!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    spec = SCALES[scale]
    streams = np.random.SeedSequence([int(seed), list(SCALES).index(scale)]).spawn(6)
    geo_rng, dist_rng, flight_rng, hotel_rng, rest_rng, attr_rng = (np.random.default_rng(s) for s in streams)
    geo = _geography(spec, geo_rng)
    return {
        "flights": _flights(spec, geo, flight_rng),
        "accommodations": _accommodations(spec, geo, hotel_rng),
        "restaurants": _restaurants(spec, geo, rest_rng),
        "attractions": _attractions(spec, geo, attr_rng),
        "distances": _distances(spec, geo, dist_rng),
        "city_states": list(zip(geo.cities, [geo.states[s] for s in geo.state_of], strict=True)),
    }


# ───────────────────────────── geography ─────────────────────────────


@dataclass(frozen=True)
class _Geo:
    states: tuple[str, ...]
    cities: tuple[str, ...]
    state_of: np.ndarray  # (C,) state index of each city
    lat: np.ndarray  # (C,)
    lon: np.ndarray  # (C,)
    size: np.ndarray  # (C,) relative size in (0, 1]
    gc_km: np.ndarray  # (C, C) great-circle km


def _geography(spec: ScaleSpec, rng: np.random.Generator) -> _Geo:
    n_states = int(rng.integers(spec.n_states[0], spec.n_states[1] + 1))
    n_cities = int(rng.integers(spec.n_cities[0], spec.n_cities[1] + 1))
    n_cities = min(max(n_cities, 3 * n_states), spec.max_cities_per_state * n_states)
    per_state = _split(n_cities, n_states, 3, spec.max_cities_per_state, rng)

    state_pool = pools.TINY_STATES if spec.fixed_pools else pools.state_space()
    city_pool = pools.TINY_CITIES if spec.fixed_pools else pools.city_space()
    states = tuple(state_pool[i] for i in rng.choice(len(state_pool), n_states, replace=False))
    cities = tuple(city_pool[i] for i in rng.choice(len(city_pool), n_cities, replace=False))
    state_of = np.repeat(np.arange(n_states), per_state)

    # states on a jittered grid; cities in a disc around their state's centre
    cols = int(np.ceil(np.sqrt(n_states * 1.8)))
    rows = int(np.ceil(n_states / cols))
    cells = rng.permutation(cols * rows)[:n_states]
    lat0, lat1, lon0, lon1 = spec.box
    cell_w, cell_h = (lon1 - lon0) / cols, (lat1 - lat0) / rows
    centre_lon = lon0 + (cells % cols + 0.5 + rng.uniform(-0.2, 0.2, n_states)) * cell_w
    centre_lat = lat0 + (cells // cols + 0.5 + rng.uniform(-0.2, 0.2, n_states)) * cell_h
    radius_deg = min(0.35 * min(cell_w, cell_h), 2.6)  # ≤ ~290 km: within-state trips stay drivable
    angle = rng.uniform(0, 2 * np.pi, n_cities)
    r = radius_deg * np.sqrt(rng.uniform(0.02, 1.0, n_cities))
    lat = centre_lat[state_of] + r * np.sin(angle)
    lon = centre_lon[state_of] + r * np.cos(angle) / np.cos(np.radians(centre_lat[state_of]))
    size = 1.0 / (1.0 + rng.permutation(n_cities)) ** 0.8
    return _Geo(states, cities, state_of, lat, lon, size, _great_circle(lat, lon))


def _split(total: int, parts: int, low: int, high: int, rng: np.random.Generator) -> np.ndarray:
    """Random integer split of ``total`` into ``parts`` values in [low, high]."""
    counts = np.full(parts, low)
    for _ in range(total - low * parts):
        open_parts = np.flatnonzero(counts < high)
        counts[rng.choice(open_parts)] += 1
    return counts


def _great_circle(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    phi, lam = np.radians(lat), np.radians(lon)
    dphi = phi[:, None] - phi[None, :]
    dlam = lam[:, None] - lam[None, :]
    a = np.sin(dphi / 2) ** 2 + np.cos(phi[:, None]) * np.cos(phi[None, :]) * np.sin(dlam / 2) ** 2
    return 2 * _EARTH_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def _time_zone(lon: np.ndarray) -> np.ndarray:
    """Hours behind the easternmost zone (0, -1, -2, -3) from longitude."""
    return -np.clip(np.ceil((-82.5 - lon) / 15.0), 0, 3).astype(np.int64)


# ───────────────────────────── distances ─────────────────────────────


def _duration_text(minutes: int) -> str:
    """Format minutes Google-style: ``"21 mins"``, ``"1 hour 5 mins"``, ``"1 day 3 hours"``."""
    if minutes >= 24 * 60:
        days, hours = divmod(minutes // 60, 24)
        return f"{days} day{'s' if days > 1 else ''} {hours} hour{'s' if hours != 1 else ''}"
    hours, mins = divmod(minutes, 60)
    tail = f"{mins} min{'s' if mins != 1 else ''}"
    return f"{hours} hour{'s' if hours != 1 else ''} {tail}" if hours else tail


def _distances(spec: ScaleSpec, geo: _Geo, rng: np.random.Generator) -> pl.DataFrame:
    n = len(geo.cities)
    road = rng.uniform(1.12, 1.35, (n, n))
    road = np.triu(road, 1) + np.triu(road, 1).T  # symmetric road factor
    speed = rng.uniform(96.0, 110.0, (n, n))
    speed = np.triu(speed, 1) + np.triu(speed, 1).T
    np.fill_diagonal(speed, 100.0)  # the diagonal is never written; keep it finite
    jitter = rng.uniform(0.996, 1.004, (n, n))  # each direction differs a little, as in the real table
    km = np.maximum(3.0, np.rint(geo.gc_km * road * jitter))
    minutes = np.maximum(3, np.rint(km / speed * 60.0 * rng.uniform(0.99, 1.01, (n, n)))).astype(np.int64)
    no_road = np.triu(rng.random((n, n)) < spec.no_road_rate, 1)
    no_road = no_road | no_road.T
    origin, dest = np.nonzero(~np.eye(n, dtype=bool))
    km_list = km[origin, dest].astype(np.int64).tolist()
    min_list = minutes[origin, dest].tolist()
    missing = no_road[origin, dest].tolist()
    return pl.DataFrame(
        {
            "origin": [geo.cities[i] for i in origin.tolist()],
            "destination": [geo.cities[j] for j in dest.tolist()],
            "cost": pl.Series([None] * len(km_list), dtype=pl.String),
            "duration": [None if m else _duration_text(t) for t, m in zip(min_list, missing, strict=True)],
            "distance": [None if m else f"{k:,} km" for k, m in zip(km_list, missing, strict=True)],
        },
        schema={c: pl.String for c in ("origin", "destination", "cost", "duration", "distance")},
    )


# ───────────────────────────── flights ─────────────────────────────


def _routes(spec: ScaleSpec, geo: _Geo, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Directed routes (origin, dest index arrays), both directions of each chosen pair."""
    n = len(geo.cities)
    i, j = np.triu_indices(n, 1)
    same_state = geo.state_of[i] == geo.state_of[j]
    pull = np.sqrt(geo.size[i] * geo.size[j])
    if spec.fixed_pools:
        p = np.full(len(i), spec.route_pairs)
    else:
        p = np.clip(spec.route_pairs * pull / pull.mean(), 0.0, 0.95)
    p = np.where(same_state, p * 0.25, p)
    p = np.where(geo.gc_km[i, j] < 150.0, 0.0, p)
    chosen = rng.random(len(i)) < p
    # every city keeps at least one route: link it to its biggest partner in another state
    for c in range(n):
        touching = chosen & ((i == c) | (j == c))
        if not touching.any():
            other = np.where(geo.state_of != geo.state_of[c], geo.size, -1.0)
            other[c] = -1.0
            partner = int(np.argmax(other))
            a, b = min(c, partner), max(c, partner)
            chosen[np.flatnonzero((i == a) & (j == b))] = True
    oi, oj = i[chosen], j[chosen]
    return np.concatenate([oi, oj]), np.concatenate([oj, oi])


def _flights(spec: ScaleSpec, geo: _Geo, rng: np.random.Generator) -> pl.DataFrame:
    origin, dest = _routes(spec, geo, rng)
    n_routes, n_days = len(origin), spec.n_days
    pull = np.sqrt(geo.size[origin] * geo.size[dest])
    lo, hi = spec.flights_per_day
    mean = lo + (hi - lo) * (pull - pull.min()) / max(1e-9, pull.max() - pull.min())
    if spec.target_flights:
        mean *= spec.target_flights / (mean.sum() * n_days * spec.operate_rate)
    operates = rng.random((n_routes, n_days)) < spec.operate_rate
    if spec.min_three:  # 3..5 flights on each operating day
        counts = 3 + rng.binomial(2, np.clip((mean - 3.0) / 2.0, 0.05, 0.95)[:, None], (n_routes, n_days))
    else:
        counts = rng.poisson(mean[:, None], (n_routes, n_days))
    counts = np.where(operates, counts, 0).astype(np.int64)  # (R, D)

    # route order = sorted by (origin name, dest name), so the file is in lookup order
    name_rank = np.argsort(np.argsort(np.array(geo.cities)))
    route_order = np.lexsort((name_rank[dest], name_rank[origin]))
    inv = np.empty(n_routes, dtype=np.int64)
    inv[route_order] = np.arange(n_routes)
    route_day = np.repeat(np.arange(n_routes * n_days), counts.ravel())  # (N,)
    route, day = np.divmod(route_day, n_days)
    n = len(route)
    dep = rng.integers(330, 1381, n)  # 05:30 .. 23:00
    order = np.argsort((inv[route] * n_days + day) * 1440 + dep, kind="stable")
    route, day, dep = route[order], day[order], dep[order]

    o, d = origin[route], dest[route]
    miles = np.maximum(30.0, np.rint(geo.gc_km[o, d] / _KM_PER_MILE))
    elapsed = np.maximum(20, np.rint(40.0 + 0.118 * miles + rng.normal(0.0, 9.0, n))).astype(np.int64)
    tz = _time_zone(geo.lon)
    arr = (dep + elapsed + 60 * (tz[d] - tz[o])) % 1440
    price = np.maximum(15, np.rint(miles * np.exp(rng.normal(np.log(0.34), 0.28, n)))).astype(np.int64)
    numbers = rng.choice(8_999_999, size=n, replace=False) + 1_000_000

    clock = pl.Series([f"{m // 60:02d}:{m % 60:02d}" for m in range(1440)], dtype=pl.String)
    durations = pl.Series([f"{m // 60} hours {m % 60} minutes" for m in range(int(elapsed.max()) + 1)])
    first = dt.date.fromisoformat(spec.first_date)
    dates = pl.Series([(first + dt.timedelta(days=k)).isoformat() for k in range(n_days)], dtype=pl.String)
    cities = pl.Series(geo.cities, dtype=pl.String)
    return pl.DataFrame(
        {
            "Flight Number": "F" + pl.Series(numbers).cast(pl.String),
            "Price": pl.Series(price, dtype=pl.Int64),
            "DepTime": clock.gather(dep),
            "ArrTime": clock.gather(arr),
            "ActualElapsedTime": durations.gather(elapsed),
            "FlightDate": dates.gather(day),
            "OriginCityName": cities.gather(o),
            "DestCityName": cities.gather(d),
            "Distance": pl.Series(miles, dtype=pl.Float64),
        }
    )


# ───────────────────────────── per-city tables ─────────────────────────────


def _per_city(counts_spec: tuple[int, int, int | None], geo: _Geo, rng: np.random.Generator) -> np.ndarray:
    """How many rows each city gets: uniform in [min, max], or min + a size-weighted share of a total."""
    low, high, total = counts_spec
    n = len(geo.cities)
    if total is None:
        return rng.integers(low, high + 1, n)
    weights = geo.size**0.5
    counts = np.full(n, low)
    left = max(0, min(total, high * n) - low * n)
    while left > 0:  # share out the rest by size; what a full city cannot take goes round again
        room = high - counts
        w = np.where(room > 0, weights, 0.0)
        counts += np.minimum(rng.multinomial(left, w / w.sum()), room)
        left = max(0, min(total, high * n) - int(counts.sum()))
    return counts


def _names(pool: tuple[str, ...], count: int, rng: np.random.Generator, what: str) -> list[str]:
    if count > len(pool):
        raise ValueError(f"name pool for {what} has {len(pool)} names, world needs {count}")
    return [pool[k] for k in rng.choice(len(pool), count, replace=False).tolist()]


def _accommodations(spec: ScaleSpec, geo: _Geo, rng: np.random.Generator) -> pl.DataFrame:
    per_city = _per_city(spec.hotels, geo, rng)
    city = np.repeat(np.arange(len(geo.cities)), per_city)
    n = len(city)
    names = _names(pools.TINY_HOTELS if spec.fixed_pools else pools.hotel_space(), n, rng, "hotels")
    room = rng.choice(3, n, p=_p(_TINY_ROOM_P if spec.fixed_pools else _ROOM_P))
    price = rng.integers(60, 1201, n).astype(float)
    nights = np.asarray(_MIN_NIGHTS, dtype=float)[
        rng.choice(len(_MIN_NIGHTS), n, p=_p(_TINY_MIN_NIGHTS_P if spec.fixed_pools else _MIN_NIGHTS_P))
    ]
    review = (1 + rng.choice(5, n, p=_p(_REVIEW_P))).astype(float)
    occupancy = np.where(
        room == 0,
        np.asarray(_ENTIRE_OCC)[rng.choice(len(_ENTIRE_OCC), n, p=_p(_ENTIRE_OCC_P))],
        np.where(room == 1, 1 + rng.integers(0, 2, n), 1),
    )
    n_rules = 1 + rng.choice(3, n, p=_p(_RULE_COUNT_P))
    rule_order = np.argsort(rng.random((n, len(pools.HOUSE_RULE_NAMES))), axis=1)
    rules = [
        " & ".join(f"No {pools.HOUSE_RULE_NAMES[r]}" for r in row[:k])
        for row, k in zip(rule_order.tolist(), n_rules.tolist(), strict=True)
    ]
    return pl.DataFrame(
        {
            "NAME": names,
            "room type": [pools.ROOM_TYPE_NAMES[r] for r in room.tolist()],
            "price": price,
            "minimum nights": nights,
            "review rate number": review,
            "house_rules": rules,
            "maximum occupancy": pl.Series(occupancy, dtype=pl.Int64),
            "city": [geo.cities[c] for c in city.tolist()],
        }
    )


def _restaurants(spec: ScaleSpec, geo: _Geo, rng: np.random.Generator) -> pl.DataFrame:
    per_city = _per_city(spec.restaurants, geo, rng)
    city = np.repeat(np.arange(len(geo.cities)), per_city)
    n = len(city)
    names = _names(
        pools.TINY_RESTAURANTS if spec.fixed_pools else pools.restaurant_space(), n, rng, "restaurants"
    )
    vocab = pools.CUISINES_COMMON + pools.CUISINES_CONSTRAINT
    weight = np.log(np.array([2.6] * len(pools.CUISINES_COMMON) + [1.0] * len(pools.CUISINES_CONSTRAINT)))
    ranked = np.argsort(-(weight + rng.gumbel(size=(n, len(vocab)))), axis=1)  # weighted draw w/o replacement
    k = np.asarray(_CUISINE_COUNT)[rng.choice(len(_CUISINE_COUNT), n, p=_p(_CUISINE_COUNT_P))]
    cuisines = [
        ", ".join(vocab[c] for c in row[:m]) for row, m in zip(ranked.tolist(), k.tolist(), strict=True)
    ]
    cost = np.where(rng.random(n) < 0.02, rng.integers(100, 251, n), rng.integers(10, 101, n))
    rating = np.round(np.clip(rng.normal(3.6, 0.5, n), 1.8, 4.9), 1)
    rating = np.where(rng.random(n) < 0.22, 0.0, rating)
    return pl.DataFrame(
        {
            "Name": names,
            "City": [geo.cities[c] for c in city.tolist()],
            "Cuisines": cuisines,
            "Average Cost": pl.Series(cost, dtype=pl.Int64),
            "Aggregate Rating": pl.Series(rating, dtype=pl.Float64),
        }
    )


def _attractions(spec: ScaleSpec, geo: _Geo, rng: np.random.Generator) -> pl.DataFrame:
    per_city = _per_city(spec.attractions, geo, rng)
    city = np.repeat(np.arange(len(geo.cities)), per_city)
    n = len(city)
    if spec.fixed_pools:
        names = _names(pools.TINY_ATTRACTIONS, n, rng, "attractions")
        streets: tuple[str, ...] = pools.TINY_STREETS
    else:
        space = pools.attraction_space()
        names = [
            space[k] for c in per_city.tolist() for k in rng.choice(len(space), c, replace=False).tolist()
        ]
        streets = pools.street_space()
    area = rng.integers(201, 990, len(geo.cities))
    zip_base = rng.integers(10_000, 99_000, len(geo.cities))
    number = rng.integers(10, 10_000, n)
    street = rng.integers(0, len(streets), n)
    zip_code = zip_base[city] + rng.integers(0, 40, n)
    phone = rng.integers(0, 10_000_000, n)
    unknown_phone = rng.random(n) < 0.21
    unknown_site = rng.random(n) < 0.20
    lat = np.round(geo.lat[city] + rng.normal(0.0, 0.04, n), 7)
    lon = np.round(geo.lon[city] + rng.normal(0.0, 0.04, n), 7)
    abbr = [pools.state_abbreviation(s) for s in geo.states]
    rows = zip(names, city.tolist(), number.tolist(), street.tolist(), zip_code.tolist(), strict=True)
    addresses = [
        f"{num} {streets[s]}, {geo.cities[c]}, {abbr[geo.state_of[c]]} {z:05d}, USA"
        for _, c, num, s, z in rows
    ]
    phones = [
        "Unknown" if unk else f"({area[c]}) {p // 10_000:03d}-{p % 10_000:04d}"
        for c, p, unk in zip(city.tolist(), phone.tolist(), unknown_phone.tolist(), strict=True)
    ]
    sites = [
        "Unknown" if unk else f"https://www.{_slug(name)}-{_slug(geo.cities[c])}.org/"
        for name, c, unk in zip(names, city.tolist(), unknown_site.tolist(), strict=True)
    ]
    return pl.DataFrame(
        {
            "Name": names,
            "Latitude": lat,
            "Longitude": lon,
            "Address": addresses,
            "Phone": phones,
            "Website": sites,
            "City": [geo.cities[c] for c in city.tolist()],
        }
    )


def _slug(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())
