"""Evaluator throughput (plans/s) in ``strict`` and ``official`` mode on one CPU core.

Workload: the 45 gold train plans, each edited 1-3 times by ``mutate_plan`` (seeded) into ``--plans``
mutated real plans (default 4,000; wrong-city meals, repeats, bad flight numbers, partial names,
"Driving", dropped/extra days, …), evaluated against the real database. For each mode, ``--repeats``
passes each start from a *fresh* Evaluator (empty memos, so index building and first lookups are timed
too); the median pass gives plans/s. Within a pass, parsed days, name splits and lookups are memoised and
reused across plans (rollouts of one query repeat most days); an information line also gives the rate
with every memo cleared before each plan. The process is pinned to one core when the OS allows. Besides
wall-clock plans/s, each mode's line gives plans per CPU-second of this process (``time.process_time``),
which other load on a shared machine does not deflate.

Usage: ``python benchmarks/bench_eval.py [--db DIR] [--train FILE] [--plans 4000] [--repeats 3]``.
Last line: ``{"plans_per_s_strict": …, "plans_per_s_official": …, "cpu_plans_per_s_strict": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from star_lib.travel.evaluate import Evaluator  # noqa: E402
from star_lib.travel.plan import mutate_plan, parse_plan  # noqa: E402
from star_lib.travel.world import World  # noqa: E402
from star_lib.types import QueryRecord  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "travelplanner"


def pin_one_core() -> str:
    """Pin this process to one CPU (Linux); return a description."""
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to cpu {cpu}"
    return "not pinned (no sched_setaffinity)"


def build_workload(world: World, train: Path, n: int, seed: int) -> list[tuple[QueryRecord, tuple]]:
    """``n`` mutated real plans with their queries."""
    gold = []
    for line in train.read_text().splitlines():
        record = json.loads(line)
        gold.append((QueryRecord.from_dict(record), parse_plan(record["annotated_plan"])))
    rng = random.Random(seed)
    work = []
    for _ in range(n):
        query, plan = rng.choice(gold)
        for _ in range(rng.randint(1, 3)):
            plan = mutate_plan(plan, rng, world)
        work.append((query, plan))
    return work


def time_mode(world: World, work: list, mode: str, repeats: int) -> tuple[float, float, float]:
    """Median wall-clock and CPU plans/s over ``repeats`` fresh-Evaluator passes, and the final-pass share."""
    rates, cpu_rates, passed = [], [], 0
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        evaluator = Evaluator(world, mode)
        reports = [evaluator.evaluate(q, p) for q, p in work]
        rates.append(len(work) / (time.perf_counter() - start))
        cpu_rates.append(len(work) / max(1e-9, time.process_time() - cpu))
        passed = sum(r.final_pass for r in reports)
    return statistics.median(rates), statistics.median(cpu_rates), passed / len(work)


def time_uncached(world: World, work: list, mode: str) -> float:
    """Plans/s when every plan starts from empty memos (no day, split or lookup is reused)."""
    evaluator = Evaluator(world, mode)
    start = time.perf_counter()
    for query, plan in work:
        evaluator.clear_caches()
        evaluator.evaluate(query, plan)
    return len(work) / (time.perf_counter() - start)


def main() -> None:
    """Run the benchmark and print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=DATA / "database")
    parser.add_argument("--train", type=Path, default=DATA / "train.jsonl")
    parser.add_argument("--plans", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.plans < 2000:
        parser.error("--plans must be at least 2000")

    print(pin_one_core())
    world = World.from_csv_dir(args.db)
    work = build_workload(world, args.train, args.plans, args.seed)
    result = {}
    for mode in ("strict", "official"):
        rate, cpu_rate, share = time_mode(world, work, mode, args.repeats)
        cold = time_uncached(world, work, mode)
        print(
            f"{mode:8s} {rate:8.0f} plans/s, {cpu_rate:8.0f} per CPU-second ({cold:6.0f} with memos cleared "
            f"before every plan)   final pass {share:.1%} of {len(work)} mutated plans"
        )
        result[f"plans_per_s_{mode}"] = round(rate, 1)
        result[f"cpu_plans_per_s_{mode}"] = round(cpu_rate, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
