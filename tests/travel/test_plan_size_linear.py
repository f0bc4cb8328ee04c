"""No plan makes the evaluator slow: the time per attraction item (or day) stays flat from 1 k to 100 k.

Issue 22 item 2: official mode compared every attraction item against a *list* of the items seen before, so
a plan with one unknown key (the irregular, faithful reading) and 50 k distinct items took 33 s. Each big
plan goes through ``Evaluator.evaluate_payload`` (what ``star eval`` calls) in both modes, in a forked child
so a regression fails instead of hanging. The bound is a ratio measured in the same run: the time per item
of the 100 k plan may be at most :data:`RATIO` times the smaller of the 1 k and 10 k plans' (quadratic code
is ~100× slower per item at 100 k than at 1 k).
"""

from __future__ import annotations

import copy
import multiprocessing
import statistics
import time

import pytest

from star_lib.travel.evaluate import Evaluator
from star_lib.types import QueryRecord

SIZES = (1_000, 10_000)
BIG = 100_000
RATIO = 10.0
"""Allowed growth of the time per item from the small plans to the 100 k one (linear code stays under 3)."""


@pytest.fixture(scope="module")
def setup(first_gold):
    return first_gold


def _plans(days: list[dict], n: int) -> dict[str, list[dict]]:
    """The big plans of ``n`` items: distinct attractions (regular and with an unknown key), ``n`` days."""
    city = days[1]["current_city"]
    items = copy.deepcopy(days)
    items[1]["attraction"] = "".join(f"Place {i}, {city};" for i in range(n))
    unknown = copy.deepcopy(items)
    unknown[1]["note"] = "an unknown key: official mode reads this plan with the faithful irregular checks"
    many_days = copy.deepcopy(days) + [dict(days[-1], days=len(days) + i + 1) for i in range(n)]
    return {"distinct attractions": items, "unknown key": unknown, "many days": many_days}


def _per_item(evaluator: Evaluator, query: QueryRecord, plan: list[dict], n: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        evaluator.clear_caches()
        start = time.perf_counter()
        evaluator.evaluate_payload(query, {"idx": 1, "plan": plan})
        times.append(time.perf_counter() - start)
    return statistics.median(times) / n


def _child(world, query, days, out) -> None:
    evaluators = [Evaluator(world, "official"), Evaluator(world, "strict")]
    small = {n: _plans(days, n) for n in SIZES}
    base: dict[tuple[str, str], float] = {}
    for evaluator in evaluators:
        for shape in small[SIZES[0]]:
            _per_item(evaluator, query, small[SIZES[0]][shape], SIZES[0], 3)  # warm the per-city indexes
            per_item = [_per_item(evaluator, query, small[n][shape], n, 5) for n in SIZES]
            base[evaluator.mode, shape] = max(min(per_item), 1e-7)
    out.put(("base", sum(base.values()) * BIG))
    big = _plans(days, BIG)
    worst = ("", 0.0)
    for evaluator in evaluators:
        for shape, plan in big.items():
            ratio = _per_item(evaluator, query, plan, BIG, 1) / base[evaluator.mode, shape]
            if ratio > worst[1]:
                worst = (f"{evaluator.mode} mode, {shape}", ratio)
    out.put(("big", worst))


def test_evaluator_time_per_item_is_flat_up_to_100k_items_in_both_modes(setup) -> None:
    world, query, days = setup
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_child, args=(world, query, days, out))
    child.start()
    try:
        _, linear_total = out.get(timeout=120)  # a safety net against a hang only
        # the 100 k plans may take RATIO times what linear growth from the small plans predicts
        _, (name, ratio) = out.get(timeout=RATIO * linear_total + 30)
    except Exception:  # noqa: BLE001 - queue.Empty: the child ran past the linear prediction
        pytest.fail(f"the {BIG}-item plans took over {RATIO:g}x the time linear growth predicts")
    finally:
        child.terminate()
        child.join()
    assert ratio < RATIO, f"{name}: {ratio:.1f}x slower per item at {BIG} items than at {SIZES}"
