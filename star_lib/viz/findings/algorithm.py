"""Finding 5, RL algorithms (notebook ``05_algorithms``): Table 4, final pass and training cost by algorithm.

Every pair of algorithms the paper reports for one model (GRPO, DAPO, ARPO at 1.5B and 7B) is checked
within each of our models, against the paper model it stands for; the cost table puts the paper's
GPU-hours beside our wall time and training tokens.
"""

from __future__ import annotations

import polars as pl

from star_lib.viz.findings.base import (
    Finding,
    build_finding,
    chart_rows,
    missing_metric_notes,
    our_runs,
    paper_rows,
    wide_metrics,
)
from star_lib.viz.labels import ALGORITHM_ORDER, FINAL, TOKEN_METRICS, model_label
from star_lib.viz.verdicts import Rule, categorical_comparisons


def algorithms(
    results: pl.DataFrame,
    scale: str = "tiny",
    curves: pl.DataFrame | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Table 4: final pass by algorithm × model, with the training cost (wall time, GPU-hours, tokens)."""
    runs = our_runs(results, "algorithm", scale, ["model", "algorithm"])
    paper = paper_rows("algorithm")
    rule = Rule(FINAL, tolerance, stable_tolerance)
    comparisons = categorical_comparisons(paper, runs.means, "algorithm", ALGORITHM_ORDER, rule, runs.stats)
    return build_finding(
        "algorithm",
        runs,
        chart_data=chart_rows(paper, runs.means, "algorithm"),
        table=_cost_table(runs.rows, curves),
        comparisons=comparisons,
        verdict=runs.verdict(comparisons, "algorithm"),
        notes=missing_metric_notes(
            runs.rows, ["rl/", "env/", "train/"], "RL training metrics (the rl stage)"
        ),
    )


EXPLORATION: dict[str, str] = {
    "rl/mean/dapo/refill_rounds": "refill_rounds",
    "rl/mean/arpo/branches_per_group": "branches_per_group",
}
"""How each algorithm explores, per RL step (mean over the run's steps, then seeds) → its table column:
DAPO's refill rounds (regenerations of all-equal groups), ARPO's entropy branches per group."""


def _cost_table(mine_rows: pl.DataFrame, curves: pl.DataFrame | None) -> pl.DataFrame:
    """Algorithms × models: final pass, cost and exploration per step, paper beside ours."""
    paper_all = paper_rows("algorithm", metric=None)
    paper = (
        paper_all.group_by(["model", "algorithm"])
        .agg(
            pl.col("value").filter(pl.col("metric") == FINAL).first().alias("final_pass"),
            pl.col("value").filter(pl.col("metric") == "cost/gpu_hours").first().alias("gpu_hours"),
        )
        .with_columns(
            pl.lit("paper").alias("source"),
            pl.lit(None, dtype=pl.Float64).alias("wall_s"),
            pl.lit(None, dtype=pl.Float64).alias("tokens"),
            *[pl.lit(None, dtype=pl.Float64).alias(name) for name in EXPLORATION.values()],
        )
    )
    wide = wide_metrics(
        mine_rows, ["model", "algorithm"], [FINAL, "cost/gpu_hours", "cost/wall_s", *EXPLORATION]
    ).rename({m.split("/", 1)[-1]: name for m, name in EXPLORATION.items()})
    tokens = _tokens(mine_rows, curves)
    if tokens.height:
        wide = wide.join(tokens, on=["model", "algorithm"], how="left")
    else:
        wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias("tokens"))
    wide = wide.with_columns(pl.lit("ours").alias("source"))
    columns = [
        "source",
        "model",
        "algorithm",
        "final_pass",
        "wall_s",
        "gpu_hours",
        "tokens",
        *EXPLORATION.values(),
    ]
    table = pl.concat([paper.select(columns), wide.select(columns)], how="vertical_relaxed")
    return table.with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String)).sort(
        [
            "source",
            "model",
            pl.col("algorithm").replace_strict(
                {a: i for i, a in enumerate(ALGORITHM_ORDER)}, default=99, return_dtype=pl.Int64
            ),
        ]
    )


def _tokens(mine_rows: pl.DataFrame, curves: pl.DataFrame | None) -> pl.DataFrame:
    """Training tokens per model × algorithm (mean over seeds), from final metrics or the last logged step."""
    schema = {"model": pl.String, "algorithm": pl.String, "tokens": pl.Float64}
    for metric in TOKEN_METRICS:
        rows = mine_rows.filter(pl.col("metric") == metric) if mine_rows.height else mine_rows
        if rows.height:
            return rows.group_by(["model", "algorithm"]).agg(pl.col("value").mean().alias("tokens"))
    if curves is not None and curves.height and "algorithm" in curves.columns:
        steps = curves.filter(pl.col("metric").str.ends_with("num_tokens"))
        if steps.height:  # the last logged count of each run
            last = steps.group_by(["run", "model", "algorithm"]).agg(pl.col("value").max())
            return last.group_by(["model", "algorithm"]).agg(pl.col("value").mean().alias("tokens"))
    return pl.DataFrame(schema=schema)
