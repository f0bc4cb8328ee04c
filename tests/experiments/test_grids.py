"""Finding grids at both scales and the factorial builder."""

from __future__ import annotations

from pathlib import Path

import pytest

from star_lib.experiments.config import ConfigError
from star_lib.experiments.grids import FINDINGS, Grid, factorial, finding_grid, load_grid


def axis_values(grid: Grid, axis: str) -> list:
    return sorted({getattr(r, axis) for r in grid.runs}, key=str)


def test_grids_reward_design_paper_is_four_rewards_by_three_models():
    grid = finding_grid("reward", "paper")
    assert len(grid) == 12
    assert axis_values(grid, "reward") == ["curriculum", "macro", "success", "sum"]
    assert axis_values(grid, "model") == ["qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"]


@pytest.mark.parametrize(
    ("finding", "axis", "values", "models"),
    [
        ("scale", "model", ["qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"], 3),
        ("data", "rl_data_size", [100, 500, 1000, 2000], 1),
        ("difficulty", "difficulty", ["4:3:3", "easy", "hard", "medium"], 1),
        ("algorithm", "algorithm", ["arpo", "dapo", "grpo"], 2),
        ("noise", "tool_failure_rate", [0.0, 0.01, 0.05, 0.1], 1),
    ],
)
def test_grids_paper_findings_have_the_papers_axes(finding, axis, values, models):
    grid = finding_grid(finding, "paper")
    assert sorted({getattr(r, axis) for r in grid.runs}, key=str) == sorted(values, key=str)
    assert len({r.model for r in grid.runs}) == models
    assert grid.finding == finding


def test_grids_noise_paper_runs_at_3b_and_algorithm_at_1_5b_and_7b():
    assert axis_values(finding_grid("noise", "paper"), "model") == ["qwen2.5-3b"]
    assert axis_values(finding_grid("algorithm", "paper"), "model") == ["qwen2.5-1.5b", "qwen2.5-7b"]


@pytest.mark.parametrize("finding", sorted(FINDINGS))
def test_grids_tiny_scale_uses_the_tiny_model_only(finding):
    grid = finding_grid(finding, "tiny")
    assert axis_values(grid, "model") == ["tiny"]
    assert grid.name == f"{finding}-tiny"


def test_grids_tiny_data_sizes_are_the_tiny_studys_so_the_finding_maps_every_paper_size_to_a_run():
    study = load_grid(Path(__file__).parents[2] / "configs" / "study" / "data.yaml")
    assert [r.rl_data_size for r in finding_grid("data", "tiny").runs] == [20, 80, 300, 600]
    assert sorted({r.rl_data_size for r in study.runs}) == [20, 80, 300, 600]


def test_grids_factorial_crosses_any_axes_and_seeds():
    grid = factorial(
        "rx", {"model": "tiny"}, {"reward": ["sum", "success"], "tool_failure_rate": [0.0, 0.1]}, seeds=[0, 1]
    )
    assert len(grid) == 8
    combos = {(r.reward, r.tool_failure_rate, r.seed) for r in grid.runs}
    assert len(combos) == 8
    assert grid.axes == ("reward", "tool_failure_rate", "seed")
    assert all(r.name.startswith("rx__") and r.name.endswith(f"__s{r.seed}") for r in grid.runs)


def test_grids_factorial_sets_nested_stage_settings():
    grid = factorial("n", {}, {"synth.n_base": [20, 40]})
    assert [r.synth["n_base"] for r in grid.runs] == [20, 40]


def test_grids_may_sweep_a_runs_torch_threads_beside_the_axes():
    grid = factorial("t", {}, {"threads": [1, 2]})
    assert [r.threads for r in grid.runs] == [1, 2]
    with pytest.raises(ConfigError, match=r"use one of \[.*\], \['stages', 'threads'\] or a"):
        factorial("g", {}, {"name": ["x"]})


def test_grids_factorial_rejects_unknown_axes_and_values():
    with pytest.raises(ConfigError, match="grid axis 'temperature'"):
        factorial("g", {}, {"temperature": [0.1]})
    with pytest.raises(ConfigError, match="algorithm: 'ppo'"):
        factorial("g", {}, {"algorithm": ["grpo", "ppo"]})
    with pytest.raises(ConfigError, match="no values"):
        factorial("g", {}, {"reward": []})


def test_grids_load_by_name_and_from_yaml(tmp_path):
    assert load_grid("noise-paper").name == "noise-paper"
    assert load_grid("difficulty").name == "difficulty-tiny"
    path = tmp_path / "g.yaml"
    path.write_text(
        "name: mine\nbase: {stages: [world, synth]}\naxes: {reward: [sum, macro]}\nseeds: [0, 1]\n"
    )
    grid = load_grid(path)
    assert grid.name == "mine" and len(grid) == 4
    assert all(r.stages == ("world", "synth") for r in grid.runs)
    with pytest.raises(ConfigError, match="neither a YAML file nor a finding"):
        load_grid("rewards-tiny")


def test_grids_manifest_round_trip(tmp_path):
    grid = finding_grid("algorithm", "tiny", seeds=[0, 1])
    grid.write_manifest(tmp_path)
    again = Grid.from_manifest(tmp_path / "grid.yaml")
    assert again == grid


def test_grids_with_stages_truncates_every_run():
    grid = finding_grid("reward", "tiny").with_stages(["world", "synth", "teacher", "eval"])
    assert {r.stages for r in grid.runs} == {("world", "synth", "teacher", "eval")}
