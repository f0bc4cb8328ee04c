import json
from pathlib import Path

import pytest

from star_lib.cli import main
from star_lib.cli.demo import DemoConfig, demo_grid, tour_testbed


def test_demo_tour_calls_tools_injects_a_fault_and_verifies_a_reference_plan():
    tour = tour_testbed(seed=1)
    names = [name for name, _ in tour["observations"]]
    assert names[0] == "SearchCity" and "injected failure" in names[-1]
    assert tour["observations"][0][1].ok and not tour["observations"][-1][1].ok
    assert tour["observations"][-1][1].fault == "failure"
    assert tour["report"].final_pass


def test_demo_grid_trains_two_reward_arms_of_the_learning_recipe():
    from star_lib.experiments.stages import load_config

    grid = demo_grid(DemoConfig())
    assert grid.name == "reward-tiny" and grid.finding == "reward"
    assert sorted(r.reward for r in grid.runs) == ["success", "sum"]
    assert all("sft" in r.stages and "rl" in r.stages for r in grid.runs)
    # the SUM arm is the learning-signal run itself: the same config, so every stage is reused from the cache
    signal = load_config("learning-signal")
    sum_arm = next(r for r in grid.runs if r.reward == "sum")
    assert sum_arm.fingerprint() == signal.fingerprint()
    grid = demo_grid(DemoConfig(grid="noise", axis_values={}))
    assert sorted(r.tool_failure_rate for r in grid.runs) == [0.0, 0.01, 0.05, 0.1]


def test_demo_config_rejects_unknown_findings():
    with pytest.raises(ValueError, match="not a finding"):
        DemoConfig(grid="nope")


def test_demo_cli_runs_the_grid_and_a_rerun_reruns_nothing(tmp_path: Path, capsys):
    args = ["demo", "--runs", str(tmp_path / "runs"), "--grid", "algorithm", "--stages", "world",
            "--no-pipeline", "--no-report"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [status for _, status in first["runs"]] == ["done", "done", "done"]
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [status for _, status in second["runs"]] == ["skipped", "skipped", "skipped"]
