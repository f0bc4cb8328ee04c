"""The factorial view (notebook ``07_interactions``): final pass over two or three axes varied together.

The paper varies one axis at a time, so the interaction itself has no paper reference: the view estimates
the main effects and interactions of the two-level factorial with 95 % intervals
(:func:`factorial_effects`), and checks each axis the paper states a direction for at every level of the
other axes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from star_lib.experiments.results import AXIS_SCHEMA
from star_lib.viz.findings.base import Finding, OurRuns, build_finding, ours, paper_rows
from star_lib.viz.labels import ALGORITHM_ORDER, DIFFICULTY_ORDER, FINAL, MODEL_ORDER, REWARD_ORDER, pct
from star_lib.viz.stats import Arm, arms_of, contrast_interval, rate_intervals, values_by
from star_lib.viz.verdicts import Comparison, Rule, arm_pair, verdict

EFFECT_SCHEMA: dict[str, Any] = {
    "effect": pl.String,
    "kind": pl.String,
    "estimate": pl.Float64,
    "± 95 %": pl.Float64,
    "verdict": pl.String,
}
"""Columns of the factorial effects table (:func:`factorial_effects`; estimates are fractions)."""


def interactions(
    results: pl.DataFrame,
    scale: str = "tiny",
    axes: Sequence[str] | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Build the factorial view: final pass over two or three axes varied together, its effects and intervals.

    ``tables["effects"]`` holds the main effects and interactions with their 95 % intervals
    (:func:`factorial_effects`); the verdict names every interaction whose interval excludes 0.
    ``tables["rates"]`` gives each cell's held-out rates with bootstrap intervals
    (:func:`~star_lib.viz.stats.rate_intervals`; empty without per-query outcomes). The paper
    measures each axis alone, so the paper-direction comparisons check each axis the paper states a direction
    for (more tool failures lower success; CURRICULUM above SUM for the 1.5B model) at every level of the
    other axes. The chart data has one row per cell; with three axes its second column joins the last two
    (``reward × tool_failure_rate``), so the table still draws as one heatmap.
    """
    mine_rows = ours(results, "interactions", scale)
    if axes is None:
        axes = _varied_axes(mine_rows)[:3]
    axes = list(dict.fromkeys(axes))
    if len(axes) < 2 or mine_rows.height == 0:
        return _no_factorial(mine_rows, axes, scale)
    runs = OurRuns(mine_rows, tuple(axes), scale)
    cells = [pl.col(a).cast(pl.String).alias(a) for a in axes]
    joined = " × ".join(axes[1:])
    columns = [] if len(axes) == 2 else [pl.concat_str(cells[1:], separator=" · ").alias(joined)]
    chart = runs.means.select(cells[0], *columns, *cells[1:], "value", "sd", "n")
    effects, notes = _effects(runs.stats, axes)
    comparisons = _factorial_comparisons(runs.stats, axes, Rule(FINAL, tolerance, stable_tolerance))
    head = verdict(comparisons, have_runs=True, scope=" × ".join(axes))
    return build_finding(
        "interactions",
        runs,
        chart_data=chart,
        table=chart.rename({"value": "final_pass"}),
        comparisons=comparisons,
        verdict=f"{head} {_effects_sentence(effects)}",
        tables={"effects": effects, "rates": rate_intervals(mine_rows, axes)},
        notes=["The paper varies one axis at a time; the interaction itself has no paper reference.", *notes],
    )


def _no_factorial(mine_rows: pl.DataFrame, axes: list[str], scale: str) -> Finding:
    """Return the view when our runs are missing or vary fewer than two axes: empty, and a sentence why."""
    by = list(dict.fromkeys(["model", *axes]))
    empty = pl.DataFrame(schema={"x": pl.String, "y": pl.String, "value": pl.Float64})
    why = (
        verdict([], have_runs=False)
        if mine_rows.height == 0
        else f"Our interaction runs vary fewer than two axes ({', '.join(axes) or 'none'}), so there "
        "is no factorial view to compare."
    )
    return build_finding(
        "interactions",
        OurRuns(mine_rows, tuple(by), scale),
        chart_data=empty,
        table=empty,
        comparisons=[],
        verdict=why,
        tables={"effects": pl.DataFrame(schema=EFFECT_SCHEMA), "rates": rate_intervals(mine_rows, by)},
    )


def _effects(stats: pl.DataFrame, axes: list[str]) -> tuple[pl.DataFrame, list[str]]:
    """Return the factorial's effects and a note: its largest complete block's when a cell is empty.

    Only a three-axis factorial falls back to a block (fixing one axis at a level); the note says so.
    """
    effects, notes = factorial_effects(stats, axes), []
    if effects["estimate"].is_null().all() and len(axes) > 2:
        block = complete_block(stats, axes)
        if block is not None:
            (axis, level), rest = block
            effects = factorial_effects(stats.filter(pl.col(axis) == level).drop(axis), rest)
            notes.append(
                f"The factorial has empty cells, so the effects are those of its complete {axis}={level} "
                f"block ({' × '.join(rest)}, {len(rest)} axes)."
            )
    return effects, notes


def factorial_effects(stats: pl.DataFrame, axes: Sequence[str]) -> pl.DataFrame:
    """Return the main effects and interactions of a two-level factorial on final pass, with 95 % intervals.

    Each axis is coded ±1 (its first and last level in study order; other levels are left out), and every
    non-empty set of axes is one contrast of the 2^k cell means with weights ``prod(x_a) / 2^(k-1)``: a main
    effect is the mean of the high cells minus the mean of the low ones, a two-way interaction half the
    difference between one axis's effect at the other's two levels, and so on. Its interval comes from
    :func:`contrast_interval` (the paired bootstrap over the shared queries and the seeds when the cells
    carry per-query outcomes, else the cells' SEs in quadrature). ``verdict`` is ``effect`` (a main effect)
    or ``interaction`` when the interval excludes 0, ``none`` when it does not, ``unknown`` without an
    interval; every estimate is null when a cell has no runs.

    Args:
        stats: :func:`arm_stats` by (at least) ``axes``, one row per cell.
        axes: The two or three factors.

    """
    levels = {a: sorted(set(stats[a].to_list()), key=_sort_key) if stats.height else [] for a in axes}
    arms: dict[tuple[Any, ...], Arm] = {}
    if stats.height and all(len(v) >= 2 for v in levels.values()):
        for cell in itertools.product(*[(levels[a][0], levels[a][-1]) for a in axes]):
            arm = arms_of(stats, axes[-1], **dict(zip(axes[:-1], cell[:-1], strict=True))).get(cell[-1])
            if arm is not None:
                arms[cell] = arm
    rows = []
    for size in range(1, len(axes) + 1):
        for subset in itertools.combinations(range(len(axes)), size):
            name = (
                f"{axes[subset[0]]} ({levels[axes[subset[0]]][0]}→{levels[axes[subset[0]]][-1]})"
                if size == 1 and len(levels[axes[subset[0]]]) >= 2
                else " × ".join(axes[i] for i in subset)
            )
            kind = "main" if size == 1 else f"{size}-way"
            cells = list(itertools.product((0, 1), repeat=len(axes)))
            keys = [tuple((levels[a][0], levels[a][-1])[c[i]] for i, a in enumerate(axes)) for c in cells]
            if len(arms) != len(cells) or any(arms[k].value is None for k in keys):
                rows.append({"effect": name, "kind": kind, "estimate": None, "± 95 %": None, "verdict": "–"})
                continue
            weights = [math.prod(2 * c[i] - 1 for i in subset) / 2 ** (len(axes) - 1) for c in cells]
            cell_arms = [arms[k] for k in keys]
            estimate = sum(w * (a.value or 0.0) for w, a in zip(weights, cell_arms, strict=True))
            interval = contrast_interval(cell_arms, weights)
            if interval is None:
                decided = "unknown"
            elif abs(estimate) > interval:
                decided = "effect" if size == 1 else "interaction"
            else:
                decided = "none"
            rows.append(
                {"effect": name, "kind": kind, "estimate": estimate, "± 95 %": interval, "verdict": decided}
            )
    return pl.DataFrame(rows, schema=EFFECT_SCHEMA)


def complete_block(stats: pl.DataFrame, axes: Sequence[str]) -> tuple[tuple[str, Any], list[str]] | None:
    """Return ``((axis, level), other axes)`` of the largest complete two-level block of a factorial.

    A factorial with empty cells (e.g. one model size not run yet) has no effects of its own; fixing one
    axis at a level whose cells over the other axes (their first and last levels) all have a final pass
    gives a smaller factorial that has. The block with most runs wins; None when no block is complete.

    Example:
        >>> cells = [("tiny", "sum", 0.0), ("tiny", "sum", 0.1), ("tiny", "curriculum", 0.0),
        ...          ("tiny", "curriculum", 0.1), ("tiny-l", "sum", 0.0)]
        >>> stats = pl.DataFrame(cells, schema=["model", "reward", "rate"], orient="row")
        >>> stats = stats.with_columns(final_pass=pl.lit(0.4), runs=pl.lit(3))
        >>> complete_block(stats, ["model", "reward", "rate"])
        (('model', 'tiny'), ['reward', 'rate'])

    """
    found: list[tuple[int, tuple[str, Any], list[str]]] = []
    for axis in axes:
        rest = [a for a in axes if a != axis]
        for level in sorted(set(stats[axis].to_list()), key=_sort_key):
            block = stats.filter((pl.col(axis) == level) & pl.col("final_pass").is_not_null())
            levels = [sorted(set(block[a].to_list()), key=_sort_key) for a in rest]
            if any(len(v) < 2 for v in levels):
                continue
            corners = set(itertools.product(*[(v[0], v[-1]) for v in levels]))
            if corners <= set(block.select(rest).iter_rows()):
                found.append((int(block["runs"].sum()), (axis, level), rest))
    return max(found, key=lambda f: f[0])[1:] if found else None


def effect_chart_rows(effects: pl.DataFrame) -> pl.DataFrame:
    """Return the effects table as rows for :func:`star_lib.viz.charts.paper_vs_ours` (``sd`` = the ± 95 %).

    One bar per estimated effect (``x``), its 95 % half-width as the error bar and its verdict as the note.
    """
    known = effects.filter(pl.col("estimate").is_not_null())
    return known.select(
        pl.lit("ours").alias("source"),
        pl.col("effect").alias("x"),
        pl.col("estimate").alias("value"),
        pl.col("± 95 %").alias("sd"),
        pl.col("verdict").alias("note"),
    )


def _factorial_comparisons(stats: pl.DataFrame, axes: Sequence[str], rule: Rule) -> list[Comparison]:
    """Each axis the paper states a direction for, high vs low level, at every level of the other axes."""
    out = []
    for axis in axes:
        levels = sorted(set(stats[axis].to_list()), key=_sort_key) if stats.height else []
        if len(levels) < 2:
            continue
        lo, hi = levels[0], levels[-1]
        expect, statement = _paper_direction(axis, lo, hi)
        if expect is None:
            continue
        others = [a for a in axes if a != axis]
        for fixed in itertools.product(*[sorted(set(stats[a].to_list()), key=_sort_key) for a in others]):
            where = dict(zip(others, fixed, strict=True))
            arms = arms_of(stats, axis, **where)
            a, b = arms.get(hi), arms.get(lo)
            diff = None if a is None or b is None or a.value is None or b.value is None else a.value - b.value
            at = ", ".join(f"{k}={v}" for k, v in where.items())
            out.append(
                Comparison(
                    label=f"{axis} {hi} vs {lo} at {at}",
                    metric=rule.metric,
                    expect=expect,
                    paper=statement,
                    our_diff=diff,
                    ours=f"{pct(a.value if a else None)} vs {pct(b.value if b else None)}",
                    tolerance=rule.tolerance,
                    stable_tolerance=rule.stable_tolerance,
                    arms=arm_pair(diff, a, b),
                )
            )
    return out


def _effects_sentence(effects: pl.DataFrame) -> str:
    """Say which interactions exceed their 95 % interval (the effects table's verdicts)."""
    terms = effects.filter(pl.col("kind") != "main")
    known = terms.filter(pl.col("estimate").is_not_null())
    if known.height == 0:
        return "The interactions cannot be estimated: a cell of the factorial has no runs."

    def said(row: dict[str, Any]) -> str:
        spread = f" ± {100 * row['± 95 %']:.1f}" if row["± 95 %"] is not None else ""
        return f"{row['effect']} {100 * row['estimate']:+.1f}{spread} pts"

    found = [said(r) for r in known.iter_rows(named=True) if r["verdict"] == "interaction"]
    if found:
        return f"Interactions beyond their 95 % interval: {'; '.join(found)}."
    largest = max(known.iter_rows(named=True), key=lambda r: abs(r["estimate"]))
    if all(v == "unknown" for v in known["verdict"].to_list()):
        return f"The interactions have no interval (no episode counts); the largest is {said(largest)}."
    return f"No interaction exceeds its 95 % interval (the largest: {said(largest)})."


def _sort_key(value: Any) -> tuple[int, Any]:
    """Order an axis's levels: numbers by value, names in the paper's order (rewards, algorithms, …)."""
    order = {v: i for i, v in enumerate((*REWARD_ORDER, *ALGORITHM_ORDER, *DIFFICULTY_ORDER, *MODEL_ORDER))}
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, order.get(value, 99), str(value))  # type: ignore[return-value]


def _paper_direction(axis: str, low: Any, high: Any) -> tuple[str | None, str]:
    """Return the paper's direction for raising ``axis`` from ``low`` to ``high``, when it states one."""
    if axis == "tool_failure_rate" and isinstance(high, float) and high >= 0.10 > low:
        note = paper_rows("noise").filter(pl.col("tool_failure_rate") == 0.10)["note"]
        return "lower", f"“{note[0] if note.len() else 'clear drop at 10 %'}”"
    if axis == "tool_failure_rate" and isinstance(high, float) and high <= 0.05:
        return "similar", "“stable for tool failure rate <= 5 %”"
    if axis == "reward":
        paper = values_by(paper_rows("reward").filter(pl.col("model") == "qwen2.5-1.5b"), "reward")
        if low in paper and high in paper:
            diff = paper[high] - paper[low]
            return ("higher" if diff > 0 else "lower"), f"1.5B: {pct(paper[high])} vs {pct(paper[low])}"
    return None, ""


def _varied_axes(rows: pl.DataFrame) -> list[str]:
    """Axes with more than one value among the rows (seed excluded), in the results table's axis order."""
    return [a for a in AXIS_SCHEMA if a != "seed" and rows.height and rows[a].n_unique() > 1]
