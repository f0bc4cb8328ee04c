r"""``star eval``: score a plan file against its queries and print the TravelPlanner metrics.

Example::

    star eval --queries validation.jsonl --plans submission.jsonl --db DB \\
        --mode official --per-plan runs/x/verdicts.jsonl --write-submission runs/x/submission.jsonl

Queries: any file :func:`star_lib.io.read_queries` reads (``.jsonl``/``.csv``/``.parquet``; our splits or the
official ``osunlp/TravelPlanner`` validation/test rows, literal-string ``date``/``local_constraint``).
Plans: JSONL, one per query and in the same order (as the official ``eval.py`` pairs them): the official
submission record ``{"idx", "query", "plan"}`` as it is, a bare day list, or a record whose ``plan`` is JSON
text or ``null``; or a ``star rollout`` parquet with one episode per query. When a plan and its query both
carry an ``idx`` they must agree.

``--mode official`` reads each plan exactly as the official evaluator does (unknown keys ignored, missing
keys and extra days as officially handled, …); a plan the official code raises on is *not scorable*: its
``--per-plan`` row has ``"scorable": false`` and an ``error`` naming the official check that raises.
``--per-plan`` rows carry the plan's own ``idx`` (the query's when the plan has none), in input order.
``--write-submission`` writes the plans as a leaderboard-ready official submission file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from star_lib.types import EvaluationReport, QueryRecord


def register(subparsers: Any) -> None:
    """Add ``star eval``."""
    parser = subparsers.add_parser(
        "eval",
        help="score plans against queries (official or strict TravelPlanner evaluator)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--queries", required=True, type=Path, help="JSONL of query records")
    parser.add_argument("--plans", required=True, type=Path, help="JSONL of plans (one per query)")
    parser.add_argument(
        "--db", required=True, type=Path, help="TravelPlanner database folder (flat or nested)"
    )
    parser.add_argument("--mode", choices=("official", "strict"), default="strict", help="evaluator mode")
    parser.add_argument("--per-plan", type=Path, default=None, help="write one JSON verdict per plan here")
    parser.add_argument(
        "--write-submission",
        type=Path,
        default=None,
        metavar="OUT.jsonl",
        help="also write the plans as an official submission file ({idx, query, plan} rows)",
    )
    parser.add_argument("--json", action="store_true", help="also print the metrics as one JSON line")
    parser.set_defaults(func=run_eval)


def read_plans(path: Path) -> list[Any]:
    """Plan payloads of a JSONL file, or of a ``star rollout`` parquet (its ``idx`` and ``plan`` columns).

    Raises:
        FileNotFoundError: when the file is missing.
        ValueError: naming the file and line that is not JSON, or a parquet without a ``plan`` column.

    """
    from star_lib.io import read_jsonl

    if path.suffix.lower() != ".parquet":
        return read_jsonl(path, "plans")
    if not path.is_file():
        raise FileNotFoundError(f"plans file not found: {path}")
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable parquet is a user error here
        raise ValueError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
    if "plan" not in frame.columns:
        raise ValueError(f"{path}: a rollout parquet needs a 'plan' column; it has {frame.columns[:12]}")
    if "index" in frame.columns:
        frame = frame.sort("index")
    idx = frame["idx"].to_list() if "idx" in frame.columns else [None] * frame.height
    return [{"idx": i, "plan": p} for i, p in zip(idx, frame["plan"].to_list(), strict=True)]


def _idx(value: Any) -> Any:
    """Normalise an ``idx`` for comparing plans with queries (``"7"`` and ``7`` agree)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def plan_idx(raw: Any) -> Any:
    """Return the ``idx`` a plan record carries, or None."""
    return raw.get("idx") if isinstance(raw, dict) else None


def pair_plans(queries: list[QueryRecord], plans: list[Any], path: Path, queries_path: Path) -> list[Any]:
    """Pair plans with queries by position (as the official ``eval.py``), checking any ``idx`` both carry.

    Raises:
        ValueError: when the counts differ, or when a plan's ``idx`` differs from its query's (naming both).

    """
    if len(plans) != len(queries):
        raise ValueError(
            f"{path} has {len(plans)} plans for {len(queries)} queries in {queries_path}: give one plan per "
            "query, in the queries' order"
        )
    for number, (query, raw) in enumerate(zip(queries, plans, strict=True), start=1):
        mine = plan_idx(raw)
        if mine is not None and query.idx is not None and _idx(mine) != _idx(query.idx):
            raise ValueError(
                f"{path} record {number} has idx {mine!r} but its query ({queries_path} record {number}) has "
                f"idx {query.idx!r}: plans pair with queries by position, so put them in the same order"
            )
    return plans


def evaluate_records(
    queries: list[QueryRecord], raw_plans: list[Any], world: Any, mode: str
) -> tuple[list[EvaluationReport], list[str | None], list[bool]]:
    """Evaluate each raw plan as ``mode`` reads it; also each plan's error and whether it is scorable."""
    from star_lib.travel.evaluate import Evaluator

    evaluator = Evaluator(world, mode)
    reports: list[EvaluationReport] = []
    errors: list[str | None] = []
    scorable: list[bool] = []
    for query, raw in zip(queries, raw_plans, strict=True):
        verdict = evaluator.evaluate_payload(query, raw)
        reports.append(verdict.report)
        errors.append(verdict.error)
        scorable.append(verdict.scorable)
    return reports, errors, scorable


def per_plan_rows(
    queries: list[QueryRecord],
    raw_plans: list[Any],
    reports: list[EvaluationReport],
    errors: list[str | None],
    scorable: list[bool],
) -> list[dict[str, Any]]:
    """Build one verdict row per plan, in input order: idx, record, scorable, mode, delivered, checks."""
    rows = []
    for number, (query, raw, report, error, ok) in enumerate(
        zip(queries, raw_plans, reports, errors, scorable, strict=True), start=1
    ):
        mine = plan_idx(raw)
        row = {"idx": mine if mine is not None else query.idx, "record": number, "scorable": ok}
        row.update(report.to_dict())
        if error is not None:
            row["error"] = error
        rows.append(row)
    return rows


def submission_rows(queries: list[QueryRecord], raw_plans: list[Any]) -> list[dict[str, Any]]:
    """Build official submission rows ``{"idx", "query", "plan"}``: each plan as the official code reads it.

    ``idx`` is the plan's, else the query's, else the 1-based position; a plan that cannot be decoded (or is
    missing) is written as ``[]`` (not delivered).
    """
    from star_lib.travel.plan import PlanParseError, decode_plan

    rows = []
    for number, (query, raw) in enumerate(zip(queries, raw_plans, strict=True), start=1):
        try:
            plan = decode_plan(raw) if raw is not None else []
        except (PlanParseError, KeyError):
            plan = []
        if isinstance(plan, tuple):
            plan = list(plan)
        idx = plan_idx(raw)
        idx = idx if idx is not None else (query.idx if query.idx is not None else number)
        rows.append({"idx": idx, "query": query.query, "plan": plan if plan else []})
    return rows


def refuse_unwritable_plans(raw_plans: list[Any], path: Path) -> None:
    r"""Refuse plans that cannot be written as UTF-8 (a lone surrogate, e.g. a JSON ``\ud800``), by record.

    Raises:
        ValueError: naming the plans file's record, before ``star eval`` writes any output.

    """
    for number, raw in enumerate(raw_plans, start=1):
        try:
            json.dumps(raw, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{path} record {number} holds text that is not valid Unicode ({exc.reason}: "
                f"{exc.object[exc.start : exc.end]!r}), so --write-submission cannot write it; fix that plan"
            ) from None


_SHORT = {
    "hard_total": "hard n",
    "delivery": "deliv",
    "cs_micro": "cs µ",
    "cs_macro": "cs M",
    "hard_micro": "hard µ",
    "hard_macro": "hard M",
    "final_pass": "final",
}
"""Column headers of the breakdown tables (µ = micro, M = macro), short enough for 80 columns."""


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def print_metrics(metrics: dict[str, float], frames: dict[str, Any], title: str) -> None:
    """Rich tables: the headline metrics with their counts, then the breakdowns."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    n = int(metrics["n"])
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("rate", justify="right")
    table.add_column("count", justify="right")
    rows = [
        ("Delivery", "delivery", f"{round(metrics['delivery'] * n)}/{n}"),
        ("Commonsense micro", "cs_micro", f"{int(metrics['cs_passed'])}/{int(metrics['cs_total'])}"),
        ("Commonsense macro", "cs_macro", f"{round(metrics['cs_macro'] * n)}/{n}"),
        ("Hard micro", "hard_micro", f"{int(metrics['hard_passed'])}/{int(metrics['hard_total'])}"),
        ("Hard macro", "hard_macro", f"{round(metrics['hard_macro'] * n)}/{n}"),
        ("Final pass", "final_pass", f"{round(metrics['final_pass'] * n)}/{n}"),
    ]
    for label, key, count in rows:
        table.add_row(label, _percent(metrics[key]), count)
    console.print(table)
    for name, frame in frames.items():
        sub = Table(title=f"by {name}")
        for column in frame.columns:
            sub.add_column(_SHORT.get(column, column), justify="right")
        for row in frame.iter_rows():
            sub.add_row(*(_percent(v) if isinstance(v, float) else str(v) for v in row))
        console.print(sub)


def run_eval(args: argparse.Namespace) -> int:
    """Run ``star eval``: check the outputs, load, evaluate, print the tables, write the files."""
    from star_lib.io import check_output_file, read_queries, write_jsonl_atomic
    from star_lib.paths import refuse_overlap
    from star_lib.travel.metrics import compute_metrics, metrics_frame
    from star_lib.travel.world import World

    outputs = {"--per-plan": args.per_plan, "--write-submission": args.write_submission}
    for option, path in outputs.items():
        if path is not None:
            check_output_file(path, option)
    refuse_overlap({"--queries": args.queries, "--plans": args.plans, "--db": args.db}, outputs)
    queries = read_queries(args.queries)
    if not queries:
        raise ValueError(f"{args.queries} holds no queries")
    raw_plans = pair_plans(queries, read_plans(args.plans), args.plans, args.queries)
    if args.write_submission is not None:
        refuse_unwritable_plans(raw_plans, args.plans)
    world = World.from_csv_dir(args.db)
    reports, errors, scorable = evaluate_records(queries, raw_plans, world, args.mode)
    metrics = compute_metrics(queries, reports)
    frames = {by: metrics_frame(queries, reports, by=by) for by in ("level", "days")}
    print_metrics(metrics, frames, title=f"TravelPlanner ({args.mode}) — {len(queries)} plans")
    unscorable = scorable.count(False)
    if unscorable:
        print(
            f"{unscorable} plan(s) not scorable: the official evaluator raises on them (each --per-plan row "
            "has the error); they count as failing the raising check and every later one"
        )
    if args.per_plan is not None:
        write_jsonl_atomic(args.per_plan, per_plan_rows(queries, raw_plans, reports, errors, scorable))
    if args.write_submission is not None:
        write_jsonl_atomic(args.write_submission, submission_rows(queries, raw_plans))
    if args.json:
        print(json.dumps({"mode": args.mode, **metrics, "not_scorable": unscorable}))
    return 0
