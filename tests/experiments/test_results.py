"""The results store: tidy rows per run × metric, problems reported, the paper's figures in the same table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from polars.testing import assert_frame_equal

from star_lib.experiments.config import ExperimentConfig, save_config
from star_lib.experiments.results import (
    PAPER_REFERENCE,
    SCHEMA,
    load_results,
    paper_reference,
    with_reference,
)
from star_lib.io import read_yaml, write_json_atomic, write_parquet_atomic


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


# The paper's numbers as they stood in ``results.py`` before they moved to ``paper_reference.yaml``
# (finding, axes, metric, value in %, relation, note): the data file must give exactly this table.
_FP = "eval/final_pass"
_FORMER_REFERENCE: list[dict[str, Any]] = [
    {"finding": "reward", "model": "qwen2.5-7b", "reward": "sum", "metric": _FP, "value": 62.8},
    {"finding": "reward", "model": "qwen2.5-1.5b", "reward": "curriculum", "metric": _FP, "value": 34.9},
    {"finding": "reward", "model": "qwen2.5-1.5b", "reward": "sum", "metric": _FP, "value": 33.1},
    {"finding": "baseline", "model": "qwen2.5-1.5b", "stage": "sft", "metric": _FP, "value": 6.9,
     "note": "SFT only (no RL)"},
    {"finding": "baseline", "run": "Kimi-K2.5", "metric": _FP, "value": 15.0, "relation": "<",
     "note": "Kimi-K2.5 (frontier model, prompted)"},
    {"finding": "data", "rl_data_size": 100, "metric": _FP, "value": 37.5},
    {"finding": "data", "rl_data_size": 1000, "metric": _FP, "value": 49.9},
    {"finding": "data", "rl_data_size": 1000, "metric": "qa/average/em", "value": 35.0, "note": "avg OOD"},
    {"finding": "data", "rl_data_size": 2000, "metric": _FP, "value": 50.8},
    {"finding": "data", "rl_data_size": 2000, "metric": "qa/average/em", "value": 32.2, "note": "avg OOD"},
    {"finding": "difficulty", "difficulty": "easy", "metric": "eval/cs_macro", "value": 79.7},
    {"finding": "difficulty", "difficulty": "4:3:3", "metric": _FP, "value": 49.9},
    {"finding": "difficulty", "difficulty": "hard", "metric": _FP, "value": None,
     "note": "hard-only training collapses"},
    {"finding": "algorithm", "model": "qwen2.5-1.5b", "algorithm": "arpo", "metric": _FP, "value": 37.5},
    {"finding": "algorithm", "model": "qwen2.5-1.5b", "algorithm": "dapo", "metric": _FP, "value": 36.9},
    {"finding": "algorithm", "model": "qwen2.5-1.5b", "algorithm": "grpo", "metric": _FP, "value": 30.1},
    {"finding": "algorithm", "model": "qwen2.5-7b", "algorithm": "grpo", "metric": _FP, "value": 62.8},
    {"finding": "algorithm", "model": "qwen2.5-7b", "algorithm": "dapo", "metric": _FP, "value": 58.4},
    {"finding": "algorithm", "model": "qwen2.5-7b", "algorithm": "arpo", "metric": _FP, "value": 58.3},
    {"finding": "algorithm", "model": "qwen2.5-1.5b", "algorithm": "grpo", "metric": "cost/gpu_hours",
     "value": 164.0,
     "unit": "h"},
    {"finding": "algorithm", "model": "qwen2.5-7b", "algorithm": "arpo", "metric": "cost/gpu_hours",
     "value": 547.0,
     "unit": "h"},
    {"finding": "ood", "model": "qwen2.5-3b", "reward": "curriculum", "metric": "qa/nq/em", "value": 41.0},
    {"finding": "ood", "run": "Search-R1", "metric": "qa/nq/em", "value": 34.1, "note": "Search-R1 baseline"},
    {"finding": "ood", "model": "qwen2.5-7b", "reward": "curriculum", "metric": "qa/hotpotqa/em",
     "value": 48.4},
    {"finding": "ood", "run": "Search-R1", "metric": "qa/hotpotqa/em",
     "value": 37.0, "note": "Search-R1 baseline"},
    {"finding": "ood", "model": "qwen2.5-7b", "reward": "macro", "metric": "qa/2wikimultihopqa/em",
     "value": 38.3},
    {"finding": "ood", "run": "Search-R1", "metric": "qa/2wikimultihopqa/em", "value": 41.4,
     "note": "Search-R1 baseline"},
    {"finding": "ood", "model": "qwen2.5-7b", "reward": "macro", "metric": "qa/bamboogle/em", "value": 52.8},
    {"finding": "ood", "run": "Search-R1", "metric": "qa/bamboogle/em",
     "value": 36.8, "note": "Search-R1 baseline"},
    {"finding": "noise", "model": "qwen2.5-3b", "tool_failure_rate": 0.05, "metric": _FP, "value": None,
     "note": "stable for tool failure rate <= 5 %"},
    {"finding": "noise", "model": "qwen2.5-3b", "tool_failure_rate": 0.10, "metric": _FP, "value": None,
     "note": "clear drop at 10 %"},
]  # fmt: skip
_AXES = ("model", "reward", "algorithm", "rl_data_size", "difficulty", "tool_failure_rate")


def _former_frame() -> pl.DataFrame:
    """The table ``paper_reference()`` built from the former literal (its code at the time of the move)."""
    rows = []
    for entry in _FORMER_REFERENCE:
        value = entry.get("value")
        if value is not None and entry.get("unit") != "h":
            value = value / 100.0
        row = {key: None for key in SCHEMA}
        row.update({k: v for k, v in entry.items() if k in SCHEMA})
        run = entry.get("run") or "-".join(str(entry[k]) for k in _AXES if entry.get(k) is not None)
        row.update(
            source="paper",
            grid=f"paper-{entry['finding']}",
            run=run or entry["finding"],
            status="done",
            value=value,
            relation=entry.get("relation", "="),
            stage=entry.get("stage", "eval" if entry["metric"].startswith("eval/") else None),
        )
        rows.append(row)
    return pl.DataFrame(rows, schema=SCHEMA)


def test_results_paper_reference_file_gives_the_former_table():
    assert_frame_equal(paper_reference(), _former_frame(), check_exact=True)  # columns, dtypes, row order


def test_results_paper_reference_cites_every_number_and_ships_with_the_package():
    entries = read_yaml(PAPER_REFERENCE)
    assert len(entries) == len(_FORMER_REFERENCE)
    assert all(isinstance(e.get("cited"), str) and e["cited"] for e in entries), "each number says where"
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    package_data = pyproject.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert f'"star_lib.experiments" = ["{PAPER_REFERENCE.name}"]' in package_data  # so a wheel has it
