"""The evidence gate, verdict sentences that spell out each outcome, run health and behaviour shifts."""

from __future__ import annotations

import math
from typing import Any

import polars as pl
import pytest

from star_lib.experiments.results import SCHEMA, load_results
from star_lib.viz import findings, stats, verdicts
from star_lib.viz.labels import FINAL
from star_lib.viz.stats import MAX_FORMAT_ERRORS, MAX_TRUNCATED, Arm, evidence_gate
from star_lib.viz.verdicts import Comparison


def runs(*arms: tuple[dict[str, Any], dict[str, float]], finding: str = "noise") -> pl.DataFrame:
    """A results table: one run per ``(axes, metrics)`` pair, one row per metric (``eval/`` prefix added)."""
    out = []
    for i, (axes, metrics) in enumerate(arms):
        for metric, value in metrics.items():
            row = {k: None for k in SCHEMA}
            row.update(source="ours", grid="g", run=f"r{i}", status="done", model="tiny", seed=0)
            row.update(finding=finding, relation="=", metric=f"eval/{metric}", value=value, **axes)
            out.append(row)
    return pl.DataFrame(out, schema=SCHEMA)


def health(final_pass: float, turn_limit: float = 0.0, n: float = 12, **extra: float) -> dict[str, float]:
    """Eval metrics of one run: final pass, the termination mix (the rest answered), turns, episodes."""
    return {
        "final_pass": final_pass,
        "n": n,
        "termination/answer": 1.0 - turn_limit,
        "termination/turn_limit": turn_limit,
        "termination/context_limit": 0.0,
        "termination/malformed": 0.0,
        "format_error_rate": 0.0,
        "turns": 4.0 if turn_limit == 1.0 else 8.0,
        **extra,
    }


def test_evidence_demo_grid_all_truncated_at_zero_is_no_evidence():
    # make demo's noise grid before the fix: max_turns 4, the expert needs ~10, every arm 0 %
    frame = runs(*(({"tool_failure_rate": rate}, health(0.0, turn_limit=1.0)) for rate in (0.0, 0.05, 0.1)))
    finding = findings.env_noise(frame, "tiny")
    assert [c.outcome for c in finding.comparisons] == ["no evidence", "no evidence"]
    reason = "every episode hit the 4-turn limit; final pass 0 % in every arm"
    assert all(c.no_evidence == reason for c in finding.comparisons)
    assert finding.verdict.startswith("No evidence:")
    assert reason in finding.verdict and "agrees" not in finding.verdict and "Agrees" not in finding.verdict
    assert "fail=0.05 ≈ fail=0: no evidence, every episode hit the 4-turn limit" in finding.verdict
    table = finding.comparison_table
    assert table["outcome"].to_list() == ["no evidence"] * 2 and table["why"].to_list() == [reason] * 2


def test_evidence_gate_names_each_failed_condition():
    good = Arm("a", 0.8, se=0.05)
    assert evidence_gate([good, Arm("b", 0.4, se=0.05)]) is None
    # truncation: at the threshold passes, above it is named with its share
    assert evidence_gate([Arm("a", 0.8, se=0.05, turn_limit=MAX_TRUNCATED), good]) is None
    cut = Arm("a", 0.9, se=0.05, turn_limit=0.4, context_limit=0.2)
    assert evidence_gate([cut, Arm("b", 0.1)]) == (
        "60.0 % of the a episodes hit the turn or context limit (the gate allows 50.0 %)"
    )
    broken = Arm("a", 0.9, se=0.05, format_errors=MAX_FORMAT_ERRORS + 0.1)
    assert "60.0 % of the a episodes have format errors" in evidence_gate([broken, Arm("b", 0.1)])
    # the floor is the untrained model when evaluated, else 0; "beats" means by more than the interval
    assert evidence_gate([Arm("a", 0.5, se=0.05, floor=0.45), Arm("b", 0.4)]) == (
        "the best arm (a: 50.0 % ± 9.8 pts) does not beat the untrained model (45.0 %) "
        "by more than its interval"
    )
    assert evidence_gate([Arm("a", 0.5, se=0.05, floor=0.3), Arm("b", 0.4)]) is None
    assert "within its interval of 0 %" in evidence_gate([Arm("a", 0.05, se=0.05), Arm("b", 0.0)])
    # the reference arm is the best-scoring one: an 'opposite' result is not hidden behind a 0 % arm
    assert evidence_gate([Arm("expected higher", 0.0, se=0.01), Arm("other", 0.6, se=0.05)]) is None


def test_evidence_gate_reads_no_evidence_when_no_arm_beats_its_own_sft_start():
    # issue 21: the first tiny study's arms all sat on their SFT start, and the gate compared them anyway
    still = [Arm("sum", 0.44, se=0.02, start=0.43), Arm("success", 0.43, se=0.02, start=0.43)]
    assert evidence_gate(still) == (
        "RL did not move the model: no arm beats its SFT start by more than its interval "
        "(sum 44.0 % ± 3.9 pts from 43.0 %, success 43.0 % ± 3.9 pts from 43.0 %)"
    )
    # one arm moved: the comparison is judged (the other arm may have stayed, or fallen)
    assert evidence_gate([Arm("sum", 0.60, se=0.02, start=0.43), still[1]]) is None
    # each arm against its own start (two model sizes have two SFT starts)
    sizes = [Arm("tiny", 0.20, se=0.02, start=0.10), Arm("tiny-l", 0.50, se=0.02, start=0.49)]
    assert evidence_gate(sizes) is None
    assert evidence_gate([Arm("tiny-l", 0.50, se=0.02, start=0.49)]).startswith("RL did not move the model")


def test_a_finding_whose_runs_scored_their_sft_start_gates_on_it():
    def arm(reward: str, rl: float, sft: float) -> tuple[dict[str, Any], dict[str, float]]:
        return {"reward": reward}, health(rl, n=600, **{"sft/final_pass": sft})

    flat = findings.reward_design(
        runs(arm("curriculum", 0.45, 0.44), arm("sum", 0.44, 0.44), finding="reward"), "tiny"
    )
    [c] = flat.comparisons
    assert c.outcome == "no evidence" and c.no_evidence.startswith("RL did not move the model")
    assert "curriculum 45.0 % ± " in c.no_evidence and "from 44.0 %" in c.no_evidence
    assert flat.verdict.startswith("No evidence:")
    moved = findings.reward_design(
        runs(arm("curriculum", 0.60, 0.44), arm("sum", 0.50, 0.44), finding="reward"), "tiny"
    )
    assert moved.comparisons[0].outcome != "no evidence"


def test_evidence_gate_only_holds_back_final_pass_comparisons_with_arms():
    zero = (Arm("a", 0.0, turn_limit=1.0, turns=4), Arm("b", 0.0, turn_limit=1.0, turns=4))
    assert Comparison("a > b", FINAL, "higher", "p", our_diff=0.0, arms=zero).outcome == "no evidence"
    assert Comparison("a > b", FINAL, "higher", "p", our_diff=0.0).outcome == "flat"  # no arms known
    assert Comparison("a > b", "qa/average/em", "higher", "p", our_diff=0.0, arms=zero).outcome == "flat"
    assert Comparison("a > b", FINAL, "higher", "p", our_diff=None, arms=zero).outcome == "missing"


def test_evidence_verdict_says_each_outcome_with_the_interval():
    frame = runs(
        ({"reward": "curriculum"}, health(0.5)),
        ({"reward": "sum"}, health(0.5)),
        finding="reward",
    )
    finding = findings.reward_design(frame, "tiny")
    [c] = finding.comparisons
    # Laplace-smoothed binomial SE of 6 of 12 per arm, 95 % half-width, the two arms in quadrature
    se = math.sqrt((7 / 14) * (7 / 14) / 14)
    assert c.interval == pytest.approx(math.sqrt(2) * 1.96 * se)
    assert c.difference() == f"+0.0 ± {100 * c.interval:.1f} pts"
    assert finding.verdict.startswith("Flat: our runs agree with the paper on 0 of 1 comparison and are flat")
    assert f"curriculum > sum: flat, ours +0.0 ± {100 * c.interval:.1f} pts is within its 95 % interval" in (
        finding.verdict
    )
    assert not finding.verdict.startswith("No")
    # the minimum detectable difference: (1.96 + 0.84) standard errors of the same contrast
    assert c.mde == pytest.approx(c.interval * (1.96 + 0.8416) / 1.96)
    assert f"these runs detect {100 * c.mde:.1f} pts at 80 % power" in finding.verdict
    assert finding.comparison_table["MDE (80 %, pts)"].to_list() == [pytest.approx(100 * c.mde)]
    opposite = findings.reward_design(
        runs(({"reward": "curriculum"}, health(0.2)), ({"reward": "sum"}, health(0.9)), finding="reward"),
        "tiny",
    )
    assert opposite.verdict.startswith("Opposite: our runs agree with the paper on 0 of 1 comparison and go")
    assert "curriculum > sum: opposite, ours -70.0 ± " in opposite.verdict
    assert "goes against the paper's direction" in opposite.verdict


def test_evidence_mixed_verdict_does_not_count_gated_comparisons():
    frame = runs(
        ({"tool_failure_rate": 0.0}, health(0.9)),
        ({"tool_failure_rate": 0.1}, health(0.3)),
        finding="noise",
    )
    gated = Comparison(
        "x > y", FINAL, "higher", "p", our_diff=0.0, arms=(Arm("x", 0.0, se=0.0), Arm("y", 0.0, se=0.0))
    )
    finding = findings.env_noise(frame, "tiny")
    sentence = verdicts.verdict([*finding.comparisons, gated], have_runs=True)
    assert sentence.startswith("Agrees: our runs agree with the paper on 1 of 1 comparison; 1 more show no")
    assert "x > y: no evidence, final pass 0 % in every arm" in sentence


def test_evidence_health_table_shows_termination_and_transport_per_arm():
    frame = runs(
        (
            {"reward": "sum"},
            health(
                0.5,
                turn_limit=0.25,
                **{
                    "transport/flight": 0.7,
                    "transport/self-driving": 0.2,
                    "transport/taxi": 0.1,
                    "tool_calls": 9.0,
                    "cs/is_valid_transportation": 0.75,
                    "hard/valid_cost": 0.5,
                },
            ),
        ),
        (
            {"reward": "curriculum"},
            health(0.75, **{"transport/flight": 0.6, "cs/is_valid_transportation": 1.0}),
        ),
        finding="reward",
    )
    finding = findings.reward_design(frame, "tiny")
    rows = {r["reward"]: r for r in finding.health.iter_rows(named=True)}
    assert set(findings.TERMINATION_COLUMNS) | set(findings.TRANSPORT_COLUMNS) <= set(finding.health.columns)
    assert (rows["sum"]["answer"], rows["sum"]["turn limit"], rows["sum"]["flight"]) == (0.75, 0.25, 0.7)
    assert rows["sum"]["tool calls"] == 9.0 and rows["sum"]["episodes"] == 12.0
    assert rows["curriculum"]["self-driving"] is None  # not logged by that run
    checks = {r["check"]: r for r in finding.checks.iter_rows(named=True)}
    assert checks["cs/is_valid_transportation"]["tiny · sum"] == pytest.approx(0.25)
    assert checks["cs/is_valid_transportation"]["tiny · curriculum"] == pytest.approx(0.0)
    assert checks["hard/valid_cost"]["tiny · sum"] == pytest.approx(0.5)


def test_evidence_gain_with_a_transport_shift_is_said_in_the_prose():
    # the case: final pass 66.5 % → 90.0 % while the flight share falls from 76.9 % to 0.2 %
    frame = runs(
        ({"reward": "curriculum"}, health(0.9, n=200, **{"transport/flight": 0.002})),
        ({"reward": "sum"}, health(0.665, n=200, **{"transport/flight": 0.769})),
        finding="reward",
    )
    finding = findings.reward_design(frame, "tiny")
    assert finding.comparisons[0].outcome == "agrees"
    [shift] = finding.shifts
    assert shift.startswith(
        "curriculum scores 23.5 pts above sum, and its flight share of travel legs is 0.2 %"
    )
    assert "76.9 % (-76.7 pts)" in shift and shift in finding.verdict
    steady = findings.reward_design(
        runs(
            ({"reward": "curriculum"}, health(0.9, n=200, **{"transport/flight": 0.70})),
            ({"reward": "sum"}, health(0.665, n=200, **{"transport/flight": 0.769})),
            finding="reward",
        ),
        "tiny",
    )
    assert steady.shifts == [] and "Behaviour" not in steady.verdict


def test_evidence_in_run_shift_from_the_sft_model():
    metrics = health(
        0.9, **{"transport/flight": 0.002, "sft/final_pass": 0.665, "sft/transport/flight": 0.769}
    )
    finding = findings.algorithms(runs(({"algorithm": "grpo"}, metrics), finding="algorithm"), "tiny")
    [shift] = finding.shifts
    assert "raises final pass from 66.5 % to 90.0 %" in shift and "flight share" in shift
    assert "sft final_pass" in finding.health.columns


def test_evidence_health_from_real_runs_matches_their_metrics(noise_runs):
    frame = load_results(noise_runs).frame
    finding = findings.env_noise(frame, "tiny")
    table = finding.health
    assert table.height == 2
    for row in table.iter_rows(named=True):
        mine = frame.filter(pl.col("tool_failure_rate") == row["tool_failure_rate"])
        metric = dict(mine.select("metric", "value").iter_rows())
        for column in (*findings.TERMINATION_COLUMNS, *findings.TRANSPORT_COLUMNS, "tool calls"):
            assert row[column] == pytest.approx(metric[stats.HEALTH_METRICS[column]]), column
        assert sum(row[c] for c in findings.TERMINATION_COLUMNS) == pytest.approx(1.0)
    assert finding.checks.height >= 10 and finding.checks.columns[0] == "check"


def test_evidence_a_difference_inside_its_interval_is_flat():
    small = findings.reward_design(
        runs(({"reward": "curriculum"}, health(0.6)), ({"reward": "sum"}, health(0.5)), finding="reward"),
        "tiny",
    )
    [c] = small.comparisons
    assert c.our_diff > c.tolerance and abs(c.our_diff) < c.interval and c.outcome == "flat"
    assert f"curriculum > sum: flat, ours {c.difference()} is within its 95 % interval" in small.verdict
    assert small.verdict.startswith("Flat:")
    large = findings.reward_design(
        runs(
            ({"reward": "curriculum"}, health(0.9, n=400)),
            ({"reward": "sum"}, health(0.5, n=400)),
            finding="reward",
        ),
        "tiny",
    )
    [c] = large.comparisons
    assert c.our_diff > c.interval and c.outcome == "agrees" and large.verdict.startswith("Agrees:")
    reverse = findings.reward_design(
        runs(
            ({"reward": "curriculum"}, health(0.5, n=400)),
            ({"reward": "sum"}, health(0.9, n=400)),
            finding="reward",
        ),
        "tiny",
    )
    assert reverse.comparisons[0].outcome == "opposite"


def test_evidence_about_equal_is_opposite_only_beyond_its_interval_and_the_stable_band():
    wide = (Arm("a", 0.5, se=0.05), Arm("b", 0.42, se=0.05))  # 8 pts apart, ±13.9 pts
    narrow = (Arm("a", 0.5, se=0.01), Arm("b", 0.42, se=0.01))  # 8 pts apart, ±2.8 pts
    assert Comparison("a ≈ b", FINAL, "similar", "p", our_diff=0.08, arms=wide).outcome == "agrees"
    assert Comparison("a ≈ b", FINAL, "similar", "p", our_diff=0.08, arms=narrow).outcome == "opposite"
