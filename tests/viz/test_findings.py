from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from star_lib.experiments.results import SCHEMA, load_results
from star_lib.viz import findings, labels, stats, verdicts
from star_lib.viz.labels import FINAL
from star_lib.viz.verdicts import Comparison, verdict


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


def test_findings_reward_checks_sum_at_the_large_size_and_that_success_is_never_best():
    rows = results(
        *(
            {"finding": "reward", "model": m, "reward": r, "value": v}
            for m, values in (("tiny", (0.30, 0.40, 0.20)), ("tiny-l", (0.50, 0.45, 0.60)))
            for r, v in zip(("sum", "curriculum", "success"), values, strict=True)
        )
    )
    checked = {
        (c.ours.split(":")[0], c.label): c.outcome for c in findings.reward_design(rows, "tiny").comparisons
    }
    assert checked == {
        ("tiny", "curriculum > sum"): "agrees",  # the paper's 1.5B numbers, for the small model only
        ("tiny", "curriculum > success"): "agrees",  # against the small model's best other reward
        ("tiny-l", "sum > curriculum"): "agrees",  # 7B gains from SUM, not CURRICULUM
        ("tiny-l", "sum > success"): "opposite",  # SUCCESS is tiny-l's best here
    }


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
    agg = stats.aggregate(rows, ["model", "reward"])
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


def test_findings_algorithm_tiny_l_is_checked_against_7b_and_tiny_against_1p5b():
    rows = results(
        *(
            {"finding": "algorithm", "algorithm": a, "model": m, "value": v}
            for m, values in (("tiny", (0.2, 0.3, 0.31)), ("tiny-l", (0.6, 0.5, 0.5)))
            for a, v in zip(("grpo", "dapo", "arpo"), values, strict=True)
        )
    )
    finding = findings.algorithms(rows, "tiny")
    by_model: dict[str, set[str]] = {}
    for c in finding.comparisons:
        by_model.setdefault(c.ours.split(":")[0], set()).add(c.paper.split(":")[0])
    assert by_model == {"tiny": {"1.5B"}, "tiny-l": {"7B"}}
    outcomes = {(c.ours.split(":")[0], c.label): c.outcome for c in finding.comparisons}
    assert outcomes[("tiny", "dapo > grpo")] == "agrees"  # exploration pays at 1.5B ...
    assert outcomes[("tiny-l", "grpo > dapo")] == "agrees"  # ... and not at 7B


@pytest.mark.parametrize(
    ("model", "reported", "expected"),
    [
        ("tiny-s", ["qwen2.5-1.5b", "qwen2.5-7b"], "qwen2.5-1.5b"),
        ("tiny", ["qwen2.5-1.5b", "qwen2.5-7b"], "qwen2.5-1.5b"),
        ("tiny", ["qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"], "qwen2.5-3b"),
        ("tiny-l", ["qwen2.5-1.5b", "qwen2.5-7b"], "qwen2.5-7b"),
        ("tiny-l", ["qwen2.5-1.5b"], "qwen2.5-1.5b"),
        ("qwen2.5-7b", ["qwen2.5-1.5b", "qwen2.5-7b"], "qwen2.5-7b"),
        ("qwen2.5-3b", ["qwen2.5-1.5b", "qwen2.5-7b"], "qwen2.5-1.5b"),
    ],
)
def test_paper_stand_in_maps_a_tiny_size_to_the_paper_size_of_its_rank(model, reported, expected):
    assert verdicts.paper_stand_in(model, reported) == expected


def test_findings_data_maps_paper_sizes_to_the_tiny_grid():
    rows = results(
        *(
            {"finding": "data", "rl_data_size": n, "value": v}
            for n, v in ((20, 0.2), (80, 0.3), (300, 0.5), (600, 0.51))
        )
    )
    finding = findings.data_quantity(rows, "tiny")
    final = [c for c in finding.comparisons if c.metric == FINAL]
    assert [c.label for c in final] == ["n=300 > n=20", "n=600 ≈ n=300"]  # paper: 1000 vs 100, 2000 vs 1000
    assert [c.outcome for c in final] == ["agrees", "agrees"]
    ood = [c for c in finding.comparisons if c.metric != FINAL]
    assert [(c.metric, c.outcome) for c in ood] == [("ood/cs_micro", "missing")]  # these runs have no OOD
    assert any("100→20, 500→80, 1000→300, 2000→600" in note for note in finding.notes)


def ood_runs(finding: str, axis: str, arms: dict[Any, list[float]]) -> pl.DataFrame:
    """Runs with held-out final pass 0.4 and per-query OOD cs micro outcomes (200 queries, 3 seeds an arm)."""
    rows = []
    for value, rates in arms.items():
        for seed, rate in enumerate(rates):
            run = {"finding": finding, axis: value, "seed": seed, "run": f"{finding}__{value}__s{seed}"}
            rows += [{**run, "value": 0.4}, {**run, "metric": "eval/n", "value": 200.0}]
            rows += [
                {**run, "metric": "ood/cs_micro", "value": rate},
                {**run, "metric": "ood/n", "value": 200.0},
            ]
            rows += [
                {**run, "metric": f"query/ood/cs_micro/{q}", "value": rate + (0.02 if q % 2 else -0.02)}
                for q in range(200)
            ]
    return results(*rows)


def test_findings_ood_is_the_ood_splits_cs_micro_at_tiny_scale_with_its_own_interval():
    far = findings.data_quantity(
        ood_runs("data", "rl_data_size", {300: [0.30, 0.31, 0.29], 600: [0.10, 0.11, 0.09]}), "tiny"
    )
    [ood] = [c for c in far.comparisons if c.metric == "ood/cs_micro" and c.label == "n=300 > n=600"]
    assert ood.outcome == "agrees"  # the paper: avg OOD EM 35.0 at 1000 > 32.2 at 2000
    assert ood.our_diff == pytest.approx(0.2)
    assert ood.arms and ood.arms[0].se is not None and ood.arms[0].se < 0.05
    near = findings.data_quantity(
        ood_runs("data", "rl_data_size", {300: [0.30, 0.31, 0.29], 600: [0.29, 0.30, 0.28]}), "tiny"
    )
    [ood] = [c for c in near.comparisons if c.metric == "ood/cs_micro" and c.label == "n=300 > n=600"]
    assert ood.outcome == "flat"  # 1 point apart: inside the interval


@pytest.mark.parametrize(("macro", "outcome"), [(0.3, "agrees"), (0.1, "opposite")])
def test_findings_reward_checks_the_ood_tax_of_the_dense_reward(macro, outcome):
    rows = ood_runs("reward", "reward", {"macro": [macro] * 3, "sum": [0.2] * 3})
    finding = findings.reward_design(rows, "tiny")
    [tax] = [c for c in finding.comparisons if c.metric == "ood/cs_micro"]
    assert tax.label == "macro > sum (OOD)"
    assert tax.outcome == outcome
    assert findings.reward_design(reward_runs(0.5, 0.3), "tiny").comparisons[-1].metric == FINAL  # no OOD


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
    effects = {r["effect"]: r for r in finding.tables["effects"].iter_rows(named=True)}
    assert list(effects) == [
        "reward (sum→curriculum)",
        "tool_failure_rate (0.0→0.1)",
        "reward × tool_failure_rate",
    ]
    assert effects["reward (sum→curriculum)"]["estimate"] == pytest.approx(0.1)  # ±1 contrasts of the cells
    assert effects["tool_failure_rate (0.0→0.1)"]["estimate"] == pytest.approx(-0.2)
    assert effects["reward × tool_failure_rate"]["estimate"] == pytest.approx(0.1)  # (-0.1 - -0.3) / 2
    assert {r["verdict"] for r in effects.values()} == {"unknown"}  # one run, no episode count: no interval
    outcomes = {c.label: c.outcome for c in finding.comparisons}
    assert outcomes == {
        "reward curriculum vs sum at tool_failure_rate=0.0": "flat",
        "reward curriculum vs sum at tool_failure_rate=0.1": "agrees",
        "tool_failure_rate 0.1 vs 0.0 at reward=sum": "agrees",
        "tool_failure_rate 0.1 vs 0.0 at reward=curriculum": "agrees",
    }
    assert "the largest is reward × tool_failure_rate +10.0 pts" in finding.verdict


def test_findings_comparison_similar_uses_the_stable_tolerance():
    close = Comparison("a ≈ b", FINAL, "similar", "p", our_diff=-0.04)
    far = Comparison("a ≈ b", FINAL, "similar", "p", our_diff=-0.2)
    assert (close.outcome, far.outcome) == ("agrees", "opposite")
    sentence = verdict([close, far], have_runs=True)
    assert sentence.startswith("Mixed: our runs agree with the paper on 1 of 2 comparisons and go the")
    assert "differs by more than its interval and the ±5 pts the paper calls stable" in sentence


def test_findings_curve_and_token_metrics_follow_the_trainers_names():
    assert labels.is_curve_metric("train/loss") and labels.is_curve_metric("env/final_pass")
    assert not labels.is_curve_metric("summary/loss") and not labels.is_curve_metric("train/grad_norm")
    rows = results(
        {"finding": "algorithm", "algorithm": "grpo", "metric": "sft/final/train/num_tokens", "value": 10.0},
        {"finding": "algorithm", "algorithm": "grpo", "metric": "rl/final/train/num_tokens", "value": 99.0},
        {"finding": "algorithm", "algorithm": "grpo", "value": 0.3},
    )
    table = findings.algorithms(rows, "tiny").table
    assert table.filter(pl.col("source") == "ours")["tokens"].to_list() == [99.0]  # RL's count first


# ── the tiny study's model sizes and the published study ──


def test_findings_tiny_scale_keeps_the_tiny_study_sizes_and_ranks_them_against_the_paper():
    assert labels.scale_models("tiny") == ("tiny-s", "tiny", "tiny-l")
    assert [labels.model_label(m) for m in ("tiny-s", "tiny-l", "qwen2.5-7b")] == ["tiny-s", "tiny-l", "7B"]
    rows = results(
        {"finding": "scale", "model": "tiny-s", "value": 0.10},
        {"finding": "scale", "model": "tiny-l", "value": 0.40},
    )
    scale = findings.model_scale(rows, "tiny")
    assert scale.runs == 2
    checked = [c for c in scale.comparisons if c.our_diff is not None]
    assert [c.label for c in checked] == ["7B > 1.5B"]  # tiny-l stands for 7B, tiny-s for 1.5B
    assert checked[0].our_diff == pytest.approx(0.30)
    reward = findings.reward_design(
        results({"finding": "reward", "model": "tiny-l", "reward": "milestone"}), "tiny"
    )
    assert (
        reward.runs == 1
        and "milestone" in reward.table.filter(pl.col("source") == "ours")["reward"].to_list()
    )


def _summary(tmp_path, finding: str, grid: str, arm: str, seed: int, **values: Any):
    """One published run summary with the columns star study writes (study.SUMMARY_COLUMNS, the axes…)."""
    from star_lib.experiments.results import AXIS_SCHEMA
    from star_lib.experiments.study import SUMMARY_COLUMNS

    axes = {"model": "tiny", "reward": "sum", "algorithm": "grpo", "rl_data_size": 64, "difficulty": "easy"}
    axes.update({k: values.pop(k) for k in list(values) if k in AXIS_SCHEMA})
    row: dict[str, Any] = {
        "finding": finding,
        "grid": grid,
        "run": f"{grid}__{arm}__s{seed}",
        "arm": arm,
        "seed": seed,
        "commit": "0123456789abcdef0123",
        "dirty": False,
        "config_hash": "abc",
        "wall_s": 60.0,
        "compute_s": 50.0,
        "finished": 1.0,
        **{k: axes.get(k) for k in AXIS_SCHEMA if k != "seed"},
        "config": "{}",
        "rl_steps": [1, 2],
        "rl_reward": [0.1, 0.2],
        **values,
    }
    assert set(SUMMARY_COLUMNS) <= set(row)
    schema = {**AXIS_SCHEMA, "rl_steps": pl.List(pl.Int64), "rl_reward": pl.List(pl.Float64)}
    frame = pl.DataFrame([row], schema_overrides=schema)
    folder = tmp_path / finding
    folder.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(folder / f"{row['run']}.parquet")


def test_findings_show_the_published_study_when_the_results_folder_has_no_runs(tmp_path):
    for seed in range(3):
        for model in ("tiny-s", "tiny-l"):
            for reward, rate in (("sum", 0.20), ("curriculum", 0.45), ("milestone", 0.30)):
                metrics = {
                    FINAL: rate + 0.01 * seed,
                    "eval/n": 200.0,
                    "eval/termination/answer": 1.0,
                    "eval/cs_micro": 0.9,
                    "ood/final_pass": rate / 2,
                    "cost/rl_s": 30.0,
                    "rl/first/env/final_pass": rate / 4,  # the first RL steps' rollouts
                }
                _summary(tmp_path, "reward", "reward", f"{reward}-{model}", seed, model=model, reward=reward,
                         **metrics)  # fmt: skip
    empty = pl.DataFrame(schema=SCHEMA)
    shown = findings.with_study(empty, "reward", "tiny", study_dir=tmp_path, results_dir="runs")
    assert shown.study and "published tiny study (18 runs at commit 0123456789" in shown.source
    assert "CPUs" not in shown.source  # no machine recorded: nothing to say
    assert f", {tmp_path})." in shown.source  # outside the project: the folder as given
    published = findings.with_study(empty, "reward", "tiny")  # the project's own reports/tiny-study
    assert (
        published.study
        and ", reports/tiny-study)." in published.source
        and "/reports/" not in published.source
    )
    finding = findings.reward_design(shown.frame, "tiny")
    assert finding.runs == 18
    ours = finding.table.filter(pl.col("source") == "ours")
    assert set(ours["model"].to_list()) == {"tiny-s", "tiny-l"}
    assert set(ours["reward"].to_list()) == {"sum", "curriculum", "milestone"}
    assert ours.filter((pl.col("model") == "tiny-l") & (pl.col("reward") == "curriculum"))[
        "final_pass"
    ].item() == pytest.approx(0.46)
    assert ours.filter((pl.col("model") == "tiny-l") & (pl.col("reward") == "curriculum"))[
        "first_rollouts_pass"
    ].item() == pytest.approx(0.45 / 4)  # how sparse a reward paid only for passing plans is there
    health = finding.health
    assert "± (95 %)" in health.columns and health.height == 6  # an interval per arm
    assert health["± (95 %)"].drop_nulls().min() > 0
    [tiny_s] = [c for c in finding.comparisons if c.label == "curriculum > sum" and "tiny-s" in c.ours]
    assert tiny_s.our_diff == pytest.approx(0.25) and tiny_s.outcome == "agrees"  # decided by the interval
    # the user's own runs win over the study; the paper scale never reads it
    mine = results({"finding": "reward", "reward": "sum", "value": 0.9})
    assert not findings.with_study(mine, "reward", "tiny", study_dir=tmp_path).study
    assert not findings.with_study(empty, "reward", "paper", study_dir=tmp_path).study


def test_a_study_whose_runs_ran_on_two_cpus_says_so_above_its_charts(tmp_path):
    for seed, cpu in enumerate(("EPYC (avx512_bf16)", "EPYC (avx512_bf16)", "EPYC (avx2)")):
        _summary(tmp_path, "algorithm", "algorithm", "grpo", seed, cpu=cpu, **{FINAL: 0.4, "eval/n": 10.0})
    shown = findings.with_study(pl.DataFrame(schema=SCHEMA), "algorithm", "tiny", study_dir=tmp_path)
    said = "ran on 2 CPUs (1 on EPYC (avx2), 2 on EPYC (avx512_bf16)): each trained its own SFT"
    assert said in shown.source


def test_the_algorithm_table_shows_dapo_refills_and_arpo_branches_per_step_from_the_summaries(tmp_path):
    exploration = {
        "dapo": ("rl/mean/dapo/refill_rounds", 1.0),
        "arpo": ("rl/mean/arpo/branches_per_group", 2.0),
    }
    for seed in range(2):
        for algorithm in ("grpo", "dapo", "arpo"):
            counter = dict([exploration[algorithm]]) if algorithm in exploration else {}
            counter = {k: v + seed for k, v in counter.items()}  # seeds 0 and 1: the table shows the mean
            _summary(tmp_path, "algorithm", "algorithm", algorithm, seed, algorithm=algorithm,
                     **counter, **{FINAL: 0.4, "eval/n": 10.0})  # fmt: skip
    shown = findings.with_study(pl.DataFrame(schema=SCHEMA), "algorithm", "tiny", study_dir=tmp_path)
    ours = findings.algorithms(shown.frame, "tiny").table.filter(pl.col("source") == "ours")
    by = {r["algorithm"]: (r["refill_rounds"], r["branches_per_group"]) for r in ours.iter_rows(named=True)}
    assert by == {"grpo": (None, None), "dapo": (1.5, None), "arpo": (None, 2.5)}


def test_the_published_study_brings_its_rl_curves_and_each_arm_gets_its_mean_curve(tmp_path):
    for seed, (first, last) in enumerate(((0.1, 0.5), (0.3, 0.7), (0.2, 0.0))):  # seed 2 collapses
        for rate in (0.0, 0.1):
            curve = {"rl_steps": [1, 2], "rl_reward": [first + rate, last + rate]}
            _summary(tmp_path, "noise", "noise", f"fail={rate}", seed, tool_failure_rate=rate,
                     **curve, **{FINAL: 0.4, "eval/n": 10.0})  # fmt: skip
    shown = findings.with_study(pl.DataFrame(schema=SCHEMA), "noise", "tiny", study_dir=tmp_path)
    curves = shown.curves
    assert curves is not None and curves.height == 12  # 6 runs × 2 steps
    from star_lib.experiments.results import CURVE_SCHEMA, RL_CURVE

    assert dict(curves.schema) == CURVE_SCHEMA and set(curves["metric"]) == {RL_CURVE}
    finding = findings.env_noise(shown.frame, "tiny", curves)
    assert finding.arms == ("model", "tool_failure_rate")
    mean = findings.arm_curves(curves, finding.arms)
    assert mean["arm"].unique().sort().to_list() == ["fail=0", "fail=0.1"]  # the model is one: not named
    at = {(a, s): v for a, s, v in mean.select("arm", "step", "value").iter_rows()}
    assert at["fail=0", 1] == pytest.approx(0.2) and at["fail=0", 2] == pytest.approx(0.4)
    assert at["fail=0.1", 2] == pytest.approx(0.5) and set(mean["runs"]) == {3}
    # the user's own curves pass through untouched; nothing logged, nothing drawn
    mine = results({"finding": "noise", "tool_failure_rate": 0.0, "value": 0.9})
    passed = findings.with_study(mine, "noise", "tiny", study_dir=tmp_path, curves=curves[:2]).curves
    assert passed is not None and passed.height == 2
    assert findings.arm_curves(None, finding.arms).height == 0
    assert findings.arm_curves(curves, finding.arms, metric="train/loss").height == 0


def test_findings_render_cleanly_before_the_study_has_run(tmp_path):
    empty = pl.DataFrame(schema=SCHEMA)
    for folder in (tmp_path / "none", tmp_path):  # no folder, then an empty one
        for name, build in findings.FINDINGS.items():
            shown = findings.with_study(empty, name, "tiny", study_dir=folder)
            assert not shown.study and findings.STUDY_MISSING in shown.source
            assert "star study --scale tiny" in shown.source
            assert build(shown.frame, "tiny").runs == 0


def test_findings_noise_shows_each_arm_noisy_and_clean_when_the_runs_scored_both():
    rows = results(
        {"finding": "noise", "tool_failure_rate": 0.0, "value": 0.5},
        {"finding": "noise", "tool_failure_rate": 0.0, "metric": labels.CLEAN_FINAL, "value": 0.5},
        {"finding": "noise", "tool_failure_rate": 0.1, "value": 0.2, "run": "r9"},
        {
            "finding": "noise",
            "tool_failure_rate": 0.1,
            "metric": labels.CLEAN_FINAL,
            "value": 0.45,
            "run": "r9",
        },
    )
    clean = findings.env_noise(rows, "tiny").tables["clean"].sort("tool_failure_rate")
    assert clean["noisy final_pass"].to_list() == [0.5, 0.2] and clean["clean final_pass"].to_list() == [
        0.5,
        0.45,
    ]
    assert clean["noisy - clean"].to_list() == pytest.approx([0.0, -0.25])
    assert "clean" not in findings.env_noise(rows.filter(pl.col("metric") == FINAL), "tiny").tables


def test_every_finding_says_which_tasks_each_sides_final_pass_is_on():
    """The paper's numbers are on the official test set; ours on the synthetic held-out tasks, or also on
    the official splits when a paper run scored them (issue 20 defect 6)."""
    from star_lib.viz.findings.base import split_note

    empty = pl.DataFrame(schema=SCHEMA)
    assert split_note(empty) == (
        "The paper's numbers are on the official TravelPlanner test set (1,000 queries), scored by the "
        "official evaluator; ours (eval/final_pass) on the synthetic held-out tasks."
    )
    rows = pl.DataFrame([{"metric": "validation/official/final_pass", "value": 0.1}]).cast(
        {"metric": pl.String}
    )
    assert "validation/official/final_pass (the official validation set (180 queries))" in split_note(rows)
    assert "test/official" not in split_note(rows)
