"""Finding 2, model scale (notebook ``02_model_scale``): Fig. 4, final pass by model size with the SUM reward.

At ``tiny`` scale the tiny study's three sizes stand for the paper's by rank (``tiny-s`` ~ 1.5B, ``tiny`` ~
3B, ``tiny-l`` ~ 7B): every pair of sizes the paper reports is checked on the stand-ins. The table adds
the paper's baselines (the SFT-only 1.5B model, prompted Kimi-K2.5).
"""

from __future__ import annotations

import itertools

import polars as pl

from star_lib.experiments.grids import PAPER_MODELS
from star_lib.train.models import TINY_SCALE
from star_lib.viz.findings.base import Finding, OurRuns, build_finding, chart_rows, our_runs, paper_rows
from star_lib.viz.labels import FINAL, MODEL_ORDER, model_label
from star_lib.viz.stats import values_by
from star_lib.viz.verdicts import Comparison, Rule, Side, number_claim


def model_scale(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Fig. 4: final pass rate by model size (the paper's SUM runs; SFT-only and Kimi-K2.5 as baselines)."""
    runs = our_runs(results, "scale", scale, ["model"])
    paper = paper_rows("reward").filter(pl.col("reward") == "sum")
    comparisons = _size_comparisons(paper, runs, Rule(FINAL, tolerance, stable_tolerance))
    chart = chart_rows(
        paper.with_columns(pl.col("model").alias("size")),
        runs.means.with_columns(pl.col("model").alias("size")),
        "size",
    ).with_columns(
        pl.col("x").map_elements(model_label, return_dtype=pl.String), pl.lit("final pass").alias("model")
    )
    return build_finding(
        "scale",
        runs,
        chart_data=chart,
        table=_scale_table(chart),
        comparisons=comparisons,
        verdict=runs.verdict(comparisons, "model"),
    )


def _size_comparisons(paper: pl.DataFrame, runs: OurRuns, rule: Rule) -> list[Comparison]:
    """Every pair of sizes the paper reports, the larger first, checked on our sizes (or their stand-ins)."""
    p = values_by(paper, "model")
    o = values_by(runs.means, "model")
    arms = runs.arms("model")
    if (
        runs.scale == "tiny"
    ):  # the tiny sizes stand for the paper's by rank: tiny-s ~ 1.5B, tiny ~ 3B, tiny-l ~ 7B
        rank = list(zip(TINY_SCALE, PAPER_MODELS, strict=True))
        o = {big: o[small] for small, big in rank if small in o}
        arms = {big: arms[small] for small, big in rank if small in arms}
    models = [m for m in MODEL_ORDER if m in p]
    out = []
    for a, b in itertools.combinations(models, 2):
        larger = Side(model_label(b), o.get(b), arms.get(b), paper=p[b])
        smaller = Side(model_label(a), o.get(a), arms.get(a), paper=p[a])
        out.append(number_claim(larger, smaller, "SUM", "ours", rule).check())
    return out


def _scale_table(chart: pl.DataFrame) -> pl.DataFrame:
    """Fig. 4's values (paper and ours) with the paper's baselines below."""
    baselines = paper_rows("baseline").select(
        pl.lit("paper").alias("source"),
        pl.coalesce(pl.col("note"), pl.col("run")).alias("system"),
        pl.col("model").map_elements(model_label, return_dtype=pl.String).alias("size"),
        pl.col("value").alias("final_pass"),
        pl.col("relation"),
    )
    return pl.concat(
        [
            chart.select(
                pl.col("source"),
                pl.lit("SUM reward, RL").alias("system"),
                pl.col("x").alias("size"),
                pl.col("value").alias("final_pass"),
                pl.lit("=").alias("relation"),
            ),
            baselines,
        ],
        how="vertical_relaxed",
    )
