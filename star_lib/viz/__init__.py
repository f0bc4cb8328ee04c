"""Notebook support: the notebooks' config, chart builders, one function per finding, the trajectory explorer.

- :class:`NotebookParams` (``params``) — the one config every notebook builds from its ``parameters`` cell;
- ``charts`` — ``polars.DataFrame -> altair.Chart`` builders, PNG rendering through vl-convert (no CDN),
  styled HTML tables, and ``show_*`` helpers that tag notebook outputs for ``star report``;
- ``findings`` — one module per finding: the paper's figures beside our runs and a generated verdict;
- ``stats`` — arms, bootstrap intervals, the evidence gate, seed planning; ``verdicts`` — the paper's claims
  checked on our runs and the verdict sentence; ``labels`` — the metric names and display labels they share;
- ``runs`` — find, launch (local / Slurm) and load a finding's runs;
- :class:`TrajectoryExplorer` (``explorer``) — ipywidgets explorer of episodes (turns, plan, verdicts);
- ``walkthrough`` — the quickstart's expert, untrained and trained model on the same held-out tasks, in the
  trained model's protocol with its eval stage's budgets.

Altair, ipywidgets and IPython load only when a name that needs them is used.
"""

from __future__ import annotations

import importlib
from typing import Any

from star_lib.viz.params import LAUNCH_MODES, SCALES, NotebookParams

_LAZY: dict[str, str] = {
    "TrajectoryExplorer": "star_lib.viz.explorer",
    "Finding": "star_lib.viz.findings",
    "Comparison": "star_lib.viz.verdicts",
    "FINDINGS": "star_lib.viz.findings",
    "ensure_runs": "star_lib.viz.runs",
    "notebook_grid": "star_lib.viz.runs",
    "open_results": "star_lib.viz.runs",
    "load_curves": "star_lib.viz.runs",
    "show_chart": "star_lib.viz.charts",
    "show_table": "star_lib.viz.charts",
    "show_verdict": "star_lib.viz.charts",
}

__all__ = ["LAUNCH_MODES", "SCALES", "NotebookParams", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'star_lib.viz' has no attribute {name!r}")
