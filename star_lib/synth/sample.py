"""Element sampling: structured query records by difficulty, following the STAR rules (spec §7).

A record is drawn in this order: days, group size, trip kind (flight or driving), a route that fits the
kind (``≥ min_flights`` flights each way on the first/last dates, or a road leg ``≤ max_drive_km``),
the local constraints of the level, and a budget from the cost estimate times the level multiplier.
Sampling never looks at the solver; the solver later proves (or refutes) feasibility.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from star_lib.synth.config import SynthConfig
from star_lib.synth.index import WorldIndex, add_days, hotel_allowed, index_for
from star_lib.types import (
    CUISINES,
    HOUSE_RULES,
    ROOM_TYPES,
    TRANSPORT_CONSTRAINTS,
    LocalConstraint,
    QueryRecord,
)

VISITING_CITIES: dict[int, int] = {3: 1, 5: 2, 7: 3}
"""Visiting-city count per trip length (§7)."""
SMALL_ROOM_TYPES: tuple[str, ...] = ("shared room", "not shared room")
"""Room types a group of at most two may ask for (§7: private/entire only when people > 2)."""


class NoCandidateError(ValueError):
    """The world offers no route of the requested shape; the message says which and what to change."""


@dataclass(frozen=True)
class CostEstimate:
    """The §7 cost estimate of one person's trip: low / average / high totals and the day-weighted base."""

    low: float
    avg: float
    high: float
    base: float
    """3 days: (avg+low)/2, 5 days: avg, 7 days: (avg+high)/2."""
    mode: str
    """Transport the estimate priced: ``fly`` or ``drive``."""


@dataclass
class Sampled:
    """A sampled record with how it was drawn."""

    record: QueryRecord
    kind: str
    """``fly`` or ``drive``: the trip kind the sampler drew the route for."""
    notes: list[str] = field(default_factory=list)
    """Relaxations applied on a sparse world (counted in the dataset stats)."""


# ───────────────────────────── budgets ─────────────────────────────


def round_to_100(value: float) -> int:
    """Round half up to a multiple of 100, at least 100.

    >>> round_to_100(1649.9), round_to_100(1650), round_to_100(12)
    (1600, 1700, 100)
    """
    return max(100, int(value / 100.0 + 0.5) * 100)


def level_budget(base: float, level: str, people: int, cfg: SynthConfig) -> int:
    """Budget of a record: ``base × people × multiplier[level]`` rounded to 100 (§7).

    >>> level_budget(2000, "medium", 4, SynthConfig())
    6000
    """
    return round_to_100(base * people * cfg.budget_multipliers[level])


def trip_cities(index: WorldIndex, record: QueryRecord) -> tuple[str, ...]:
    """Cities the trip may stay in: the destination city, or the usable cities of the destination state."""
    if record.visiting_city_number == 1:
        return (record.dest,)
    return index.usable_cities_in(record.dest, exclude=[record.org])


def preferred_mode(index: WorldIndex, record: QueryRecord, cfg: SynthConfig) -> str:
    """``drive`` when allowed and a destination city lies within ``max_drive_km`` by road, else ``fly``.

    ``no flight`` forces ``drive`` and ``no self-driving`` forces ``fly`` (taxis ride with flights).
    """
    transport = record.local_constraint.transportation
    if transport == "no self-driving":
        return "fly"
    if transport == "no flight":
        return "drive"
    for city in trip_cities(index, record):
        leg = index.leg(record.org, city)
        if leg is not None and leg.row.km <= cfg.max_drive_km:
            return "drive"
    return "fly"


def _stats(values: list[float]) -> tuple[float, float, float]:
    return (min(values), fmean(values), max(values)) if values else (0.0, 0.0, 0.0)


def estimate_cost(world: Any, record: QueryRecord, cfg: SynthConfig) -> CostEstimate:
    """Estimate a trip as §7 does: transport × {2,3,4} + hotel × {3,5,7} + meals × {9,15,21}, per person.

    Transport prices the solver's preferred mode (flights on the first/last dates, or one car);
    hotels are those allowed by the record's house rule and room type (all of them if none is).
    """
    index = index_for(world)
    cities = trip_cities(index, record)
    mode = preferred_mode(index, record, cfg)
    first, last = record.date[0], record.date[-1]
    transport: list[float] = []
    if mode == "fly":
        transport = [f.price for c in cities for f in index.flights(record.org, c, first)]
        transport += [f.price for c in cities for f in index.flights(c, record.org, last)]
    if not transport:
        legs = [index.leg(record.org, c) for c in cities] + [index.leg(c, record.org) for c in cities]
        transport = [leg.drive_cost for leg in legs if leg is not None]
    rows = [h for c in cities for h in index.hotels(c)]
    allowed = [h.price for h in rows if hotel_allowed(h, record.local_constraint)] or [h.price for h in rows]
    meals = [r.average_cost for c in cities for r in index.restaurants(c)]
    n_legs, n_nights, n_meals = record.days // 2 + 1, record.days, 3 * record.days
    t, h, m = _stats(transport), _stats(allowed), _stats(meals)
    low, avg, high = (n_legs * t[i] + n_nights * h[i] + n_meals * m[i] for i in range(3))
    base = {3: (avg + low) / 2, 5: avg, 7: (avg + high) / 2}[record.days]
    return CostEstimate(low=low, avg=avg, high=high, base=base, mode=mode)


# ───────────────────────────── candidates ─────────────────────────────


def _near(index: WorldIndex, org: str, cities: tuple[str, ...], max_km: float) -> bool:
    legs = (index.leg(org, c) for c in cities)
    return any(leg is not None and leg.row.km <= max_km for leg in legs)


def _fly_single(index: WorldIndex, min_flights: int) -> list[tuple[str, str, str]]:
    """(org, city, start) of 3-day flight trips with enough flights both ways, different states."""
    out = []
    for (o, d), dates in sorted(index.routes.items()):
        so, sd = index.state_of(o), index.state_of(d)
        if not so or not sd or so == sd or not index.usable(d):
            continue
        back = set(index.routes.get((d, o), ()))
        for s in dates:
            e = add_days(s, 2)
            if (
                e in back
                and len(index.flights(o, d, s)) >= min_flights
                and len(index.flights(d, o, e)) >= min_flights
            ):
                out.append((o, d, s))
    return out


def _fly_state(index: WorldIndex, days: int, min_flights: int, min_cities: int) -> list[tuple[str, str, str]]:
    """(org, state, start) of 5/7-day flight trips: a first and a different last city with enough flights."""
    k = VISITING_CITIES[days]
    outs: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    ins: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for (a, b), dates in sorted(index.routes.items()):
        sa, sb = index.state_of(a), index.state_of(b)
        if not sa or not sb or sa == sb:
            continue
        for date in dates:
            if len(index.flights(a, b, date)) < min_flights:
                continue
            if index.usable(b):
                outs[(a, sb, date)].add(b)
            if index.usable(a):
                ins[(b, sa, date)].add(a)
    found = []
    for (o, st, s), firsts in sorted(outs.items()):
        lasts = ins.get((o, st, add_days(s, days - 1)), set())
        if not any(c1 != ck for c1 in firsts for ck in lasts):
            continue
        if len(index.usable_cities_in(st, exclude=[o])) >= max(min_cities, k):
            found.append((o, st, s))
    return found


def _drive_pairs(index: WorldIndex, max_km: float | None) -> list[tuple[str, str]]:
    """(org, city) pairs in different states with road legs both ways (first leg ``≤ max_km``)."""
    out = []
    for o in index.cities:
        so = index.state_of(o)
        for c in index.cities:
            sc = index.state_of(c)
            if c == o or not so or not sc or so == sc:
                continue
            there = index.leg(o, c)
            if there is None or (max_km is not None and there.row.km > max_km):
                continue
            if index.leg(c, o) is not None and index.usable(c):
                out.append((o, c))
    return out


def _drive_states(
    index: WorldIndex, days: int, max_km: float | None, min_cities: int
) -> list[tuple[str, str]]:
    """(org, state) pairs whose state has a reachable first city and a different last city with a way home."""
    need = max(min_cities, VISITING_CITIES[days])
    out = []
    for st in index.states:
        in_state = index.usable_cities_in(st)
        if len(in_state) < need:
            continue
        for o in index.cities:
            if index.state_of(o) in (None, st):
                continue
            firsts = [
                c for c in in_state if (leg := index.leg(o, c)) and (max_km is None or leg.row.km <= max_km)
            ]
            if not firsts:
                continue
            lasts = [c for c in in_state if index.leg(c, o) is not None]
            if any(a != b for a in firsts for b in lasts):
                out.append((o, st))
    return out


SAMPLE_TRIES = 256
"""Random route/date draws before a flight-trip sampler falls back to enumerating every candidate."""


def _fly_pool(index: WorldIndex, days: int, min_cities: int) -> list[tuple[str, str]]:
    """Flight routes that can open a trip: different states, a usable first city (or state)."""
    need = max(min_cities, VISITING_CITIES[days])

    def build() -> list[tuple[str, str]]:
        out = []
        for o, c in sorted(index.routes):
            so, sc = index.state_of(o), index.state_of(c)
            if not so or not sc or so == sc or not index.usable(c):
                continue
            if days == 3 and (c, o) in index.routes:
                out.append((o, c))
            elif days > 3 and len(index.usable_cities_in(sc, exclude=[o])) >= need:
                out.append((o, c))
        return out

    return index.cached(("fly-pool", days, need), build)


def _try_fly(index: WorldIndex, days: int, pair: tuple[str, str], rng: random.Random, mf: int):
    """Draw a start date for a route; return (org, dest, start) when both ends have ``mf`` flights."""
    o, c = pair
    dates = index.routes[pair]
    if days == 3:
        back = index.route_dates(c, o)
        starts = [s for s in dates if add_days(s, 2) in back]
        if not starts:
            return None
        s = starts[rng.randrange(len(starts))]
        ok = len(index.flights(o, c, s)) >= mf and len(index.flights(c, o, add_days(s, 2))) >= mf
        return (o, c, s) if ok else None
    s = dates[rng.randrange(len(dates))]
    if len(index.flights(o, c, s)) < mf:
        return None
    e, state = add_days(s, days - 1), index.state_of(c)
    for last in index.usable_cities_in(state, exclude=[o]):
        if last != c and e in index.route_dates(last, o) and len(index.flights(last, o, e)) >= mf:
            return (o, state, s)
    return None


def _is_far(index: WorldIndex, days: int, org: str, dest: str, cfg: SynthConfig) -> bool:
    cities = (dest,) if days == 3 else index.usable_cities_in(dest, exclude=[org])
    return not _near(index, org, cities, cfg.max_drive_km)


def _enumerate_fly(index: WorldIndex, days: int, mf: int, cfg: SynthConfig) -> tuple[list, list]:
    """Every flight-trip candidate, and those beyond driving distance (cached per world)."""

    def build() -> tuple[list, list]:
        if days == 3:
            cands = _fly_single(index, mf)
        else:
            cands = _fly_state(index, days, mf, cfg.min_state_cities)
        far_pairs = {(o, d) for o, d, _ in cands if _is_far(index, days, o, d, cfg)}
        return cands, [c for c in cands if (c[0], c[1]) in far_pairs]

    return index.cached(("fly-all", days, mf, cfg.min_state_cities, cfg.max_drive_km), build)


def _draw_fly(index: WorldIndex, days: int, rng: random.Random, cfg: SynthConfig, notes: list[str]):
    """Draw (org, dest, start) of a flight trip: random draws first, exhaustive enumeration as fallback.

    Routes within driving distance are avoided (the solver would drive them); ``min_flights`` is relaxed
    to 1 on sparse worlds when ``relax_on_sparse``. Both relaxations are noted.
    """
    pool = _fly_pool(index, days, cfg.min_state_cities)
    thresholds = [cfg.min_flights] + ([1] if cfg.relax_on_sparse and cfg.min_flights > 1 else [])
    for mf in thresholds if pool else []:
        relaxed = (
            [f"relaxed min_flights {cfg.min_flights}->{mf} ({days}-day flight trips)"]
            if mf != cfg.min_flights
            else []
        )
        for _ in range(SAMPLE_TRIES):
            got = _try_fly(index, days, pool[rng.randrange(len(pool))], rng, mf)
            if got is not None and _is_far(index, days, got[0], got[1], cfg):
                notes.extend(relaxed)
                return got
        cands, far = _enumerate_fly(index, days, mf, cfg)
        if far or cands:
            notes.extend(relaxed)
            if not far:
                notes.append(f"flight trip within {cfg.max_drive_km:g} km by road ({days}-day)")
            chosen = far or cands
            return chosen[rng.randrange(len(chosen))]
    return None


def _drive_candidates(index: WorldIndex, days: int, max_km: float | None, cfg: SynthConfig) -> list:
    key = ("drive", days, max_km, cfg.min_state_cities)
    if days == 3:
        return index.cached(key, lambda: _drive_pairs(index, max_km))
    return index.cached(key, lambda: _drive_states(index, days, max_km, cfg.min_state_cities))


def _pick_route(
    index: WorldIndex,
    days: int,
    kind: str,
    max_km: float | None,
    rng: random.Random,
    cfg: SynthConfig,
    notes: list,
) -> tuple[str, str, str, str]:
    """Return (org, dest, start date, kind); fall back from driving to flying (noted) when needed."""
    if kind == "drive":
        pairs = _drive_candidates(index, days, max_km, cfg)
        last_start = len(index.dates) - days
        if pairs and last_start >= 0:
            org, dest = pairs[rng.randrange(len(pairs))]
            return org, dest, index.dates[rng.randrange(last_start + 1)], "drive"
        if max_km is None:
            raise NoCandidateError(
                f"no {days}-day driving trip is possible: no road legs between states in this world "
                "(add distance rows, or drop 'no flight' trips from the hard level)"
            )
        notes.append(f"no driving route within {cfg.max_drive_km:g} km ({days}-day); drew a flight trip")
    got = _draw_fly(index, days, rng, cfg, notes)
    if got is None:
        shape = "a city" if days == 3 else f"a state with >= {cfg.min_state_cities} usable cities"
        raise NoCandidateError(
            f"no {days}-day flight trip is possible: no origin/{shape} pair in different states has "
            f"flights on both the first and the last date (world has {len(index.routes)} flight routes); "
            "use a world with more flights or restrict days_choices"
        )
    org, dest, start = got
    return org, dest, start, "fly"


# ───────────────────────────── constraints ─────────────────────────────


def _room_type(people: int, rng: random.Random) -> str:
    return rng.choice(ROOM_TYPES if people > 2 else SMALL_ROOM_TYPES)


def sample_constraint(level: str, people: int, transport: str | None, rng: random.Random, cfg: SynthConfig):
    """Local constraints of a level (§7): none; exactly one; or transportation plus two others."""
    if level == "easy":
        return LocalConstraint()
    picks = rng.sample(["house rule", "cuisine", "room type"], 1 if level == "medium" else 2)
    n_cuisines = cfg.medium_cuisines if level == "medium" else rng.randint(*cfg.hard_cuisines)
    values: dict[str, Any] = {}
    for name in sorted(picks):
        if name == "house rule":
            values["house_rule"] = rng.choice(HOUSE_RULES)
        elif name == "cuisine":
            values["cuisine"] = tuple(rng.sample(CUISINES, n_cuisines))
        else:
            values["room_type"] = _room_type(people, rng)
    return LocalConstraint(transportation=transport if level == "hard" else None, **values)


# ───────────────────────────── the sampler ─────────────────────────────


def sample_elements(world: Any, level: str, rng: random.Random, cfg: SynthConfig) -> Sampled:
    """Draw one record of ``level``; see :func:`sample_record`.

    Raises:
        NoCandidateError: when the world has no route of the drawn shape.

    """
    if level not in cfg.budget_multipliers:
        raise ValueError(f"level {level!r}: use one of easy, medium, hard")
    index = index_for(world)
    notes: list[str] = []
    days = rng.choice(cfg.days_choices)
    people = 1 if level == "easy" else rng.randint(*cfg.people_range)
    transport = rng.choice(TRANSPORT_CONSTRAINTS) if level == "hard" else None
    if transport is not None:
        kind, max_km = ("drive", None) if transport == "no flight" else ("fly", None)
    else:
        is_drive = level == "easy" and rng.random() < cfg.driving_share
        kind, max_km = ("drive", cfg.max_drive_km) if is_drive else ("fly", None)
    org, dest, start, kind = _pick_route(index, days, kind, max_km, rng, cfg, notes)
    constraint = sample_constraint(level, people, transport, rng, cfg)
    record = QueryRecord(
        org=org,
        dest=dest,
        days=days,
        visiting_city_number=VISITING_CITIES[days],
        date=tuple(add_days(start, i) for i in range(days)),
        people_number=people,
        local_constraint=constraint,
        budget=0,
        level=level,
    )
    budget = level_budget(estimate_cost(world, record, cfg).base, level, people, cfg)
    return Sampled(record=_replace_budget(record, budget), kind=kind, notes=notes)


def _replace_budget(record: QueryRecord, budget: int) -> QueryRecord:
    from dataclasses import replace

    return replace(record, budget=budget)


def sample_record(world: Any, level: str, rng: random.Random, cfg: SynthConfig | None = None) -> QueryRecord:
    """Draw one structured query record of ``level`` (``query`` text empty, no plan yet).

    Args:
        world: any ``World`` (synthetic or the official CSVs; a flights slice works on the routes it has).
        level: ``easy`` | ``medium`` | ``hard``.
        rng: the generator that decides every choice (seed it for determinism).
        cfg: synthesis rules; defaults to :class:`SynthConfig`.

    Raises:
        NoCandidateError: when the world has no route of the drawn shape (the message says what to change).

    """
    return sample_elements(world, level, rng, cfg or SynthConfig()).record
