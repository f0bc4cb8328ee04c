"""The learning-signal pipeline: worlds by query, metrics, the cosine schedule, a toy end-to-end run."""

from __future__ import annotations

import json
import math
import time

import pytest

from star_lib.agent import run_episodes
from star_lib.agent.compact import CompactExpert
from star_lib.train.pipeline import (
    IDX_STRIDE,
    CosineSchedule,
    PipelineConfig,
    WorldSet,
    curve_text,
    run_pipeline,
    standard_error,
    summarize,
    synth_queries,
    whole_words,
)


def test_pipeline_worldset_runs_each_episode_in_its_own_world() -> None:
    worlds = WorldSet(capacity=2)
    queries = synth_queries(worlds, [5, 6, 7], per_world=2, days=(3,))
    assert {q.idx // IDX_STRIDE for q in queries} == {5, 6, 7}
    assert len(worlds._worlds) == 2  # bounded cache; evicted worlds are rebuilt identically
    cfg = PipelineConfig()
    episodes = run_episodes(CompactExpert(), queries, worlds, cfg.rollout_config())
    metrics = summarize(episodes)
    assert metrics["final_pass"] == metrics["cs_micro"] == metrics["sum"] == 1.0
    assert metrics["valid_tool_calls"] == metrics["parseable_plans"] == 1.0
    assert 0.0 < metrics["flight_legs"] <= 1.0
    wrong = WorldSet().world(99)  # the same plans judged in another world fail
    assert sum(ep.reward for ep in run_episodes(CompactExpert(), queries, wrong, cfg.rollout_config())) < 6
    with pytest.raises(ValueError, match="no idx"):
        worlds.for_query(queries[0].__class__(**{**queries[0].__dict__, "idx": None}))


def test_pipeline_standard_error_and_curve_text() -> None:
    assert standard_error([1.0]) == 0.0
    assert standard_error([0.0, 1.0, 0.0, 1.0]) == pytest.approx(0.2887, abs=1e-4)
    text = curve_text([(i, i / 10) for i in range(1, 11)], points=5)
    assert text.count("|") == 4 and "1-2: 0.150" in text


def test_pipeline_cosine_schedule_decays_with_the_clock() -> None:
    clock = CosineSchedule(budget_s=0.2, warmup_steps=2, floor=0.1)
    assert clock(0) == pytest.approx(0.5, abs=0.05)
    assert clock(5) == pytest.approx(1.0, abs=0.05)
    assert not clock.finished(10**6)  # a time budget ignores the step count
    time.sleep(0.25)
    assert clock(100) == pytest.approx(0.1) and clock.finished(0)


def test_pipeline_cosine_schedule_counts_steps() -> None:
    clock = CosineSchedule(budget_steps=100, warmup_steps=10, floor=0.05)
    assert clock(4) == pytest.approx(0.5 * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * 0.04))))
    assert clock(50) == pytest.approx(0.05 + 0.95 * 0.5)
    assert clock(100) == pytest.approx(0.05) and clock.finished(100) and not clock.finished(99)
    with pytest.raises(ValueError, match="budget"):
        CosineSchedule()


def test_pipeline_whole_words_cover_names_dates_and_flight_prefix() -> None:
    words = whole_words()
    assert "F" in words and "2022-03-02" in words and "SearchFlight" in words and "Pellmont" in words
    assert len(words) == len(set(words))


def test_pipeline_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="tiny"):
        PipelineConfig(preset="qwen2.5-1.5b")
    with pytest.raises(ValueError, match="rl_group"):
        PipelineConfig(rl_group=1)
    with pytest.raises(ValueError, match="days"):
        PipelineConfig(days=(4,))
    with pytest.raises(ValueError, match="sft_s"):
        PipelineConfig(sft_s=0.0)
    seeds = {k: set(PipelineConfig().seeds(k, 1000)) for k in ("train", "rl", "eval")}
    assert not (seeds["train"] & seeds["rl"] or seeds["train"] & seeds["eval"] or seeds["rl"] & seeds["eval"])


def test_pipeline_toy_run_end_to_end(tmp_path) -> None:
    cfg = PipelineConfig(
        out_dir=str(tmp_path),
        train_worlds=6,
        queries_per_world=2,
        rl_worlds=2,
        eval_queries=4,
        warmup_steps=20,
        sft_steps=6,
        sft_batch=4,
        rl_steps=3,
        rl_group=2,
        rl_prompts_per_step=2,
        max_new_tokens=24,
        rl_monitor=2,
        rl_monitor_every=1,
    )
    result = run_pipeline(cfg, log=lambda _: None)
    assert result.rl_monitor and result.rl_monitor[0][0] == 0  # greedy held-out checks during GRPO
    assert set(result.models) == {"base", "sft", "rl"}
    assert all(m["n"] == 4 for m in result.models.values())
    assert result.rl_curve and result.stages["rl"]["seconds"] > 0
    assert result.stages["sft"]["steps"] == 6 and result.stages["rl"]["steps"] == 3  # budgets count steps
    final = result.final_json()
    assert set(final) == {
        "cs_micro_base",
        "cs_micro_sft",
        "sum_sft",
        "sum_rl",
        "sum_rl_se",
        "success_sft",
        "success_rl",
        "minutes",
    }
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["final"] == final
    for name in ("base", "sft", "rl"):
        assert (tmp_path / f"eval_{name}.parquet").is_file()
    assert (tmp_path / "rl" / "model" / "config.json").is_file()
    rows = [json.loads(line) for line in (tmp_path / "data" / "sft.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and rows[0]["messages"][0] == {"role": "system", "content": "plan"}
