"""The teacher stage: SFT trajectories, with clean tools or with failures the expert recovers from."""

from __future__ import annotations

import json

import polars as pl
import pytest

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.runner import run_experiment

BASE = {"stages": ["world", "synth", "teacher"], "synth": {"n_base": 24}, "world": {"scale": "small"}}


def test_a_teacher_with_failing_tools_retries_each_failed_call_and_its_plans_still_pass(tmp_path):
    cache = tmp_path / "cache"
    clean = run_experiment(
        ExperimentConfig.from_dict({**BASE, "name": "clean"}), tmp_path / "g" / "c", cache=cache
    )
    noisy = run_experiment(
        ExperimentConfig.from_dict({**BASE, "name": "noisy", "teacher": {"failure_rate": 0.3}}),
        tmp_path / "g" / "n",
        cache=cache,
    )
    assert clean.status == noisy.status == "done", (clean.error, noisy.error)
    keys = {
        name: {s["stage"]: s["key"] for s in run.stages} for name, run in (("clean", clean), ("noisy", noisy))
    }
    assert (
        keys["clean"]["synth"] == keys["noisy"]["synth"]
        and keys["clean"]["teacher"] != keys["noisy"]["teacher"]
    )

    def teacher(name: str) -> tuple[dict[str, float], list[str]]:
        folder = cache / "teacher" / keys[name]["teacher"]
        metrics = pl.read_parquet(folder / "metrics.parquet")
        rows = [json.loads(line) for line in (folder / "train.jsonl").read_text().splitlines()]
        texts = [m["content"] for r in rows for m in r["messages"] if m["role"] != "assistant"]
        return dict(metrics.select("metric", "value").iter_rows()), texts

    clean_metrics, clean_texts = teacher("clean")
    noisy_metrics, noisy_texts = teacher("noisy")
    assert not any(k.startswith("teacher/faults/") for k in clean_metrics)
    failures = sum(v for k, v in noisy_metrics.items() if k.startswith("teacher/faults/"))
    assert failures > 0, noisy_metrics
    errors = [t for t in noisy_texts if "error" in t.lower()]
    assert errors and not any("error" in t.lower() for t in clean_texts)  # the SFT set sees failed calls
    # the expert retries instead of giving up: nearly as many kept (passing) trajectories as with clean tools
    assert noisy_metrics["teacher/kept"] >= 0.8 * clean_metrics["teacher/kept"], (
        noisy_metrics,
        clean_metrics,
    )


def test_the_teacher_refuses_a_failure_rate_that_is_not_a_probability():
    from star_lib.experiments.stages.teacher import TeacherStageConfig

    with pytest.raises(ValueError, match=r"teacher.failure_rate must be a probability in \[0, 1\)"):
        TeacherStageConfig(failure_rate=1.0)
