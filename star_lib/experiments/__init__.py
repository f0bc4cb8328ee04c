"""Experiments: typed configs for every axis, grids per finding, local and Slurm runs, the results store.

>>> from star_lib.experiments import finding_grid, run_grid_local, load_results  # doctest: +SKIP
>>> grid = finding_grid("reward", "tiny").with_stages(["world", "synth", "teacher", "eval"])  # doctest: +SKIP
>>> run_grid_local(grid, "runs")  # doctest: +SKIP
>>> load_results("runs").frame  # one row per run × metric, axes as columns  # doctest: +SKIP

Modules: :mod:`.config` (ExperimentConfig), :mod:`.stages` (the stages, one module each, and their registry),
:mod:`.artifacts` (content-addressed stage outputs), :mod:`.runner` (local / submitit), :mod:`.profiles`
(cluster profiles), :mod:`.launch` (torchrun/accelerate), :mod:`.grids`, :mod:`.status`, :mod:`.results`,
and :mod:`star_lib.io` (atomic writers).
"""

from star_lib.experiments.config import (
    AXES,
    STAGE_NAMES,
    ConfigError,
    ExperimentConfig,
    save_config,
)
from star_lib.experiments.grids import FINDINGS, Grid, factorial, finding_grid, load_grid
from star_lib.experiments.profiles import ClusterProfile, load_profile
from star_lib.experiments.results import Results, load_results, paper_reference, with_reference
from star_lib.experiments.runner import RunJob, RunResult, run_experiment, run_grid_local, submit_grid
from star_lib.experiments.stages import load_config
from star_lib.experiments.status import RunStatus, grid_status

__all__ = [
    "AXES",
    "FINDINGS",
    "STAGE_NAMES",
    "ClusterProfile",
    "ConfigError",
    "ExperimentConfig",
    "Grid",
    "RunJob",
    "RunResult",
    "RunStatus",
    "Results",
    "factorial",
    "finding_grid",
    "grid_status",
    "load_config",
    "load_grid",
    "load_profile",
    "load_results",
    "paper_reference",
    "run_experiment",
    "run_grid_local",
    "save_config",
    "submit_grid",
    "with_reference",
]
