"""The results store: tidy rows per run × metric, problems reported, the paper's figures in the same table."""

from __future__ import annotations

import polars as pl

from star_lib.experiments.config import ExperimentConfig, save_config
from star_lib.experiments.results import SCHEMA, load_results, paper_reference, with_reference
from star_lib.io import write_json_atomic, write_parquet_atomic


def make_run(root, grid, name, status, metrics=None, **axes):
    run = root / grid / name
    run.mkdir(parents=True)
    save_config(ExperimentConfig.from_dict({"name": name, **axes}), run / "config.yaml")
    write_json_atomic(run / "run.json", {"status": status, "error": "boom" if status == "failed" else None})
    if metrics is not None:
        write_parquet_atomic(
            run / "metrics.parquet",
            pl.DataFrame(
                {
                    "stage": ["eval"] * len(metrics) + ["sft"],
                    "step": pl.Series([None] * len(metrics) + [5], dtype=pl.Int64),
                    "metric": [*metrics, "train/loss"],
                    "value": [*metrics.values(), 2.0],
                }
            ),
        )
    return run


def test_results_one_row_per_run_and_metric_with_axes(tmp_path):
    make_run(
        tmp_path, "g", "r1", "done", {"eval/final_pass": 0.5, "cost/gpu_hours": 3.0}, reward="macro", seed=1
    )
    make_run(tmp_path, "g", "r2", "done", {"eval/final_pass": 0.25, "cost/gpu_hours": 2.0}, reward="sum")
    make_run(tmp_path, "g", "r3", "failed")
    make_run(tmp_path, "g", "r4", "running", {"eval/final_pass": 0.9})  # partial files are not results
    (tmp_path / "_stages").mkdir()
    results = load_results(tmp_path)
    assert results.runs == 2
    assert results.frame.columns == list(SCHEMA)
    assert results.frame.height == 4  # per-step training rows are not final metrics
    r1 = results.frame.filter((pl.col("run") == "r1") & (pl.col("metric") == "eval/final_pass")).row(
        0, named=True
    )
    assert (r1["reward"], r1["seed"], r1["value"], r1["source"], r1["model"]) == (
        "macro",
        1,
        0.5,
        "ours",
        "tiny",
    )
    problems = {r["run"]: r for r in results.problems.rows(named=True)}
    assert problems["r3"]["status"] == "failed" and problems["r3"]["error"] == "boom"
    assert problems["r4"]["status"] == "running"
    wide = results.wide()
    assert wide.height == 2 and "eval/final_pass" in wide.columns


def test_results_unreadable_metrics_are_reported_not_raised(tmp_path):
    run = make_run(tmp_path, "g", "r1", "done", {"eval/final_pass": 0.5})
    (run / "metrics.parquet").write_bytes(b"PAR1 broken")
    results = load_results(tmp_path)
    assert results.runs == 0
    assert results.problems.row(0, named=True)["status"] == "unreadable"


def test_results_paper_reference_holds_section_9():
    paper = paper_reference()
    assert paper.columns == list(SCHEMA) and set(paper["source"]) == {"paper"}

    def value(**where):
        frame = paper
        for key, wanted in where.items():
            frame = frame.filter(pl.col(key) == wanted)
        assert frame.height == 1, where
        return frame["value"][0]

    assert value(model="qwen2.5-7b", reward="sum", metric="eval/final_pass") == 0.628
    assert value(model="qwen2.5-1.5b", algorithm="grpo", metric="eval/final_pass") == 0.301
    assert value(model="qwen2.5-7b", algorithm="arpo", metric="cost/gpu_hours") == 547.0
    assert value(rl_data_size=2000, metric="qa/average/em") == 0.322
    assert value(difficulty="easy", metric="eval/cs_macro") == 0.797
    assert value(run="Search-R1", metric="qa/bamboogle/em") == 0.368
    kimi = paper.filter(pl.col("run") == "Kimi-K2.5").row(0, named=True)
    assert (kimi["relation"], kimi["value"]) == ("<", 0.15)
    notes = paper.filter(pl.col("value").is_null())["note"].to_list()
    assert "clear drop at 10 %" in notes and "hard-only training collapses" in notes


def test_results_ours_and_paper_concatenate(tmp_path):
    make_run(tmp_path, "g", "r1", "done", {"eval/final_pass": 0.5})
    both = with_reference(load_results(tmp_path))
    assert set(both["source"]) == {"ours", "paper"}
