"""Metrics: denominators from the queries, micro/macro rates, groupings."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from star_lib.travel.metrics import RATE_KEYS, compute_metrics, hard_denominator, metrics_frame
from star_lib.types import (
    COMMONSENSE_KEYS,
    HARD_KEYS,
    CheckResult,
    EvaluationReport,
    LocalConstraint,
    QueryRecord,
)

OK, BAD, NA = CheckResult(True), CheckResult(False, "x"), CheckResult(None)


def _query(level="easy", days=3, **constraint) -> QueryRecord:
    return QueryRecord(
        org="A",
        dest="B",
        days=days,
        visiting_city_number=1,
        date=("d",) * days,
        people_number=2,
        local_constraint=LocalConstraint(**constraint),
        budget=1000,
        level=level,
    )


def _report(query: QueryRecord, cs_fail: int = 0, hard: dict | None | str = "pass") -> EvaluationReport:
    commonsense = {k: (BAD if i < cs_fail else OK) for i, k in enumerate(COMMONSENSE_KEYS)}
    if hard == "pass":
        requested = {
            "house rule": "valid_room_rule",
            "cuisine": "valid_cuisine",
            "room type": "valid_room_type",
            "transportation": "valid_transportation",
        }
        wanted = {requested[n] for n in query.local_constraint.requested} | {"valid_cost"}
        hard = {k: (OK if k in wanted else NA) for k in HARD_KEYS}
    return EvaluationReport(commonsense, hard, hard_applicable=hard_denominator(query))


def test_metrics_hard_denominator_is_105_on_train(tp_dir) -> None:
    queries = [
        QueryRecord.from_dict(json.loads(line)) for line in (tp_dir / "train.jsonl").read_text().splitlines()
    ]
    assert len(queries) == 45
    assert sum(hard_denominator(q) for q in queries) == 105
    metrics = compute_metrics(queries, [None] * 45)
    assert metrics["hard_total"] == 105 and metrics["cs_total"] == 360
    assert all(metrics[k] == 0.0 for k in RATE_KEYS)


def test_metrics_hard_denominator_counts_requested_constraints() -> None:
    assert hard_denominator(_query()) == 1
    assert hard_denominator(_query(house_rule="pets", cuisine=("Chinese",), transportation="no flight")) == 4


def test_metrics_micro_and_macro_rates() -> None:
    q_easy = _query()
    q_hard = _query("hard", 5, room_type="private room", transportation="no flight")
    queries = [q_easy, q_hard, q_easy, q_hard]
    fail_cost = {
        "valid_cost": BAD,
        "valid_room_rule": NA,
        "valid_cuisine": NA,
        "valid_room_type": OK,
        "valid_transportation": OK,
    }
    reports = [
        _report(q_easy),  # passes everything
        _report(q_hard, hard=fail_cost),  # commonsense all pass; 2 of 3 hard pass
        _report(q_easy, cs_fail=2, hard=None),  # 6/8 commonsense, hard skipped
        None,  # not delivered
    ]
    m = compute_metrics(queries, reports)
    assert m["n"] == 4
    assert m["delivery"] == 0.75
    assert m["cs_micro"] == (8 + 8 + 6) / 32
    assert m["cs_macro"] == 2 / 4
    assert m["hard_total"] == 1 + 3 + 1 + 3
    assert m["hard_micro"] == (1 + 2) / 8
    assert m["hard_macro"] == 1 / 4  # skipped hard checks do not pass
    assert m["final_pass"] == 1 / 4
    assert m["cs/is_reasonable_visiting_city"] == 2 / 4
    assert m["hard/valid_cost"] == 1 / 4
    assert m["hard/valid_room_type"] == 1 / 2  # over the two queries that request it


def test_metrics_frame_matches_compute_metrics_overall_and_by_group() -> None:
    queries = [_query("easy", 3), _query("medium", 5, house_rule="pets"), _query("easy", 7)]
    reports = [_report(queries[0]), _report(queries[1], cs_fail=1), None]
    overall = metrics_frame(queries, reports).row(0, named=True)
    m = compute_metrics(queries, reports)
    for key in RATE_KEYS:
        assert overall[key] == pytest.approx(m[key])
    by_level = {
        row["level"]: row for row in metrics_frame(queries, reports, by="level").iter_rows(named=True)
    }
    assert by_level["easy"]["n"] == 2 and by_level["easy"]["final_pass"] == 0.5
    assert by_level["medium"]["hard_total"] == 2 and by_level["medium"]["cs_macro"] == 0.0
    both = metrics_frame(queries, reports, by=["level", "days"])
    assert both.height == 3 and set(both.columns) >= {"level", "days", *RATE_KEYS}


def test_metrics_reject_mismatch_and_unknown_grouping() -> None:
    with pytest.raises(ValueError, match="one report per query"):
        compute_metrics([_query()], [])
    with pytest.raises(ValueError, match="cannot group by"):
        metrics_frame([_query()], [None], by="budget")


def test_metrics_empty_set_is_zero() -> None:
    m = compute_metrics([], [])
    assert m["n"] == 0 and m["final_pass"] == 0.0


def test_metrics_report_without_hard_dict_counts_zero_hard() -> None:
    q = _query(cuisine=("Chinese",))
    report = replace(_report(q), hard=None)
    m = compute_metrics([q], [report])
    assert m["hard_micro"] == 0.0 and m["hard_total"] == 2
