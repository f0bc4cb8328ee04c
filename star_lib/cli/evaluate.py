r"""``star eval``: score a plan file against its queries and print the TravelPlanner metrics.

Example::

    star eval --queries data/val.jsonl --plans plans.jsonl --db ../shared/data/travelplanner/database \\
        --mode official --per-plan runs/x/verdicts.jsonl

Queries are JSONL records (plain JSON or the HF/CSV literal-string form). Plans are JSONL, one per query:
the official submission record ``{"idx", "query", "plan"}``, a bare day list, or a record whose ``plan``
is a string/``null``. Plans are matched to queries by ``idx`` when every record has one, else by line.
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
    parser.add_argument("--json", action="store_true", help="also print the metrics as one JSON line")
    parser.set_defaults(func=run_eval)


def read_jsonl(path: Path, what: str) -> list[Any]:
    """Non-empty lines of a JSONL file, decoded.

    Raises:
        FileNotFoundError: when the file is missing.
        ValueError: naming the line that is not JSON.

    """
    if not path.is_file():
        raise FileNotFoundError(f"{what} file not found: {path}")
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line ({exc})") from None
    return records


def load_queries(path: Path) -> list[QueryRecord]:
    """Query records from JSONL, with a line-numbered error for a bad record."""
    queries = []
    for number, record in enumerate(read_jsonl(path, "queries"), start=1):
        if not isinstance(record, dict):
            raise ValueError(f"{path}: record {number} is not a JSON object")
        try:
            queries.append(QueryRecord.from_dict(record))
        except ValueError as exc:
            raise ValueError(f"{path}: record {number}: {exc}") from None
    return queries


def pair_plans(queries: list[QueryRecord], plans: list[Any], path: Path) -> list[Any]:
    """One raw plan payload per query (None when a query has no plan), by ``idx`` or by position.

    Raises:
        ValueError: when plans cannot be matched to the queries.

    """
    by_idx = all(isinstance(p, dict) and p.get("idx") is not None for p in plans) and all(
        q.idx is not None for q in queries
    )
    if by_idx and plans:
        table: dict[int, Any] = {}
        for record in plans:
            idx = int(record["idx"])
            if idx in table:
                raise ValueError(f"{path}: idx {idx} appears twice")
            table[idx] = record
        return [table.get(q.idx) for q in queries]
    if len(plans) != len(queries):
        raise ValueError(
            f"{path} has {len(plans)} plans for {len(queries)} queries: give one line per query, "
            "or an 'idx' on every plan and query"
        )
    return plans


def evaluate_records(
    queries: list[QueryRecord], raw_plans: list[Any], world: Any, mode: str
) -> tuple[list[EvaluationReport], list[str | None]]:
    """Parse and evaluate each plan; a parse error is an undelivered plan with its message."""
    from star_lib.travel.evaluate import Evaluator, undelivered_report
    from star_lib.travel.plan import PlanParseError, parse_plan

    evaluator = Evaluator(world, mode)
    reports: list[EvaluationReport] = []
    errors: list[str | None] = []
    for query, raw in zip(queries, raw_plans, strict=True):
        error = None
        if raw is None or (isinstance(raw, dict) and not raw.get("plan")):
            report = undelivered_report(query, mode)
        else:
            try:
                plan = parse_plan(raw, days=query.days)
            except PlanParseError as exc:
                error = str(exc)
                report = undelivered_report(query, mode, f"Plan could not be parsed: {exc}")
            else:
                report = evaluator.evaluate(query, plan)
        reports.append(report)
        errors.append(error)
    return reports, errors


def write_per_plan(
    path: Path, queries: list[QueryRecord], reports: list[EvaluationReport], errors: list[str | None]
) -> None:
    """One JSON verdict per plan: idx, mode, delivered, commonsense, hard (null when skipped), final_pass."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for position, (query, report, error) in enumerate(zip(queries, reports, errors, strict=True)):
            record = {"idx": query.idx if query.idx is not None else position, **report.to_dict()}
            if error is not None:
                record["error"] = error
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


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
    """Run ``star eval``: load, evaluate, print the tables, write the verdicts."""
    from star_lib.travel.metrics import compute_metrics, metrics_frame
    from star_lib.travel.world import World

    queries = load_queries(args.queries)
    if not queries:
        raise ValueError(f"{args.queries} holds no queries")
    raw_plans = pair_plans(queries, read_jsonl(args.plans, "plans"), args.plans)
    world = World.from_csv_dir(args.db)
    reports, errors = evaluate_records(queries, raw_plans, world, args.mode)
    metrics = compute_metrics(queries, reports)
    frames = {by: metrics_frame(queries, reports, by=by) for by in ("level", "days")}
    print_metrics(metrics, frames, title=f"TravelPlanner ({args.mode}) — {len(queries)} plans")
    if args.per_plan is not None:
        write_per_plan(args.per_plan, queries, reports, errors)
    if args.json:
        print(json.dumps({"mode": args.mode, **metrics}))
    return 0
