"""Finding 4, RL data difficulty (notebook ``04_data_difficulty``): Table 3, metrics by prompt difficulty.

The paper reports easy-only training by its commonsense macro rate, the 4:3:3 mixture by final pass, and
hard-only training in words only (it collapses): that statement is the comparison, the mixture above hard.
"""

from __future__ import annotations

import polars as pl

from star_lib.viz.findings.base import (
    Finding,
    OurRuns,
    build_finding,
    chart_rows,
    our_runs,
    paper_rows,
    wide_metrics,
)
from star_lib.viz.labels import DIFFICULTY_ORDER, FINAL, IN_DOMAIN, model_label
from star_lib.viz.stats import models_in, values_by
from star_lib.viz.verdicts import Claim, Comparison, Rule, Side, quote


def data_difficulty(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Table 3: metrics by RL prompt difficulty (easy / medium / hard / the 4:3:3 mixture)."""
    runs = our_runs(results, "difficulty", scale, ["model", "difficulty"])
    paper_all = paper_rows("difficulty", metric=None)
    comparisons = _collapse_claims(paper_all, runs, Rule(FINAL, tolerance, stable_tolerance))
    return build_finding(
        "difficulty",
        runs,
        chart_data=chart_rows(paper_rows("difficulty"), runs.means, "difficulty"),
        table=_difficulty_table(paper_all, runs.rows),
        comparisons=comparisons,
        verdict=runs.verdict(comparisons, "difficulty"),
        notes=[
            "The paper reports easy-only training by its commonsense macro rate (79.7 %) and hard-only "
            "training only in words (it collapses), so the chart shows the 4:3:3 final pass rate "
            "as the paper's bar."
        ],
    )


def _collapse_claims(paper_all: pl.DataFrame, runs: OurRuns, rule: Rule) -> list[Comparison]:
    """Check "hard-only training collapses" per model of ours: the 4:3:3 mixture above hard-only."""
    collapse = paper_all.filter((pl.col("difficulty") == "hard") & pl.col("value").is_null())
    if not collapse.height:
        return []
    statement = collapse["note"][0]
    out = []
    for model in models_in(runs.means) or ["tiny"]:
        values = values_by(runs.means.filter(pl.col("model") == model), "difficulty")
        arms = runs.arms("difficulty", model)
        claim = Claim(
            label="4:3:3 > hard",
            expect="higher",
            paper=quote(statement),
            first=Side("4:3:3", values.get("4:3:3"), arms.get("4:3:3")),
            second=Side("hard", values.get("hard"), arms.get("hard")),
            context=model_label(model),
            rule=rule,
        )
        out.append(claim.check())
    return out


def _difficulty_table(paper_all: pl.DataFrame, mine_rows: pl.DataFrame) -> pl.DataFrame:
    """Table 3: the paper's commonsense macro and final pass by difficulty beside ours."""
    table_ours = wide_metrics(mine_rows, ["model", "difficulty"], IN_DOMAIN).with_columns(
        pl.lit("ours").alias("source"), pl.lit(None, dtype=pl.String).alias("note")
    )
    paper_wide = (
        paper_all.group_by("difficulty")
        .agg(
            pl.col("value").filter(pl.col("metric") == "eval/cs_macro").first().alias("cs_macro"),
            pl.col("value").filter(pl.col("metric") == FINAL).first().alias("final_pass"),
            pl.col("note").drop_nulls().first().alias("note"),
        )
        .with_columns(pl.lit("paper").alias("source"), pl.lit(None, dtype=pl.String).alias("model"))
    )
    columns = ["source", "model", "difficulty", "cs_macro", "final_pass", "note"]
    table = pl.concat(
        [paper_wide.select(columns), table_ours.select(columns)], how="vertical_relaxed"
    ).with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String))
    return table.sort(
        [
            "source",
            pl.col("difficulty").replace_strict(
                {d: i for i, d in enumerate(DIFFICULTY_ORDER)}, default=99, return_dtype=pl.Int64
            ),
        ]
    )
