"""Finding 1, reward design (notebook ``01_reward_design``): Table 1 by reward × model, Table 2's OOD tax.

The paper's numbers compare rewards at 1.5B (CURRICULUM 34.9 % > SUM 33.1 %); its statements add that a
large model gains most from SUM, that SUCCESS is never the best reward, and that the dense SUM reward pays
an out-of-domain tax MACRO does not (Table 2).
"""

from __future__ import annotations

import polars as pl

from star_lib.experiments.grids import PAPER_MODELS
from star_lib.viz.findings.base import (
    Finding,
    OurRuns,
    build_finding,
    chart_rows,
    ood_notes,
    our_runs,
    ours,
    paper_rows,
    wide_metrics,
)
from star_lib.viz.labels import FINAL, IN_DOMAIN, REWARD_ORDER, metric_label, model_label, ood_metric
from star_lib.viz.stats import aggregate, arm_stats, arms_of, models_in, values_by
from star_lib.viz.verdicts import (
    Claim,
    Comparison,
    Rule,
    Side,
    categorical_comparisons,
    paper_stand_in,
    quote,
)


def reward_design(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Table 1 (in-domain metrics by reward × model) and Table 2 (OOD accuracy by reward)."""
    runs = our_runs(results, "reward", scale, ["model", "reward"])
    rule = Rule(FINAL, tolerance, stable_tolerance)
    paper = paper_rows("reward")
    large = [m for m in models_in(runs.means) if paper_stand_in(m, PAPER_MODELS) == PAPER_MODELS[-1]]
    comparisons = categorical_comparisons(  # the paper's numbers compare rewards at 1.5B only
        paper, runs.means.filter(~pl.col("model").is_in(large)), "reward", REWARD_ORDER, rule, runs.stats
    )
    comparisons += _reward_claims(runs, large, rule)
    comparisons += _ood_tax(runs, rule)
    return build_finding(
        "reward",
        runs,
        chart_data=chart_rows(paper, runs.means, "reward"),
        table=_reward_table(runs.rows),
        comparisons=comparisons,
        verdict=runs.verdict(comparisons, "reward"),
        tables={"ood": _ood_table(results, scale)},
        notes=ood_notes(runs.rows, scale),
    )


def _reward_claims(runs: OurRuns, large: list[str], rule: Rule) -> list[Comparison]:
    """Check finding 1's statements beyond the paper's numbers, per model of our runs.

    A model standing for 7B (``large``) should gain from SUM rather than CURRICULUM; and for every model
    SUCCESS should not be the best reward: it is checked against the model's best other reward of the
    paper's (SUM, MACRO, CURRICULUM), when our runs have SUCCESS.
    """
    out = []
    for model in models_in(runs.means):
        values = values_by(runs.means.filter(pl.col("model") == model), "reward")
        arms = runs.arms("reward", model)
        pairs = []
        if model in large:
            pairs.append(("sum", "curriculum", "large models gain most from SUM, small ones from CURRICULUM"))
        rivals = [r for r in ("sum", "macro", "curriculum") if r in values]
        if "success" in values and rivals:
            pairs.append((max(rivals, key=values.__getitem__), "success", "SUCCESS is never the best reward"))
        for a, b, statement in pairs:
            claim = Claim(
                label=f"{a} > {b}",
                expect="higher",
                paper=quote(statement),
                first=Side(a, values.get(a), arms.get(a)),
                second=Side(b, values.get(b), arms.get(b)),
                context=model_label(model),
                rule=rule,
            )
            out.append(claim.check())
    return out


def _ood_tax(runs: OurRuns, rule: Rule) -> list[Comparison]:
    """Table 2's claim, per model: MACRO keeps OOD generalisation, the dense SUM reward pays for it.

    Empty when our runs have no OOD metric (the finding's notes say so).
    """
    metric = ood_metric(runs.scale)
    mine = aggregate(runs.rows, ["model", "reward"], metric)
    stats = arm_stats(runs.rows, ["model", "reward"], metric)
    out = []
    for model in models_in(mine):
        values = values_by(mine.filter(pl.col("model") == model), "reward")
        arms = arms_of(stats, "reward", model)
        claim = Claim(
            label="macro > sum (OOD)",
            expect="higher",
            paper=quote("dense rewards pay an out-of-domain tax; MACRO keeps generalisation (Table 2)"),
            first=Side("macro", values.get("macro"), arms.get("macro")),
            second=Side("sum", values.get("sum"), arms.get("sum")),
            context=f"{model_label(model)} {metric_label(metric)}",
            rule=Rule(metric, rule.tolerance, rule.stable_tolerance),
        )
        out.append(claim.check())
    return out


EARLY_ROLLOUTS = "rl/first/env/final_pass"
"""How often the first RL steps' rollouts pass (:data:`~star_lib.experiments.stages.training.FIRST_STEPS`):
whether SUCCESS, which pays only a passing plan, is sparse for that arm."""


def _reward_table(mine_rows: pl.DataFrame) -> pl.DataFrame:
    """Rewards × models: Table 1's columns, paper beside ours, and our rollouts' pass rate at the start."""
    ours_wide = wide_metrics(mine_rows, ["model", "reward"], [*IN_DOMAIN, EARLY_ROLLOUTS])
    ours_wide = ours_wide.rename({EARLY_ROLLOUTS.split("/", 1)[-1]: "first_rollouts_pass"}).with_columns(
        pl.lit("ours").alias("source"), pl.lit(None, dtype=pl.String).alias("note")
    )
    paper = paper_rows(["reward", "baseline"])
    paper_wide = paper.select(
        pl.lit("paper").alias("source"),
        "model",
        pl.coalesce(pl.col("reward"), pl.col("note"), pl.col("run")).alias("reward"),
        *[pl.lit(None, dtype=pl.Float64).alias(m.split("/", 1)[-1]) for m in IN_DOMAIN[:-1]],
        pl.col("value").alias("final_pass"),
        pl.lit(None, dtype=pl.Float64).alias("first_rollouts_pass"),
        pl.when(pl.col("relation") == "<")
        .then(pl.lit("upper bound"))
        .otherwise(pl.col("note"))
        .alias("note"),
    )
    columns = [
        "source",
        "model",
        "reward",
        *[m.split("/", 1)[-1] for m in IN_DOMAIN],
        "first_rollouts_pass",
        "note",
    ]
    table = pl.concat([paper_wide.select(columns), ours_wide.select(columns)], how="vertical_relaxed")
    return table.with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String))


def _ood_table(results: pl.DataFrame, scale: str) -> pl.DataFrame:
    """Table 2: exact match per OOD dataset — the paper's STAR models, Search-R1, and our runs by reward."""
    paper = paper_rows(["ood"], metric=None).filter(pl.col("metric").str.starts_with("qa/"))
    paper_part = paper.select(
        pl.col("metric").str.split("/").list.get(1).alias("dataset"),
        pl.lit("paper").alias("source"),
        pl.when(pl.col("run") == "Search-R1")
        .then(pl.lit("Search-R1"))
        .otherwise(pl.col("model").map_elements(model_label, return_dtype=pl.String) + " " + pl.col("reward"))
        .alias("system"),
        pl.col("value").alias("em"),
    )
    mine_rows = ours(results, None, scale)
    mine_rows = mine_rows.filter(
        pl.col("metric").str.starts_with("qa/") & pl.col("metric").str.ends_with("/em")
    )
    mine = mine_rows.group_by(["metric", "model", "reward"]).agg(pl.col("value").mean().alias("em"))
    ours_part = mine.select(
        pl.col("metric").str.split("/").list.get(1).alias("dataset"),
        pl.lit("ours").alias("source"),
        (pl.col("model").map_elements(model_label, return_dtype=pl.String) + " " + pl.col("reward")).alias(
            "system"
        ),
        pl.col("em"),
    )
    return pl.concat([paper_part, ours_part], how="vertical_relaxed").sort(["dataset", "source", "system"])
