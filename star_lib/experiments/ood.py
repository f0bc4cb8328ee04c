"""The out-of-distribution split of a tiny run: tasks outside what the run trained on, from unseen worlds.

At tiny scale the paper's OOD QA sets are out of reach, so OOD means *tasks the training distribution does not
contain*. The synth stage writes the split when ``synth.ood`` is set (off by default)::

    synth:
      ood: {n: 200, per_world: 2, days_choices: [7], mix: "4:3:3"}

Tasks are synthesised in worlds of their own (``world_seeds(data_seed, "ood", …)``, disjoint from the
training, RL and held-out worlds) with ``mix`` and ``days_choices``, and a task is kept only when it lies
outside the training distribution (the SFT tasks and the RL prompts together):

- **long**: its trip length is not one any training task has (7 days when training uses 3 and 5);
- **constraints**: its combination of local constraints — which of house rule, cuisine, room type and
  transportation it sets — occurs in no training task (any medium or hard task when training is easy-only).

A task that is neither is dropped, as is one whose origin, destination, dates, constraints, people and days
equal a training task's. The synth stage writes ``ood/test.jsonl`` (the tasks) and ``ood/shift.json`` (the
training lengths and combinations, and per task which shift it carries); the eval stage scores every model on
them as ``ood/…`` metrics, with ``ood/long/…`` and ``ood/constraints/…`` for each kind of shift.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from star_lib.io import write_json_atomic, write_jsonl_atomic
from star_lib.types import QueryRecord

SHIFTS: tuple[str, ...] = ("long", "constraints")
"""Kinds of distribution shift an OOD task carries (a task may carry both)."""
CONSTRAINT_KINDS: tuple[str, ...] = ("house_rule", "cuisine", "room_type", "transportation")
"""Local constraints whose combination defines a task's constraint signature."""
OOD_DIR = "ood"
"""Folder of the split inside the synth stage's output."""
MAX_ROUNDS = 30
"""Rounds of fresh worlds drawn before a split that stays short is refused."""


@dataclass(frozen=True)
class OODConfig:
    """``synth.ood``: size and shape of the out-of-distribution split."""

    n: int = 200
    """Tasks in the split (issue 13: at least 200 per evaluation)."""
    per_world: int = 2
    """Tasks synthesised in each OOD world."""
    days_choices: tuple[int, ...] = (7,)
    """Trip lengths the OOD tasks are drawn from (7: longer than the recipe's 3 and 5 days)."""
    mix: str = "4:3:3"
    """Difficulty mix the OOD tasks are drawn from (``easy``, ``medium``, ``hard`` or ``E:M:H``)."""

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"ood.n must be an integer >= 1, got {self.n!r}")
        if isinstance(self.per_world, bool) or not isinstance(self.per_world, int) or self.per_world < 1:
            raise ValueError(f"ood.per_world must be an integer >= 1, got {self.per_world!r}")
        days = tuple(self.days_choices) if isinstance(self.days_choices, (list, tuple)) else ()
        if not days or any(d not in (3, 5, 7) for d in days):
            raise ValueError(
                f"ood.days_choices: {self.days_choices!r} must be a non-empty subset of [3, 5, 7]"
            )
        object.__setattr__(self, "days_choices", days)
        from star_lib.synth.config import parse_mix

        try:
            parse_mix(self.mix)
        except ValueError as exc:
            raise ValueError(f"ood.mix: {exc}") from None

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> OODConfig:
        """Build from the ``synth.ood`` mapping.

        Raises:
            ValueError: an unknown key (naming the allowed ones) or a bad value.

        """
        if not isinstance(section, Mapping):
            raise ValueError(f"ood must be a mapping of {list(cls.__dataclass_fields__)}, got {section!r}")
        unknown = sorted(set(section) - set(cls.__dataclass_fields__))
        if unknown:
            allowed = list(cls.__dataclass_fields__)
            raise ValueError(f"ood: unknown key(s) {unknown}; allowed keys are {allowed}")
        return cls(**dict(section))


def constraint_signature(record: QueryRecord) -> tuple[str, ...]:
    """Return which local constraints a task sets, in :data:`CONSTRAINT_KINDS` order (``()`` for none).

    >>> from star_lib.types import LocalConstraint
    >>> constraint_signature(QueryRecord(org="A", dest="B", days=3, visiting_city_number=1,
    ...     date=("2022-03-01", "2022-03-02", "2022-03-03"), people_number=2,
    ...     local_constraint=LocalConstraint(cuisine=("Thai",)), budget=900))
    ('cuisine',)
    """
    constraint = record.local_constraint
    return tuple(kind for kind in CONSTRAINT_KINDS if getattr(constraint, kind) is not None)


def task_shifts(
    record: QueryRecord, train_days: set[int], train_signatures: set[tuple[str, ...]]
) -> tuple[str, ...]:
    """Return the shifts (of :data:`SHIFTS`) that put ``record`` outside the training distribution."""
    shifts = []
    if record.days not in train_days:
        shifts.append("long")
    if constraint_signature(record) not in train_signatures:
        shifts.append("constraints")
    return tuple(shifts)


def build_ood_split(
    cfg: OODConfig,
    worlds: Any,
    training: Sequence[QueryRecord],
    data_seed: int,
    options: Mapping[str, Any] | None = None,
) -> tuple[list[QueryRecord], dict[str, Any]]:
    """Synthesise the OOD tasks in fresh worlds and keep those outside the training distribution.

    Args:
        cfg: The split's settings.
        worlds: The per-query world set (:class:`star_lib.travel.worldset.WorldSet`).
        training: Every task the run trains on (SFT tasks and RL prompts).
        data_seed: The synthesis seed; OOD world seeds derive from it.
        options: Other ``SynthConfig`` fields of the run (``days_choices`` is the split's own).

    Returns:
        The tasks (at most ``cfg.n``) and the ``shift.json`` payload.

    Raises:
        ValueError: fewer than ``cfg.n`` tasks outside the training distribution after
            :data:`MAX_ROUNDS` rounds of fresh worlds, saying which setting to widen.

    """
    from star_lib.synth.dataset import held_out_key
    from star_lib.synth.per_world import synthesize_per_world, world_seeds

    train_days = {r.days for r in training}
    train_signatures = {constraint_signature(r) for r in training}
    seen = {held_out_key(r) for r in training}
    values = {**(options or {}), "days_choices": list(cfg.days_choices)}
    kept: list[QueryRecord] = []
    shifts: list[tuple[str, ...]] = []
    used = 0
    for _ in range(MAX_ROUNDS):
        need = cfg.n - len(kept)
        if need <= 0:
            break
        count = math.ceil(need / cfg.per_world) + 5  # a few worlds are too sparse for a task
        seeds = world_seeds(data_seed, "ood", used + count)[used:]
        used += count
        for record in synthesize_per_world(worlds, seeds, cfg.per_world, cfg.mix, values):
            shift = task_shifts(record, train_days, train_signatures)
            if shift and held_out_key(record) not in seen and len(kept) < cfg.n:
                kept.append(record)
                shifts.append(shift)
    if len(kept) < cfg.n:
        raise ValueError(
            f"ood: only {len(kept)} of n={cfg.n} tasks from {used} fresh worlds lie outside the training "
            f"distribution (trip lengths {sorted(train_days)}, constraint combinations "
            f"{sorted(train_signatures)}); widen synth.ood.days_choices or synth.ood.mix, or lower "
            "synth.ood.n"
        )
    payload = {
        "train_days": sorted(train_days),
        "train_constraints": sorted(list(s) for s in train_signatures),
        "days_choices": list(cfg.days_choices),
        "mix": cfg.mix,
        "tasks": [
            {"idx": r.idx, **{s: s in shift for s in SHIFTS}} for r, shift in zip(kept, shifts, strict=True)
        ],
    }
    return kept, payload


def write_ood_split(out: Path, records: Iterable[QueryRecord], payload: Mapping[str, Any]) -> Path:
    """Write ``<out>/ood/test.jsonl`` and ``<out>/ood/shift.json``; returns the folder."""
    from star_lib.synth.dataset import record_row

    folder = Path(out) / OOD_DIR
    write_jsonl_atomic(folder / "test.jsonl", [record_row(r) for r in records])
    write_json_atomic(folder / "shift.json", dict(payload))
    return folder


def read_shifts(folder: Path) -> dict[str, list[bool]]:
    """Return, per shift, one flag per task of ``<folder>/test.jsonl`` (from ``shift.json``)."""
    data = json.loads((Path(folder) / "shift.json").read_text(encoding="utf-8"))
    tasks = data.get("tasks") or []
    return {shift: [bool(t.get(shift)) for t in tasks] for shift in SHIFTS}
