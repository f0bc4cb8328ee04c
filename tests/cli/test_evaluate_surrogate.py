"""``star eval --write-submission`` refuses a plan with a lone surrogate before any output (issue 22)."""

from __future__ import annotations

import ast
import json

from star_lib.cli import main


def test_evaluate_lone_surrogate_refused_before_any_output(tmp_path, tp_dir, real_db_dir, capsys) -> None:
    lines = (tp_dir / "train.jsonl").read_text().splitlines()[:2]
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(lines) + "\n")
    gold = [ast.literal_eval(json.loads(line)["annotated_plan"])[1] for line in lines]
    plans = [json.dumps({"idx": n, "plan": [d for d in days if d]}) for n, days in enumerate(gold, start=1)]
    plans[1] = plans[1].replace('"-"', '"\\ud800"', 1)  # valid JSON, but no UTF-8 text can hold it
    (tmp_path / "plans.jsonl").write_text("\n".join(plans) + "\n")
    per_plan, submission = tmp_path / "verdicts.jsonl", tmp_path / "submission.jsonl"
    args = ["eval", "--queries", str(queries), "--plans", str(tmp_path / "plans.jsonl")]
    args += ["--db", str(real_db_dir)]
    code = main([*args, "--per-plan", str(per_plan), "--write-submission", str(submission)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("star eval: error:") and len(err.strip().splitlines()) == 1
    assert "plans.jsonl record 2" in err and "--write-submission" in err
    assert not per_plan.exists() and not submission.exists()
