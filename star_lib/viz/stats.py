"""The findings' statistics: per-query outcomes, arms, bootstrap intervals, the evidence gate, seed planning.

An *arm* is a group of our runs that differ only by seed (``tiny · curriculum``). :func:`arm_stats` pools
each arm's runs into its final pass with a 95 % interval (:data:`INTERVAL_Z`) and the health of its
episodes (termination mix, format errors, transport mix); :class:`Arm` is one such row as the comparisons
read it (:func:`arms_of`). Every interval is computed in one place, :func:`contrast_interval`: the paired
bootstrap over the held-out queries and the seeds (:func:`contrast_se`) when the arms list per-query
outcomes (:class:`Outcomes`), else the arms' standard errors in quadrature. :func:`evidence_gate` says when
the arms show no signal to judge by, and :func:`seeds_for` / :func:`seeds_table` how many seeds an arm
would need for a given interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from star_lib.viz.labels import FINAL, MODEL_ORDER, finite, model_label, pct, pts_abs

INTERVAL_Z = 1.96
"""Half-width of every interval shown (``± …``), in standard errors: a normal 95 % interval."""
POWER_Z = 0.8416
"""The normal quantile of 80 % power: a true difference of ``(INTERVAL_Z + POWER_Z)`` standard errors is
found (outside the 95 % interval) four times in five — the minimum detectable difference."""
MAX_TRUNCATED = 0.5
"""Evidence gate: largest share of the reference arm's episodes that may end at the turn or context limit.
Above it the arm measures the limit rather than the policy, and its comparisons read *no evidence*."""
MAX_FORMAT_ERRORS = 0.5
"""Evidence gate: largest share of the reference arm's episodes with a format error
(``eval/format_error_rate``) or a malformed ending (``eval/termination/malformed``)."""
BOOTSTRAP_RESAMPLES = 2000
"""Resamples of every bootstrap interval (over queries and seeds, :func:`contrast_interval`)."""
BOOTSTRAP_SEED = 0
"""Seed of the bootstrap's generator: the same runs always give the same interval."""
QUERY_METRIC = "query/"
"""Prefix of the per-query outcome rows of the tidy table: ``query/<split>/<rate>/<query id>`` (one row per
run × held-out query, value 0/1 or SUM), from the published study's lists
(:func:`~star_lib.viz.findings.study_rows`)."""

HEALTH_METRICS: dict[str, str] = {
    "final_pass": FINAL,
    "untrained": "eval/base/final_pass",
    "answer": "eval/termination/answer",
    "turn limit": "eval/termination/turn_limit",
    "context limit": "eval/termination/context_limit",
    "malformed": "eval/termination/malformed",
    "format errors": "eval/format_error_rate",
    "flight": "eval/transport/flight",
    "self-driving": "eval/transport/self-driving",
    "taxi": "eval/transport/taxi",
    "tool calls": "eval/tool_calls",
    "turns": "eval/turns",
    "episodes": "eval/n",
}
"""Columns of a finding's run-health table (:attr:`~star_lib.viz.findings.Finding.health`) → the eval
metric each one averages."""
HEALTH_PERCENT: tuple[str, ...] = (
    "final_pass",
    "± (95 %)",
    "untrained",
    "answer",
    "turn limit",
    "context limit",
    "malformed",
    "format errors",
    "flight",
    "self-driving",
    "taxi",
)
"""Health-table columns holding fractions (shown as percentages)."""
TERMINATION_COLUMNS: tuple[str, ...] = ("answer", "turn limit", "context limit", "malformed")
"""The termination mix of the health table (shares of the arm's evaluation episodes)."""
TRANSPORT_COLUMNS: tuple[str, ...] = ("flight", "self-driving", "taxi")
"""The transport mix of the health table (shares of the plans' travel legs)."""
SFT_METRICS: dict[str, str] = {
    "sft final_pass": "eval/sft/final_pass",
    **{f"sft {kind}": f"eval/sft/transport/{kind}" for kind in TRANSPORT_COLUMNS},
}
"""The SFT model's numbers when a run also evaluated it (``eval.models: [..., sft, rl]``)."""


@dataclass(frozen=True)
class Outcomes:
    """An arm's per-query final-pass outcomes: one row per run (seed), one column per held-out query."""

    queries: tuple[int, ...]
    """The held-out queries' ids, in the split's order (the same for every run of the arm)."""
    values: tuple[tuple[float, ...], ...]
    """Outcome per run × query (0/1 for final pass)."""

    @property
    def mean(self) -> float:
        """Mean over runs and queries (the arm's rate)."""
        return sum(map(sum, self.values)) / max(1, len(self.values) * len(self.queries))


def contrast_se(
    cells: Sequence[Outcomes],
    weights: Sequence[float],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    seeds: int | None = None,
) -> float:
    """Return the bootstrap SE of ``sum(w * cell mean)`` over cells that share their held-out queries.

    Each resample draws the queries with replacement once — the same indices for every cell, so the query
    difficulty common to the cells cancels in a difference (the paired bootstrap) — and each cell's runs
    (seeds) with replacement, independently per cell. One cell with weight 1 gives the arm's own SE.

    ``seeds`` draws that many runs per cell instead of the cell's own count: the SE a design with that many
    seeds would get, projected from the runs at hand (their spread stands for every seed's; see
    :func:`seeds_for`).

    Raises:
        ValueError: the cells do not share their queries, or ``weights`` does not match ``cells``.

    Example:
        >>> a = Outcomes((1, 2, 3, 4), ((1, 0, 1, 0),))
        >>> b = Outcomes((1, 2, 3, 4), ((1, 0, 1, 1),))
        >>> contrast_se([a, a], [1.0, -1.0]), contrast_se([a, b], [1.0, -1.0]) > 0
        (0.0, True)

    """
    import numpy as np

    if len(cells) != len(weights) or not cells:
        raise ValueError(f"contrast of {len(cells)} cells needs as many weights, got {len(weights)}")
    if not shares_queries(cells):
        raise ValueError("the paired bootstrap needs cells that share their held-out queries")
    rng = np.random.default_rng(seed)
    n_queries = len(cells[0].queries)
    drawn = rng.integers(0, n_queries, size=(resamples, n_queries))
    query_counts = np.stack([np.bincount(row, minlength=n_queries) for row in drawn]).astype(float)
    total = np.zeros(resamples)
    for cell, weight in zip(cells, weights, strict=True):
        matrix = np.asarray(cell.values, dtype=float)
        runs = matrix.shape[0]
        drawn_runs = runs if seeds is None else seeds
        picks = rng.integers(0, runs, size=(resamples, drawn_runs))
        run_counts = np.stack([np.bincount(row, minlength=runs) for row in picks]).astype(float)
        total += (
            weight * np.einsum("bs,sq,bq->b", run_counts, matrix, query_counts) / (drawn_runs * n_queries)
        )
    return float(total.std(ddof=1))


def seeds_for(outcomes: Outcomes, half_width: float, most: int = 20) -> int | None:
    """Return the fewest seeds whose projected 95 % half-width of the arm's rate is at most ``half_width``.

    The projection is :func:`contrast_se` drawing ``n`` seeds from the arm's runs: their spread stands for
    every seed's, so it cannot foresee a seed unlike the ones at hand, and with few runs it errs low. More
    seeds only shrink the seeds' share of the interval; the held-out queries' share stays, so an arm whose
    queries alone give more than ``half_width`` never gets there. None when ``most`` seeds do not (that, or
    seeds that spread too far, as when one of them collapsed).

    Example:
        >>> same = Outcomes((1, 2, 3, 4), ((1, 0, 1, 0), (1, 0, 1, 0)))
        >>> seeds_for(same, 0.5), seeds_for(same, 0.1)
        (1, None)

    """
    if half_width <= 0 or most < 1:
        raise ValueError(f"half_width must be > 0 and most >= 1, got {half_width} and {most}")

    def fits(n: int) -> bool:
        return INTERVAL_Z * contrast_se([outcomes], [1.0], seeds=n) <= half_width

    if not fits(most):
        return None
    low, high = 1, most  # the smallest n that fits lies in [low, high]; the SE falls as n grows
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle + 1, high)
    return low


def shares_queries(cells: Sequence[Outcomes | None]) -> bool:
    """Return whether every cell has per-query outcomes on the same queries (the paired bootstrap applies)."""
    present = [c for c in cells if c is not None]
    return bool(cells) and len(present) == len(cells) and len({c.queries for c in present}) == 1


def contrast_interval(arms: Sequence[Arm], weights: Sequence[float], *, paired: bool = True) -> float | None:
    """Return the 95 % half-width of ``sum(w * arm value)``: the one place every interval is computed.

    When the arms carry per-query outcomes on the same queries (the tiny study's runs do: synthesis is
    shared by every arm and seed) and ``paired`` (the contrast is of final pass, what the outcomes hold), it
    is :data:`INTERVAL_Z` times the paired bootstrap SE over queries and seeds (:func:`contrast_se`);
    otherwise the arms' SEs in quadrature, ``Z·sqrt(sum(w² se²))``; None when an arm's SE is unknown.
    """
    if paired and shares_queries([a.outcomes for a in arms]):
        return INTERVAL_Z * contrast_se([a.outcomes for a in arms if a.outcomes is not None], weights)
    if not arms or any(a.se is None for a in arms):
        return None
    return INTERVAL_Z * math.sqrt(sum((w * (a.se or 0.0)) ** 2 for a, w in zip(arms, weights, strict=True)))


@dataclass(frozen=True)
class Arm:
    """One side of a comparison: a group of our runs (seeds pooled) and the health of its episodes."""

    label: str
    """The arm's axis value, e.g. ``fail=0.1`` or ``curriculum``."""
    value: float | None
    """Final pass rate (mean over the arm's runs)."""
    se: float | None = None
    """Standard error of ``value`` (:func:`arm_stats`): the bootstrap SE over queries and seeds when the runs
    carry per-query outcomes, else the larger of the seeds' SE and the binomial SE of the pooled episodes
    (never below the Laplace-smoothed binomial SE); None when neither is known."""
    floor: float | None = None
    """The untrained model's final pass on the same tasks (``eval/base/final_pass``), when evaluated."""
    start: float | None = None
    """The arm's SFT start on the same tasks and metric (``eval/sft/final_pass``), when the runs scored it
    (``eval.models: [sft, rl]``): the model RL began from."""
    turn_limit: float = 0.0
    """Share of episodes that ended at the turn limit."""
    context_limit: float = 0.0
    """Share of episodes that ended at the context limit."""
    format_errors: float = 0.0
    """Share of episodes with a format error or a malformed ending."""
    turns: float | None = None
    """Mean turns per episode."""
    transport: Mapping[str, float] = field(default_factory=dict)
    """Shares of the travel legs by kind (``flight``, ``self-driving``, ``taxi``); empty when unknown."""
    outcomes: Outcomes | None = None
    """The runs' per-query final pass (the published study's runs), for paired bootstrap intervals."""

    @property
    def interval(self) -> float | None:
        """Half-width of the arm's 95 % interval (:data:`INTERVAL_Z` standard errors), None when unknown."""
        return None if self.se is None else INTERVAL_Z * self.se

    @property
    def truncated(self) -> float:
        """Share of episodes cut by a limit (turn or context)."""
        return self.turn_limit + self.context_limit


def _limit_reason(arms: Sequence[Arm], ref: Arm) -> str | None:
    """Why the reference arm's episodes measure a limit, or None when they are not dominated by one."""
    if ref.truncated <= MAX_TRUNCATED:
        return None
    every = all(a.truncated >= 1.0 - 1e-9 for a in arms)
    only_turns = all(a.context_limit == 0 for a in arms)
    turns = {round(a.turns) for a in arms if a.turns is not None}
    if every and only_turns:
        limit = f"{turns.pop()}-turn limit" if len(turns) == 1 else "turn limit"
        return f"every episode hit the {limit}"
    if every:
        return "every episode hit the turn or context limit"
    return (
        f"{pct(ref.truncated)} of the {ref.label} episodes hit the turn or context limit "
        f"(the gate allows {pct(MAX_TRUNCATED)})"
    )


def evidence_gate(arms: Sequence[Arm]) -> str | None:
    """Return why the arms show no signal ("no evidence"), or None when a comparison of them may be judged.

    The reference arm is the best-scoring arm (a difference can only be read when something scores). It must
    beat a floor — the untrained model (``eval/base/final_pass``) when the runs evaluated it, else 0 — by more
    than its interval (:data:`INTERVAL_Z` standard errors), and its episodes must not be dominated by
    truncation (more than :data:`MAX_TRUNCATED` at the turn or context limit) or by format errors (more than
    :data:`MAX_FORMAT_ERRORS`). Where the runs scored their SFT start (:attr:`Arm.start`), some arm must beat
    its own start by more than its interval: otherwise RL did not move the model, and comparing the arms
    compares SFT starts. Every failed condition is named, e.g. "every episode hit the 4-turn limit; final
    pass 0 % in every arm".

    Example:
        >>> cut = [Arm(f"fail={r}", 0.0, turn_limit=1.0, turns=4) for r in (0.05, 0)]
        >>> evidence_gate(cut)
        'every episode hit the 4-turn limit; final pass 0 % in every arm'
        >>> evidence_gate([Arm("a", 0.9, se=0.05), Arm("b", 0.5, se=0.1)]) is None
        True

    """
    scored = [a for a in arms if a.value is not None]
    if not scored:
        return None
    ref = max(scored, key=lambda a: a.value or 0.0)
    reasons = []
    limit = _limit_reason(scored, ref)
    if limit:
        reasons.append(limit)
    if ref.format_errors > MAX_FORMAT_ERRORS:
        reasons.append(
            f"{pct(ref.format_errors)} of the {ref.label} episodes have format errors "
            f"(the gate allows {pct(MAX_FORMAT_ERRORS)})"
        )
    floor = ref.floor if ref.floor is not None else 0.0
    interval = ref.interval or 0.0
    if (ref.value or 0.0) - floor <= interval:
        if ref.floor is None and all(a.value == 0 for a in scored):
            reasons.append("final pass 0 % in every arm")
        elif ref.floor is None:
            reasons.append(
                f"the best arm ({ref.label}: {pct(ref.value)} ± {pts_abs(interval)}) is within "
                "its interval of 0 %"
            )
        else:
            reasons.append(
                f"the best arm ({ref.label}: {pct(ref.value)} ± {pts_abs(interval)}) does not beat "
                f"the untrained model ({pct(ref.floor)}) by more than its interval"
            )
    unmoved = _unmoved_reason(scored)
    if unmoved:
        reasons.append(unmoved)
    return "; ".join(reasons) or None


def _unmoved_reason(arms: Sequence[Arm]) -> str | None:
    """Why RL did not move the model, or None when an arm beats its SFT start (or no start was scored)."""
    started = [a for a in arms if a.start is not None]
    if not started:
        return None
    if any((a.value or 0.0) - (a.start or 0.0) > (a.interval or 0.0) for a in started):
        return None
    each = ", ".join(
        f"{a.label} {pct(a.value)} ± {pts_abs(a.interval or 0.0)} from {pct(a.start)}" for a in started
    )
    return f"RL did not move the model: no arm beats its SFT start by more than its interval ({each})"


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


def values_by(rows: pl.DataFrame, key: str) -> dict[Any, float]:
    """``{axis value: value}`` of rows that have a value."""
    return {k: v for k, v in zip(rows[key].to_list(), rows["value"].to_list(), strict=True) if v is not None}


def models_in(rows: pl.DataFrame) -> list[str]:
    """Return the model presets among ``rows``, smallest first (:data:`~star_lib.viz.labels.MODEL_ORDER`)."""
    present = set(rows["model"].drop_nulls().to_list()) if rows.height else set()
    return [m for m in MODEL_ORDER if m in present]


def arm_label(axis: str, value: Any) -> str:
    """Short name of an arm by its axis value (``tool_failure_rate`` 0.1 → ``fail=0.1``, 100 → ``n=100``)."""
    if axis == "tool_failure_rate" and isinstance(value, (int, float)):
        return f"fail={value:g}"
    if axis == "rl_data_size":
        return f"n={value}"
    if axis == "model":
        return model_label(value)
    return str(value)


def arm_name(axes: Sequence[str], *, ignore_nulls: bool = False) -> pl.Expr:
    """Return the expression that names each row's arm: its ``axes`` labels joined by `` · ``.

    E.g. ``tiny-l · fail=0.1`` (:func:`arm_label` per axis); ``ignore_nulls`` skips an axis a row lacks.
    """
    labels = [pl.col(a).map_elements(lambda v, a=a: arm_label(a, v), return_dtype=pl.String) for a in axes]
    return pl.concat_str(labels, separator=" · ", ignore_nulls=ignore_nulls)


def arm_stats(rows: pl.DataFrame, by: Sequence[str], metric: str = FINAL) -> pl.DataFrame:
    """Per arm (one row per combination of ``by``, seeds pooled): final pass with its interval and the health.

    Columns: ``by``, then :data:`HEALTH_METRICS` (means over the arm's runs; ``episodes`` is their sum), the
    standard error ``se`` and the 95 % half-width ``± (95 %)`` of final pass, ``runs``, and the SFT model's
    final pass and transport mix (``sft …``) when the runs evaluated it; ``_queries`` / ``_outcomes`` hold
    the arm's per-query final pass (runs × queries) when every run of the arm lists it, else null.

    The SE is the bootstrap SE over queries and seeds (:func:`contrast_se`, :data:`BOOTSTRAP_RESAMPLES`
    resamples, fixed seed) when the runs carry per-query outcomes (the published study's), else the larger
    of the seeds' SE and the binomial SE over the pooled episodes; neither is taken below that binomial SE
    Laplace-smoothed, p = (passes + 1) / (episodes + 2), so 0 of 12 is 0 % ± 13.5 pts rather than an exact
    0 ± 0.

    ``metric`` is the rate the ``final_pass`` column, its interval and the per-query outcomes are of:
    ``eval/final_pass`` by default, e.g. ``ood/cs_micro`` for an OOD comparison, whose health columns then
    come from the same split (``ood/termination/…``).
    """
    split = metric.split("/", 1)[0]
    metrics = {
        name: m.replace("eval/", f"{split}/", 1) for name, m in {**HEALTH_METRICS, **SFT_METRICS}.items()
    }
    metrics["final_pass"] = metric
    metrics["sft final_pass"] = f"{split}/sft/{metric.split('/', 1)[1]}"  # the SFT start, same metric
    columns = {
        **{k: rows.schema[k] if k in rows.schema else pl.String for k in by},
        **{name: pl.Float64 for name in metrics},
        "se": pl.Float64,
        "± (95 %)": pl.Float64,
        "runs": pl.UInt32,
    }
    picked = rows.filter(pl.col("metric").is_in(list(metrics.values()))) if rows.height else rows
    if picked.height == 0 or not picked.filter(pl.col("metric") == metric).height:
        return pl.DataFrame(schema={**columns, **_OUTCOME_TYPES})
    per_run = (
        picked.group_by([*by, "grid", "run", "metric"])
        .agg(pl.col("value").mean())
        .pivot(on="metric", index=[*by, "grid", "run"], values="value")
    )
    for name in metrics.values():
        if name not in per_run.columns:
            per_run = per_run.with_columns(pl.lit(None, dtype=pl.Float64).alias(name))
    per_run = per_run.filter(pl.col(metric).is_not_null())
    stats = per_run.group_by(list(by)).agg(
        *[pl.col(m).mean().alias(name) for name, m in metrics.items() if name != "episodes"],
        pl.col(metrics["episodes"]).sum().alias("episodes"),
        pl.col(metric).std().fill_null(0.0).alias("_sd"),
        pl.len().cast(pl.UInt32).alias("runs"),
    )
    # Laplace-smoothed binomial SE, so 0 of 12 (or 12 of 12) does not read as an exact 0 % ± 0
    smoothed = (pl.col("final_pass") * pl.col("episodes") + 1) / (pl.col("episodes") + 2)
    binomial = (smoothed * (1 - smoothed) / (pl.col("episodes") + 2)).sqrt()
    binomial = pl.when(pl.col("episodes") > 0).then(binomial)  # null without an episode count
    seeds = pl.when(pl.col("runs") >= 2).then(pl.col("_sd") / pl.col("runs").cast(pl.Float64).sqrt())
    stats = stats.with_columns(pl.max_horizontal(binomial, seeds).alias("se"), binomial.alias("_binomial"))
    stats = _with_outcomes(stats, rows, per_run, by, metric)
    bootstrap = [
        None if o is None else contrast_se([o], [1.0]) for o in outcomes_of(stats)
    ]  # over queries and seeds; never below the smoothed binomial SE (0 of 600 is not an exact 0 ± 0)
    stats = stats.with_columns(pl.Series("_bootstrap", bootstrap, dtype=pl.Float64)).with_columns(
        pl.when(pl.col("_bootstrap").is_not_null())
        .then(pl.max_horizontal("_bootstrap", "_binomial"))
        .otherwise(pl.col("se"))
        .alias("se")
    )
    stats = stats.with_columns((INTERVAL_Z * pl.col("se")).alias("± (95 %)"))
    return stats.select(*columns, "_queries", "_outcomes").sort(list(by))


_OUTCOME_TYPES = {"_queries": pl.List(pl.Int64), "_outcomes": pl.List(pl.List(pl.Float64))}


def _with_outcomes(
    stats: pl.DataFrame, rows: pl.DataFrame, per_run: pl.DataFrame, by: Sequence[str], metric: str
) -> pl.DataFrame:
    """Add each arm's per-query ``metric`` (``_queries``, ``_outcomes``: runs × queries) when all list it."""
    prefix = f"{QUERY_METRIC}{metric}/"
    picked = rows.filter(pl.col("metric").str.starts_with(prefix))
    if picked.height == 0:
        return stats.with_columns(*[pl.lit(None, dtype=t).alias(k) for k, t in _OUTCOME_TYPES.items()])
    runs = (
        picked.with_columns(
            pl.col("metric").str.strip_prefix(prefix).cast(pl.Int64, strict=False).alias("_q")
        )
        .group_by([*by, "grid", "run", "_q"])
        .agg(pl.col("value").mean())
        .sort("_q")
        .group_by([*by, "grid", "run"])
        .agg(pl.col("_q"), pl.col("value"))
    )
    runs = per_run.select(*by, "grid", "run").join(
        runs, on=[*by, "grid", "run"], how="left", nulls_equal=True
    )
    cells = []
    for key, group in runs.sort("grid", "run").group_by(list(by), maintain_order=True):
        queries = group["_q"].to_list()
        complete = all(q is not None and len(q) > 0 and q == queries[0] for q in queries)
        cells.append(
            {
                **dict(zip(by, key, strict=True)),
                "_queries": queries[0] if complete else None,
                "_outcomes": group["value"].to_list() if complete else None,
            }
        )
    schema = {**{k: stats.schema[k] for k in by}, **_OUTCOME_TYPES}
    return stats.join(pl.DataFrame(cells, schema=schema), on=list(by), how="left", nulls_equal=True)


def rate_intervals(rows: pl.DataFrame, by: Sequence[str], split: str = "eval") -> pl.DataFrame:
    """Return each arm's held-out rates with bootstrap 95 % intervals over queries and seeds.

    One row per arm × rate (``final_pass``, ``cs_micro``, ``cs_macro``, ``hard_macro``, ``sum``: the
    per-query lists of :func:`~star_lib.experiments.results.held_out_outcomes`) of ``split`` (``eval`` or
    ``ood``): ``value`` (mean over runs and queries), ``± 95 %`` (:data:`INTERVAL_Z` × :func:`contrast_se`)
    and ``runs``. Arms whose runs do not all list the same queries are left out; empty without per-query
    rows (runs of your own, summaries published before the lists existed).
    """
    from star_lib.experiments.results import OUTCOME_COLUMNS

    schema = {
        **{k: rows.schema[k] if k in rows.schema else pl.String for k in by},
        "rate": pl.String,
        "value": pl.Float64,
        "± 95 %": pl.Float64,
        "runs": pl.UInt32,
    }
    prefix = f"{QUERY_METRIC}{split}/"
    picked = rows.filter(pl.col("metric").str.starts_with(prefix)) if rows.height else rows
    if picked.height == 0:
        return pl.DataFrame(schema=schema)
    parts = picked.with_columns(
        pl.col("metric").str.strip_prefix(prefix).str.split("/").alias("_parts")
    ).with_columns(
        pl.col("_parts").list.first().alias("rate"),
        pl.col("_parts").list.last().cast(pl.Int64, strict=False).alias("_q"),
    )
    per_run = (
        parts.group_by([*by, "rate", "grid", "run", "_q"])
        .agg(pl.col("value").mean())
        .sort("_q")
        .group_by([*by, "rate", "grid", "run"])
        .agg(pl.col("_q"), pl.col("value"))
        .sort([*by, "grid", "run"])
    )
    order = {name: i for i, name in enumerate(OUTCOME_COLUMNS)}
    out = []
    for key, group in per_run.group_by([*by, "rate"], maintain_order=True):
        queries = group["_q"].to_list()
        if not queries[0] or any(q != queries[0] for q in queries):
            continue
        cell = Outcomes(tuple(queries[0]), tuple(tuple(v) for v in group["value"].to_list()))
        se = contrast_se([cell], [1.0])
        out.append(
            {
                **dict(zip([*by, "rate"], key, strict=True)),
                "value": cell.mean,
                "± 95 %": INTERVAL_Z * se,
                "runs": group.height,
            }
        )
    frame = pl.DataFrame(out, schema=schema)
    return frame.sort([*by, pl.col("rate").replace_strict(order, default=99)])


def seeds_table(
    stats: pl.DataFrame, by: Sequence[str], half_width: float = 0.05, most: int = 20
) -> pl.DataFrame:
    """Per arm of :func:`arm_stats`: its runs, its interval now and the seeds it needs for ``± half_width``.

    ``seeds needed`` is :func:`seeds_for` (null when the arm's runs list no per-query outcomes, or when
    ``most`` seeds would not do). Planning a grid's seeds from a first pass of its runs: e.g.
    ``seeds_table(arm_stats(rows, ["model", "algorithm"]), ["model", "algorithm"])``.
    """
    needed = [None if o is None else seeds_for(o, half_width, most) for o in outcomes_of(stats)]
    return stats.select(*by, "runs", "final_pass", "± (95 %)").with_columns(
        pl.Series("seeds needed", needed, dtype=pl.UInt32)
    )


def outcomes_of(stats: pl.DataFrame) -> list[Outcomes | None]:
    """Each arm's :class:`Outcomes` (None where its runs do not all list them)."""
    return [
        None if q is None or v is None else Outcomes(tuple(q), tuple(tuple(r) for r in v))
        for q, v in zip(stats["_queries"].to_list(), stats["_outcomes"].to_list(), strict=True)
    ]


def health_table(stats: pl.DataFrame) -> pl.DataFrame:
    """Return the run-health table a finding shows (one row per arm).

    Per arm: the termination mix, format errors, the transport mix, tool calls and turns beside final pass
    and its interval; the SFT model's columns only when the runs evaluated it.
    """
    by = stats.columns[: stats.columns.index("final_pass")]
    rest = [
        c for c in stats.columns if c not in (*by, "final_pass", "± (95 %)", "se") and not c.startswith("_")
    ]
    shown = stats.select(*by, "final_pass", "± (95 %)", *rest)
    sft = [c for c in SFT_METRICS if c in shown.columns]
    if not shown.height or all(shown[c].null_count() == shown.height for c in sft):
        shown = shown.drop(sft)
    if "model" in shown.columns:
        shown = shown.with_columns(pl.col("model").map_elements(model_label, return_dtype=pl.String))
    return shown


def check_failures(rows: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Return the per-check failure profile: one row per check, one column per arm.

    Checks are ``cs/<check>`` and ``hard/<check>``; each cell is the share of the arm's evaluation episodes
    that fail the check (1 − its pass rate, mean over the arm's runs).
    """
    picked = rows.filter(pl.col("metric").str.contains(r"^eval/(cs|hard)/")) if rows.height else rows
    if picked.height == 0:
        return pl.DataFrame(schema={"check": pl.String})
    labelled = picked.with_columns(
        arm_name(by).alias("arm"), pl.col("metric").str.strip_prefix("eval/").alias("check")
    )
    order = labelled.sort(list(by))["arm"].unique(maintain_order=True).to_list()
    wide = (
        labelled.group_by(["check", "arm"])
        .agg((1 - pl.col("value").mean()).alias("fail"))
        .pivot(on="arm", index="check", values="fail")
    )
    return wide.select("check", *order).sort("check")


def arms_of(stats: pl.DataFrame, axis: str, model: str | None = None, **fixed: Any) -> dict[Any, Arm]:
    """``{axis value: Arm}`` of one model's arms (and fixed values of other axes)."""
    rows = stats
    if model is not None and "model" in rows.columns:
        rows = rows.filter(pl.col("model") == model)
    for key, value in fixed.items():
        rows = rows.filter(pl.col(key) == value)
    out = {}
    for row, outcomes in zip(rows.iter_rows(named=True), outcomes_of(rows), strict=True):
        prefix = ", ".join(
            arm_label(k, v) if k in ("tool_failure_rate", "rl_data_size") else f"{k}={v}"
            for k, v in fixed.items()
        )
        label = arm_label(axis, row[axis]) + (f" at {prefix}" if prefix else "")
        out[row[axis]] = Arm(
            label=label,
            value=finite(row["final_pass"]),
            se=finite(row["se"]),
            floor=finite(row["untrained"]),
            start=finite(row["sft final_pass"]),
            turn_limit=finite(row["turn limit"]) or 0.0,
            context_limit=finite(row["context limit"]) or 0.0,
            format_errors=max(finite(row["format errors"]) or 0.0, finite(row["malformed"]) or 0.0),
            turns=finite(row["turns"]),
            transport={k: v for k in TRANSPORT_COLUMNS if (v := finite(row[k])) is not None},
            outcomes=outcomes,
        )
    return out
