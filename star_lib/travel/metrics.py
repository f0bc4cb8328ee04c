"""TravelPlanner metrics over a set of evaluated plans (spec §5), overall and by level / by days.

* ``delivery`` = delivered plans / N
* ``cs_micro`` = passed commonsense checks / (8 N); ``cs_macro`` = plans passing all 8 / N
* ``hard_micro`` = passed hard checks / applicable hard checks, the denominator derived from the queries
  (budget always, plus each requested local constraint: 105 on train-45, 420 on validation-180,
  2290 on test-1000); ``hard_macro`` = plans passing every applicable hard check / N (skipped hard checks
  do not pass)
* ``final_pass`` = plans passing everything / N

:func:`compute_metrics` is plain Python (fast inside training loops); :func:`metrics_frame` gives the same
numbers as a polars frame, optionally grouped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from star_lib.types import COMMONSENSE_KEYS, HARD_KEYS, EvaluationReport, QueryRecord

RATE_KEYS: tuple[str, ...] = ("delivery", "cs_micro", "cs_macro", "hard_micro", "hard_macro", "final_pass")
"""The six headline rates, in the order of the official report."""

GROUPINGS: tuple[str, ...] = ("level", "days")

_HARD_CONSTRAINT_KEY = {
    "house rule": "valid_room_rule",
    "cuisine": "valid_cuisine",
    "room type": "valid_room_type",
    "transportation": "valid_transportation",
}


def hard_denominator(query: QueryRecord) -> int:
    """Applicable hard checks of a query: the budget plus each requested local constraint.

    >>> from star_lib.types import LocalConstraint
    >>> q = QueryRecord(org="A", dest="B", days=3, visiting_city_number=1, date=("d",) * 3, people_number=2,
    ...                 local_constraint=LocalConstraint(room_type="private room"), budget=900)
    >>> hard_denominator(q)
    2
    """
    return 1 + len(query.local_constraint.requested)


def plan_row(query: QueryRecord, report: EvaluationReport | None) -> dict[str, Any]:
    """Per-plan counts every metric is built from (a missing report counts as undelivered)."""
    applicable = hard_denominator(query)
    row: dict[str, Any] = {"level": query.level, "days": query.days, "hard_total": applicable}
    if report is None or not report.delivered:
        row.update(delivered=0, cs_passed=0, cs_all=0, hard_passed=0, hard_all=0, final=0)
        row.update({f"cs/{k}": 0 for k in COMMONSENSE_KEYS})
        row.update({f"hard/{k}": 0 for k in HARD_KEYS})
        return row
    row.update(
        delivered=1,
        cs_passed=report.commonsense_passed,
        cs_all=int(report.commonsense_all),
        hard_passed=report.hard_passed,
        hard_all=int(report.hard_all),
        final=int(report.final_pass),
    )
    row.update({f"cs/{k}": int(report.commonsense[k].passed is True) for k in COMMONSENSE_KEYS})
    hard = report.hard or {}
    row.update({f"hard/{k}": int(k in hard and hard[k].passed is True) for k in HARD_KEYS})
    return row


def _check_lengths(queries: Sequence[QueryRecord], reports: Sequence[EvaluationReport | None]) -> None:
    if len(queries) != len(reports):
        raise ValueError(f"got {len(queries)} queries but {len(reports)} reports: pass one report per query")


def _applicable(query: QueryRecord) -> dict[str, int]:
    """Which hard checks apply to a query (1/0 per hard key)."""
    requested = {_HARD_CONSTRAINT_KEY[name] for name in query.local_constraint.requested}
    return {k: int(k == "valid_cost" or k in requested) for k in HARD_KEYS}


def compute_metrics(
    queries: Sequence[QueryRecord], reports: Sequence[EvaluationReport | None]
) -> dict[str, float]:
    """Compute the headline metrics plus per-check pass rates and the raw counts behind them.

    Args:
        queries: the evaluated queries.
        reports: one report per query (None = no plan).

    Returns:
        ``delivery, cs_micro, cs_macro, hard_micro, hard_macro, final_pass`` (fractions in [0, 1]),
        ``n, cs_passed, cs_total, hard_passed, hard_total``, and ``cs/<key>`` / ``hard/<key>`` pass rates
        (a hard key's rate is over the queries that request it).

    Raises:
        ValueError: when the two sequences differ in length.

    """
    _check_lengths(queries, reports)
    rows = [plan_row(q, r) for q, r in zip(queries, reports, strict=True)]
    n = len(rows)
    counted = [key for key in rows[0] if key not in GROUPINGS] if rows else []
    totals = {key: sum(row[key] for row in rows) for key in counted}
    hard_total = sum(row["hard_total"] for row in rows)
    applicable = [_applicable(q) for q in queries]
    out: dict[str, float] = {
        "n": n,
        "delivery": _ratio(totals.get("delivered", 0), n),
        "cs_micro": _ratio(totals.get("cs_passed", 0), len(COMMONSENSE_KEYS) * n),
        "cs_macro": _ratio(totals.get("cs_all", 0), n),
        "hard_micro": _ratio(totals.get("hard_passed", 0), hard_total),
        "hard_macro": _ratio(totals.get("hard_all", 0), n),
        "final_pass": _ratio(totals.get("final", 0), n),
        "cs_passed": totals.get("cs_passed", 0),
        "cs_total": len(COMMONSENSE_KEYS) * n,
        "hard_passed": totals.get("hard_passed", 0),
        "hard_total": hard_total,
    }
    for key in COMMONSENSE_KEYS:
        out[f"cs/{key}"] = _ratio(totals.get(f"cs/{key}", 0), n)
    for key in HARD_KEYS:
        out[f"hard/{key}"] = _ratio(totals.get(f"hard/{key}", 0), sum(a[key] for a in applicable))
    return out


def metrics_frame(
    queries: Sequence[QueryRecord],
    reports: Sequence[EvaluationReport | None],
    by: str | Sequence[str] | None = None,
) -> Any:
    """Compute the headline metrics as a polars DataFrame, one row overall or one row per group.

    Args:
        queries: the evaluated queries.
        reports: one report per query (None = no plan).
        by: None, ``"level"``, ``"days"`` or a list of them.

    Returns:
        A ``polars.DataFrame`` with the group columns, ``n``, ``hard_total`` and the six rates.

    Raises:
        ValueError: for an unknown grouping or mismatched lengths.

    """
    import polars as pl

    _check_lengths(queries, reports)
    keys = [by] if isinstance(by, str) else list(by or [])
    unknown = [k for k in keys if k not in GROUPINGS]
    if unknown:
        raise ValueError(f"cannot group by {unknown}: choose from {GROUPINGS}")
    schema = {"level": pl.Utf8, "days": pl.Int64, "delivered": pl.Int64, "cs_passed": pl.Int64,
              "cs_all": pl.Int64, "hard_passed": pl.Int64, "hard_all": pl.Int64, "final": pl.Int64,
              "hard_total": pl.Int64}  # fmt: skip
    pairs = zip(queries, reports, strict=True)
    rows = [{k: row[k] for k in schema} for row in (plan_row(q, r) for q, r in pairs)]
    return _rates(pl.DataFrame(rows, schema=schema), keys)


def _rates(counts: Any, keys: Sequence[str], prefix: str = "") -> Any:
    """Aggregate per-plan count columns into the six rates (and ``n``, ``hard_total``) per ``keys`` group.

    ``counts`` holds ``{prefix}delivered``, ``cs_passed``, ``cs_all``, ``hard_passed``, ``hard_all``,
    ``hard_total`` and ``final`` per plan; no ``keys``: one row for the whole table.
    """
    import polars as pl

    def col(name: str) -> Any:
        return pl.col(prefix + name)

    aggregations = [
        pl.len().alias("n"),
        col("hard_total").sum().alias("hard_total"),
        (col("delivered").sum() / pl.len()).alias("delivery"),
        (col("cs_passed").sum() / (len(COMMONSENSE_KEYS) * pl.len())).alias("cs_micro"),
        (col("cs_all").sum() / pl.len()).alias("cs_macro"),
        (col("hard_passed").sum() / col("hard_total").sum()).alias("hard_micro"),
        (col("hard_all").sum() / pl.len()).alias("hard_macro"),
        (col("final").sum() / pl.len()).alias("final_pass"),
    ]
    if not keys:
        return counts.select(aggregations)
    return counts.group_by(keys).agg(aggregations).sort(keys)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


# ───────────────────────── breakdowns of an evaluation episode table ─────────────────────────

BREAKDOWN_KEYS: tuple[str, ...] = ("model", "level", "days")
"""Columns an episode-table breakdown may group by (``model`` in multi-model tables)."""


def _verdict_prefix(episodes: Any, mode: str | None) -> str:
    """Return the column prefix of ``mode``'s verdicts in an episode table (``""``: the table's own)."""
    columns = set(episodes.columns)
    if mode is not None and f"{mode}/final_pass" in columns:
        return f"{mode}/"
    if mode in (None, "strict"):
        return ""
    raise ValueError(
        f"the episode table has no {mode!r} verdicts (no {mode}/final_pass column): evaluate with "
        f"eval.also_modes: [{mode}] or pass mode=None for the table's own"
    )


def _episode_counts(episodes: Any, mode: str | None, queries: Sequence[QueryRecord] | None) -> Any:
    """Per-episode counts (like :func:`plan_row`) computed from an episode table's verdict columns."""
    import polars as pl

    prefix = _verdict_prefix(episodes, mode)
    needed = [f"{prefix}{c}" for c in ("delivered", "commonsense_pass", "hard_pass", "final_pass")]
    missing = [c for c in [*needed, "level", "days"] if c not in episodes.columns]
    if missing:
        raise ValueError(f"the episode table lacks the columns {missing} (an eval stage table has them)")
    frame = episodes
    if "hard_total" not in frame.columns:
        if queries is None or "query_index" not in frame.columns:
            raise ValueError(
                "the episode table has no hard_total column (tables written before it was added): pass the "
                "evaluated queries to count the applicable hard checks"
            )
        totals = [hard_denominator(queries[i]) for i in frame["query_index"].to_list()]
        frame = frame.with_columns(pl.Series("hard_total", totals, dtype=pl.Int64))
    delivered = pl.col(f"{prefix}delivered").fill_null(False)
    cs_cols = [f"{prefix}cs/{k}" for k in COMMONSENSE_KEYS if f"{prefix}cs/{k}" in frame.columns]
    hard_cols = [f"{prefix}hard/{k}" for k in HARD_KEYS if f"{prefix}hard/{k}" in frame.columns]

    def passed(columns: list[str]) -> pl.Expr:
        if not columns:
            return pl.lit(0, dtype=pl.Int64)
        return pl.sum_horizontal([(pl.col(c).fill_null(False) & delivered).cast(pl.Int64) for c in columns])

    return frame.with_columns(
        delivered.cast(pl.Int64).alias("_delivered"),
        passed(cs_cols).alias("_cs_passed"),
        (pl.col(f"{prefix}commonsense_pass").fill_null(False) & delivered).cast(pl.Int64).alias("_cs_all"),
        passed(hard_cols).alias("_hard_passed"),
        (pl.col(f"{prefix}hard_pass").fill_null(False) & delivered).cast(pl.Int64).alias("_hard_all"),
        (pl.col(f"{prefix}final_pass").fill_null(False) & delivered).cast(pl.Int64).alias("_final"),
        pl.col("hard_total").cast(pl.Int64).alias("_hard_total"),
    )


def _group_keys(episodes: Any, by: str | Sequence[str] | None) -> list[str]:
    keys = [by] if isinstance(by, str) else list(by or [])
    unknown = [k for k in keys if k not in BREAKDOWN_KEYS]
    if unknown:
        raise ValueError(f"cannot group by {unknown}: choose from {list(BREAKDOWN_KEYS)}")
    if "model" in episodes.columns and "model" not in keys:
        keys = ["model", *keys]  # never pool different models' episodes
    return keys


def episode_breakdown(
    episodes: Any,
    by: str | Sequence[str] | None = ("level", "days"),
    mode: str | None = None,
    queries: Sequence[QueryRecord] | None = None,
) -> Any:
    """Compute the six headline rates of an evaluation episode table, overall or per group.

    The same numbers :func:`metrics_frame` gives from reports, computed from the eval stage's episode
    table (``eval.parquet``, or ``eval_models.parquet`` whose ``model`` column is always a group key).

    Args:
        episodes: A polars episode table (one row per episode, the verdict columns of
            :func:`star_lib.agent.rollout.episode_row` and ``hard_total``).
        by: Group columns from :data:`BREAKDOWN_KEYS` (None or ``()``: one row per model).
        mode: ``None``/``"strict"`` for the table's own verdicts, ``"official"`` for the ``official/…``
            columns the eval stage adds with ``also_modes: [official]``.
        queries: The evaluated queries, only for tables without ``hard_total`` (by ``query_index``).

    Returns:
        A polars DataFrame: the group columns, ``n``, ``hard_total`` and :data:`RATE_KEYS`.

    Raises:
        ValueError: An unknown group column, a mode the table was not scored in, missing columns.

    """
    keys = _group_keys(episodes, by)
    return _rates(_episode_counts(episodes, mode, queries), keys, prefix="_")


def check_failures(episodes: Any, by: str | Sequence[str] | None = None, mode: str | None = None) -> Any:
    """Count the failures of each check in an evaluation episode table (the per-check failure profile).

    An undelivered plan (no parseable plan) is one ``delivery`` failure and is checked for nothing else;
    a check that does not apply (a hard constraint the query does not ask for) is not counted.

    Args:
        episodes: A polars episode table (see :func:`episode_breakdown`).
        by: Group columns from :data:`BREAKDOWN_KEYS` (``model`` is added when the table has it).
        mode: As in :func:`episode_breakdown`.

    Returns:
        A long polars DataFrame: the group columns, ``kind`` (``delivery`` | ``commonsense`` | ``hard``),
        ``check``, ``n`` (episodes), ``checked`` (episodes the check was applied to), ``failed`` and
        ``fail_rate`` (``failed / n``), in :data:`COMMONSENSE_KEYS` / :data:`HARD_KEYS` order per group.

    Raises:
        ValueError: As :func:`episode_breakdown`.

    """
    import polars as pl

    keys = _group_keys(episodes, by)
    prefix = _verdict_prefix(episodes, mode)
    if f"{prefix}delivered" not in episodes.columns:
        raise ValueError(f"the episode table lacks the column {prefix}delivered (an eval stage table has it)")
    delivered = pl.col(f"{prefix}delivered").fill_null(False)
    checks = [("delivery", "delivered", (~delivered).cast(pl.Int64), pl.lit(1, dtype=pl.Int64))]
    for kind, names in (("commonsense", COMMONSENSE_KEYS), ("hard", HARD_KEYS)):
        short = "cs" if kind == "commonsense" else "hard"
        for name in names:
            column = f"{prefix}{short}/{name}"
            if column not in episodes.columns:
                continue
            cell = pl.col(column)
            applied = (cell.is_not_null() & delivered).cast(pl.Int64)
            checks.append(
                (kind, name, (applied.cast(pl.Boolean) & ~cell.fill_null(True)).cast(pl.Int64), applied)
            )
    frames = []
    for order, (kind, name, failed, applied) in enumerate(checks):
        aggregations = [
            pl.len().alias("n"),
            applied.sum().alias("checked"),
            failed.sum().alias("failed"),
        ]
        grouped = episodes.group_by(keys).agg(aggregations) if keys else episodes.select(aggregations)
        frames.append(
            grouped.with_columns(
                pl.lit(kind).alias("kind"), pl.lit(name).alias("check"), pl.lit(order).alias("_order")
            )
        )
    out = pl.concat(frames, how="vertical_relaxed").with_columns(
        (pl.col("failed") / pl.col("n")).alias("fail_rate")
    )
    return out.sort([*keys, "_order"]).select(*keys, "kind", "check", "n", "checked", "failed", "fail_rate")
