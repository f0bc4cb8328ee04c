"""One function per finding of the paper: select and reshape the results, compare with the paper, say so.

Each function takes the results table (``star_lib.experiments.results.load_results(...).frame``, our runs)
and returns a :class:`Finding`: tidy chart data with the paper's figures (``source = "paper"``) beside our
runs (``source = "ours"``), the finding's table, the paper-vs-ours comparisons
(:class:`~star_lib.viz.verdicts.Comparison`), and a verdict sentence generated from them — whether our runs
move in the paper's direction (:mod:`star_lib.viz.verdicts`). Nothing here knows a result in advance: the
paper's side comes from :func:`~star_lib.experiments.results.paper_reference` (spec §9), ours from the runs,
and the verdict from comparing the two.

A verdict needs evidence (:func:`~star_lib.viz.stats.evidence_gate`): a final-pass comparison is judged
only when its best arm beats a floor — the untrained model (``eval/base/final_pass``) when evaluated, else 0
— by more than its 95 % interval, that arm's episodes are not dominated by truncation or format errors,
and, where the runs scored their SFT start (``eval.models: [sft, rl]``), some arm beats its own start by more
than its interval ("RL did not move the model" otherwise).
Every finding also carries the health of each arm (:attr:`Finding.health`: termination mix, format errors,
transport mix, tool calls), the per-check failure profile (:attr:`Finding.checks`) and the behaviour shifts
behind a gain (:func:`~star_lib.viz.verdicts.behaviour_shifts`), which the verdict names.

At ``tiny`` scale the model axis is the tiny study's three sizes (``tiny-s``, ``tiny``, ``tiny-l``:
:data:`~star_lib.train.models.TINY_SCALE`), stand-ins by rank for the paper's 1.5B / 3B / 7B in the scale
finding; a comparison over another axis is made against the paper model a tiny size stands for, or the
nearest one that reports it (:func:`~star_lib.viz.verdicts.paper_stand_in`, named in each comparison).
Where the user's results folder has no run of a finding, :func:`with_study` shows the published tiny study
(``reports/tiny-study/``, :func:`~star_lib.experiments.results.load_study`) instead.

One module per finding, each beside its notebook: ``reward`` (01), ``scale`` (02), ``data`` (03),
``difficulty`` (04), ``algorithm`` (05), ``noise`` (06), ``interactions`` (07); ``base`` holds the skeleton
they share and ``shown`` what a notebook shows. The statistics live in :mod:`star_lib.viz.stats`, the
comparisons and verdicts in :mod:`star_lib.viz.verdicts`, the shared names in :mod:`star_lib.viz.labels`;
the few a notebook reads beside a finding (the health table's columns, :func:`arm_stats` and
:func:`seeds_table` for planning seeds, :data:`FINAL`) are exported here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from star_lib.viz.findings.algorithm import algorithms
from star_lib.viz.findings.base import Finding, ours
from star_lib.viz.findings.data import data_quantity
from star_lib.viz.findings.difficulty import data_difficulty
from star_lib.viz.findings.interactions import (
    EFFECT_SCHEMA,
    complete_block,
    effect_chart_rows,
    factorial_effects,
    interactions,
)
from star_lib.viz.findings.noise import env_noise
from star_lib.viz.findings.reward import reward_design
from star_lib.viz.findings.scale import model_scale
from star_lib.viz.findings.shown import (
    STUDY_MISSING,
    Shown,
    arm_curves,
    machine_note,
    study_curves,
    study_rows,
    with_study,
)
from star_lib.viz.labels import FINAL
from star_lib.viz.stats import HEALTH_PERCENT, TERMINATION_COLUMNS, TRANSPORT_COLUMNS, arm_stats, seeds_table

FINDINGS: Mapping[str, Callable[..., Finding]] = {
    "reward": reward_design,
    "scale": model_scale,
    "data": data_quantity,
    "difficulty": data_difficulty,
    "algorithm": algorithms,
    "noise": env_noise,
    "interactions": interactions,
}
"""Finding name → the function that builds it."""

__all__ = [
    "EFFECT_SCHEMA",
    "FINAL",
    "FINDINGS",
    "HEALTH_PERCENT",
    "STUDY_MISSING",
    "TERMINATION_COLUMNS",
    "TRANSPORT_COLUMNS",
    "Finding",
    "Shown",
    "algorithms",
    "arm_curves",
    "arm_stats",
    "complete_block",
    "data_difficulty",
    "data_quantity",
    "effect_chart_rows",
    "env_noise",
    "factorial_effects",
    "interactions",
    "machine_note",
    "model_scale",
    "ours",
    "reward_design",
    "seeds_table",
    "study_curves",
    "study_rows",
    "with_study",
]
