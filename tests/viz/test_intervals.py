"""Bootstrap intervals over queries and seeds, the paired bootstrap of a difference, the factorial effects.

The synthetic study here is what ``star study`` publishes (one summary parquet per run, with the per-query
lists of ``eval_final_pass``): every run answers the same held-out queries, and most of a query's outcome is
its difficulty, shared by every arm — the case the paired bootstrap is for.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from star_lib.experiments.results import SCHEMA, load_study
from star_lib.viz import findings
from star_lib.viz.stats import (
    INTERVAL_Z,
    Arm,
    Outcomes,
    aggregate,
    arm_stats,
    contrast_interval,
    contrast_se,
    outcomes_of,
    rate_intervals,
    seeds_for,
    seeds_table,
)
from star_lib.viz.verdicts import Comparison

N_QUERIES = 200


def outcomes(rate: float, seed: int, flip: float = 0.02, n: int = N_QUERIES) -> list[int]:
    """One run's per-query final pass: query q passes when its difficulty (q + 0.5) / n is below ``rate``,
    and each outcome flips with probability ``flip`` (the run's own luck)."""
    rng = np.random.default_rng(seed)
    passed = (np.arange(n) + 0.5) / n < rate
    return [int(v) for v in np.where(rng.random(n) < flip, ~passed, passed)]


def publish(
    folder: Path, finding: str, arms: list[dict[str, Any]], seeds: int = 3, lists: bool = True
) -> Path:
    """Write a published study: one summary per arm × seed; each arm dict holds its axes and ``rate``."""
    out = folder / finding
    out.mkdir(parents=True, exist_ok=True)
    for a, arm in enumerate(arms):
        axes = {k: v for k, v in arm.items() if k != "rate"}
        for seed in range(seeds):
            passes = outcomes(arm["rate"], seed=1000 * a + seed)
            name = f"{finding}__{'-'.join(str(v) for v in axes.values())}__s{seed}"
            row: dict[str, Any] = {
                "finding": finding,
                "grid": finding,
                "run": name,
                "seed": seed,
                "commit": "abc1234",
                "model": "tiny-s",
                **axes,
                "eval/final_pass": sum(passes) / len(passes),
                "eval/n": float(len(passes)),
            }
            if lists:
                row["eval_query"] = list(range(100, 100 + len(passes)))
                row["eval_final_pass"] = passes
                row["eval_sum"] = [0.25 + 0.75 * v for v in passes]
            pl.DataFrame([row]).write_parquet(out / f"{name}.parquet")
    return folder


def shown(folder: Path, finding: str) -> pl.DataFrame:
    return findings.with_study(pl.DataFrame(schema=SCHEMA), finding, "tiny", study_dir=folder).frame


def quadrature(comparison: Comparison) -> float:
    return math.sqrt(sum((a.interval or 0.0) ** 2 for a in comparison.arms))


def test_bootstrap_se_of_independent_bernoulli_outcomes_is_the_binomial_se():
    rng = np.random.default_rng(7)
    values = tuple(int(v) for v in rng.random(400) < 0.3)
    p = sum(values) / len(values)
    se = contrast_se([Outcomes(tuple(range(400)), (values,))], [1.0])
    assert se == pytest.approx(math.sqrt(p * (1 - p) / 400), rel=0.1)


def test_bootstrap_is_deterministic_and_a_cell_against_itself_has_no_spread():
    cell = Outcomes(tuple(range(N_QUERIES)), tuple(tuple(outcomes(0.4, s)) for s in range(3)))
    first = contrast_se([cell], [1.0])
    assert first > 0 and contrast_se([cell], [1.0]) == first  # fixed seed: the same runs, the same SE
    other = Outcomes(cell.queries, tuple(tuple(outcomes(0.4, s)) for s in range(3, 6)))
    assert contrast_se([cell, other], [1.0, -1.0]) > 0
    one = Outcomes(cell.queries, cell.values[:1])
    assert contrast_se([one, one], [1.0, -1.0]) == 0.0  # the same run on the same resampled queries
    with pytest.raises(ValueError, match="share their held-out queries"):
        contrast_se([cell, Outcomes(tuple(range(1, N_QUERIES + 1)), cell.values)], [1.0, -1.0])


def test_more_seeds_shrink_only_the_seeds_share_of_an_interval():
    """Seeds that disagree (a 10-pt spread) need more seeds for a narrow interval than seeds that agree, and
    no count of seeds narrows the queries' own share: 200 queries at 40 % give about ± 6.8 pts."""
    queries = tuple(range(N_QUERIES))
    spread = Outcomes(queries, tuple(tuple(outcomes(rate, s)) for s, rate in enumerate((0.35, 0.45, 0.40))))
    agree = Outcomes(queries, tuple(tuple(outcomes(0.40, s, flip=0.0)) for s in range(3)))
    assert contrast_se([spread], [1.0], seeds=3) == contrast_se([spread], [1.0])  # its own count: as before
    wide = [INTERVAL_Z * contrast_se([spread], [1.0], seeds=n) for n in (3, 12, 48)]
    assert wide[0] > wide[1] > wide[2]
    floor = INTERVAL_Z * math.sqrt(0.4 * 0.6 / N_QUERIES)
    assert INTERVAL_Z * contrast_se([agree], [1.0], seeds=48) == pytest.approx(floor, rel=0.1)
    needed = seeds_for(spread, 0.09, most=40)
    assert needed is not None and needed > seeds_for(agree, 0.09, most=40) == 1
    assert INTERVAL_Z * contrast_se([spread], [1.0], seeds=needed) <= 0.09
    assert INTERVAL_Z * contrast_se([spread], [1.0], seeds=needed - 1) > 0.09
    assert seeds_for(spread, floor / 2) is None  # narrower than the queries allow
    with pytest.raises(ValueError, match="half_width"):
        seeds_for(spread, 0.0)


def test_seeds_table_names_the_seeds_each_arm_needs(tmp_path):
    folder = publish(
        tmp_path, "reward", [{"reward": "curriculum", "rate": 0.45}, {"reward": "sum", "rate": 0.40}]
    )
    rows = findings.ours(shown(folder, "reward"), "reward", "tiny")
    stats = arm_stats(rows, ["reward"])
    table = seeds_table(stats, ["reward"], half_width=0.07)
    assert table.columns == ["reward", "runs", "final_pass", "± (95 %)", "seeds needed"]
    arms = outcomes_of(stats)
    assert table["seeds needed"].to_list() == [seeds_for(a, 0.07) for a in arms] == [1, 2]
    assert seeds_table(stats, ["reward"], half_width=0.01)["seeds needed"].null_count() == 2


def test_paired_bootstrap_of_a_shared_query_difference_is_much_narrower_than_quadrature(tmp_path):
    folder = publish(
        tmp_path, "reward", [{"reward": "curriculum", "rate": 0.45}, {"reward": "sum", "rate": 0.40}]
    )
    table = load_study(folder)
    assert table["eval_final_pass"].list.len().to_list() == [N_QUERIES] * 6
    finding = findings.reward_design(shown(folder, "reward"), "tiny")
    [comparison] = finding.comparisons
    curriculum, sum_ = comparison.arms
    assert curriculum.outcomes is not None and curriculum.outcomes.queries == sum_.outcomes.queries
    assert comparison.our_diff == pytest.approx(curriculum.outcomes.mean - sum_.outcomes.mean)
    paired, separate = comparison.interval, quadrature(comparison)
    assert paired is not None and paired < 0.5 * separate  # the query difficulty both arms share cancels
    assert comparison.outcome == "agrees"  # +5 pts is beyond the paired interval, inside the quadrature one
    assert abs(comparison.our_diff) < separate
    # the arm's own SE is the bootstrap over queries and seeds (larger than the pooled binomial's)
    p = curriculum.value
    assert curriculum.se == pytest.approx(contrast_se([curriculum.outcomes], [1.0]))
    assert curriculum.se > math.sqrt(p * (1 - p) / (3 * N_QUERIES))
    assert not any(c.startswith("_") for c in finding.health.columns)  # the lists stay out of the table


def test_without_per_query_lists_the_intervals_are_the_quadrature_as_before(tmp_path):
    arms = [{"reward": "curriculum", "rate": 0.45}, {"reward": "sum", "rate": 0.40}]
    folder = publish(tmp_path, "reward", arms, lists=False)
    [comparison] = findings.reward_design(shown(folder, "reward"), "tiny").comparisons
    assert all(a.outcomes is None for a in comparison.arms)
    assert comparison.interval == pytest.approx(quadrature(comparison))
    curriculum = comparison.arms[0]
    runs = load_study(folder).filter(pl.col("reward") == "curriculum")["eval/final_pass"]
    p, n = curriculum.value, 3 * N_QUERIES
    smoothed = (p * n + 1) / (n + 2)
    legacy = max(math.sqrt(smoothed * (1 - smoothed) / (n + 2)), runs.std() / math.sqrt(3))
    assert curriculum.se == pytest.approx(legacy)  # the seeds' SE or the pooled binomial SE, as before


def test_contrast_interval_falls_back_to_quadrature_when_the_arms_do_not_share_queries():
    a = Arm("a", 0.5, se=0.03, outcomes=Outcomes((1, 2), ((1, 0),)))
    b = Arm("b", 0.4, se=0.04, outcomes=Outcomes((3, 4), ((0, 1),)))
    assert contrast_interval([a, b], [1.0, -1.0]) == pytest.approx(INTERVAL_Z * 0.05)
    assert contrast_interval([a, Arm("c", 0.1)], [1.0, -1.0]) is None


FACTORIAL = [
    {"model": m, "reward": r, "tool_failure_rate": f}
    for m in ("tiny-s", "tiny-l")
    for r in ("sum", "curriculum")
    for f in (0.0, 0.1)
]


def factorial_rate(cell: dict[str, Any]) -> float:
    """Final pass of a cell: model +10 pts, failures -8 pts, and a reward × failures interaction of 6 pts."""
    x = {
        "model": 1 if cell["model"] == "tiny-l" else -1,
        "reward": 1 if cell["reward"] == "curriculum" else -1,
        "fail": 1 if cell["tool_failure_rate"] else -1,
    }
    return 0.5 + 0.05 * x["model"] - 0.04 * x["fail"] + 0.03 * x["reward"] * x["fail"]


def test_interactions_estimate_main_effects_and_interactions_with_paired_intervals(tmp_path):
    arms = [{**c, "rate": factorial_rate(c)} for c in FACTORIAL]
    folder = publish(tmp_path, "interactions", arms)
    finding = findings.interactions(shown(folder, "interactions"), "tiny")
    effects = {r["effect"]: r for r in finding.tables["effects"].iter_rows(named=True)}
    assert list(effects) == [
        "model (tiny-s→tiny-l)",
        "reward (sum→curriculum)",
        "tool_failure_rate (0.0→0.1)",
        "model × reward",
        "model × tool_failure_rate",
        "reward × tool_failure_rate",
        "model × reward × tool_failure_rate",
    ]
    cells = {
        (r["model"], r["reward"], float(r["tool_failure_rate"])): r["value"]
        for r in aggregate(
            findings.ours(shown(folder, "interactions"), "interactions", "tiny"),
            ["model", "reward", "tool_failure_rate"],
        ).iter_rows(named=True)
    }
    sign = {"tiny-l": 1, "tiny-s": -1, "curriculum": 1, "sum": -1, 0.1: 1, 0.0: -1}
    interaction = sum(sign[r] * sign[f] * v for (_, r, f), v in cells.items()) / 4
    assert effects["reward × tool_failure_rate"]["estimate"] == pytest.approx(interaction)
    assert interaction == pytest.approx(0.06, abs=0.02)  # 2 × 0.03: half the effect difference, ±1 coded
    assert effects["model (tiny-s→tiny-l)"]["estimate"] == pytest.approx(0.10, abs=0.02)
    assert effects["tool_failure_rate (0.0→0.1)"]["estimate"] == pytest.approx(-0.08, abs=0.02)
    verdicts = {k: r["verdict"] for k, r in effects.items()}
    assert verdicts["reward × tool_failure_rate"] == "interaction"
    assert verdicts["model × reward"] == verdicts["model × reward × tool_failure_rate"] == "none"
    assert verdicts["model (tiny-s→tiny-l)"] == verdicts["tool_failure_rate (0.0→0.1)"] == "effect"
    widths = [r["± 95 %"] for r in effects.values()]
    assert all(0 < w < 0.03 for w in widths)  # paired over 200 shared queries × 3 seeds per cell
    stats = arm_stats(
        findings.ours(shown(folder, "interactions"), "interactions", "tiny"),
        ["model", "reward", "tool_failure_rate"],
    )
    separate = INTERVAL_Z * math.sqrt(sum((se / 4) ** 2 for se in stats["se"].to_list()))
    # the cells' SEs in quadrature are wider: a query's outcome is mostly its difficulty, shared by all cells
    assert max(widths) < 0.7 * separate and min(widths) < 0.45 * separate
    assert "Interactions beyond their 95 % interval: reward × tool_failure_rate +" in finding.verdict
    assert finding.chart_data.columns[:2] == ["model", "reward × tool_failure_rate"]
    assert finding.chart_data.height == 8
    labels = [c.label for c in finding.comparisons]
    assert "tool_failure_rate 0.1 vs 0.0 at model=tiny-s, reward=sum" in labels
    assert "reward curriculum vs sum at model=tiny-l, tool_failure_rate=0.1" in labels
    assert len(labels) == 8  # each directed axis at each of the other two axes' 4 level pairs


def test_interactions_without_per_query_lists_use_the_cells_ses_in_quadrature(tmp_path):
    arms = [{**c, "rate": factorial_rate(c)} for c in FACTORIAL]
    folder = publish(tmp_path, "interactions", arms, lists=False)
    rows = findings.ours(shown(folder, "interactions"), "interactions", "tiny")
    finding = findings.interactions(rows, "tiny")
    stats = arm_stats(rows, ["model", "reward", "tool_failure_rate"])
    expected = INTERVAL_Z * math.sqrt(sum((se / 4) ** 2 for se in stats["se"].to_list()))
    assert finding.tables["effects"]["± 95 %"].to_list() == pytest.approx([expected] * 7)


def test_interactions_with_a_missing_cell_estimate_the_effects_of_a_complete_block_and_say_so(tmp_path):
    arms = [{**c, "rate": factorial_rate(c)} for c in FACTORIAL[:-1]]  # no tiny-l × curriculum × 0.1
    folder = publish(tmp_path, "interactions", arms, seeds=1)
    finding = findings.interactions(shown(folder, "interactions"), "tiny")
    effects = {r["effect"]: r["estimate"] for r in finding.tables["effects"].iter_rows(named=True)}
    block = ["reward (sum→curriculum)", "tool_failure_rate (0.0→0.1)", "reward × tool_failure_rate"]
    assert list(effects) == block
    assert effects["reward × tool_failure_rate"] == pytest.approx(0.06, abs=0.02)  # as in the whole factorial
    assert effects["tool_failure_rate (0.0→0.1)"] == pytest.approx(-0.08, abs=0.02)
    assert any("effects are those of its complete model=tiny-s block" in n for n in finding.notes)


def test_interactions_with_no_complete_block_estimate_nothing_and_say_so(tmp_path):
    gone = [FACTORIAL[0], FACTORIAL[-1]]  # tiny-s × sum × 0 and tiny-l × curriculum × 0.1: every block broken
    arms = [{**c, "rate": factorial_rate(c)} for c in FACTORIAL if c not in gone]
    folder = publish(tmp_path, "interactions", arms, seeds=1)
    finding = findings.interactions(shown(folder, "interactions"), "tiny")
    assert finding.tables["effects"]["estimate"].null_count() == 7
    assert "a cell of the factorial has no runs" in finding.verdict


def test_each_cell_reports_its_rates_with_bootstrap_intervals(tmp_path):
    arms = [{**c, "rate": factorial_rate(c)} for c in FACTORIAL]
    folder = publish(tmp_path, "interactions", arms)
    rows = findings.ours(shown(folder, "interactions"), "interactions", "tiny")
    rates = findings.interactions(rows, "tiny").tables["rates"]
    assert rates.height == 16 and rates["rate"].unique(maintain_order=True).to_list() == ["final_pass", "sum"]
    stats = arm_stats(rows, ["model", "reward", "tool_failure_rate"])
    final = rates.filter(pl.col("rate") == "final_pass").sort("model", "reward", "tool_failure_rate")
    assert final["value"].to_list() == pytest.approx(
        stats.sort("model", "reward", "tool_failure_rate")["final_pass"].to_list()
    )
    sums = rates.filter(pl.col("rate") == "sum")
    assert sums["± 95 %"].to_list() == pytest.approx((0.75 * final["± 95 %"]).to_list(), rel=1e-9)  # affine
    assert rate_intervals(rows.filter(~pl.col("metric").str.starts_with("query/")), ["model"]).height == 0
