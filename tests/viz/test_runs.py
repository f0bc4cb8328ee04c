from __future__ import annotations

import shutil

import polars as pl

from star_lib.experiments.grids import base_config, factorial
from star_lib.io import read_json
from star_lib.viz import runs
from star_lib.viz.params import NotebookParams

FAST = {
    "stages": ["world", "synth", "teacher", "eval"],
    "rl_data_size": 10,
    "synth": {"n_base": 30, "n_test": 3, "days_choices": [3]},
    "eval": {"max_queries": 3},
}


def one_run_grid(name: str = "noise-tiny"):
    return factorial(name, base_config("tiny").replace(**FAST), {"tool_failure_rate": [0.0]}, finding="noise")


def test_runs_launch_none_lists_missing_runs_with_the_command(tmp_path):
    params = NotebookParams(results_dir=str(tmp_path), stages="world,synth,teacher,eval")
    grid = one_run_grid()
    report = runs.ensure_runs(params, grid)
    assert report.missing == [grid.runs[0].name] and report.launched == 0
    assert f"star run-grid noise-tiny --runs {tmp_path} --stages world,synth,teacher,eval" in report.message
    assert not (tmp_path / "noise-tiny").exists()  # nothing was run


def test_runs_launch_local_runs_and_waits_then_finds_them(tmp_path):
    params = NotebookParams(results_dir=str(tmp_path), launch="local")
    grid = one_run_grid()
    report = runs.ensure_runs(params, grid, progress=False)
    assert report.launched == 1
    assert report.status.select("run", "state").rows() == [(grid.runs[0].name, "done")]
    again = runs.ensure_runs(params, grid, progress=False)
    assert again.missing == [] and again.launched == 0 and "all 1 runs finished" in again.message
    results = runs.open_results(params)
    assert results.runs == 1


def test_runs_launch_slurm_submits_once_and_shows_the_state(tmp_path):
    profile = tmp_path / "debug.yaml"
    profile.write_text(
        "cluster: debug\nnodes: 1\ngpus_per_node: 0\ncpus_per_task: 2\nmem_gb: 4\ntimeout_min: 30\n"
    )
    params = NotebookParams(results_dir=str(tmp_path / "runs"), launch="slurm", cluster=str(profile))
    grid = one_run_grid()
    report = runs.ensure_runs(params, grid)
    assert report.launched == 1
    run_dir = tmp_path / "runs" / grid.name / grid.runs[0].name
    assert read_json(run_dir / "job.json")["cluster"] == "debug"
    assert report.status["state"].to_list() == ["pending"]  # the debug executor runs a job only when asked
    assert runs.ensure_runs(params, grid).launched == 0  # a pending run is not submitted twice
    manifest = (tmp_path / "runs" / grid.name / "grid.yaml").read_text()
    assert grid.runs[0].name in manifest


def test_runs_finished_run_with_other_settings_is_not_missing(tmp_path):
    params = NotebookParams(results_dir=str(tmp_path), launch="local")
    runs.ensure_runs(params, one_run_grid(), progress=False)
    other = factorial(
        "noise-tiny",
        base_config("tiny").replace(**{**FAST, "eval": {"max_queries": 2}}),
        {"tool_failure_rate": [0.0]},
        finding="noise",
    )
    assert runs.missing_runs(other, tmp_path) == []


def test_runs_notebook_grid_follows_the_params():
    grid = runs.notebook_grid("reward", NotebookParams(stages="world,synth,eval"))
    assert grid.name == "reward-tiny" and len(grid) == 4
    assert all(r.stages == ("world", "synth", "eval") for r in grid.runs)
    assert runs.notebook_grid("interactions", NotebookParams(scale="paper")).name == "interactions-paper"


def test_runs_load_curves_reads_per_step_rows_with_axes(noise_runs, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(noise_runs / "noise-tiny", root / "noise-tiny")
    empty = runs.load_curves(root)
    assert empty.height == 0 and "tool_failure_rate" in empty.columns
    run_dir = next(p for p in (root / "noise-tiny").iterdir() if p.is_dir())
    metrics = pl.read_parquet(run_dir / "metrics.parquet")
    steps = pl.DataFrame(
        {"stage": ["rl"] * 3, "step": [1, 2, 3], "metric": ["env/final_pass"] * 3, "value": [0.1, 0.2, 0.3]}
    )
    pl.concat([metrics, steps], how="vertical_relaxed").write_parquet(run_dir / "metrics.parquet")
    curves = runs.load_curves(root, prefixes=("env/",))
    assert curves["step"].to_list() == [1, 2, 3]
    assert set(curves["run"]) == {run_dir.name} and curves["finding"].unique().to_list() == ["noise"]
    assert runs.latest_model(root) is None
