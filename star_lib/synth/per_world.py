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

from star_lib.synth.config import SynthConfig
from star_lib.synth.dataset import synthesize
from star_lib.travel.worldset import IDX_STRIDE, WorldSet, query_idx
from star_lib.types import QueryRecord

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


def synthesize_per_world(
    worlds: WorldSet,
    seeds: Sequence[int],
    per_world: int,
    mix: str = "easy",
    options: dict[str, Any] | None = None,
) -> list[QueryRecord]:
    """Synthesise up to ``per_world`` tasks (with reference plans) in each world of ``seeds``.

    Args:
        worlds: Where the worlds come from.
        seeds: World seeds; the synthesis of world ``s`` is seeded with ``s``.
        per_world: Tasks per world (below :data:`IDX_STRIDE`).
        mix: Difficulty mix (``easy`` or an ``E:M:H`` ratio, as :class:`SynthConfig` reads it).
        options: Other :class:`SynthConfig` fields (e.g. ``days_choices``).

    Returns:
        The tasks, world by world, each with ``idx = seed * IDX_STRIDE + k``. A world too sparse for
        any task of the mix is skipped.

    """
    if not 1 <= per_world < IDX_STRIDE:
        raise ValueError(f"per_world must be between 1 and {IDX_STRIDE - 1}, got {per_world}")
    values = {k: v for k, v in (options or {}).items() if k not in ("n", "mix", "seed", "splits")}
    if isinstance(values.get("days_choices"), list):
        values["days_choices"] = tuple(values["days_choices"])
    tasks: list[QueryRecord] = []
    for seed in seeds:
        cfg = SynthConfig(n=per_world, mix=mix, seed=seed, splits=(1.0, 0.0, 0.0), **values)
        try:
            result = synthesize(worlds.world(seed), cfg)
        except ValueError:  # a world too sparse for any task of this mix
            continue
        records = [r for split in result.splits.values() for r in split][:per_world]
        tasks += [replace(r, idx=query_idx(seed, k)) for k, r in enumerate(records)]
    return tasks
