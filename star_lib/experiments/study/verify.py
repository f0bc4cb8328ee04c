"""Reproducing the published study: compare each rerun's summary with the published one, exactly.

``star study --rerun --runs <empty folder>`` reruns published runs from scratch; ``star study --verify``
then compares every finished rerun with its published summary (:func:`verify_study`), column by column.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from star_lib.experiments.grids import Grid
from star_lib.experiments.runner import grid_dir
from star_lib.experiments.study.publish import run_summary, summary_path

REPRODUCED_PREFIXES: tuple[str, ...] = ("eval/", "ood/", "eval_", "ood_")
"""Columns a rerun must match exactly: the held-out and OOD metrics and the per-query outcomes."""


@dataclass
class Reproduction:
    """How one rerun compares with its published summary."""

    run: str
    """Run name."""
    status: str
    """``reproduced`` (every held-out metric equal), ``differs``, ``other config`` or ``not rerun``."""
    gaps: list[str] = field(default_factory=list)
    """The columns that differ, as ``column: published -> rerun``."""
    machines: tuple[str, str] | None = None
    """The CPUs of the published run and of the rerun when they differ (another CPU's kernels may round
    differently, so a rerun there is not expected to match bit for bit); None when the same or unknown."""


def reproduction_gaps(published: Any, rerun: Any) -> list[str]:
    """Name each held-out metric, per-query outcome or RL-curve value where a rerun differs from its summary.

    Both are one-row summaries (:func:`.publish.run_summary`). Equality is exact (NaN equals NaN): step
    budgets and seeded, greedy evaluation make a rerun of the same config at the same commit give the same
    numbers.
    """
    old, new = published.row(0, named=True), rerun.row(0, named=True)
    columns = [c for c in old if c.startswith(REPRODUCED_PREFIXES)] + ["rl_reward"]
    gaps = []
    for column in columns:
        a, b = old.get(column), new.get(column)
        if not _same(a, b):
            gaps.append(f"{column}: {_short(a)} -> {_short(b)}")
    return gaps


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


def _short(value: Any) -> str:
    if isinstance(value, list):
        return f"[{len(value)} values]"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def verify_study(
    grids: Sequence[Grid], runs_root: str | os.PathLike[str], out_dir: str | os.PathLike[str]
) -> list[Reproduction]:
    """Compare every finished run under ``runs_root`` with its published summary in ``out_dir``; run nothing.

    A run that is not finished under ``runs_root`` (or not published) is ``not rerun``; one whose config
    fingerprint is not the published one is ``other config`` (its numbers are not expected to match).
    """
    import polars as pl

    out = []
    for grid in grids:
        for config in grid.runs:
            path = summary_path(out_dir, grid, config.name)
            run_dir = grid_dir(runs_root, grid) / config.name
            if not path.is_file() or not (run_dir / "metrics.parquet").is_file():
                out.append(Reproduction(config.name, "not rerun"))
                continue
            published = pl.read_parquet(path)
            if published["config_hash"][0] != config.fingerprint():
                out.append(Reproduction(config.name, "other config"))
                continue
            rerun = run_summary(grid, config, run_dir, ("", False))
            gaps = reproduction_gaps(published, rerun)
            cpus = (_cpu_of(published), _cpu_of(rerun))
            machines = cpus if all(cpus) and cpus[0] != cpus[1] else None
            out.append(Reproduction(config.name, "differs" if gaps else "reproduced", gaps, machines))
    return out


def _cpu_of(summary: Any) -> str:
    return str(summary["cpu"][0] or "") if "cpu" in summary.columns else ""
