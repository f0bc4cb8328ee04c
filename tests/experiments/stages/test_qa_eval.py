"""The qa-eval stage: the baseline on the real QA data, and the model policy's need of a trained model."""

from __future__ import annotations

import polars as pl
import pytest

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.runner import run_experiment


def test_qa_eval_baseline_on_real_qa_data(tmp_path, qa_dir):
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


def test_qa_eval_with_model_policy_needs_a_model_stage(tmp_path, qa_dir):
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
