"""Real runs for the viz tests: a two-run noise grid through the experiments runner (a few seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from star_lib.experiments.grids import base_config, finding_grid
from star_lib.experiments.runner import run_grid_local

STAGES = ["world", "synth", "teacher", "eval"]


@pytest.fixture(scope="session")
def noise_runs(tmp_path_factory) -> Path:
    """``runs/`` holding ``noise-tiny`` at failure rates 0 and 0.1 (expert policy, 11-turn budget)."""
    root = tmp_path_factory.mktemp("viz-runs")
    base = base_config("tiny").replace(
        stages=STAGES,
        synth={"n_base": 100, "n_test": 12, "days_choices": [3, 5]},
        eval={"max_queries": 12, "max_turns": 11, "chunk_size": 12},
    )
    grid = finding_grid("noise", "tiny", base=base)
    grid = grid.__class__(
        grid.name, tuple(r for r in grid.runs if r.tool_failure_rate in (0.0, 0.1)), grid.axes, grid.finding
    )
    results = run_grid_local(grid, root)
    assert [r.status for r in results] == ["done", "done"], [r.error for r in results]
    return root
