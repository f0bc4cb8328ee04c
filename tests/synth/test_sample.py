from __future__ import annotations

import datetime as dt
import random
from dataclasses import replace
from statistics import fmean

import pytest

from star_lib.synth import NoCandidateError, SynthConfig, estimate_cost, level_budget, sample_record
from star_lib.synth.sample import sample_elements
from star_lib.types import ROOM_TYPES, TRANSPORT_CONSTRAINTS, LocalConstraint

CFG = SynthConfig()


def _draw(world, level, n, seed=0):
    return [sample_elements(world, level, random.Random(f"t{seed}|{level}|{i}"), CFG) for i in range(n)]


def _other_constraints(lc: LocalConstraint) -> int:
    return sum(v is not None for v in (lc.house_rule, lc.cuisine, lc.room_type))


def _check_shape(world, record):
    assert record.days in (3, 5, 7)
    assert record.visiting_city_number == {3: 1, 5: 2, 7: 3}[record.days]
    dates = [dt.date.fromisoformat(d) for d in record.date]
    assert len(dates) == record.days
    assert all((b - a).days == 1 for a, b in zip(dates, dates[1:], strict=False))
    org_state = world.state_of(record.org)
    if record.days == 3:
        assert record.dest in world.cities
        assert world.state_of(record.dest) != org_state
    else:
        assert record.dest in world.states and record.dest != org_state
        assert len([c for c in world.cities_in(record.dest) if c != record.org]) >= 3
    if record.local_constraint.room_type in ("private room", "entire room"):
        assert record.people_number > 2


def test_sample_easy_has_one_person_and_no_constraint(small_world):
    for s in _draw(small_world, "easy", 80):
        _check_shape(small_world, s.record)
        assert s.record.people_number == 1
        assert s.record.local_constraint == LocalConstraint()
        assert s.record.level == "easy"


def test_sample_medium_has_exactly_one_local_constraint(small_world):
    for s in _draw(small_world, "medium", 80):
        r = s.record
        _check_shape(small_world, r)
        assert 2 <= r.people_number <= 8
        assert r.local_constraint.transportation is None
        assert _other_constraints(r.local_constraint) == 1
        if r.local_constraint.cuisine:
            assert len(r.local_constraint.cuisine) == 2


def test_sample_hard_has_transport_plus_two_constraints(small_world):
    drawn = _draw(small_world, "hard", 80)
    for s in drawn:
        r = s.record
        _check_shape(small_world, r)
        assert 2 <= r.people_number <= 8
        assert r.local_constraint.transportation in TRANSPORT_CONSTRAINTS
        assert _other_constraints(r.local_constraint) == 2
        if r.local_constraint.cuisine:
            assert 2 <= len(r.local_constraint.cuisine) <= 3
        assert s.kind == ("drive" if r.local_constraint.transportation == "no flight" else "fly")
    assert {s.record.local_constraint.transportation for s in drawn} == set(TRANSPORT_CONSTRAINTS)


def test_sample_room_types_for_small_groups_are_shared_or_not(small_world):
    seen = set()
    for s in _draw(small_world, "medium", 200, seed=1) + _draw(small_world, "hard", 200, seed=1):
        room = s.record.local_constraint.room_type
        if room:
            seen.add(room)
            if s.record.people_number <= 2:
                assert room in ("shared room", "not shared room")
    assert seen == set(ROOM_TYPES)


def test_sample_flight_trips_have_three_flights_each_way(small_world):
    for s in _draw(small_world, "medium", 60):
        r = s.record
        assert s.kind == "fly" and not s.notes
        first, last = r.date[0], r.date[-1]
        cities = [r.dest] if r.days == 3 else [c for c in small_world.cities_in(r.dest) if c != r.org]
        outs = [c for c in cities if len(small_world.flights(r.org, c, first)) >= 3]
        backs = [c for c in cities if len(small_world.flights(c, r.org, last)) >= 3]
        assert outs and backs
        if r.days > 3:
            assert any(a != b for a in outs for b in backs)


def test_sample_about_ten_percent_of_easy_trips_drive(small_world):
    drawn = _draw(small_world, "easy", 400, seed=2)
    drives = [s for s in drawn if s.kind == "drive"]
    assert 0.04 <= len(drives) / len(drawn) <= 0.18
    for s in drives:
        r = s.record
        cities = [r.dest] if r.days == 3 else small_world.cities_in(r.dest)
        km = [d.km for c in cities if (d := small_world.distance(r.org, c)) is not None and d.valid]
        assert km and min(km) <= CFG.max_drive_km


def test_sample_budget_follows_level_multipliers(small_world):
    assert level_budget(2000, "easy", 1, CFG) == 2000
    assert level_budget(2000, "medium", 4, CFG) == 6000
    assert level_budget(2000, "hard", 4, CFG) == 4000
    assert level_budget(1649, "easy", 1, CFG) == 1600
    assert level_budget(10, "hard", 2, CFG) == 100
    for level in ("easy", "medium", "hard"):
        for s in _draw(small_world, level, 30, seed=3):
            r = s.record
            base = estimate_cost(small_world, replace(r, budget=0), CFG).base
            mult = {"easy": 1.0, "medium": 0.75, "hard": 0.5}[level]
            assert r.budget == max(100, int(base * r.people_number * mult / 100 + 0.5) * 100)
            assert r.budget % 100 == 0


def _stats(values):
    return min(values), fmean(values), max(values)


def test_sample_cost_estimate_matches_section_7_by_hand(small_world):
    """Recompute the §7 estimate of 3-day flight trips straight from the world tables."""
    checked = 0
    for s in _draw(small_world, "easy", 60, seed=4):
        r = s.record
        if r.days != 3 or s.kind != "fly":
            continue
        est = estimate_cost(small_world, r, CFG)
        if est.mode != "fly":
            continue
        flights = [f.price for f in small_world.flights(r.org, r.dest, r.date[0])]
        flights += [f.price for f in small_world.flights(r.dest, r.org, r.date[-1])]
        hotels = [h.price for h in small_world.accommodations(r.dest)]
        meals = [m.average_cost for m in small_world.restaurants(r.dest)]
        low, avg, _ = (
            2 * f + 3 * h + 9 * m for f, h, m in zip(*map(_stats, (flights, hotels, meals)), strict=True)
        )
        assert est.base == pytest.approx((avg + low) / 2, rel=0.02)
        checked += 1
    assert checked >= 10


def test_sample_same_seed_same_record(small_world):
    for level in ("easy", "medium", "hard"):
        a = sample_record(small_world, level, random.Random(7), CFG)
        b = sample_record(small_world, level, random.Random(7), CFG)
        assert a == b
    many = {sample_record(small_world, "hard", random.Random(i), CFG) for i in range(20)}
    assert len(many) >= 15


def test_sample_real_slice_uses_routes_with_flights(real_world):
    routes = real_world.flight_routes()
    drawn = _draw(real_world, "medium", 40)
    for s in drawn:
        r = s.record
        if r.days == 3:
            assert r.date[0] in routes[(r.org, r.dest)]
            assert r.date[-1] in routes[(r.dest, r.org)]
        assert r.date[0].startswith("2022-03")


def test_sample_impossible_world_says_why(empty_world):
    with pytest.raises(NoCandidateError, match="flight trip is possible"):
        sample_record(empty_world, "medium", random.Random(0), CFG)
    messages = []
    for i in range(30):  # hard trips draw 'no flight' (driving) about half the time
        with pytest.raises(NoCandidateError) as info:
            sample_record(empty_world, "hard", random.Random(i), CFG)
        messages.append(str(info.value))
    assert any("driving trip is possible" in m for m in messages)
    assert any("flight trip is possible" in m for m in messages)
