"""One function per finding of the paper: select and reshape the results, compare with the paper, say so.

Each function takes the results table (``star_lib.experiments.results.load_results(...).frame``, our runs)
and returns a :class:`Finding`: tidy chart data with the paper's figures (``source = "paper"``) beside our
runs (``source = "ours"``), the finding's table, the paper-vs-ours :class:`Comparison` rows, and a verdict
sentence generated from those rows — whether our runs move in the paper's direction. Nothing here knows a
result in advance: the paper's side comes from :func:`~star_lib.experiments.results.paper_reference`
(spec §9), ours from the runs, and the verdict from comparing the two.

A comparison checks one of the paper's statements on our runs: "A is higher than B" (from two reported
numbers, or from a qualitative statement such as "hard-only training collapses") or "A is about B" ("stable
for failure rates up to 5 %", or two reported numbers less than ``tolerance`` apart). Our difference agrees
when it has the paper's sign and exceeds ``tolerance`` (for "about": stays within ``stable_tolerance``);
a difference inside ``tolerance`` is *flat*; a pair our runs lack is *missing* and is not counted.

At ``tiny`` scale the model axis collapses to ``tiny``; comparisons over another axis are then made against
the paper's smallest model that reports them (named in each comparison).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from star_lib.experiments.grids import PAPER_MODELS, finding_axes
from star_lib.experiments.results import paper_reference

FINAL = "eval/final_pass"
"""The paper's headline metric: TravelPlanner final pass rate (a fraction)."""
IN_DOMAIN: tuple[str, ...] = (
    "eval/delivery",
    "eval/cs_micro",
    "eval/cs_macro",
    "eval/hard_micro",
    "eval/hard_macro",
    FINAL,
)
"""TravelPlanner metrics of Table 1, in the paper's column order."""
CURVE_METRICS: tuple[str, ...] = ("env/success", "reward", "env/faults", "env/truncation_rate", "loss")
"""Per-step metrics the noise figure plots when a run logged them (RL: success, reward, faults; SFT: loss)."""
TOKEN_METRICS: tuple[str, ...] = (
    "rl/final/train/num_tokens",
    "rl/final/num_tokens",
    "sft/final/train/num_tokens",
    "sft/final/num_tokens",
)
"""Final metrics that count training tokens (the trainers' last ``num_tokens``; RL's first, then SFT's)."""


def is_curve_metric(metric: str) -> bool:
    """Tell whether a per-step metric is in :data:`CURVE_METRICS`, bare or under a prefix (``train/loss``)."""
    if metric.startswith("summary/"):
        return False
    return any(metric == m or metric.endswith("/" + m) for m in CURVE_METRICS)


FINDING_TITLES: dict[str, str] = {
    "reward": "Reward design (Table 1, Table 2)",
    "scale": "Model scale (Fig. 4)",
    "data": "RL data quantity (Fig. 5)",
    "difficulty": "RL data difficulty (Table 3)",
    "algorithm": "RL algorithms and training cost (Table 4)",
    "noise": "Environment noise (Fig. 6)",
    "interactions": "Interactions between the axes (factorial view)",
}
"""Title of each finding's notebook section."""
_MODEL_LABELS = {"tiny": "tiny", "qwen2.5-1.5b": "1.5B", "qwen2.5-3b": "3B", "qwen2.5-7b": "7B"}
_MODEL_ORDER = ("tiny", *PAPER_MODELS)
_DIFFICULTY_ORDER = ("easy", "medium", "hard", "4:3:3")
_REWARD_ORDER = ("sum", "macro", "success", "curriculum")
_ALGORITHM_ORDER = ("grpo", "dapo", "arpo")


def model_label(model: str | None) -> str:
    """Short display name of a model preset (``qwen2.5-1.5b`` → ``1.5B``)."""
    return _MODEL_LABELS.get(model or "", model or "–")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _pts(value: float) -> str:
    return f"{100 * value:+.1f} pts"


# ───────────────────────────── comparisons and verdicts ─────────────────────────────


@dataclass(frozen=True)
class Comparison:
    """One of the paper's statements, checked on our runs."""

    label: str
    """What is compared, e.g. ``curriculum > sum`` or ``fail=0.05 ≈ fail=0``."""
    metric: str
    """The metric compared (``eval/final_pass`` …)."""
    expect: str
    """The paper's direction: ``higher`` (first above second), ``lower`` or ``similar``."""
    paper: str
    """The paper's evidence, e.g. ``1.5B: 34.9 % vs 33.1 %`` or a quoted statement."""
    our_diff: float | None
    """Our first-minus-second difference (fraction), None when our runs lack one side."""
    ours: str = ""
    """Our values, e.g. ``tiny: 40.0 % vs 35.0 %``."""
    tolerance: float = 0.01
    """Differences within this are flat (for ``higher``/``lower``)."""
    stable_tolerance: float = 0.05
    """Largest difference that still counts as ``similar``."""

    @property
    def outcome(self) -> str:
        """``agrees`` | ``flat`` | ``opposite`` | ``missing``."""
        diff = self.our_diff
        if diff is None or (isinstance(diff, float) and math.isnan(diff)):
            return "missing"
        if self.expect == "similar":
            return "agrees" if abs(diff) <= self.stable_tolerance else "opposite"
        if abs(diff) <= self.tolerance:
            return "flat"
        return "agrees" if (diff > 0) == (self.expect == "higher") else "opposite"

    def describe(self) -> str:
        """Describe the comparison as a clause of the verdict sentence."""
        ours = "not in our runs" if self.our_diff is None else f"ours {_pts(self.our_diff)}"
        return f"{self.label} (paper {self.paper}; {ours}: {self.outcome})"


def comparisons_frame(comparisons: Sequence[Comparison]) -> pl.DataFrame:
    """Return the comparisons as a table (one row each, with the outcome)."""
    schema = {
        "comparison": pl.String,
        "metric": pl.String,
        "paper": pl.String,
        "ours": pl.String,
        "our difference (pts)": pl.Float64,
        "outcome": pl.String,
    }
    rows = [
        {
            "comparison": c.label,
            "metric": c.metric,
            "paper": c.paper,
            "ours": c.ours or "–",
            "our difference (pts)": None if c.our_diff is None else 100 * c.our_diff,
            "outcome": c.outcome,
        }
        for c in comparisons
    ]
    return pl.DataFrame(rows, schema=schema)


def verdict(comparisons: Sequence[Comparison], *, have_runs: bool, scope: str = "") -> str:
    """One sentence: whether our runs move in the paper's direction, computed from the comparisons.

    Args:
        comparisons: The paper's statements checked on our runs.
        have_runs: Whether any of our runs for this finding have finished.
        scope: What our runs cover (e.g. ``reward ∈ {sum, success} at tiny``), used when nothing compares.

    Example:
        >>> c = Comparison("7B > 1.5B", FINAL, "higher", "62.8 % vs 33.1 %", our_diff=0.05)
        >>> print(verdict([c], have_runs=True)[:64])
        Yes: our runs move in the paper's direction on 1 of 1 comparison

    """
    if not have_runs:
        return (
            "No finished runs of this finding yet, so nothing can be compared with the paper; "
            "launch them (launch='local' or 'slurm') or point results_dir at a runs folder."
        )
    checked = [c for c in comparisons if c.outcome != "missing"]
    if not checked:
        what = f" ({scope})" if scope else ""
        expected = "; ".join(f"{c.label}: paper {c.paper}" for c in comparisons) or "none stated"
        return (
            f"Our runs{what} have no pair that matches one of the paper's comparisons ({expected}), "
            "so the paper's direction cannot be checked at this scale."
        )
    agree = sum(c.outcome == "agrees" for c in checked)
    head = "Yes" if agree == len(checked) else ("No" if agree == 0 else "Partly")
    plural = "comparison" if len(checked) == 1 else "comparisons"
    details = "; ".join(c.describe() for c in checked)
    return (
        f"{head}: our runs move in the paper's direction on {agree} of {len(checked)} {plural} — {details}."
    )


# ───────────────────────────── the finding ─────────────────────────────


@dataclass
class Finding:
    """What a finding notebook shows: chart data, tables, comparisons, and the verdict."""

    key: str
    """Finding name (``reward``, ``scale``, …)."""
    title: str
    """Section title (with the paper's table/figure number)."""
    chart_data: pl.DataFrame
    """Rows of the paper-vs-ours chart: ``source``, ``model``, ``x``, ``value``, ``sd``, ``n``, ``note``."""
    table: pl.DataFrame
    """The finding's table (paper and ours side by side)."""
    comparisons: list[Comparison]
    """The paper's statements checked on our runs."""
    verdict: str
    """One generated sentence (see :func:`verdict`)."""
    runs: int = 0
    """How many of our finished runs the finding uses."""
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    """Further tables (``ood``, ``cost``, ``effects`` …)."""
    notes: list[str] = field(default_factory=list)
    """What is missing or approximated, in plain words."""

    @property
    def comparison_table(self) -> pl.DataFrame:
        """The comparisons as a table."""
        return comparisons_frame(self.comparisons)


# ───────────────────────────── selection helpers ─────────────────────────────


def scale_models(scale: str) -> tuple[str, ...]:
    """Model presets of a scale: ``tiny`` → ``("tiny",)``, ``paper`` → the Qwen2.5 sizes."""
    return ("tiny",) if scale == "tiny" else PAPER_MODELS


def ours(results: pl.DataFrame, finding: str | Iterable[str] | None, scale: str) -> pl.DataFrame:
    """Our finished runs' rows for a finding (or any finding when None) at a scale."""
    if results.height == 0:
        return results
    rows = results.filter((pl.col("source") == "ours") & pl.col("model").is_in(list(scale_models(scale))))
    if finding is not None:
        names = [finding] if isinstance(finding, str) else list(finding)
        rows = rows.filter(pl.col("finding").is_in(names))
    return rows


def aggregate(rows: pl.DataFrame, by: Sequence[str], metric: str = FINAL) -> pl.DataFrame:
    """Mean, standard deviation and count of ``metric`` over seeds (and anything not in ``by``)."""
    schema = {**{k: rows.schema[k] for k in by}, "value": pl.Float64, "sd": pl.Float64, "n": pl.UInt32}
    picked = rows.filter(pl.col("metric") == metric) if rows.height else rows
    if picked.height == 0:
        return pl.DataFrame(schema=schema)
    return (
        picked.group_by(list(by))
        .agg(pl.col("value").mean().alias("value"), pl.col("value").std().alias("sd"), pl.len().alias("n"))
        .sort(list(by))
    )


def paper_rows(finding: str | Iterable[str], metric: str | None = FINAL) -> pl.DataFrame:
    """Return the paper's reference rows of a finding (all metrics when ``metric`` is None)."""
    names = [finding] if isinstance(finding, str) else list(finding)
    rows = paper_reference().filter(pl.col("finding").is_in(names))
    return rows if metric is None else rows.filter(pl.col("metric") == metric)


def _chart_rows(paper: pl.DataFrame, mine: pl.DataFrame, axis: str) -> pl.DataFrame:
    """Tidy chart rows from paper rows and our aggregated rows (``x`` = the axis value as text)."""
    parts = []
    if paper.height:
        parts.append(
            paper.select(
                pl.lit("paper").alias("source"),
                pl.col("model").map_elements(model_label, return_dtype=pl.String).alias("model"),
                pl.col(axis).cast(pl.String).alias("x"),
                pl.col("value"),
                pl.lit(None, dtype=pl.Float64).alias("sd"),
                pl.lit(None, dtype=pl.UInt32).alias("n"),
                pl.col("note"),
            )
        )
    if mine.height:
        parts.append(
            mine.select(
                pl.lit("ours").alias("source"),
                pl.col("model").map_elements(model_label, return_dtype=pl.String).alias("model"),
                pl.col(axis).cast(pl.String).alias("x"),
                pl.col("value"),
                pl.col("sd"),
                pl.col("n").cast(pl.UInt32),
                pl.lit(None, dtype=pl.String).alias("note"),
            )
        )
    schema = {
        "source": pl.String,
        "model": pl.String,
        "x": pl.String,
        "value": pl.Float64,
        "sd": pl.Float64,
        "n": pl.UInt32,
        "note": pl.String,
    }
    return pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema=schema)


def _values(rows: pl.DataFrame, key: str) -> dict[Any, float]:
    """``{axis value: value}`` of rows that have a value."""
    return {k: v for k, v in zip(rows[key].to_list(), rows["value"].to_list(), strict=True) if v is not None}


def _models_in(rows: pl.DataFrame) -> list[str]:
    present = set(rows["model"].drop_nulls().to_list()) if rows.height else set()
    return [m for m in _MODEL_ORDER if m in present]


def _expect(diff: float, tolerance: float) -> str:
    return "similar" if abs(diff) < tolerance else ("higher" if diff > 0 else "lower")


def _pair(
    label_a: str,
    label_b: str,
    paper_a: float,
    paper_b: float,
    context: str,
    ours_a: float | None,
    ours_b: float | None,
    our_context: str,
    metric: str,
    tolerance: float,
    stable_tolerance: float,
) -> Comparison:
    """Build a comparison from two paper numbers, the paper's higher value first."""
    if paper_b > paper_a:
        label_a, label_b, paper_a, paper_b, ours_a, ours_b = (
            label_b,
            label_a,
            paper_b,
            paper_a,
            ours_b,
            ours_a,
        )
    expect = _expect(paper_a - paper_b, tolerance)
    sign = "≈" if expect == "similar" else ">"
    diff = None if ours_a is None or ours_b is None else ours_a - ours_b
    ours_text = f"{our_context}: {_pct(ours_a)} vs {_pct(ours_b)}" if diff is not None else ""
    return Comparison(
        label=f"{label_a} {sign} {label_b}",
        metric=metric,
        expect=expect,
        paper=f"{context}: {_pct(paper_a)} vs {_pct(paper_b)}",
        our_diff=diff,
        ours=ours_text,
        tolerance=tolerance,
        stable_tolerance=stable_tolerance,
    )


def categorical_comparisons(
    paper: pl.DataFrame,
    mine: pl.DataFrame,
    axis: str,
    order: Sequence[str],
    metric: str = FINAL,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> list[Comparison]:
    """Every pair of ``axis`` values the paper reports for one model, checked within each of our models.

    Our model is compared with the same paper model when the paper reports it, else with the paper's
    smallest model that reports a pair.
    """
    paper = paper.filter(pl.col("value").is_not_null() & pl.col(axis).is_not_null())
    by_model = {m: _values(paper.filter(pl.col("model") == m), axis) for m in _models_in(paper)}
    by_model = {m: v for m, v in by_model.items() if len(v) >= 2}
    if not by_model:
        return []
    out = []
    for our_model in _models_in(mine) or ["tiny"]:
        ref = our_model if our_model in by_model else next(iter(by_model))
        p = by_model[ref]
        o = _values(mine.filter(pl.col("model") == our_model), axis) if mine.height else {}
        keys = sorted(p, key=lambda k: order.index(k) if k in order else len(order))
        for a, b in itertools.combinations(keys, 2):
            out.append(
                _pair(
                    str(a),
                    str(b),
                    p[a],
                    p[b],
                    model_label(ref),
                    o.get(a),
                    o.get(b),
                    model_label(our_model),
                    metric,
                    tolerance,
                    stable_tolerance,
                )
            )
    return out


def _claim(
    label: str,
    expect: str,
    statement: str,
    ours_a: float | None,
    ours_b: float | None,
    our_context: str,
    metric: str,
    tolerance: float,
    stable_tolerance: float,
) -> Comparison:
    """Build a comparison from a qualitative statement of the paper."""
    diff = None if ours_a is None or ours_b is None else ours_a - ours_b
    return Comparison(
        label=label,
        metric=metric,
        expect=expect,
        paper=f"“{statement}”",
        our_diff=diff,
        ours=f"{our_context}: {_pct(ours_a)} vs {_pct(ours_b)}" if diff is not None else "",
        tolerance=tolerance,
        stable_tolerance=stable_tolerance,
    )


def _scope(mine: pl.DataFrame, axis: str, scale: str) -> str:
    values = sorted({str(v) for v in mine[axis].to_list()}) if mine.height else []
    return (
        f"{axis} ∈ {{{', '.join(values)}}} at {scale} scale"
        if values
        else f"no {axis} values at {scale} scale"
    )


def _wide_metrics(rows: pl.DataFrame, by: Sequence[str], metrics: Sequence[str]) -> pl.DataFrame:
    """Mean of each metric over seeds, one column per metric (short names)."""
    cols = {m: m.split("/", 1)[-1] for m in metrics}
    if rows.height == 0:
        return pl.DataFrame(schema={**{k: pl.String for k in by}, **{v: pl.Float64 for v in cols.values()}})
    picked = rows.filter(pl.col("metric").is_in(list(metrics)))
    if picked.height == 0:
        return pl.DataFrame(
            schema={**{k: rows.schema[k] for k in by}, **{v: pl.Float64 for v in cols.values()}}
        )
    wide = (
        picked.group_by([*by, "metric"])
        .agg(pl.col("value").mean())
        .pivot(on="metric", index=list(by), values="value")
    )
    for metric in metrics:
        if metric not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(metric))
    return wide.select(*by, *[pl.col(m).alias(c) for m, c in cols.items()]).sort(list(by))


# ───────────────────────────── the findings ─────────────────────────────


def reward_design(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Table 1 (in-domain metrics by reward × model) and Table 2 (OOD accuracy by reward)."""
    mine_rows = ours(results, "reward", scale)
    mine = aggregate(mine_rows, ["model", "reward"])
    paper = paper_rows("reward")
    comparisons = categorical_comparisons(
        paper, mine, "reward", _REWARD_ORDER, FINAL, tolerance, stable_tolerance
    )
    table = _reward_table(mine_rows)
    return Finding(
        key="reward",
        title=FINDING_TITLES["reward"],
        chart_data=_chart_rows(paper, mine, "reward"),
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(comparisons, have_runs=mine.height > 0, scope=_scope(mine, "reward", scale)),
        tables={"ood": _ood_table(results, scale)},
        notes=_missing_metric_notes(mine_rows, ["qa/"], "OOD accuracy (the qa-eval stage)"),
    )


def _reward_table(mine_rows: pl.DataFrame) -> pl.DataFrame:
    ours_wide = _wide_metrics(mine_rows, ["model", "reward"], IN_DOMAIN)
    ours_wide = ours_wide.with_columns(
        pl.lit("ours").alias("source"), pl.lit(None, dtype=pl.String).alias("note")
    )
    paper = paper_rows(["reward", "baseline"])
    paper_wide = paper.select(
        pl.lit("paper").alias("source"),
        "model",
        pl.coalesce(pl.col("reward"), pl.col("note"), pl.col("run")).alias("reward"),
        *[pl.lit(None, dtype=pl.Float64).alias(m.split("/", 1)[-1]) for m in IN_DOMAIN[:-1]],
        pl.col("value").alias("final_pass"),
        pl.when(pl.col("relation") == "<")
        .then(pl.lit("upper bound"))
        .otherwise(pl.col("note"))
        .alias("note"),
    )
    columns = ["source", "model", "reward", *[m.split("/", 1)[-1] for m in IN_DOMAIN], "note"]
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


def model_scale(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Fig. 4: final pass rate by model size (the paper's SUM runs; SFT-only and Kimi-K2.5 as baselines)."""
    mine_rows = ours(results, "scale", scale)
    mine = aggregate(mine_rows, ["model"])
    paper = paper_rows("reward").filter(pl.col("reward") == "sum")
    comparisons = []
    p = _values(paper, "model")
    o = _values(mine, "model")
    models = [m for m in _MODEL_ORDER if m in p]
    for a, b in itertools.combinations(models, 2):
        comparisons.append(
            _pair(
                model_label(b),
                model_label(a),
                p[b],
                p[a],
                "SUM",
                o.get(b),
                o.get(a),
                "ours",
                FINAL,
                tolerance,
                stable_tolerance,
            )
        )
    chart = _chart_rows(
        paper.with_columns(pl.col("model").alias("size")),
        mine.with_columns(pl.col("model").alias("size")),
        "size",
    ).with_columns(
        pl.col("x").map_elements(model_label, return_dtype=pl.String), pl.lit("final pass").alias("model")
    )
    baselines = paper_rows("baseline").select(
        pl.lit("paper").alias("source"),
        pl.coalesce(pl.col("note"), pl.col("run")).alias("system"),
        pl.col("model").map_elements(model_label, return_dtype=pl.String).alias("size"),
        pl.col("value").alias("final_pass"),
        pl.col("relation"),
    )
    table = pl.concat(
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
    return Finding(
        key="scale",
        title=FINDING_TITLES["scale"],
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(comparisons, have_runs=mine.height > 0, scope=_scope(mine, "model", scale)),
    )


def data_quantity(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Fig. 5: in-domain final pass and average OOD exact match by number of RL prompts.

    At ``tiny`` scale the grid's sizes are the paper's divided by ten; the paper's size ``s`` is compared
    with our size at the same position of the grid (``finding_axes("data", scale)``).
    """
    mine_rows = ours(results, "data", scale)
    paper_sizes, our_sizes = (
        finding_axes("data", "paper")["rl_data_size"],
        finding_axes("data", scale)["rl_data_size"],
    )
    equivalent = dict(zip(paper_sizes, our_sizes, strict=True))
    comparisons: list[Comparison] = []
    frames = []
    for metric, label in ((FINAL, "final pass"), ("qa/average/em", "avg OOD EM")):
        paper = paper_rows("data", metric)
        mine = aggregate(mine_rows, ["model", "rl_data_size"], metric)
        p = _values(paper, "rl_data_size")
        o = _values(mine, "rl_data_size")
        sizes = sorted(p)
        for a, b in itertools.pairwise(sizes):
            ea, eb = equivalent.get(a, a), equivalent.get(b, b)
            comparisons.append(
                _pair(
                    f"n={eb}" if scale == "tiny" else f"n={b}",
                    f"n={ea}" if scale == "tiny" else f"n={a}",
                    p[b],
                    p[a],
                    f"{label}, n={b} vs n={a}",
                    o.get(eb),
                    o.get(ea),
                    "ours",
                    metric,
                    tolerance,
                    stable_tolerance,
                )
            )
        paper_scaled = paper.with_columns(pl.col("rl_data_size").replace(equivalent))
        frames.append(
            _chart_rows(paper_scaled, mine, "rl_data_size").with_columns(pl.lit(label).alias("model"))
        )
    chart = pl.concat(frames, how="vertical_relaxed").with_columns(pl.col("x").cast(pl.Int64).alias("size"))
    table = (
        chart.select("model", "source", "size", "value", "sd", "n")
        .rename({"model": "metric", "size": "rl_data_size"})
        .sort(["metric", "rl_data_size", "source"])
    )
    mine_final = aggregate(mine_rows, ["model", "rl_data_size"])
    notes = []
    if scale == "tiny":
        notes.append(
            "Paper sizes are mapped to the tiny grid's sizes (÷10): "
            + ", ".join(f"{k}→{v}" for k, v in equivalent.items())
            + "."
        )
    notes += _missing_metric_notes(mine_rows, ["qa/"], "average OOD EM (the qa-eval stage)")
    return Finding(
        key="data",
        title=FINDING_TITLES["data"],
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        notes=notes,
        verdict=verdict(
            comparisons, have_runs=mine_final.height > 0, scope=_scope(mine_final, "rl_data_size", scale)
        ),
    )


def data_difficulty(
    results: pl.DataFrame, scale: str = "tiny", *, tolerance: float = 0.01, stable_tolerance: float = 0.05
) -> Finding:
    """Table 3: metrics by RL prompt difficulty (easy / medium / hard / the 4:3:3 mixture)."""
    mine_rows = ours(results, "difficulty", scale)
    mine = aggregate(mine_rows, ["model", "difficulty"])
    paper_all = paper_rows("difficulty", metric=None)
    o = {}
    for model in _models_in(mine) or ["tiny"]:
        o[model] = _values(mine.filter(pl.col("model") == model), "difficulty")
    comparisons = []
    collapse = paper_all.filter((pl.col("difficulty") == "hard") & pl.col("value").is_null())
    if collapse.height:
        statement = collapse["note"][0]
        for model, values in o.items():
            comparisons.append(
                _claim(
                    "4:3:3 > hard",
                    "higher",
                    statement,
                    values.get("4:3:3"),
                    values.get("hard"),
                    model_label(model),
                    FINAL,
                    tolerance,
                    stable_tolerance,
                )
            )
    table_ours = _wide_metrics(mine_rows, ["model", "difficulty"], IN_DOMAIN).with_columns(
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
    table = table.sort(
        [
            "source",
            pl.col("difficulty").replace_strict(
                {d: i for i, d in enumerate(_DIFFICULTY_ORDER)}, default=99, return_dtype=pl.Int64
            ),
        ]
    )
    chart = _chart_rows(paper_rows("difficulty"), mine, "difficulty")
    return Finding(
        key="difficulty",
        title=FINDING_TITLES["difficulty"],
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(comparisons, have_runs=mine.height > 0, scope=_scope(mine, "difficulty", scale)),
        notes=[
            "The paper reports easy-only training by its commonsense macro rate (79.7 %) and hard-only "
            "training only in words (it collapses), so the chart shows the 4:3:3 final pass rate "
            "as the paper's bar."
        ],
    )


def algorithms(
    results: pl.DataFrame,
    scale: str = "tiny",
    curves: pl.DataFrame | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Table 4: final pass by algorithm × model, with the training cost (wall time, GPU-hours, tokens)."""
    mine_rows = ours(results, "algorithm", scale)
    mine = aggregate(mine_rows, ["model", "algorithm"])
    paper = paper_rows("algorithm")
    comparisons = categorical_comparisons(
        paper, mine, "algorithm", _ALGORITHM_ORDER, FINAL, tolerance, stable_tolerance
    )
    return Finding(
        key="algorithm",
        title=FINDING_TITLES["algorithm"],
        chart_data=_chart_rows(paper, mine, "algorithm"),
        table=_cost_table(mine_rows, curves),
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(comparisons, have_runs=mine.height > 0, scope=_scope(mine, "algorithm", scale)),
        notes=_missing_metric_notes(
            mine_rows, ["rl/", "env/", "train/"], "RL training metrics (the rl stage)"
        ),
    )


def _cost_table(mine_rows: pl.DataFrame, curves: pl.DataFrame | None) -> pl.DataFrame:
    """Algorithms × models: final pass and cost, paper beside ours."""
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
        )
    )
    wide = _wide_metrics(mine_rows, ["model", "algorithm"], [FINAL, "cost/gpu_hours", "cost/wall_s"])
    wide = wide.rename({"final_pass": "final_pass", "gpu_hours": "gpu_hours", "wall_s": "wall_s"})
    tokens = _tokens(mine_rows, curves)
    if tokens.height:
        wide = wide.join(tokens, on=["model", "algorithm"], how="left")
    else:
        wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias("tokens"))
    wide = wide.with_columns(pl.lit("ours").alias("source"))
    columns = ["source", "model", "algorithm", "final_pass", "wall_s", "gpu_hours", "tokens"]
    table = pl.concat([paper.select(columns), wide.select(columns)], how="vertical_relaxed")
    return table.with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String)).sort(
        [
            "source",
            "model",
            pl.col("algorithm").replace_strict(
                {a: i for i, a in enumerate(_ALGORITHM_ORDER)}, default=99, return_dtype=pl.Int64
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


def env_noise(
    results: pl.DataFrame,
    scale: str = "tiny",
    curves: pl.DataFrame | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Fig. 6: test success by tool failure rate (and training curves per failure rate)."""
    mine_rows = ours(results, "noise", scale)
    mine = aggregate(mine_rows, ["model", "tool_failure_rate"])
    statements = paper_rows("noise")
    comparisons = []
    for model in _models_in(mine) or ["tiny"]:
        o = _values(mine.filter(pl.col("model") == model), "tool_failure_rate")
        base = o.get(0.0)
        for row in statements.iter_rows(named=True):
            rate, note = row["tool_failure_rate"], row["note"] or ""
            expect = "lower" if "drop" in note else "similar"
            sign = "<" if expect == "lower" else "≈"
            comparisons.append(
                _claim(
                    f"fail={rate:g} {sign} fail=0",
                    expect,
                    note,
                    o.get(rate),
                    base,
                    model_label(model),
                    FINAL,
                    tolerance,
                    stable_tolerance,
                )
            )
    chart = (
        mine.select(
            pl.lit("ours").alias("source"),
            pl.col("model").map_elements(model_label, return_dtype=pl.String),
            pl.col("tool_failure_rate"),
            "value",
            "sd",
            "n",
        )
        if mine.height
        else pl.DataFrame(
            schema={
                "source": pl.String,
                "model": pl.String,
                "tool_failure_rate": pl.Float64,
                "value": pl.Float64,
                "sd": pl.Float64,
                "n": pl.UInt32,
            }
        )
    )
    paper_text = statements.select(
        pl.lit("paper").alias("source"),
        pl.col("model").map_elements(model_label, return_dtype=pl.String),
        "tool_failure_rate",
        pl.col("note"),
    )
    table = pl.concat(
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
    finding = Finding(
        key="noise",
        title=FINDING_TITLES["noise"],
        chart_data=chart,
        table=table,
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=verdict(
            comparisons, have_runs=mine.height > 0, scope=_scope(mine, "tool_failure_rate", scale)
        ),
        notes=[
            "The paper states the noise result in words (3B: stable up to 5 % failures, a clear drop at "
            "10 %); those statements are the comparisons."
        ],
    )
    finding.tables["paper_statements"] = statements.select(
        pl.col("tool_failure_rate").alias("x"), pl.lit("paper: ").add(pl.col("note")).alias("text")
    )
    if curves is not None:
        noise_curves = curves.filter(pl.col("finding") == "noise") if curves.height else curves
        wanted = (
            noise_curves.filter(pl.col("metric").map_elements(is_curve_metric, return_dtype=pl.Boolean))
            if noise_curves.height
            else noise_curves
        )
        finding.tables["curves"] = wanted if wanted.height else noise_curves
    return finding


def interactions(
    results: pl.DataFrame,
    scale: str = "tiny",
    axes: Sequence[str] | None = None,
    *,
    tolerance: float = 0.01,
    stable_tolerance: float = 0.05,
) -> Finding:
    """Build the factorial view: final pass over two axes varied together, and each effect per level.

    The paper measures each axis alone; here the effect of the second axis (its last value minus its first)
    is computed at every level of the first, and checked against the paper's direction for that axis where
    the paper states one (more tool failures lower success; CURRICULUM above SUM).
    """
    mine_rows = ours(results, "interactions", scale)
    if axes is None:
        axes = _varied_axes(mine_rows)[:2]
    if len(axes) < 2 or mine_rows.height == 0:
        empty = pl.DataFrame(schema={"x": pl.String, "y": pl.String, "value": pl.Float64})
        return Finding(
            key="interactions",
            title=FINDING_TITLES["interactions"],
            chart_data=empty,
            table=empty,
            comparisons=[],
            runs=_run_count(mine_rows),
            verdict=verdict([], have_runs=False)
            if mine_rows.height == 0
            else f"Our interaction runs vary fewer than two axes ({', '.join(axes) or 'none'}), so there "
            "is no factorial view to compare.",
        )
    first, second = axes
    grid = aggregate(mine_rows, ["model", first, second])
    chart = grid.select(
        pl.col(first).cast(pl.String).alias(first),
        pl.col(second).cast(pl.String).alias(second),
        "value",
        "sd",
        "n",
    )
    levels_2 = sorted(set(grid[second].to_list()), key=_sort_key)
    effects = []
    comparisons = []
    for level in sorted(set(grid[first].to_list()), key=_sort_key):
        sub = _values(grid.filter(pl.col(first) == level), second)
        lo, hi = levels_2[0], levels_2[-1]
        effect = sub[hi] - sub[lo] if lo in sub and hi in sub else None
        effects.append({first: str(level), f"effect of {second} {lo}→{hi}": effect})
        expect, statement = _paper_direction(second, lo, hi)
        if expect is not None:
            comparisons.append(
                Comparison(
                    label=f"{second} {hi} vs {lo} at {first}={level}",
                    metric=FINAL,
                    expect=expect,
                    paper=statement,
                    our_diff=effect,
                    ours=f"{_pct(sub.get(hi))} vs {_pct(sub.get(lo))}",
                    tolerance=tolerance,
                    stable_tolerance=stable_tolerance,
                )
            )
    effects_frame = pl.DataFrame(effects)
    values = [e for e in effects_frame[effects_frame.columns[1]].to_list() if e is not None]
    spread = max(values) - min(values) if len(values) >= 2 else None
    head = verdict(comparisons, have_runs=True, scope=f"{first} × {second}")
    interaction = (
        f" The effect of {second} varies by {100 * spread:.1f} pts across {first} levels"
        f" ({'an interaction' if spread > tolerance else 'no interaction beyond the tolerance'})."
        if spread is not None
        else ""
    )
    return Finding(
        key="interactions",
        title=FINDING_TITLES["interactions"],
        chart_data=chart,
        table=chart.rename({"value": "final_pass"}),
        comparisons=comparisons,
        runs=_run_count(mine_rows),
        verdict=head + interaction,
        tables={"effects": effects_frame},
        notes=["The paper varies one axis at a time; the interaction itself has no paper reference."],
    )


def _sort_key(value: Any) -> tuple[int, Any]:
    order = {
        v: i for i, v in enumerate((*_REWARD_ORDER, *_ALGORITHM_ORDER, *_DIFFICULTY_ORDER, *_MODEL_ORDER))
    }
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
        paper = _values(paper_rows("reward").filter(pl.col("model") == "qwen2.5-1.5b"), "reward")
        if low in paper and high in paper:
            diff = paper[high] - paper[low]
            return ("higher" if diff > 0 else "lower"), f"1.5B: {_pct(paper[high])} vs {_pct(paper[low])}"
    return None, ""


def _varied_axes(rows: pl.DataFrame) -> list[str]:
    """Axes with more than one value among the rows (seed excluded), in the results table's axis order."""
    from star_lib.experiments.results import AXIS_SCHEMA

    return [a for a in AXIS_SCHEMA if a != "seed" and rows.height and rows[a].n_unique() > 1]


def _run_count(rows: pl.DataFrame) -> int:
    return rows.select(pl.struct("grid", "run").n_unique()).item() if rows.height else 0


def _missing_metric_notes(rows: pl.DataFrame, prefixes: Sequence[str], what: str) -> list[str]:
    if rows.height == 0:
        return []
    present = any(rows["metric"].str.starts_with(p).any() for p in prefixes)
    return [] if present else [f"Our runs have no {what} metrics yet, so that part shows the paper only."]


FINDINGS: Mapping[str, Any] = {
    "reward": reward_design,
    "scale": model_scale,
    "data": data_quantity,
    "difficulty": data_difficulty,
    "algorithm": algorithms,
    "noise": env_noise,
    "interactions": interactions,
}
"""Finding name → the function that builds it."""
