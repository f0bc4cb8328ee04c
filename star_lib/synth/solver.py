"""Feasibility by construction: build a concrete plan that passes the strict evaluator, or say why not.

The solver is deliberately simple, so that a model can learn to act it out:

* **Mode** — drive when the record allows it and a destination city lies within ``max_drive_km`` by
  road, otherwise fly (each leg takes the cheaper of its cheapest flight and a taxi); the other mode is
  the fallback.
* **Cities** — 3-day trips visit ``dest``; 5/7-day trips combine the ``max_city_candidates`` cheapest
  usable cities of the state and try visiting orders from the cheapest estimated total upwards.
* **Days** — arrive for dinner, full days with three meals and sights, leave after breakfast (``full``);
  when a city has too few restaurants or the budget is tight, only full days get meals (``minimal``).
* **Nights** — evenly split (2 per city); uneven splits are tried only when minimum stays block the even
  one. Fallback order: preferred mode (full, minimal), then the other mode (full, minimal).
* **Items** — per city the first hotel that honours house rule, room type and minimum nights (rooms =
  ceil(people / maximum occupancy)), then restaurants covering every requested cuisine, then the other
  meals, never repeating a restaurant or an attraction; "first" follows ``tie_break`` (cheapest |
  best-rated | random with a per-record seed).
* **Proof** — the assembled plan must fit the budget and pass the strict and official evaluators.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from star_lib.synth.config import SynthConfig
from star_lib.synth.index import WorldIndex, hotel_allowed, index_for
from star_lib.synth.sample import preferred_mode, trip_cities
from star_lib.types import Accommodation, Attraction, DayPlan, QueryRecord, Restaurant

R_INPUT = "malformed record"
R_UNKNOWN = "unknown destination"
R_FEW_CITIES = "too few cities in state"
R_TRANSPORT = "no flights or road route"
R_HOTELS = "too few hotels after filters"
R_RESTAURANTS = "too few restaurants"
R_CUISINE = "cuisine not available"
R_ATTRACTIONS = "too few attractions"
R_BUDGET = "budget too low"
R_EVALUATOR = "evaluator rejected"
REASON_PRIORITY: tuple[str, ...] = (
    R_INPUT,
    R_UNKNOWN,
    R_FEW_CITIES,
    R_BUDGET,
    R_EVALUATOR,
    R_CUISINE,
    R_HOTELS,
    R_RESTAURANTS,
    R_ATTRACTIONS,
    R_TRANSPORT,
)
"""When several tries fail for different reasons, the reported reason is the first of these that occurred."""

MEALS: tuple[str, ...] = ("breakfast", "lunch", "dinner")
MEAL_STYLES: tuple[str, ...] = ("full", "minimal")
"""Day layouts tried in order: meals and sights on travel days too, then only on full days."""


@dataclass(frozen=True)
class Rejection:
    """Why no plan exists for a record: a stable ``reason`` (counted in stats) and a human ``detail``."""

    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason


def night_splits(days: int, k: int) -> list[tuple[int, ...]]:
    """Nights per city (each >= 1, summing to ``days - 1``): the even split first, then by unevenness.

    >>> night_splits(5, 2)
    [(2, 2), (1, 3), (3, 1)]
    """
    total = days - 1
    splits = [s for s in itertools.product(range(1, total + 1), repeat=k) if sum(s) == total]
    return sorted(splits, key=lambda s: (max(s) - min(s), s))


# ───────────────────────────── day layout ─────────────────────────────


@dataclass(frozen=True)
class DaySlot:
    """What one day needs: its cities, its travel leg, which city each meal/attraction/night is in."""

    day: int
    current_city: str
    leg: tuple[str, str] | None
    meals: tuple[tuple[str, str | None], ...]
    attraction: str | None
    night: str | None


def layout(
    org: str, seq: Sequence[str], nights: Sequence[int], days: int, style: str = "full"
) -> list[DaySlot]:
    """Lay out the days of a trip: arrive for dinner, full days in town, leave after breakfast.

    First day (org→c1): dinner in c1. Move day (ci→cj): breakfast in ci; attraction and dinner in cj.
    Last day (ck→org): breakfast and attraction in ck. Other days: three meals and attractions.
    The ``minimal`` style (for small cities or tight budgets) leaves travel days without meals or sights.
    """
    arrivals, night_city, day = {}, {}, 1
    for i, (city, n) in enumerate(zip(seq, nights, strict=True)):
        arrivals[day] = i
        for x in range(day, day + n):
            night_city[x] = city
        day += n
    slots = []
    for d in range(1, days + 1):
        night = night_city.get(d)
        if d in arrivals or d == days:
            i = arrivals.get(d)
            a, b = (org if i == 0 else seq[i - 1], seq[i]) if i is not None else (seq[-1], org)
            if a == org:
                meals, attraction = (("breakfast", None), ("lunch", None), ("dinner", b)), None
            elif b == org:
                meals, attraction = (("breakfast", a), ("lunch", None), ("dinner", None)), a
            else:
                meals, attraction = (("breakfast", a), ("lunch", None), ("dinner", b)), b
            if style == "minimal":
                meals, attraction = tuple((m, None) for m in MEALS), None
            slots.append(DaySlot(d, f"from {a} to {b}", (a, b), meals, attraction, night))
        else:
            city = night_city[d]
            slots.append(DaySlot(d, city, None, tuple((m, city) for m in MEALS), city, night))
    return slots


@dataclass(frozen=True)
class Skeleton:
    """A layout by position (-1 = origin, 0.. = visiting cities), so city orders can be priced fast."""

    legs: tuple[tuple[int, int, int], ...]
    """(from position, to position, day index) of each travel day."""
    meals: tuple[int, ...]
    """Meals eaten in each visiting city."""
    nights: tuple[int, ...]
    """Nights in each visiting city."""


@functools.lru_cache(maxsize=256)
def skeleton(days: int, nights: tuple[int, ...], style: str = "full") -> Skeleton:
    """Return the :class:`Skeleton` of :func:`layout` for ``days`` and a nights split."""
    names = tuple(f"\0{i}" for i in range(len(nights)))
    pos = {name: i for i, name in enumerate(names)} | {"\0org": -1}
    slots = layout("\0org", names, nights, days, style)
    legs = tuple((pos[s.leg[0]], pos[s.leg[1]], s.day - 1) for s in slots if s.leg is not None)
    meals = Counter(pos[c] for s in slots for _, c in s.meals if c)
    return Skeleton(legs=legs, meals=tuple(meals[i] for i in range(len(nights))), nights=tuple(nights))


# ───────────────────────────── the search context ─────────────────────────────


class _Solver:
    """Choices for one record; caches what several city orders share."""

    def __init__(self, index: WorldIndex, record: QueryRecord, cfg: SynthConfig) -> None:
        self.index, self.record, self.cfg = index, record, cfg
        self.people = max(1, int(record.people_number))
        self.constraint = record.local_constraint
        self.allow_flight = self.constraint.transportation != "no flight"
        self.rng = random.Random(
            f"star-solve|{cfg.seed}|{record.org}|{record.dest}|{record.date}|{record.level}"
        )
        self._rand: dict[tuple[str, str], float] = {}
        self._legs: dict[tuple, tuple[float, str] | None] = {}
        self._hotels: dict[tuple[str, int], Accommodation | None] = {}
        self._restaurants: dict[str, list[Restaurant]] = {}
        self._stays: dict[tuple[str, int, int], float | Rejection] = {}

    # ── ranking ───────────────────────────────────────────────────────────

    def _random_key(self, kind: str, name: str) -> float:
        key = (kind, name)
        if key not in self._rand:
            self._rand[key] = self.rng.random()
        return self._rand[key]

    def _hotel_key(self, h: Accommodation) -> tuple:
        cost = h.price * math.ceil(self.people / h.maximum_occupancy)
        if self.cfg.tie_break == "best-rated":
            return (-h.review_rate, cost, h.name)
        if self.cfg.tie_break == "random":
            return (self._random_key("hotel", f"{h.city}|{h.name}"), h.name)
        return (cost, -h.review_rate, h.name)

    def _restaurant_key(self, r: Restaurant) -> tuple:
        if self.cfg.tie_break == "best-rated":
            return (-r.rating, r.average_cost, r.name)
        if self.cfg.tie_break == "random":
            return (self._random_key("restaurant", f"{r.city}|{r.name}"), r.name)
        return (r.average_cost, -r.rating, r.name)

    def restaurants(self, city: str) -> list[Restaurant]:
        """Usable restaurants of ``city`` in tie-break order."""
        if city not in self._restaurants:
            self._restaurants[city] = sorted(self.index.restaurants(city), key=self._restaurant_key)
        return self._restaurants[city]

    def attractions(self, city: str) -> list[Attraction]:
        """Usable attractions of ``city``: database order, or shuffled for ``random``."""
        rows = list(self.index.attractions(city))
        if self.cfg.tie_break == "random":
            rows.sort(key=lambda a: (self._random_key("attraction", f"{city}|{a.name}"), a.name))
        return rows

    # ── components ────────────────────────────────────────────────────────

    def hotel(self, city: str, nights: int) -> Accommodation | None:
        """Return the first allowed listing of ``city`` whose minimum stay fits ``nights``."""
        key = (city, nights)
        if key not in self._hotels:
            rows = [
                h
                for h in self.index.hotels(city)
                if hotel_allowed(h, self.constraint) and h.minimum_nights <= nights
            ]
            self._hotels[key] = min(rows, key=self._hotel_key) if rows else None
        return self._hotels[key]

    def hotel_cost(self, h: Accommodation, nights: int) -> float:
        """Group cost of ``nights`` nights (rooms = ceil(people / maximum occupancy))."""
        return h.price * math.ceil(self.people / h.maximum_occupancy) * nights

    def leg(self, a: str, b: str, date: str, mode: str) -> tuple[float, str] | None:
        """(group cost, official transportation text) of the chosen way from ``a`` to ``b`` on ``date``."""
        key = (a, b, date, mode)
        if key not in self._legs:
            self._legs[key] = self._choose_leg(a, b, date, mode)
        return self._legs[key]

    def _choose_leg(self, a: str, b: str, date: str, mode: str) -> tuple[float, str] | None:
        road = self.index.leg(a, b)
        if mode == "drive":
            if road is None:
                return None
            cost = road.drive_cost
            text = f"Self-driving, from {a} to {b}, {_route_text(road.row)}, cost: {cost}"
            return cost * math.ceil(self.people / 5), text
        options = []
        flights = self.index.flights(a, b, date) if self.allow_flight else ()
        if flights:
            if self.cfg.tie_break == "random":
                f = min(flights, key=lambda x: (self._random_key("flight", x.number), x.number))
            else:
                f = min(flights, key=lambda x: (x.price, x.dep_time, x.number))
            text = (
                f"Flight Number: {f.number}, from {a} to {b}, "
                f"Departure Time: {f.dep_time}, Arrival Time: {f.arr_time}"
            )
            options.append((f.price * self.people, 0, text))
        if road is not None:
            cost = road.taxi_cost
            text = f"Taxi, from {a} to {b}, {_route_text(road.row)}, cost: {cost}"
            options.append((cost * math.ceil(self.people / 4), 1, text))
        if not options:
            return None
        cost, _, text = min(options)
        return cost, text

    # ── estimates and construction ───────────────────────────────────────

    def stay(self, city: str, nights: int, meals: int) -> float | Rejection:
        """Hotel nights plus the first ``meals`` restaurants of ``city`` for the group, or why not."""
        key = (city, nights, meals)
        if key not in self._stays:
            h = self.hotel(city, nights)
            rows = self.restaurants(city)
            if h is None:
                self._stays[key] = Rejection(R_HOTELS, f"{city} ({nights} nights)")
            elif len(rows) < meals:
                self._stays[key] = Rejection(R_RESTAURANTS, f"{city}: {len(rows)} < {meals}")
            else:
                meal_cost = sum(r.average_cost for r in rows[:meals]) * self.people
                self._stays[key] = self.hotel_cost(h, nights) + meal_cost
        return self._stays[key]

    def estimate(self, seq: Sequence[str], sk: Skeleton, mode: str) -> float | Rejection:
        """Cost of a city order before cuisine and uniqueness adjustments, or the first reason it fails."""
        org, dates = self.record.org, self.record.date
        total = 0.0
        for frm, to, day in sk.legs:
            a, b = (org if frm < 0 else seq[frm]), (org if to < 0 else seq[to])
            got = self.leg(a, b, dates[day], mode)
            if got is None:
                return Rejection(R_TRANSPORT, f"{mode}: {a} -> {b} on {dates[day]}")
            total += got[0]
        for city, n, m in zip(seq, sk.nights, sk.meals, strict=True):
            got = self.stay(city, n, m)
            if isinstance(got, Rejection):
                return got
            total += got
        return total

    def build(
        self, seq: Sequence[str], nights: Sequence[int], mode: str, style: str = "full"
    ) -> tuple[tuple[DayPlan, ...], float] | Rejection:
        """Return the full plan and its group cost, or the reason it cannot be built."""
        record = self.record
        slots = layout(record.org, seq, nights, record.days, style)
        transport, cost = {}, 0.0
        for slot in slots:
            if slot.leg is not None:
                got = self.leg(*slot.leg, record.date[slot.day - 1], mode)
                if got is None:
                    return Rejection(R_TRANSPORT, f"{mode}: {slot.leg[0]} -> {slot.leg[1]}")
                cost += got[0]
                transport[slot.day] = got[1]
        hotels = {}
        for city, n in zip(seq, nights, strict=True):
            h = self.hotel(city, n)
            if h is None:
                return Rejection(R_HOTELS, f"{city} ({n} nights)")
            hotels[city] = h
            cost += self.hotel_cost(h, n)
        meals = self._assign_meals(slots, seq)
        if isinstance(meals, Rejection):
            return meals
        cost += sum(r.average_cost for r, _ in meals.values()) * self.people
        sights = self._assign_attractions(slots, seq)
        if isinstance(sights, Rejection):
            return sights
        plan = tuple(self._day(slot, transport, hotels, meals, sights) for slot in slots)
        return plan, cost

    def _assign_meals(
        self, slots: list[DaySlot], seq: Sequence[str]
    ) -> dict[tuple[int, str], tuple[Restaurant, str]] | Rejection:
        need = Counter(c for s in slots for _, c in s.meals if c)
        chosen: dict[str, list[Restaurant]] = {c: [] for c in seq}
        used: set[tuple[str, str]] = set()
        wanted = list(self.constraint.cuisine or ())
        covered: set[str] = set()
        for cuisine in wanted:
            if cuisine in covered:
                continue
            pool = [
                (self._restaurant_key(r), c, r)
                for c in seq
                if len(chosen[c]) < need[c]
                for r in self.restaurants(c)
                if (r.name, c) not in used and cuisine in _cuisines(r)
            ]
            if not pool:
                return Rejection(R_CUISINE, f"{cuisine} in {', '.join(seq)}")
            _, city, best = min(pool, key=lambda x: (x[0], x[1]))
            chosen[city].append(best)
            used.add((best.name, city))
            covered.update(c for c in wanted if c in _cuisines(best))
        for city in seq:
            for r in self.restaurants(city):
                if len(chosen[city]) >= need[city]:
                    break
                if (r.name, city) not in used:
                    chosen[city].append(r)
                    used.add((r.name, city))
            if len(chosen[city]) < need[city]:
                return Rejection(R_RESTAURANTS, f"{city}: {len(chosen[city])} < {need[city]}")
        queues = {c: sorted(rows, key=self._restaurant_key) for c, rows in chosen.items()}
        out = {}
        for slot in slots:
            for meal, city in slot.meals:
                if city:
                    out[(slot.day, meal)] = (queues[city].pop(0), city)
        return out

    def _assign_attractions(
        self, slots: list[DaySlot], seq: Sequence[str]
    ) -> dict[int, list[tuple[Attraction, str]]] | Rejection:
        days_in = {c: [s.day for s in slots if s.attraction == c] for c in seq}
        out: dict[int, list[tuple[Attraction, str]]] = {}
        for city, days in days_in.items():
            if not days:
                continue
            rows = self.attractions(city)  # each city is visited once, so no repeats across cities
            per_day = min(self.cfg.attractions_per_day, len(rows) // len(days))
            if per_day < 1:
                return Rejection(R_ATTRACTIONS, f"{city}: {len(rows)} < {len(days)}")
            for i, day in enumerate(days):
                out[day] = [(a, city) for a in rows[i * per_day : (i + 1) * per_day]]
        return out

    @staticmethod
    def _day(slot: DaySlot, transport: dict, hotels: dict, meals: dict, sights: dict) -> DayPlan:
        def meal(name: str) -> str:
            got = meals.get((slot.day, name))
            return f"{got[0].name}, {got[1]}" if got else "-"

        attraction = "".join(f"{a.name}, {city};" for a, city in sights.get(slot.day, [])) or "-"
        night = hotels.get(slot.night) if slot.night else None
        return DayPlan(
            days=slot.day,
            current_city=slot.current_city,
            transportation=transport.get(slot.day, "-"),
            breakfast=meal("breakfast"),
            attraction=attraction,
            lunch=meal("lunch"),
            dinner=meal("dinner"),
            accommodation=f"{night.name}, {slot.night}" if night else "-",
        )


def _route_text(row: Any) -> str:
    return f"duration: {row.duration}, distance: {row.distance}"


def _cuisines(r: Restaurant) -> set[str]:
    return {c.strip() for c in str(r.cuisines).split(",")}


# ───────────────────────────── search ─────────────────────────────


def _city_orders(
    solver: _Solver, cities: Sequence[str], sk: Skeleton, mode: str, note: Callable[[Rejection], None]
) -> list[tuple[str, ...]]:
    """Visiting orders: cheapest reachable first cities × cheapest stays × cheapest last cities.

    Each pool keeps ``max_city_candidates`` cities, ranked by leg cost (first/last) plus stay cost.
    """
    k = len(sk.nights)
    if k == 1:
        return [tuple(cities)]
    org, first_day, last_day = solver.record.org, solver.record.date[0], solver.record.date[-1]

    def stay(city: str, i: int) -> float | None:
        got = solver.stay(city, sk.nights[i], sk.meals[i])
        if isinstance(got, Rejection):
            note(got)
            return None
        return got

    def leg(a: str, b: str, date: str) -> float | None:
        got = solver.leg(a, b, date, mode)
        if got is None:
            note(Rejection(R_TRANSPORT, f"{mode}: {a} -> {b} on {date}"))
            return None
        return got[0]

    def ranked(score: Callable[[str], float | None]) -> list[str]:
        scored = sorted((v, c) for c in cities if (v := score(c)) is not None)
        return [c for _, c in scored[: solver.cfg.max_city_candidates]]

    def total(*parts: float | None) -> float | None:
        return None if any(p is None for p in parts) else sum(parts)  # type: ignore[arg-type]

    firsts = ranked(lambda c: total(leg(org, c, first_day), stay(c, 0)))
    lasts = ranked(lambda c: total(leg(c, org, last_day), stay(c, k - 1)))
    if k == 2:
        return [(a, b) for a in firsts for b in lasts if a != b]
    middles = ranked(lambda c: stay(c, 1))
    return [(a, m, b) for a in firsts for m in middles for b in lasts if len({a, m, b}) == 3]


def _modes(record: QueryRecord, preferred: str) -> list[str]:
    modes = [preferred, "fly" if preferred == "drive" else "drive"]
    if record.local_constraint.transportation == "no self-driving":
        modes = [m for m in modes if m != "drive"]
    return modes


def _check_record(index: WorldIndex, record: QueryRecord) -> Rejection | None:
    if record.days not in (3, 5, 7) or len(record.date) != record.days:
        return Rejection(R_INPUT, f"days={record.days} with {len(record.date)} dates")
    if record.visiting_city_number != {3: 1, 5: 2, 7: 3}[record.days]:
        return Rejection(
            R_INPUT, f"visiting_city_number={record.visiting_city_number} for {record.days} days"
        )
    if record.visiting_city_number == 1 and (record.dest not in index.cities or record.dest == record.org):
        return Rejection(R_UNKNOWN, f"city {record.dest!r}")
    if record.visiting_city_number > 1 and record.dest not in index.states:
        return Rejection(R_UNKNOWN, f"state {record.dest!r}")
    return None


def verify_plan(
    world: Any, record: QueryRecord, plan: Sequence[DayPlan], modes=("strict", "official")
) -> list[str]:
    """Failed checks of ``plan`` under each evaluator mode (empty list: the plan passes everything)."""
    from star_lib.travel.evaluate import evaluate_plan

    failed = []
    for mode in modes:
        report = evaluate_plan(record, tuple(plan), world, mode=mode)
        if report.final_pass:
            continue
        checks = dict(report.commonsense) | dict(report.hard or {})
        bad = [k for k, v in checks.items() if v.passed is False] or ["hard checks skipped"]
        failed += [f"{mode}:{k}" for k in bad]
    return failed


def _pick_reason(reasons: Counter, details: dict[str, str], cheapest: float, budget: int) -> Rejection:
    for reason in REASON_PRIORITY:
        if reasons[reason]:
            if reason == R_BUDGET:
                return Rejection(R_BUDGET, f"cheapest plan costs {cheapest:.0f} > budget {budget}")
            return Rejection(reason, details.get(reason, ""))
    return Rejection(R_TRANSPORT, "no candidate plan")


def solve(world: Any, record: QueryRecord, cfg: SynthConfig | None = None) -> tuple[DayPlan, ...] | Rejection:
    """Build a plan for ``record`` that fits its budget and passes the evaluators, or return why not.

    Args:
        world: the ``World`` the plan must live in.
        record: the task (any level; real TravelPlanner records work too).
        cfg: synthesis rules (tie-break, candidate limits, ``verify``); defaults to :class:`SynthConfig`.

    Returns:
        The plan in the official format (one :class:`DayPlan` per day), or a :class:`Rejection`.

    """
    cfg = cfg or SynthConfig()
    index = index_for(world)
    bad = _check_record(index, record)
    if bad is not None:
        return bad
    k = record.visiting_city_number
    cities = trip_cities(index, record)
    if len(cities) < k:
        return Rejection(R_FEW_CITIES, f"{record.dest}: {len(cities)} usable cities < {k}")
    solver = _Solver(index, record, cfg)
    reasons: Counter = Counter()
    details: dict[str, str] = {}
    cheapest = [math.inf]

    def note(rej: Rejection) -> None:
        reasons[rej.reason] += 1
        details.setdefault(rej.reason, rej.detail)

    tries = 0
    for mode, style in itertools.product(_modes(record, preferred_mode(index, record, cfg)), MEAL_STYLES):
        for nights in night_splits(record.days, k):
            hotel_failures = reasons[R_HOTELS]
            sk = skeleton(record.days, nights, style)
            scored = []
            for seq in _city_orders(solver, cities, sk, mode, note):
                est = solver.estimate(seq, sk, mode)
                if isinstance(est, Rejection):
                    note(est)
                elif est > record.budget:
                    cheapest[0] = min(cheapest[0], est)
                    reasons[R_BUDGET] += 1
                else:
                    scored.append((est, seq))
            for _, seq in sorted(scored):
                if tries >= cfg.max_plan_tries:
                    return _pick_reason(reasons, details, cheapest[0], record.budget)
                tries += 1
                plan = _prove(solver, seq, nights, mode, style, note, cheapest)
                if plan is not None:
                    return plan
            if reasons[R_HOTELS] == hotel_failures:
                break  # uneven splits only help when minimum stays blocked a city
    return _pick_reason(reasons, details, cheapest[0], record.budget)


def _prove(
    solver: _Solver, seq, nights, mode, style, note, cheapest: list[float]
) -> tuple[DayPlan, ...] | None:
    """Build one plan and check budget and evaluators; None (with the reason noted) when it fails."""
    built = solver.build(seq, nights, mode, style)
    if isinstance(built, Rejection):
        note(built)
        return None
    plan, cost = built
    record = solver.record
    if cost > record.budget:
        cheapest[0] = min(cheapest[0], cost)
        note(Rejection(R_BUDGET))
        return None
    failed = verify_plan(solver.index.world, record, plan) if solver.cfg.verify else []
    if failed:
        note(Rejection(R_EVALUATOR, ", ".join(failed)))
        return None
    return plan
