"""The skeleton every finding shares: our runs in arms, the :class:`Finding` it returns, table helpers.

A finding selects our finished runs of its grid (:func:`our_runs`: rows, arms, their statistics), states
the paper's claims about them (:mod:`star_lib.viz.verdicts`), shapes its chart and tables, and hands all of
it to :func:`build_finding`, which adds what every finding shows: the run count, the run-health and check
tables of its arms, and the behaviour shifts behind a gain, said in its verdict.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from star_lib.experiments.results import PAPER_SPLIT, paper_reference, split_of
from star_lib.viz.labels import FINAL, FINDING_TITLES, model_label, scale_models
from star_lib.viz.stats import Arm, aggregate, arm_stats, arms_of, check_failures, health_table
from star_lib.viz.verdicts import Comparison, behaviour_shifts, comparisons_frame, verdict


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
    health: pl.DataFrame = field(default_factory=pl.DataFrame)
    """Run health per arm (:func:`arm_stats`): final pass ± its interval, the termination mix, format errors,
    the transport mix, tool calls and turns per episode."""
    checks: pl.DataFrame = field(default_factory=pl.DataFrame)
    """The per-check failure profile per arm (:func:`check_failures`)."""
    shifts: list[str] = field(default_factory=list)
    """Gains that come with a shift in behaviour (:func:`behaviour_shifts`); also said in the verdict."""
    arms: tuple[str, ...] = ()
    """The axes whose values name one arm (``("model", "reward")``), as the health table groups them."""

    @property
    def comparison_table(self) -> pl.DataFrame:
        """The comparisons as a table."""
        return comparisons_frame(self.comparisons)


@dataclass(frozen=True)
class OurRuns:
    """Our finished runs of one finding at one scale, grouped into arms: what every finding starts from."""

    rows: pl.DataFrame
    """Their rows of the results table (:func:`ours`)."""
    by: tuple[str, ...]
    """The axes whose values name one arm (``("model", "reward")``)."""
    scale: str
    """``tiny`` or ``paper``."""

    @functools.cached_property
    def means(self) -> pl.DataFrame:
        """Final pass per arm: mean, standard deviation and count over its runs (:func:`aggregate`)."""
        return aggregate(self.rows, self.by)

    @functools.cached_property
    def stats(self) -> pl.DataFrame:
        """Each arm's final pass with its interval and the health of its episodes (:func:`arm_stats`)."""
        return arm_stats(self.rows, self.by)

    def arms(self, axis: str, model: str | None = None) -> dict[Any, Arm]:
        """``{axis value: Arm}`` of one model's arms (every model's when None)."""
        return arms_of(self.stats, axis, model)

    def verdict(self, comparisons: Sequence[Comparison], axis: str) -> str:
        """Return the verdict sentence on ``comparisons``, naming the ``axis`` values our runs cover."""
        return verdict(
            comparisons, have_runs=self.means.height > 0, scope=_scope(self.means, axis, self.scale)
        )


def our_runs(results: pl.DataFrame, finding: str, scale: str, by: Sequence[str]) -> OurRuns:
    """Select our finished runs of ``finding`` at ``scale`` (:func:`ours`), their arms named by ``by``."""
    return OurRuns(ours(results, finding, scale), tuple(by), scale)


def build_finding(
    key: str,
    runs: OurRuns,
    *,
    chart_data: pl.DataFrame,
    table: pl.DataFrame,
    comparisons: list[Comparison],
    verdict: str,
    tables: dict[str, pl.DataFrame] | None = None,
    notes: list[str] | None = None,
) -> Finding:
    """Return the finding: its parts, our runs' count, their health and check tables, the behaviour shifts.

    A gain that comes with a shift in behaviour (:func:`~star_lib.viz.verdicts.behaviour_shifts`) is also
    said at the end of the verdict.
    """
    finding = Finding(
        key=key,
        title=FINDING_TITLES[key],
        chart_data=chart_data,
        table=table,
        comparisons=comparisons,
        runs=run_count(runs.rows),
        verdict=verdict,
        tables=tables if tables is not None else {},
        notes=[*(notes or []), split_note(runs.rows)],
    )
    finding.health = health_table(runs.stats)
    finding.checks = check_failures(runs.rows, runs.by)
    finding.arms = runs.by
    finding.shifts = behaviour_shifts(finding.comparisons, runs.stats)
    if finding.shifts and finding.runs:
        finding.verdict = f"{finding.verdict} Behaviour: {' '.join(finding.shifts)}"
    return finding


def split_note(rows: pl.DataFrame) -> str:
    """Say which tasks each side's final pass rate is on, and the official splits our runs also scored."""
    note = f"The paper's numbers are on {PAPER_SPLIT}; ours ({FINAL}) on {split_of(FINAL)}."
    metrics = set(rows["metric"].to_list()) if rows.height else set()
    official = [
        f"{s}/official/final_pass" for s in ("validation", "test") if f"{s}/official/final_pass" in metrics
    ]
    if official:
        where = " and ".join(f"{m} ({split_of(m)})" for m in official)
        note += f" Our runs also report {where}, official evaluator: the numbers to set beside the paper's."
    return note


def ours(results: pl.DataFrame, finding: str | Iterable[str] | None, scale: str) -> pl.DataFrame:
    """Our finished runs' rows for a finding (or any finding when None) at a scale."""
    if results.height == 0:
        return results
    rows = results.filter((pl.col("source") == "ours") & pl.col("model").is_in(list(scale_models(scale))))
    if finding is not None:
        names = [finding] if isinstance(finding, str) else list(finding)
        rows = rows.filter(pl.col("finding").is_in(names))
    return rows


def paper_rows(finding: str | Iterable[str], metric: str | None = FINAL) -> pl.DataFrame:
    """Return the paper's reference rows of a finding (all metrics when ``metric`` is None)."""
    names = [finding] if isinstance(finding, str) else list(finding)
    rows = paper_reference().filter(pl.col("finding").is_in(names))
    return rows if metric is None else rows.filter(pl.col("metric") == metric)


def chart_rows(paper: pl.DataFrame, mine: pl.DataFrame, axis: str) -> pl.DataFrame:
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


def wide_metrics(rows: pl.DataFrame, by: Sequence[str], metrics: Sequence[str]) -> pl.DataFrame:
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


def run_count(rows: pl.DataFrame) -> int:
    """Return how many runs (grid × run) ``rows`` hold."""
    return rows.select(pl.struct("grid", "run").n_unique()).item() if rows.height else 0


def ood_notes(rows: pl.DataFrame, scale: str) -> list[str]:
    """Return notes on what the OOD comparisons measure at ``scale``, and whether our runs have it."""
    if scale != "tiny":
        return missing_metric_notes(rows, ["qa/"], "average OOD EM (the qa-eval stage)")
    return [
        "At tiny scale OOD is the OOD split (longer trips and constraint combinations never trained on, "
        "from unseen worlds), scored by its commonsense micro rate; the paper's is exact match on QA sets, "
        "so only the direction of a difference is compared.",
        *missing_metric_notes(rows, ["ood/"], "OOD (the ood split of the eval stage)"),
    ]


def missing_metric_notes(rows: pl.DataFrame, prefixes: Sequence[str], what: str) -> list[str]:
    """Return a note that our runs lack ``what`` when no metric of ``rows`` has one of ``prefixes``."""
    if rows.height == 0:
        return []
    present = any(rows["metric"].str.starts_with(p).any() for p in prefixes)
    return [] if present else [f"Our runs have no {what} metrics yet, so that part shows the paper only."]


def _scope(mine: pl.DataFrame, axis: str, scale: str) -> str:
    """Say which values of ``axis`` our runs cover (``reward ∈ {sum, success} at tiny scale``)."""
    values = sorted({str(v) for v in mine[axis].to_list()}) if mine.height else []
    return (
        f"{axis} ∈ {{{', '.join(values)}}} at {scale} scale"
        if values
        else f"no {axis} values at {scale} scale"
    )
