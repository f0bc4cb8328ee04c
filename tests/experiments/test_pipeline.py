"""The real stages: chunked eval is chunking-independent, qa-eval on the real QA data, and (slow) the whole
tiny pipeline world → synth → teacher → sft → rl → eval."""

from __future__ import annotations

import polars as pl
import pytest

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.runner import run_experiment

BASE = {
    "stages": ["world", "synth", "teacher", "eval"],
    "rl_data_size": 10,
    "synth": {"n_base": 60},
    "tool_failure_rate": 0.2,
    "tool_corruption_rate": 0.1,
}


def eval_rows(run_dir):
    frame = pl.read_parquet(run_dir / "eval.parquet").sort("query_index")
    return frame.select("query_index", "turns", "faults", "final_pass", "run_reward").rows()


def test_pipeline_eval_results_do_not_depend_on_chunking(tmp_path):
    one = run_experiment(
        ExperimentConfig.from_dict({**BASE, "eval": {"chunk_size": 1}}), tmp_path / "g" / "one"
    )
    four = run_experiment(
        ExperimentConfig.from_dict({**BASE, "eval": {"chunk_size": 4}}), tmp_path / "g" / "four"
    )
    assert one.status == four.status == "done"
    rows = eval_rows(tmp_path / "g" / "one")
    assert rows == eval_rows(tmp_path / "g" / "four")
    assert any(r[2] != "{}" for r in rows)  # faults were injected, with the same draws per query


def test_pipeline_eval_reward_axis_scores_the_same_episodes(tmp_path):
    runs = {}
    for reward in ("success", "sum"):
        cfg = ExperimentConfig.from_dict({**BASE, "reward": reward, "name": reward})
        run_experiment(cfg, tmp_path / "g" / reward)
        runs[reward] = pl.read_parquet(tmp_path / "g" / reward / "eval.parquet").sort("query_index")
    assert runs["success"]["final_pass"].to_list() == runs["sum"]["final_pass"].to_list()
    assert (runs["success"]["run_reward"] == runs["success"]["final_pass"].cast(pl.Float64)).all()
    assert (runs["sum"]["run_reward"] >= runs["success"]["run_reward"]).all()


def test_pipeline_qa_eval_baseline_on_real_qa_data(tmp_path, qa_dir):
    cfg = ExperimentConfig.from_dict(
        {
            "stages": ["qa-eval"],
            "qa_eval": {
                "policy": "baseline",
                "data_dir": str(qa_dir / "deepresearcher_test"),
                "corpus": str(qa_dir / "corpus" / "flashrag_wiki_sample_1000.jsonl"),
                "datasets": ["bamboogle", "hotpotqa"],
                "limit": 4,
            },
        }
    )
    run_experiment(cfg, tmp_path / "g" / "qa")
    qa = pl.read_parquet(tmp_path / "g" / "qa" / "qa.parquet")
    assert qa.height == 8 and set(qa["dataset"]) == {"bamboogle", "hotpotqa"}
    metrics = pl.read_parquet(tmp_path / "g" / "qa" / "metrics.parquet")
    names = set(metrics["metric"])
    assert {"qa/bamboogle/em", "qa/hotpotqa/f1", "qa/average/em"} <= names


def test_pipeline_qa_eval_with_model_policy_needs_a_model_stage(tmp_path, qa_dir):
    cfg = ExperimentConfig.from_dict(
        {
            "stages": ["qa-eval"],
            "qa_eval": {
                "data_dir": str(qa_dir),
                "corpus": str(qa_dir / "corpus" / "flashrag_wiki_sample_1000.jsonl"),
            },
        }
    )
    with pytest.raises(Exception, match="add sft or rl to stages"):
        run_experiment(cfg, tmp_path / "g" / "qa")


@pytest.mark.slow
def test_pipeline_whole_tiny_pipeline_with_sft_and_rl(tmp_path):
    cfg = ExperimentConfig.from_dict(
        {
            "rl_data_size": 8,
            "synth": {"n_base": 30},
            "stages": ["world", "synth", "teacher", "sft", "rl", "eval"],
            "sft": {"max_steps": 2, "logging_steps": 1, "save_steps": 1},
            "rl": {
                "max_steps": 1,
                "num_generations": 2,
                "prompts_per_step": 1,
                "max_turns": 2,
                "max_new_tokens": 32,
                "rollouts_per_step": 1,
            },
            "eval": {"max_queries": 1, "max_turns": 30, "max_new_tokens": 32},
        }
    )
    result = run_experiment(cfg, tmp_path / "g" / "full")
    assert [s["stage"] for s in result.stages] == ["world", "synth", "teacher", "sft", "rl", "eval"]
    metrics = pl.read_parquet(tmp_path / "g" / "full" / "metrics.parquet")
    final = metrics.filter(pl.col("step").is_null())
    assert final.filter(pl.col("metric") == "sft/steps")["value"].to_list() == [2.0]
    assert final.filter(pl.col("metric") == "rl/steps")["value"].to_list() == [1.0]
    assert metrics.filter((pl.col("stage") == "sft") & pl.col("step").is_not_null()).height > 0
    assert final.filter(pl.col("metric") == "eval/final_pass").height == 1
    rollouts = pl.read_parquet(tmp_path / "g" / "full" / "rollouts.parquet")
    assert {"teacher", "rl", "eval"} <= set(rollouts["stage"])
    assert (tmp_path / "_stages" / "rl").is_dir()


def test_pipeline_synth_that_leaves_the_test_split_empty_says_what_to_change(tmp_path):
    from star_lib.experiments.config import ConfigError

    config = ExperimentConfig.from_dict({"stages": ["world", "synth", "eval"], "synth": {"n_base": 3}})
    with pytest.raises(ConfigError, match=r"no held-out test tasks from n_base=3: raise synth.n_base"):
        run_experiment(config, tmp_path / "g" / "small")


def test_pipeline_eval_resumes_past_a_progress_log_line_torn_by_a_kill(tmp_path):
    import json

    from star_lib.experiments.pipeline import run_chunks

    def compute(start, chunk):
        return pl.DataFrame({"i": [start + k for k in range(len(chunk))]})

    frames, log = run_chunks(list(range(6)), 2, tmp_path, compute)
    progress = tmp_path / "_checkpoints" / "progress.jsonl"
    progress.write_text(progress.read_text() + '{"start": 9, "rest')  # a kill mid-append
    (tmp_path / "_checkpoints" / "chunks" / "00000004.parquet").unlink()  # that chunk must be redone
    frames, log = run_chunks(list(range(6)), 2, tmp_path, compute)
    assert pl.concat(frames)["i"].to_list() == list(range(6))
    assert [e["start"] for e in log] == [0, 2, 4, 4]  # the torn line skipped, the redone chunk logged
    assert all(json.loads(line) for line in progress.read_text().splitlines()[-1:])


def test_the_sft_key_holds_a_from_scratch_presets_shape_so_a_reshaped_model_is_retrained(monkeypatch):
    from dataclasses import replace

    from star_lib.experiments.pipeline import SFTStageConfig, build_registry
    from star_lib.train import models

    sft = build_registry().get("sft")
    small = SFTStageConfig(model="tiny-s", protocol="compact")
    before = sft.config_dict(small)
    assert before["architecture"]["hidden_size"] == models.PRESETS["tiny-s"].architecture.hidden_size
    wider = replace(models.PRESETS["tiny-s"], architecture=replace(models.PRESETS["tiny-s"].architecture,
                                                                    hidden_size=192))  # fmt: skip
    monkeypatch.setitem(models.PRESETS, "tiny-s", wider)
    after = sft.config_dict(small)
    assert after != before and after["architecture"]["hidden_size"] == 192
    hub = SFTStageConfig(model="qwen2.5-1.5b")
    assert "architecture" not in sft.config_dict(hub)  # a hub model: its name
