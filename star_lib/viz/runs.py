"""What a notebook does before it plots: find the finding's runs, launch the missing ones, load the results.

A finding notebook reads the runs of its grid (``<results_dir>/<finding>-<scale>/``). When some are missing,
:func:`ensure_runs` follows ``NotebookParams.launch``: ``none`` only lists them with the command that would
run them; ``local`` runs them here through the experiments runner and waits; ``slurm`` submits them as one
submitit job array with the ``cluster`` profile and returns the job status (run the notebook again later).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from star_lib.viz.params import NotebookParams

if TYPE_CHECKING:
    import polars as pl

    from star_lib.experiments.config import ExperimentConfig
    from star_lib.experiments.grids import Grid
    from star_lib.experiments.results import Results

INTERACTION_AXES: dict[str, list[Any]] = {"reward": ["sum", "curriculum"], "tool_failure_rate": [0.0, 0.10]}
"""The default factorial of ``07_interactions``: reward design × tool failures (2 × 2)."""
_ACTIVE = ("pending", "running")


def interactions_grid(
    scale: str,
    stages: list[str] | None = None,
    axes: dict[str, list[Any]] | None = None,
    base: ExperimentConfig | None = None,
) -> Grid:
    """Build the factorial grid of ``07_interactions`` (``interactions-<scale>``)."""
    from star_lib.experiments.grids import base_config, factorial

    base = base or base_config(scale)
    if stages is not None:
        base = base.replace(stages=list(stages))
    return factorial(f"interactions-{scale}", base, axes or INTERACTION_AXES, finding="interactions")


def notebook_grid(finding: str, params: NotebookParams) -> Grid:
    """Return the grid a finding notebook reads (and launches): the finding's grid at ``params.scale``."""
    if finding == "interactions":
        return interactions_grid(params.scale, params.stage_list)
    from star_lib.experiments.grids import finding_grid

    return finding_grid(finding, params.scale, stages=params.stage_list)


def missing_runs(grid: Grid, root: str | Path) -> list[str]:
    """Names of the grid's runs with no finished run folder under ``root``.

    A run that finished with other settings (say, other ``stages``) counts as present: a notebook shows the
    runs that exist and never overwrites them; ``star run-grid`` reruns runs whose config changed.
    """
    from star_lib.experiments.runner import grid_dir, read_run_record

    folder = grid_dir(root, grid)
    return [c.name for c in grid.runs if (read_run_record(folder / c.name) or {}).get("status") != "done"]


@dataclass
class LaunchReport:
    """What :func:`ensure_runs` found and did."""

    grid: str
    """Grid name."""
    mode: str
    """``none`` | ``local`` | ``slurm``."""
    missing: list[str]
    """Runs that were not finished when the notebook started."""
    launched: int
    """Runs run here (local) or submitted (slurm) now."""
    status: pl.DataFrame
    """``star status`` of the grid after launching (one row per run)."""
    message: str
    """One line for the notebook."""


def _status(grid: Grid, root: str | Path) -> pl.DataFrame:
    from star_lib.experiments.runner import grid_dir
    from star_lib.experiments.status import grid_status, status_frame

    folder = grid_dir(root, grid)
    return status_frame(grid_status(folder) if folder.is_dir() else [])


def _command(grid: Grid, params: NotebookParams) -> str:
    stages = f" --stages {params.stages}" if params.stage_list else ""
    return f"star run-grid {grid.name} --runs {params.results_dir}{stages}"


def ensure_runs(params: NotebookParams, grid: Grid, *, progress: bool = True) -> LaunchReport:
    """Make sure the grid's runs exist, as ``params.launch`` says (see the module docstring).

    Failed runs are recorded by the runner (``run.json``) and shown in the returned status; they never
    raise here, so the notebook goes on with the runs that finished.
    """
    missing = missing_runs(grid, params.results_path)
    launched = 0
    if not missing:
        message = f"{grid.name}: all {len(grid)} runs finished under {params.results_dir}."
    elif params.launch == "none":
        message = (
            f"{grid.name}: {len(missing)} of {len(grid)} runs missing under {params.results_dir}; "
            f"set launch='local' (or 'slurm') or run `{_command(grid, params)}`."
        )
    elif params.launch == "local":
        launched = _run_local(grid, missing, params.results_path, progress)
        message = f"{grid.name}: ran {launched} missing run(s) here."
    else:
        launched = _submit(grid, params)
        message = (
            f"{grid.name}: submitted {launched} run(s) to {params.cluster}; the table shows their state — "
            "run the notebook again when they are done."
        )
    return LaunchReport(
        grid.name, params.launch, missing, launched, _status(grid, params.results_path), message
    )


def _run_local(grid: Grid, missing: list[str], root: Path, progress: bool) -> int:
    """Run the missing runs one after another in this process (like ``star run-grid``) with a progress bar."""
    from tqdm.auto import tqdm

    from star_lib.experiments.runner import CACHE_DIRNAME, grid_dir, run_experiment

    folder = grid_dir(root, grid)
    grid.write_manifest(folder)
    todo = [c for c in grid.runs if c.name in missing]
    for config in tqdm(todo, desc=grid.name, unit="run", disable=not progress):
        try:
            run_experiment(config, folder / config.name, cache=root / CACHE_DIRNAME, grid=grid.name)
        except Exception:  # recorded in the run's run.json; the status table shows it
            continue
    return len(todo)


def _submit(grid: Grid, params: NotebookParams) -> int:
    """Submit the runs that are neither finished nor already pending/running on the cluster."""
    from star_lib.experiments.grids import Grid as GridType
    from star_lib.experiments.profiles import load_profile
    from star_lib.experiments.runner import grid_dir, submit_grid

    status = _status(grid, params.results_path)
    active = (
        set(status.filter(status["state"].is_in(list(_ACTIVE)))["run"].to_list()) if status.height else set()
    )
    missing = set(missing_runs(grid, params.results_path)) - active
    todo = tuple(c for c in grid.runs if c.name in missing)
    if not todo:
        return 0
    subset = GridType(grid.name, todo, grid.axes, grid.finding)
    jobs = submit_grid(subset, load_profile(params.cluster), params.results_path)
    grid.write_manifest(grid_dir(params.results_path, grid))  # the manifest lists every run, not the subset
    return len(jobs)


def open_results(params: NotebookParams) -> Results:
    """Load the results store of ``params.results_dir`` (empty when the folder does not exist yet)."""
    from star_lib.experiments.results import Results, load_results

    if not params.results_path.is_dir():
        import polars as pl

        from star_lib.experiments.results import SCHEMA

        return Results(pl.DataFrame(schema=SCHEMA))
    return load_results(params.results_path)


def load_curves(
    root: str | Path, grids: list[str] | None = None, prefixes: tuple[str, ...] = ()
) -> pl.DataFrame:
    """Per-step metrics (``step`` not null) of every finished run, with the run's axes.

    Args:
        root: The runs folder.
        grids: Only these grid names.
        prefixes: Only metrics starting with one of these (all when empty).

    Returns:
        :data:`~star_lib.experiments.results.CURVE_SCHEMA`: ``grid``, ``run``, ``finding``, the axes,
        ``stage``, ``step``, ``metric``, ``value``.

    """
    import polars as pl

    from star_lib.experiments.config import ExperimentConfig
    from star_lib.experiments.results import CURVE_SCHEMA as schema
    from star_lib.experiments.runner import read_run_record
    from star_lib.io import read_yaml

    root = Path(root)
    frames = []
    for grid_folder in sorted(p for p in root.glob("*") if p.is_dir() and not p.name.startswith(("_", "."))):
        if grids is not None and grid_folder.name not in grids:
            continue
        manifest = grid_folder / "grid.yaml"
        finding = (read_yaml(manifest) or {}).get("finding") if manifest.is_file() else None
        for run_dir in sorted(p for p in grid_folder.iterdir() if (p / "metrics.parquet").is_file()):
            if (read_run_record(run_dir) or {}).get("status") != "done":
                continue
            metrics = pl.read_parquet(run_dir / "metrics.parquet").filter(pl.col("step").is_not_null())
            if prefixes:
                metrics = metrics.filter(
                    pl.any_horizontal(pl.col("metric").str.starts_with(p) for p in prefixes)
                )
            if metrics.height == 0:
                continue
            axes = ExperimentConfig.from_dict(read_yaml(run_dir / "config.yaml")).axes()
            axes["curriculum_boundaries"] = ",".join(f"{b:.4g}" for b in axes["curriculum_boundaries"])
            constants = {"grid": grid_folder.name, "run": run_dir.name, "finding": finding, **axes}
            frames.append(
                metrics.select("stage", "step", "metric", "value")
                .with_columns([pl.lit(v, dtype=schema[k]).alias(k) for k, v in constants.items()])
                .select(list(schema))
            )
    return pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=schema)


def latest_model(root: str | Path) -> Path | None:
    """Return the newest trained model in a runs folder's stage cache (``_stages/{rl,sft}/<key>/model``)."""
    from star_lib.experiments.runner import CACHE_DIRNAME

    candidates = [
        p.parent
        for stage in ("rl", "sft")
        for p in (Path(root) / CACHE_DIRNAME / stage).glob("*/model/config.json")
    ]
    return max(candidates, key=lambda p: p.stat().st_mtime) if candidates else None
