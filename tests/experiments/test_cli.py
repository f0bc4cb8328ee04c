"""`star run`, `star run-grid`, `star submit` (submitit's local executor) and `star status`."""

from __future__ import annotations

from pathlib import Path

from star_lib.cli import main as star

CONFIG = """\
name: one
stages: [world, synth, teacher, eval]
rl_data_size: 10
synth: {n_base: 30}
"""
GRID = """\
name: cli-grid
base: {stages: [world, synth, teacher, eval], rl_data_size: 10, synth: {n_base: 30}}
axes: {reward: [sum, success]}
"""
LOCAL_PROFILE = Path(__file__).resolve().parents[2] / "slurm" / "local.yaml"


def test_cli_run_then_rerun_reuses(tmp_path, capsys):
    config = tmp_path / "one.yaml"
    config.write_text(CONFIG)
    runs = str(tmp_path / "runs")
    assert star(["run", str(config), "--runs", runs]) == 0
    assert "done:" in capsys.readouterr().out
    assert star(["run", str(config), "--runs", runs]) == 0
    assert capsys.readouterr().out.startswith("skipped:")
    assert star(["run", str(config), "--runs", runs, "--force"]) == 0
    assert "4 stages, 4 reused" in capsys.readouterr().out
    assert (tmp_path / "runs" / "adhoc" / "one" / "eval.parquet").is_file()


def test_cli_bad_config_is_a_clear_error(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("algorithm: ppo\n")
    assert star(["run", str(config)]) == 2
    assert "algorithm: 'ppo' is not allowed" in capsys.readouterr().err


def test_cli_run_grid_and_status(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    runs = str(tmp_path / "runs")
    assert star(["run-grid", str(grid), "--runs", runs]) == 0
    assert capsys.readouterr().out.count("done") == 2
    assert star(["status", "cli-grid", "--runs", runs]) == 0
    out = capsys.readouterr().out
    assert "done: 2" in out and "failed: 0" in out
    assert star(["status", "cli-grid", "--runs", runs, "--json"]) == 0
    assert capsys.readouterr().out.count('"state": "done"') == 2


def test_cli_submit_with_the_local_profile_waits_and_reports(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    runs = str(tmp_path / "runs")
    assert star(["submit", str(grid), "--runs", runs, "--cluster", str(LOCAL_PROFILE), "--wait"]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 runs submitted" in out and "done: 2" in out
    assert star(["submit", str(grid), "--runs", runs, "--cluster", str(LOCAL_PROFILE)]) == 0
    assert "0 of 2 runs submitted" in capsys.readouterr().out
