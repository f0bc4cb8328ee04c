"""Finding 6, environment noise (notebook ``06_env_noise``): Fig. 6, final pass by tool failure rate.

The paper states the result in words (3B: stable for failure rates up to 5 %, a clear drop at 10 %); each
statement is a comparison of a failure rate with clean tools (``fail=0``), per model of ours. When the runs
were also scored with clean tools, a table sets each arm's noisy score beside its clean one.
"""

from __future__ import annotations

import polars as pl

from star_lib.viz.findings.base import Finding, OurRuns, build_finding, our_runs, paper_rows, wide_metrics
from star_lib.viz.labels import CLEAN_FINAL, FINAL, is_curve_metric, model_label
from star_lib.viz.stats import models_in, values_by
from star_lib.viz.verdicts import Claim, Comparison, Rule, Side, quote

_CHART_SCHEMA = {
    "source": pl.String,
    "model": pl.String,
    "tool_failure_rate": pl.Float64,
    "value": pl.Float64,
    "sd": pl.Float64,
    "n": pl.UInt32,
}


def env_noise(
    results: pl.DataFrame,
    scale: str = "tiny",
    curves: pl.DataFrame | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Fig. 6: test success by tool failure rate (and training curves per failure rate).

    When the runs were also scored with clean tools (``eval.also_clean``), ``tables["clean"]`` holds each
    arm's noisy and clean final pass and their difference (the comparisons stay on the noisy scores, as in
    the paper).
    """
    runs = our_runs(results, "noise", scale, ["model", "tool_failure_rate"])
    statements = paper_rows("noise")
    comparisons = _noise_claims(statements, runs, Rule(FINAL, tolerance, stable_tolerance))
    chart = (
        runs.means.select(
            pl.lit("ours").alias("source"),
            pl.col("model").map_elements(model_label, return_dtype=pl.String),
            pl.col("tool_failure_rate"),
            "value",
            "sd",
            "n",
        )
        if runs.means.height
        else pl.DataFrame(schema=_CHART_SCHEMA)
    )
    tables = {
        "paper_statements": statements.select(
            pl.col("tool_failure_rate").alias("x"), pl.lit("paper: ").add(pl.col("note")).alias("text")
        )
    }
    clean = _clean_table(runs.rows)
    if clean is not None:
        tables["clean"] = clean
    if curves is not None:
        tables["curves"] = _noise_curves(curves)
    return build_finding(
        "noise",
        runs,
        chart_data=chart,
        table=_noise_table(statements, chart),
        comparisons=comparisons,
        verdict=runs.verdict(comparisons, "tool_failure_rate"),
        tables=tables,
        notes=[
            "The paper states the noise result in words (3B: stable up to 5 % failures, a clear drop at "
            "10 %); those statements are the comparisons."
        ],
    )


def _noise_claims(statements: pl.DataFrame, runs: OurRuns, rule: Rule) -> list[Comparison]:
    """Check each of the paper's statements per model of ours: a failure rate against clean tools."""
    out = []
    for model in models_in(runs.means) or ["tiny"]:
        o = values_by(runs.means.filter(pl.col("model") == model), "tool_failure_rate")
        arms = runs.arms("tool_failure_rate", model)
        for row in statements.iter_rows(named=True):
            rate, note = row["tool_failure_rate"], row["note"] or ""
            expect = "lower" if "drop" in note else "similar"
            sign = "<" if expect == "lower" else "≈"
            claim = Claim(
                label=f"fail={rate:g} {sign} fail=0",
                expect=expect,
                paper=quote(note),
                first=Side(f"fail={rate:g}", o.get(rate), arms.get(rate)),
                second=Side("fail=0", o.get(0.0), arms.get(0.0)),
                context=model_label(model),
                rule=rule,
            )
            out.append(claim.check())
    return out


def _noise_table(statements: pl.DataFrame, chart: pl.DataFrame) -> pl.DataFrame:
    """Fig. 6's values: the paper's statements (no number) above our final pass per failure rate."""
    paper_text = statements.select(
        pl.lit("paper").alias("source"),
        pl.col("model").map_elements(model_label, return_dtype=pl.String),
        "tool_failure_rate",
        pl.col("note"),
    )
    return pl.concat(
        [
            paper_text.with_columns(pl.lit(None, dtype=pl.Float64).alias("final_pass")),
            chart.select(
                "source",
                "model",
                "tool_failure_rate",
                pl.lit(None, dtype=pl.String).alias("note"),
                pl.col("value").alias("final_pass"),
            ),
        ],
        how="vertical_relaxed",
    ).select("source", "model", "tool_failure_rate", "final_pass", "note")


def _clean_table(mine_rows: pl.DataFrame) -> pl.DataFrame | None:
    """Each arm's noisy and clean final pass and their difference; None when no run was scored clean."""
    clean = wide_metrics(mine_rows, ["model", "tool_failure_rate"], [FINAL, CLEAN_FINAL])
    if not (clean.height and clean["clean/final_pass"].drop_nulls().len()):
        return None
    return clean.select(
        pl.col("model").map_elements(model_label, return_dtype=pl.String),
        "tool_failure_rate",
        pl.col("final_pass").alias("noisy final_pass"),
        pl.col("clean/final_pass").alias("clean final_pass"),
        (pl.col("final_pass") - pl.col("clean/final_pass")).alias("noisy - clean"),
    )


def _noise_curves(curves: pl.DataFrame) -> pl.DataFrame:
    """Return the noise runs' curves of :data:`~star_lib.viz.labels.CURVE_METRICS` (all when none logged)."""
    noise_curves = curves.filter(pl.col("finding") == "noise") if curves.height else curves
    wanted = (
        noise_curves.filter(pl.col("metric").map_elements(is_curve_metric, return_dtype=pl.Boolean))
        if noise_curves.height
        else noise_curves
    )
    return wanted if wanted.height else noise_curves
