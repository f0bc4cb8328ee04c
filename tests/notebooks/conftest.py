"""Session fixtures: a small results folder made by the real experiments runner, and one report over it.

Every finding grid at ``tiny`` scale (plus the interactions grid of ``07_interactions``) runs through
``run_grid_local`` with the stages that take seconds — world, synth, teacher (the expert acts out the SFT
pool) and eval (the expert policy on the held-out split) — on a smaller base than ``base_config("tiny")``
and with an 11-turn budget, so tool failures cost episodes (the noise grid shows a real drop). Building it
takes ~10 s; executing all eight notebooks once takes ~1 min on 2 cores, and every notebook test reads that
one execution.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from star_lib.experiments.grids import FINDINGS, base_config, finding_grid
from star_lib.experiments.runner import run_grid_local
from star_lib.reports import NotebookReport, ReportConfig, build_reports
from star_lib.viz.runs import interactions_grid

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
STAGES = ["world", "synth", "teacher", "eval"]
"""Stages of the test runs (sft/rl take minutes each on CPU; the notebooks need only their metrics)."""


def small_base():
    """The tiny base config, shrunk: a 100-record SFT/test pool, 12 eval queries, at most 11 turns."""
    return base_config("tiny").replace(
        stages=STAGES,
        synth={"n_base": 100, "n_test": 12, "days_choices": [3, 5]},
        eval={"max_queries": 12, "max_turns": 11, "chunk_size": 12},
    )


def build_results(root: Path) -> dict[str, list[str]]:
    """Run every finding grid and the interactions grid into ``root``; returns grid name → run statuses."""
    base = small_base()
    grids = [finding_grid(f, "tiny", base=base) for f in FINDINGS]
    grids.append(interactions_grid("tiny", base=base))
    return {grid.name: [r.status for r in run_grid_local(grid, root)] for grid in grids}


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory) -> Path:
    """A runs folder with every tiny grid finished."""
    root = tmp_path_factory.mktemp("nb-runs")
    statuses = build_results(root)
    failed = {g: s for g, s in statuses.items() if set(s) != {"done"}}
    assert not failed, failed
    return root


@pytest.fixture(scope="session")
def report(results_dir, tmp_path_factory) -> tuple[list[NotebookReport], Path, ReportConfig]:
    """``star report --scale tiny`` over the results folder, once per session: (reports, index, config)."""
    out = tmp_path_factory.mktemp("reports")
    cfg = ReportConfig(
        notebooks_dir=str(NOTEBOOKS),
        out_dir=str(out),
        results_dir=str(results_dir),
        scale="tiny",
        progress=False,
    )
    reports, index = build_reports(cfg)
    return reports, index, cfg


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that share the ~1-minute report execution as ``slow`` (``-m "not slow"`` skips them)."""
    for item in items:
        if "report" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
