"""What a finding notebook shows: the user's runs of a finding, else the published tiny study's.

:func:`with_study` picks the rows (:class:`Shown`); :func:`study_rows` and :func:`study_curves` turn the
published per-run summaries (``reports/tiny-study/``, :func:`~star_lib.experiments.results.load_study`) into
the tidy results table and its training curves, so every finding reads them like the user's own runs;
:func:`arm_curves` averages a curve over each arm's seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from star_lib.experiments.results import (
    AXIS_SCHEMA,
    CURVE_SCHEMA,
    OUTCOME_COLUMNS,
    OUTCOME_SPLITS,
    RL_CURVE,
    SCHEMA,
    STUDY_RESULTS,
    load_study,
)
from star_lib.experiments.study import PROJECT_ROOT
from star_lib.viz.findings.base import ours
from star_lib.viz.stats import QUERY_METRIC, arm_name

STUDY_MISSING = "the study has not been run yet: `star study --scale tiny`"
"""What a finding says at tiny scale when neither the user's runs nor the published study has its runs."""


@dataclass(frozen=True)
class Shown:
    """The results a finding notebook shows, and one sentence saying where they come from."""

    frame: pl.DataFrame
    """The tidy results table (:data:`~star_lib.experiments.results.SCHEMA`)."""
    source: str
    """Whose runs these are: the user's, the published study's, or neither (:data:`STUDY_MISSING`)."""
    study: bool = False
    """True when the rows are the published study's."""
    curves: pl.DataFrame | None = None
    """Per-step training metrics of the same runs (:func:`~star_lib.viz.runs.load_curves`' columns): the
    user's when given, the published runs' RL reward curve (:func:`study_curves`) when the study is shown."""


def study_rows(study: pl.DataFrame) -> pl.DataFrame:
    """Turn the published study's per-run summaries (:func:`load_study`) into the tidy results table.

    One row per run × held-out metric (``eval/…``, ``ood/…``, ``cost/…``; the RL stage's step means
    ``rl/mean/…``, ``rl/first/…`` with ``stage = "rl"``), ``source = "ours"``, ``status = "done"``, the
    run's axes and ``note`` = its commit, so every finding function reads them like the rows of
    :func:`~star_lib.experiments.results.load_results`; plus, for summaries that list them, one row per
    run × held-out query and rate (``query/eval/final_pass/<query id>``, :data:`QUERY_METRIC`), from which
    :func:`~star_lib.viz.stats.arm_stats` bootstraps the intervals.
    """
    metrics = [c for c in study.columns if c.startswith(("eval/", "ood/", "cost/", "rl/"))]
    if study.height == 0 or not metrics:
        return pl.DataFrame(schema=SCHEMA)
    ids = ["grid", "run", "finding", *[k for k in AXIS_SCHEMA if k in study.columns]]
    commit = [pl.col("commit").cast(pl.String).alias("note")] if "commit" in study.columns else []
    long = study.select(*ids, *commit, *[pl.col(m).cast(pl.Float64) for m in metrics]).unpivot(
        index=[*ids, *(["note"] if commit else [])], on=metrics, variable_name="metric", value_name="value"
    )
    long = long.filter(pl.col("value").is_not_null()).with_columns(
        pl.lit("ours").alias("source"),
        pl.lit("done").alias("status"),
        pl.when(pl.col("metric").str.starts_with("cost/"))
        .then(pl.lit(None, dtype=pl.String))
        .when(pl.col("metric").str.starts_with("rl/"))
        .then(pl.lit("rl"))
        .otherwise(pl.lit("eval"))
        .alias("stage"),
        pl.lit("=").alias("relation"),
        *([] if commit else [pl.lit(None, dtype=pl.String).alias("note")]),
    )
    long = pl.concat([long, *_query_rows(study, ids, bool(commit))], how="diagonal_relaxed")
    for key, dtype in SCHEMA.items():
        long = long.with_columns(
            pl.col(key).cast(dtype) if key in long.columns else pl.lit(None, dtype=dtype).alias(key)
        )
    return long.select(list(SCHEMA))


def _query_rows(study: pl.DataFrame, ids: Sequence[str], commit: bool) -> list[pl.DataFrame]:
    """Return the per-query rows (``query/<split>/<rate>/<query id>``) of the summaries that list them."""
    parts = []
    for split in OUTCOME_SPLITS:
        key = f"{split}_query"
        for name in OUTCOME_COLUMNS:
            column = f"{split}_{name}"
            if key not in study.columns or column not in study.columns:
                continue
            picked = study.filter(
                pl.col(key).is_not_null()
                & pl.col(column).is_not_null()
                & (pl.col(key).list.len() == pl.col(column).list.len())
            )
            if picked.height == 0:
                continue
            note = [pl.col("commit").cast(pl.String).alias("note")] if commit else []
            rows = picked.select(*ids, *note, pl.col(key).alias("_q"), pl.col(column).alias("value")).explode(
                "_q", "value"
            )
            parts.append(
                rows.with_columns(
                    (pl.lit(f"{QUERY_METRIC}{split}/{name}/") + pl.col("_q").cast(pl.String)).alias("metric"),
                    pl.col("value").cast(pl.Float64),
                    pl.lit("ours").alias("source"),
                    pl.lit("done").alias("status"),
                    pl.lit(split).alias("stage"),
                    pl.lit("=").alias("relation"),
                ).drop("_q")
            )
    return parts


def with_study(
    results: pl.DataFrame,
    finding: str,
    scale: str,
    study_dir: Any = STUDY_RESULTS,
    results_dir: Any = "the results folder",
    curves: pl.DataFrame | None = None,
) -> Shown:
    """Return what a finding notebook shows: the user's runs of ``finding``, else the published tiny study.

    At ``tiny`` scale, when ``results`` holds no finished run of ``finding``, the published study's runs of it
    (``study_dir``, ``reports/tiny-study/`` by default) are shown instead, with their RL reward curves
    (:func:`study_curves`) in place of ``curves`` (the user's per-step metrics,
    :func:`~star_lib.viz.runs.load_curves`); when the study has none either, the source sentence says so
    (:data:`STUDY_MISSING`) and the finding renders its empty tables.

    Raises:
        ValueError: a published summary cannot be read (naming the file).

    """
    if ours(results, finding, scale).height:
        return Shown(results, f"Showing your runs in {results_dir}.", curves=curves)
    if scale != "tiny":
        return Shown(results, f"No {finding} runs in {results_dir} yet.", curves=curves)
    try:
        study = load_study(study_dir, findings=[finding])
    except FileNotFoundError:
        study = pl.DataFrame()
    rows = study_rows(study)
    if rows.height == 0:
        return Shown(results, f"No {finding} runs in {results_dir}, and {STUDY_MISSING}.", curves=curves)
    commits = sorted({str(c)[:10] for c in study["commit"].drop_nulls()}) if "commit" in study.columns else []
    at = f" at commit {', '.join(commits)}" if commits else ""
    source = (
        f"No {finding} runs in {results_dir}: showing the published tiny study ({study.height} runs{at}, "
        f"{_project_relative(study_dir)}).{machine_note(study)}"
    )
    frame = pl.concat([results, rows], how="vertical_relaxed")
    return Shown(frame, source, study=True, curves=study_curves(study))


def _project_relative(path: Any) -> str:
    """Return ``path`` from the project root (``reports/tiny-study``) when inside the project, else as given.

    A page published from one checkout must not name that checkout's folder.
    """
    try:
        return Path(path).resolve().relative_to(PROJECT_ROOT).as_posix()
    except ValueError:
        return str(path)


def study_curves(study: pl.DataFrame) -> pl.DataFrame:
    """Return the published runs' RL training curves (``rl_steps``, ``rl_reward``) as per-step rows.

    The columns are :data:`~star_lib.experiments.results.CURVE_SCHEMA`, the metric :data:`RL_CURVE` of
    stage ``rl``, so a notebook plots the published study's curves like the user's own runs'.
    """
    if not study.height or not {"rl_steps", "rl_reward"} <= set(study.columns):
        return pl.DataFrame(schema=CURVE_SCHEMA)
    ids = [k for k in CURVE_SCHEMA if k in study.columns and k not in ("stage", "step", "metric", "value")]
    rows = (
        study.filter(pl.col("rl_steps").list.len() == pl.col("rl_reward").list.len())
        .select(*ids, pl.col("rl_steps").alias("step"), pl.col("rl_reward").alias("value"))
        .explode("step", "value")
        .filter(pl.col("step").is_not_null())
        .with_columns(pl.lit("rl").alias("stage"), pl.lit(RL_CURVE).alias("metric"))
    )
    for key, dtype in CURVE_SCHEMA.items():
        rows = rows.with_columns(
            pl.col(key).cast(dtype) if key in rows.columns else pl.lit(None, dtype=dtype).alias(key)
        )
    return rows.select(list(CURVE_SCHEMA))


def arm_curves(curves: pl.DataFrame | None, arms: Sequence[str], metric: str = RL_CURVE) -> pl.DataFrame:
    """Average one per-step ``metric`` over each arm's seeds: the training curve per arm.

    Args:
        curves: Per-step rows (:data:`~star_lib.experiments.results.CURVE_SCHEMA`), e.g. :attr:`Shown.curves`.
        arms: The axes whose values name an arm (:attr:`~star_lib.viz.findings.Finding.arms`).
        metric: The per-step metric to plot (the RL rollouts' mean reward by default).

    Returns:
        Columns ``arm`` (e.g. ``tiny · sum``), ``step``, ``metric``, ``value`` (mean over the arm's runs)
        and ``runs``, sorted by arm and step; empty when no run logged ``metric``.

    """
    schema = {"arm": pl.String, "step": pl.Int64, "metric": pl.String, "value": pl.Float64, "runs": pl.UInt32}
    if curves is None or not curves.height:
        return pl.DataFrame(schema=schema)
    rows = curves.filter(pl.col("metric") == metric)
    present = [a for a in arms if a in rows.columns]
    named = [a for a in present if rows[a].n_unique() > 1] or present[:1]  # an axis with one value: unnamed
    if not rows.height or not named:
        return pl.DataFrame(schema=schema)
    return (
        rows.with_columns(arm_name(named, ignore_nulls=True).alias("arm"))
        .group_by("arm", "step", "metric")
        .agg(pl.col("value").mean(), pl.col("run").n_unique().cast(pl.UInt32).alias("runs"))
        .sort("arm", "step")
        .select(list(schema))
    )


def machine_note(study: pl.DataFrame) -> str:
    """Return a sentence naming the CPUs a study's runs ran on when there are several, else "".

    Each CPU kind rounds its own way, so each trained its own SFT model from the same config and data (a
    rerun on another CPU does not match bit for bit, see ``star study --verify``): two arms that ran on
    different CPUs differ by the machine as well as by their axis. Runs with no recorded CPU are not
    counted.

    Example:
        >>> cpus = ["EPYC (avx2)", "EPYC (avx512_bf16)", "EPYC (avx2)", ""]
        >>> note = machine_note(pl.DataFrame({"cpu": cpus}))
        >>> note.split(":")[0]
        ' Its runs ran on 2 CPUs (2 on EPYC (avx2), 1 on EPYC (avx512_bf16))'

    """
    if "cpu" not in study.columns:
        return ""
    known = study.filter(pl.col("cpu").is_not_null() & (pl.col("cpu") != ""))
    counts = known.group_by("cpu").len().sort("cpu")
    if counts.height < 2:
        return ""
    parts = ", ".join(f"{n} on {cpu}" for cpu, n in counts.iter_rows())
    return (
        f" Its runs ran on {counts.height} CPUs ({parts}): each trained its own SFT model, so arms that ran "
        "on different CPUs differ by the machine as well."
    )
