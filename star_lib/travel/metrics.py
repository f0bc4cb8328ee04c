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
    frame = pl.DataFrame(rows, schema=schema)
    n_checks = len(COMMONSENSE_KEYS)
    aggregations = [
        pl.len().alias("n"),
        pl.col("hard_total").sum().alias("hard_total"),
        (pl.col("delivered").sum() / pl.len()).alias("delivery"),
        (pl.col("cs_passed").sum() / (n_checks * pl.len())).alias("cs_micro"),
        (pl.col("cs_all").sum() / pl.len()).alias("cs_macro"),
        (pl.col("hard_passed").sum() / pl.col("hard_total").sum()).alias("hard_micro"),
        (pl.col("hard_all").sum() / pl.len()).alias("hard_macro"),
        (pl.col("final").sum() / pl.len()).alias("final_pass"),
    ]
    if not keys:
        return frame.select(aggregations)
    return frame.group_by(keys).agg(aggregations).sort(keys)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0
