"""``star eval`` end to end on the real gold plans, plus broken and missing plans."""

from __future__ import annotations

import ast
import json
import re

import pytest

from star_lib.cli import main


@pytest.fixture()
def files(tmp_path, tp_dir):
    """Queries (HF literal-string form, as shipped) and the gold plans as official submission records."""
    queries, plans = tmp_path / "queries.jsonl", tmp_path / "plans.jsonl"
    with queries.open("w") as q_out, plans.open("w") as p_out:
        for idx, line in enumerate((tp_dir / "train.jsonl").read_text().splitlines()):
            record = json.loads(line)
            q_out.write(json.dumps({k: v for k, v in record.items() if k != "annotated_plan"}) + "\n")
            days = [d for d in ast.literal_eval(record["annotated_plan"])[1] if d]
            p_out.write(json.dumps({"idx": idx, "query": record["query"], "plan": days}) + "\n")
    return queries, plans


def _rows(text: str) -> dict[str, tuple[str, str]]:
    """Metric rows of the rich table: label → (rate, count)."""
    found = {}
    for label in (
        "Delivery",
        "Commonsense micro",
        "Commonsense macro",
        "Hard micro",
        "Hard macro",
        "Final pass",
    ):
        match = re.search(rf"{label}\s*│\s*([\d.]+%)\s*│\s*(\d+/\d+)", text)
        assert match, f"no row {label!r} in:\n{text}"
        found[label] = match.groups()
    return found


def test_cli_eval_gold_plans_score_100_percent(files, real_db_dir, tmp_path, capsys) -> None:
    queries, plans = files
    verdicts = tmp_path / "verdicts.jsonl"
    args = ["eval", "--queries", str(queries), "--plans", str(plans), "--db", str(real_db_dir)]
    assert main([*args, "--mode", "official", "--per-plan", str(verdicts), "--json"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert all(rate == "100.0%" for rate, _ in rows.values()), rows
    assert rows["Hard micro"] == ("100.0%", "105/105")
    assert rows["Commonsense micro"] == ("100.0%", "360/360")
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics["hard_total"] == 105 and metrics["final_pass"] == 1.0
    records = [json.loads(line) for line in verdicts.read_text().splitlines()]
    assert [r["idx"] for r in records] == list(range(45))
    assert all(r["final_pass"] and r["hard"] is not None for r in records)
    assert set(records[0]["commonsense"]["is_not_absent"]) == {"passed", "reason"}


def test_cli_eval_strict_mode_flags_the_known_gold_annotation_error(files, real_db_dir, capsys) -> None:
    queries, plans = files
    args = ["eval", "--queries", str(queries), "--plans", str(plans), "--db", str(real_db_dir)]
    assert main([*args, "--mode", "strict"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows["Final pass"][1] == "44/45"
    assert rows["Hard micro"] == ("100.0%", "105/105")


def test_cli_eval_broken_and_missing_plans(files, real_db_dir, tmp_path, capsys) -> None:
    queries, plans = files
    lines = plans.read_text().splitlines()
    lines[0] = json.dumps({"idx": 0, "query": "", "plan": "[{'days': 1, 'current_city': 'X'"})  # unparseable
    lines[1] = json.dumps({"idx": 1, "query": "", "plan": None})  # nothing delivered
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    verdicts = tmp_path / "verdicts.jsonl"
    args = ["eval", "--queries", str(queries), "--plans", str(broken), "--db", str(real_db_dir)]
    assert main([*args, "--mode", "official", "--per-plan", str(verdicts)]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows["Delivery"] == ("95.6%", "43/45")
    records = [json.loads(line) for line in verdicts.read_text().splitlines()]
    assert records[0]["delivered"] is False and "neither JSON nor a Python literal" in records[0]["error"]
    assert records[1]["delivered"] is False and records[1]["hard"] is None and "error" not in records[1]


def test_cli_eval_rejects_plan_count_mismatch(files, real_db_dir, tmp_path, capsys) -> None:
    queries, plans = files
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(json.dumps([]) for _ in range(3)) + "\n")
    code = main(["eval", "--queries", str(queries), "--plans", str(short), "--db", str(real_db_dir)])
    assert code == 2
    assert "3 plans for 45 queries" in capsys.readouterr().err
