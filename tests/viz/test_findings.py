from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from star_lib.experiments.results import SCHEMA, load_results
from star_lib.viz import findings
from star_lib.viz.findings import FINAL, Comparison, verdict


def results(*rows: dict[str, Any]) -> pl.DataFrame:
    """A results table of our runs (one row per run × metric), in the store's schema."""
    out = []
    for i, row in enumerate(rows):
        base = {k: None for k in SCHEMA}
        base.update(
            source="ours",
            grid="g",
            run=f"r{i}",
            status="done",
            model="tiny",
            seed=0,
            metric=FINAL,
            relation="=",
        )
        base.update(row)
        out.append(base)
    return pl.DataFrame(out, schema=SCHEMA)


def reward_runs(curriculum: float, sum_: float) -> pl.DataFrame:
    return results(
        {"finding": "reward", "reward": "curriculum", "value": curriculum},
        {"finding": "reward", "reward": "sum", "value": sum_},
    )


@pytest.mark.parametrize(
    ("curriculum", "sum_", "outcome", "head"),
    [(0.5, 0.3, "agrees", "Agrees:"), (0.3, 0.5, "opposite", "Opposite:"), (0.4, 0.4, "flat", "Flat:")],
)
def test_findings_reward_direction_comes_from_the_data(curriculum, sum_, outcome, head):
    finding = findings.reward_design(reward_runs(curriculum, sum_), "tiny")
    [comparison] = finding.comparisons
    assert comparison.label == "curriculum > sum"  # the paper: 1.5B curriculum 34.9 % > sum 33.1 %
    assert "1.5B" in comparison.paper
    assert comparison.our_diff == pytest.approx(curriculum - sum_)
    assert comparison.outcome == outcome
    assert finding.verdict.startswith(head)
    assert f"curriculum > sum: {outcome}, ours {100 * (curriculum - sum_):+.1f} pts" in finding.verdict
    assert finding.runs == 2


def test_findings_missing_pair_is_not_counted():
    finding = findings.reward_design(results({"finding": "reward", "reward": "sum", "value": 0.4}), "tiny")
    assert [c.outcome for c in finding.comparisons] == ["missing"]
    assert "cannot be checked" in finding.verdict


def test_findings_no_runs_says_so():
    empty = pl.DataFrame(schema=SCHEMA)
    for name, build in findings.FINDINGS.items():
        finding = build(empty, "tiny")
        assert "No finished runs" in finding.verdict, name
        assert finding.runs == 0


def test_findings_seeds_are_averaged():
    rows = results(
        {"finding": "reward", "reward": "sum", "value": 0.2, "seed": 0},
        {"finding": "reward", "reward": "sum", "value": 0.4, "seed": 1},
    )
    agg = findings.aggregate(rows, ["model", "reward"])
    assert agg["value"].item() == pytest.approx(0.3) and agg["n"].item() == 2
    assert agg["sd"].item() == pytest.approx(0.1414, abs=1e-3)


def test_findings_paper_scale_runs_are_not_mixed_into_tiny():
    rows = results({"finding": "reward", "reward": "sum", "value": 0.9, "model": "qwen2.5-7b"})
    assert findings.reward_design(rows, "tiny").runs == 0
    assert findings.reward_design(rows, "paper").runs == 1


def test_findings_scale_compares_model_sizes_only_at_paper_scale():
    tiny = findings.model_scale(results({"finding": "scale", "value": 0.5}), "tiny")
    assert "cannot be checked" in tiny.verdict
    paper = findings.model_scale(
        results(
            {"finding": "scale", "model": "qwen2.5-1.5b", "value": 0.30},
            {"finding": "scale", "model": "qwen2.5-7b", "value": 0.55},
        ),
        "paper",
    )
    [comparison] = paper.comparisons
    assert comparison.label == "7B > 1.5B" and comparison.outcome == "agrees"


def test_findings_data_maps_paper_sizes_to_the_tiny_grid():
    rows = results(
        *(
            {"finding": "data", "rl_data_size": n, "value": v}
            for n, v in ((10, 0.2), (50, 0.3), (100, 0.5), (200, 0.51))
        )
    )
    finding = findings.data_quantity(rows, "tiny")
    final = [c for c in finding.comparisons if c.metric == FINAL]
    assert [c.label for c in final] == ["n=100 > n=10", "n=200 ≈ n=100"]
    assert [c.outcome for c in final] == ["agrees", "agrees"]
    ood = [c for c in finding.comparisons if c.metric != FINAL]
    assert [c.outcome for c in ood] == ["missing"]  # no qa-eval metrics in these runs
    assert any("÷10" in note for note in finding.notes)


def test_findings_algorithm_tiny_is_checked_against_the_smallest_paper_model():
    rows = results(
        *(
            {"finding": "algorithm", "algorithm": a, "value": v}
            for a, v in (("grpo", 0.2), ("dapo", 0.3), ("arpo", 0.31))
        )
    )
    finding = findings.algorithms(rows, "tiny")
    assert all(c.paper.startswith("1.5B") for c in finding.comparisons)
    assert {c.label: c.outcome for c in finding.comparisons} == {
        "dapo > grpo": "agrees",
        "arpo > grpo": "agrees",
        "arpo ≈ dapo": "agrees",
    }
    assert set(finding.table["source"]) == {"paper", "ours"}


def test_findings_difficulty_uses_the_papers_collapse_statement():
    rows = results(
        {"finding": "difficulty", "difficulty": "4:3:3", "value": 0.5},
        {"finding": "difficulty", "difficulty": "hard", "value": 0.1},
    )
    [comparison] = findings.data_difficulty(rows, "tiny").comparisons
    assert "collapses" in comparison.paper and comparison.outcome == "agrees"


def test_findings_noise_on_real_runs_matches_their_metrics(noise_runs):
    frame = load_results(noise_runs).frame
    finding = findings.env_noise(frame, "tiny")
    values = dict(frame.filter(pl.col("metric") == FINAL).select("tool_failure_rate", "value").iter_rows())
    by_label = {c.label: c for c in finding.comparisons}
    drop = by_label["fail=0.1 < fail=0"]
    assert drop.our_diff == pytest.approx(values[0.1] - values[0.0])
    expected = "flat" if abs(drop.our_diff) <= 0.01 else ("agrees" if drop.our_diff < 0 else "opposite")
    assert drop.no_evidence is None  # the expert finishes at fail=0: the arms show signal
    assert drop.outcome == expected
    assert drop.interval is not None and " ± " in drop.difference()
    assert f"fail=0.1 < fail=0: {expected}, ours {drop.difference()}" in finding.verdict
    assert by_label["fail=0.05 ≈ fail=0"].outcome == "missing"  # not in this grid
    assert finding.runs == 2


def test_findings_interactions_reports_each_effect_and_the_interaction():
    rows = results(
        *(
            {"finding": "interactions", "reward": r, "tool_failure_rate": f, "value": v}
            for r, f, v in (
                ("sum", 0.0, 0.6),
                ("sum", 0.1, 0.3),
                ("curriculum", 0.0, 0.6),
                ("curriculum", 0.1, 0.5),
            )
        )
    )
    finding = findings.interactions(rows, "tiny")
    effects = dict(finding.tables["effects"].iter_rows())
    assert effects["sum"] == pytest.approx(-0.3) and effects["curriculum"] == pytest.approx(-0.1)
    assert [c.outcome for c in finding.comparisons] == ["agrees", "agrees"]
    assert "varies by 20.0 pts" in finding.verdict and "an interaction" in finding.verdict


def test_findings_comparison_similar_uses_the_stable_tolerance():
    close = Comparison("a ≈ b", FINAL, "similar", "p", our_diff=-0.04)
    far = Comparison("a ≈ b", FINAL, "similar", "p", our_diff=-0.2)
    assert (close.outcome, far.outcome) == ("agrees", "opposite")
    sentence = verdict([close, far], have_runs=True)
    assert sentence.startswith("Mixed: our runs agree with the paper on 1 of 2 comparisons and go the")
    assert "differs by more than the ±5 pts the paper calls stable" in sentence


def test_findings_curve_and_token_metrics_follow_the_trainers_names():
    assert findings.is_curve_metric("train/loss") and findings.is_curve_metric("env/final_pass")
    assert not findings.is_curve_metric("summary/loss") and not findings.is_curve_metric("train/grad_norm")
    rows = results(
        {"finding": "algorithm", "algorithm": "grpo", "metric": "sft/final/train/num_tokens", "value": 10.0},
        {"finding": "algorithm", "algorithm": "grpo", "metric": "rl/final/train/num_tokens", "value": 99.0},
        {"finding": "algorithm", "algorithm": "grpo", "value": 0.3},
    )
    table = findings.algorithms(rows, "tiny").table
    assert table.filter(pl.col("source") == "ours")["tokens"].to_list() == [99.0]  # RL's count first
