from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import replace

import pytest

from star_lib.synth import Rejection, SynthConfig, layout, night_splits, solve
from star_lib.synth.sample import sample_elements
from star_lib.synth.solver import MEAL_STYLES, skeleton
from star_lib.travel.evaluate import evaluate_plan, plan_cost
from star_lib.types import LocalConstraint, QueryRecord

CFG = SynthConfig()


def _records(world, level, n, seed=0):
    return [
        sample_elements(world, level, random.Random(f"s{seed}|{level}|{i}"), CFG).record for i in range(n)
    ]


def _passes(world, record, plan, mode="strict"):
    report = evaluate_plan(record, plan, world, mode=mode)
    return report.final_pass, report


def _split(text):
    name, _, city = text.rpartition(", ")
    return name, city


def test_solver_train_queries_pass_strict(tp_dir, real_world):
    """Each of the 45 real train queries, fed to the solver, gets a strict-passing plan (>= 40 required)."""
    lines = (tp_dir / "train.jsonl").read_text(encoding="utf-8").splitlines()
    records = [QueryRecord.from_dict(json.loads(line)) for line in lines if line.strip()]
    assert len(records) == 45
    passed, reasons = 0, []
    for r in records:
        plan = solve(real_world, r, CFG)
        if isinstance(plan, Rejection):
            reasons.append(
                f"{r.level} {r.org} -> {r.dest} ({r.days}d, {r.people_number}p, ${r.budget}): {plan}"
            )
            continue
        ok, report = _passes(real_world, r, plan)
        assert ok, report.to_dict()
        assert _passes(real_world, r, plan, "official")[0]
        passed += 1
    print(f"train queries solved: {passed}/45", *reasons, sep="\n  ")
    assert passed >= 40


def test_solver_real_slice_records_are_feasible(real_world):
    routes = real_world.flight_routes()
    solved = 0
    for level in ("easy", "medium", "hard"):
        for r in _records(real_world, level, 25):
            plan = solve(real_world, r, CFG)
            if isinstance(plan, Rejection):
                continue
            solved += 1
            assert _passes(real_world, r, plan)[0] and _passes(real_world, r, plan, "official")[0]
            for day in plan:
                if day.transportation.startswith("Flight Number: "):
                    number = day.transportation.split(",")[0].removeprefix("Flight Number: ")
                    flight = real_world.flight(number)
                    assert flight is not None and (flight.origin, flight.dest) in routes
    assert solved >= 50


def test_solver_plans_honour_every_constraint(small_world):
    for r in _records(small_world, "hard", 60, seed=1):
        plan = solve(small_world, r, CFG)
        if isinstance(plan, Rejection):
            continue
        lc = r.local_constraint
        assert len(plan) == r.days and [d.days for d in plan] == list(range(1, r.days + 1))
        assert plan_cost(r, plan, small_world) <= r.budget
        meals = [m for d in plan for m in (d.breakfast, d.lunch, d.dinner) if m != "-"]
        assert len(meals) == len(set(meals))
        sights = [a for d in plan if d.attraction != "-" for a in d.attraction.split(";") if a]
        assert len(sights) == len(set(sights))
        kinds = {d.transportation.split(",")[0].split(":")[0] for d in plan if d.transportation != "-"}
        if lc.transportation == "no flight":
            assert "Flight Number" not in kinds
        if lc.transportation == "no self-driving":
            assert "Self-driving" not in kinds
        assert not ("Self-driving" in kinds and kinds - {"Self-driving"})
        nights = Counter(d.accommodation for d in plan if d.accommodation != "-")
        for text, count in nights.items():
            name, city = _split(text)
            (row,) = [h for h in small_world.accommodations(city) if h.name == name]
            assert row.minimum_nights <= count
            if lc.house_rule:
                assert f"No {lc.house_rule}" not in row.house_rules
            if lc.room_type == "entire room":
                assert row.room_type == "Entire home/apt"
            if lc.room_type == "not shared room":
                assert row.room_type != "Shared room"
        if lc.cuisine:
            served = set()
            for m in meals:
                name, city = _split(m)
                (row,) = [x for x in small_world.restaurants(city) if x.name == name]
                served |= {c.strip() for c in row.cuisines.split(",")}
            assert set(lc.cuisine) <= served


def test_solver_rejects_with_reasons(small_world):
    r = next(r for r in _records(small_world, "easy", 20) if r.days == 3)
    assert solve(small_world, replace(r, budget=1)).reason == "budget too low"
    assert solve(small_world, replace(r, dest="Atlantis")).reason == "unknown destination"
    assert solve(small_world, replace(r, days=4)).reason == "malformed record"
    klingon = replace(r, local_constraint=LocalConstraint(cuisine=("Klingon",)))
    assert solve(small_world, klingon).reason == "cuisine not available"
    picky = replace(
        r, people_number=8, local_constraint=LocalConstraint(room_type="shared room", house_rule="pets")
    )
    rejected = solve(small_world, replace(picky, budget=10**7))
    if isinstance(rejected, Rejection):  # only when no shared room allows pets in that city
        assert rejected.reason == "too few hotels after filters"


@pytest.mark.parametrize("tie_break", ["cheapest", "best-rated", "random"])
def test_solver_tie_breaks_all_prove_feasible(small_world, tie_break):
    cfg = SynthConfig(tie_break=tie_break)
    solved = 0
    for r in _records(small_world, "medium", 25, seed=2):
        plan = solve(small_world, replace(r, budget=r.budget * 10), cfg)
        if not isinstance(plan, Rejection):
            solved += 1
            assert _passes(small_world, r, plan)[0] is not None
            assert plan == solve(small_world, replace(r, budget=r.budget * 10), cfg)  # deterministic
    assert solved >= 15


def test_solver_cheapest_is_no_dearer_than_best_rated(small_world):
    cheaper = 0
    for r in _records(small_world, "easy", 25, seed=3):
        rich = replace(r, budget=10**7)
        a, b = solve(small_world, rich, CFG), solve(small_world, rich, SynthConfig(tie_break="best-rated"))
        if isinstance(a, Rejection) or isinstance(b, Rejection):
            continue
        ca, cb = plan_cost(rich, a, small_world), plan_cost(rich, b, small_world)
        assert ca <= cb + 1e-6
        cheaper += ca < cb
    assert cheaper >= 5


def test_solver_works_on_tiny_world(tiny_world):
    solved = 0
    for level in ("easy", "medium", "hard"):
        for r in _records(tiny_world, level, 20):
            plan = solve(tiny_world, r, CFG)
            if not isinstance(plan, Rejection):
                solved += 1
                assert _passes(tiny_world, r, plan)[0]
    assert solved >= 20


def test_solver_night_splits_and_layouts():
    assert night_splits(3, 1) == [(2,)]
    assert night_splits(5, 2)[0] == (2, 2)
    assert night_splits(7, 3)[0] == (2, 2, 2) and len(night_splits(7, 3)) == 10
    slots = layout("O", ["A", "B", "C"], (2, 2, 2), 7)
    assert [s.current_city for s in slots] == [
        "from O to A",
        "A",
        "from A to B",
        "B",
        "from B to C",
        "C",
        "from C to O",
    ]
    assert [s.night for s in slots] == ["A", "A", "B", "B", "C", "C", None]
    for style in MEAL_STYLES:
        sk = skeleton(7, (2, 2, 2), style)
        assert sk.legs == ((-1, 0, 0), (0, 1, 2), (1, 2, 4), (2, -1, 6))
        assert sk.meals == ((5, 5, 5) if style == "full" else (3, 3, 3))


def test_solver_uses_rooms_for_the_whole_group(small_world):
    for r in _records(small_world, "medium", 30, seed=4):
        plan = solve(small_world, r, CFG)
        if isinstance(plan, Rejection):
            continue
        text = plan[0].accommodation
        name, city = _split(text)
        (row,) = [h for h in small_world.accommodations(city) if h.name == name]
        rooms = math.ceil(r.people_number / row.maximum_occupancy)
        assert rooms >= 1
        assert plan_cost(r, plan, small_world) >= rooms * row.price
