"""Feasible records per second of STAR stage-1 synthesis on the ``full`` synthetic world, one core.

Every record counted is complete: sampled by the §7 rules, given a constructive plan that the strict
*and* official evaluators both pass (``verify=True``), and back-translated by the template realiser.
Rejected attempts cost time but are not counted.

Two numbers: ``cold_records_per_s`` is the first ``--warmup`` records on a fresh world (it pays the
one-off per-world indexes: road legs, route pools, the evaluator's flight-number index);
``records_per_s`` is the next ``--n`` records (steady state, what a long run sees).

Usage: ``python benchmarks/bench_synth.py [--scale full] [--n 1000] [--warmup 200] [--seed 0]``.
Last line: ``{"records_per_s": …, "acceptance_rate": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy/polars load: one core
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from star_lib.synth import SynthConfig, synthesize  # noqa: E402
from star_lib.travel.world import World  # noqa: E402


def main() -> None:
    """Time world generation, a cold warm-up run and a steady-state run; print a JSON summary last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="full", choices=("tiny", "small", "full"))
    parser.add_argument("--n", type=int, default=1000, help="records timed in the steady-state run")
    parser.add_argument("--warmup", type=int, default=200, help="records of the cold run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    world = World.synthetic(seed=args.seed, scale=args.scale)
    load_s = time.perf_counter() - start
    print(f"world synthetic:{args.scale}:{args.seed} built in {load_s:.1f}s: {world.summary()}")

    start = time.perf_counter()
    cold = synthesize(world, SynthConfig(n=args.warmup, seed=args.seed + 1))
    cold_s = time.perf_counter() - start
    print(
        f"cold: {args.warmup} records in {cold_s:.2f}s ({args.warmup / cold_s:.1f}/s), "
        f"acceptance {cold.stats['acceptance_rate']}"
    )

    start = time.perf_counter()
    warm = synthesize(world, SynthConfig(n=args.n, seed=args.seed + 2))
    warm_s = time.perf_counter() - start
    stats = warm.stats
    print(f"steady: {args.n} records in {warm_s:.2f}s ({args.n / warm_s:.1f}/s)")
    print(f"rejections: {stats['rejections']}")
    print(f"transport: {stats['transport']}  days: {stats['days']}")
    print(
        json.dumps(
            {
                "records_per_s": round(args.n / warm_s, 1),
                "acceptance_rate": stats["acceptance_rate"],
                "cold_records_per_s": round(args.warmup / cold_s, 1),
                "scale": args.scale,
                "n": args.n,
                "world_build_s": round(load_s, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
