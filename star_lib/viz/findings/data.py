"""Finding 3, RL data quantity (notebook ``03_data_quantity``): Fig. 5, final pass and OOD by RL prompts.

The paper's sizes (100 / 500 / 1,000 / 2,000 prompts) are compared with ours at the same position of the
grid (``finding_axes("data", scale)``; at ``tiny`` scale
:data:`~star_lib.experiments.grids.TINY_DATA_SIZES`), each neighbouring pair the paper reports, for final
pass and for the OOD rate.
"""

from __future__ import annotations

import itertools

import polars as pl

from star_lib.experiments.grids import finding_axes
from star_lib.viz.findings.base import (
    Finding,
    OurRuns,
    build_finding,
    chart_rows,
    ood_notes,
    our_runs,
    paper_rows,
)
from star_lib.viz.labels import FINAL, PAPER_OOD, metric_label, ood_metric
from star_lib.viz.stats import aggregate, arm_stats, arms_of, values_by
from star_lib.viz.verdicts import Comparison, Rule, Side, number_claim


def data_quantity(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Fig. 5: in-domain final pass and average OOD exact match by number of RL prompts.

    The paper's size ``s`` is compared with our size at the same position of the grid
    (``finding_axes("data", scale)``; at ``tiny`` scale :data:`~star_lib.experiments.grids.TINY_DATA_SIZES`).
    """
    runs = our_runs(results, "data", scale, ["model", "rl_data_size"])
    paper_sizes, our_sizes = (
        finding_axes("data", "paper")["rl_data_size"],
        finding_axes("data", scale)["rl_data_size"],
    )
    equivalent = dict(zip(paper_sizes, our_sizes, strict=True))
    comparisons: list[Comparison] = []
    frames = []
    for paper_metric, metric, label in (
        (FINAL, FINAL, "final pass"),
        (PAPER_OOD, ood_metric(scale), "OOD" if scale == "tiny" else "avg OOD EM"),
    ):
        paper = paper_rows("data", paper_metric)
        mine = aggregate(runs.rows, ["model", "rl_data_size"], metric)
        rule = Rule(metric, tolerance, stable_tolerance)
        comparisons += _size_comparisons(paper, mine, runs, equivalent, rule, paper_metric)
        paper_scaled = paper.with_columns(pl.col("rl_data_size").replace(equivalent))
        frames.append(
            chart_rows(paper_scaled, mine, "rl_data_size").with_columns(pl.lit(label).alias("model"))
        )
    chart = pl.concat(frames, how="vertical_relaxed").with_columns(pl.col("x").cast(pl.Int64).alias("size"))
    table = (
        chart.select("model", "source", "size", "value", "sd", "n")
        .rename({"model": "metric", "size": "rl_data_size"})
        .sort(["metric", "rl_data_size", "source"])
    )
    notes = []
    if scale == "tiny":
        notes.append(
            "Paper sizes are mapped to the tiny grid's sizes, position for position: "
            + ", ".join(f"{k}→{v}" for k, v in equivalent.items())
            + "."
        )
    notes += ood_notes(runs.rows, scale)
    return build_finding(
        "data",
        runs,
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        verdict=runs.verdict(comparisons, "rl_data_size"),
        notes=notes,
    )


def _size_comparisons(
    paper: pl.DataFrame,
    mine: pl.DataFrame,
    runs: OurRuns,
    equivalent: dict[int, int],
    rule: Rule,
    paper_metric: str,
) -> list[Comparison]:
    """Each pair of neighbouring sizes the paper reports, its higher value first, checked on our sizes.

    ``mine`` is our mean of ``rule.metric`` per model and size; ``equivalent`` maps a paper size to ours.
    """
    stats = (
        runs.stats if rule.metric == FINAL else arm_stats(runs.rows, ["model", "rl_data_size"], rule.metric)
    )
    arms = arms_of(stats, "rl_data_size")
    p = values_by(paper, "rl_data_size")
    o = values_by(mine, "rl_data_size")
    out = []
    for a, b in itertools.pairwise(sorted(p)):
        if p[a] > p[b]:  # the paper's higher value first, so the context reads in the pair's order
            a, b = b, a
        ea, eb = equivalent.get(a, a), equivalent.get(b, b)
        tiny = runs.scale == "tiny"
        first = Side(f"n={eb}" if tiny else f"n={b}", o.get(eb), arms.get(eb), paper=p[b])
        second = Side(f"n={ea}" if tiny else f"n={a}", o.get(ea), arms.get(ea), paper=p[a])
        context = f"{metric_label(paper_metric)}, n={b} vs n={a}"
        out.append(number_claim(first, second, context, metric_label(rule.metric), rule).check())
    return out
