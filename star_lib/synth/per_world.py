"""Tasks in per-query worlds: a few tasks synthesised in each of many seeded worlds.

Each task's ``idx`` encodes its world's seed (:func:`star_lib.travel.worldset.query_idx`), so the episode
runner, the teacher and the evaluator rebuild its world from the task alone. Training, RL and held-out tasks
come from disjoint world seeds (:func:`world_seeds`), so a held-out score measures copying from
observations in worlds the model never saw, not memorised worlds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from star_lib.synth.config import SynthConfig, parse_mix
from star_lib.synth.dataset import synthesize
from star_lib.travel.worldset import IDX_STRIDE, WorldSet, query_idx
from star_lib.types import LEVELS, QueryRecord

WORLD_KINDS: dict[str, int] = {"train": 0, "rl": 400_000, "eval": 700_000, "ood": 900_000}
"""Offsets of the world seeds of each use (disjoint for any base seed; ``ood``: the out-of-distribution split
of :mod:`star_lib.experiments.ood`)."""


def world_seeds(base_seed: int, kind: str, count: int) -> list[int]:
    """Return ``count`` world seeds for ``kind`` (``train`` | ``rl`` | ``eval``), disjoint across kinds.

    >>> world_seeds(0, "eval", 2)
    [700000, 700001]
    """
    if kind not in WORLD_KINDS:
        raise ValueError(f"world kind {kind!r} is not allowed; choose one of {list(WORLD_KINDS)}")
    return [base_seed * 1_000_000 + WORLD_KINDS[kind] + i for i in range(count)]


def level_sequence(n: int, mix: str) -> list[str]:
    """Return ``n`` levels in an order whose every prefix is as close to ``mix`` as counts allow.

    Position ``i`` takes the level furthest behind its share ``weight * i``, so a prefix of a multiple of
    the mix's denominator holds it exactly.

    >>> level_sequence(10, "4:3:3").count("hard")
    3
    """
    weights = parse_mix(mix)
    counts = [0, 0, 0]
    levels: list[str] = []
    for i in range(1, n + 1):
        level = max(range(3), key=lambda k: (weights[k] * i - counts[k], -k))
        counts[level] += 1
        levels.append(LEVELS[level])
    return levels


def synthesize_per_world(
    worlds: WorldSet,
    seeds: Sequence[int],
    per_world: int,
    mix: str = "easy",
    options: dict[str, Any] | None = None,
) -> list[QueryRecord]:
    """Synthesise up to ``per_world`` tasks (with reference plans) in each world of ``seeds``.

    The tasks' levels follow :func:`level_sequence` across worlds, so the first ``n`` tasks hold the mix
    over ``n``, not per world (two tasks a world of a 4:3:3 mix would otherwise be 1:1:0). A world too
    sparse for one of its levels is skipped whole and the next world takes its levels.

    Args:
        worlds: Where the worlds come from.
        seeds: World seeds; the synthesis of world ``s`` is seeded with ``s``.
        per_world: Tasks per world (below :data:`IDX_STRIDE`).
        mix: Difficulty mix (``easy`` or an ``E:M:H`` ratio, as :class:`SynthConfig` reads it).
        options: Other :class:`SynthConfig` fields (e.g. ``days_choices``).

    Returns:
        The tasks, world by world, each with ``idx = seed * IDX_STRIDE + k``.

    """
    if not 1 <= per_world < IDX_STRIDE:
        raise ValueError(f"per_world must be between 1 and {IDX_STRIDE - 1}, got {per_world}")
    values = {k: v for k, v in (options or {}).items() if k not in ("n", "mix", "seed", "splits")}
    if isinstance(values.get("days_choices"), list):
        values["days_choices"] = tuple(values["days_choices"])
    levels = level_sequence(len(seeds) * per_world, mix)
    tasks: list[QueryRecord] = []
    for seed in seeds:
        wanted, levels = levels[:per_world], levels[per_world:]
        records = _world_tasks(worlds, seed, wanted, values)
        if records is None:  # a world too sparse for one of its levels: the next world takes them
            levels = wanted + levels
            continue
        tasks += [replace(r, idx=query_idx(seed, k)) for k, r in enumerate(records)]
    return tasks


def _world_tasks(
    worlds: WorldSet, seed: int, levels: list[str], values: dict[str, Any]
) -> list[QueryRecord] | None:
    """Return one task per entry of ``levels`` in world ``seed``, in that order; None if it has too few.

    A single-level list takes whatever the world has, as many as it asks for at most.
    """
    by_level: dict[str, list[QueryRecord]] = {}
    for level in dict.fromkeys(levels):
        cfg = SynthConfig(n=levels.count(level), mix=level, seed=seed, splits=(1.0, 0.0, 0.0), **values)
        try:
            result = synthesize(worlds.world(seed), cfg)
        except ValueError:
            return None
        by_level[level] = [r for split in result.splits.values() for r in split]
    if len(by_level) == 1:  # one level: whatever the world has (a mix is kept whole below)
        return next(iter(by_level.values()))[: len(levels)]
    if any(len(by_level[level]) < levels.count(level) for level in by_level):
        return None
    return [by_level[level].pop(0) for level in levels]
