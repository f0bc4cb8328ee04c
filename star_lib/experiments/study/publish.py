"""Publishing the study: one summary per finished run under ``reports/tiny-study/``, optionally committed.

A run's summary (:func:`run_summary`, no weights) is written to ``<out>/<finding>/<run>.parquet``
(:func:`summary_path`) and records the run's config fingerprint, so :func:`publication_status` can tell
which runs of a study are already published (``published``) or are copies of the same config published
under another name (``shared``, :func:`shared_summary`). ``--commit`` commits exactly that one file
(:func:`commit_file`).

The published table (:func:`star_lib.experiments.results.load_study`) has one row per run with
:data:`SUMMARY_COLUMNS`, the run's axes, its held-out metrics (``eval/…`` and ``ood/…``), the stage wall
times (``cost/…``), the RL training curve (``rl_steps`` / ``rl_reward``) and the per-query outcomes of both
splits (``eval_query``, ``eval_final_pass``, …, ``ood_sum``: lists, one entry per query).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from star_lib.experiments.config import CONFIGS_DIR, ExperimentConfig
from star_lib.experiments.grids import Grid
from star_lib.experiments.runner import git_commit_of
from star_lib.experiments.study.config import StudyError
from star_lib.io import atomic_path

PROJECT_ROOT = CONFIGS_DIR.parent
"""The checkout whose commit a summary records (the code that ran)."""
PUBLISHED_DIR = Path("reports") / "tiny-study"
"""Where the published per-run summaries live (relative to the project root)."""
SUMMARY_COLUMNS: tuple[str, ...] = (
    "finding",
    "grid",
    "run",
    "arm",
    "seed",
    "commit",
    "dirty",
    "config_hash",
    "wall_s",
    "compute_s",
    "finished",
)
"""Columns every summary row has (beside the axes, the metrics and the RL curve; ``cpu`` since 6703336)."""
HELD_OUT_PREFIXES: tuple[str, ...] = ("eval/", "ood/")
"""Metrics a summary keeps: the held-out and OOD scores (``cost/…`` too, and the RL curve)."""
RL_STEP_MEANS: tuple[str, ...] = ("rl/mean/", "rl/first/")
"""The RL stage's step means a summary keeps too: exploration per step, the first steps' rollouts."""


def summary_path(out_dir: str | os.PathLike[str], grid: Grid, run: str) -> Path:
    """Return where a run's summary is published: ``<out>/<finding>/<run>.parquet``."""
    return Path(out_dir) / (grid.finding or grid.name) / f"{run}.parquet"


def run_summary(grid: Grid, config: ExperimentConfig, run_dir: Path, commit: tuple[str, bool]) -> Any:
    """Return a finished run's one-row summary (a polars frame): ids, axes, held-out metrics, costs, curve.

    The commit is the one the run's ``run.json`` recorded when it started (``commit``, the checkout now,
    only for runs older than that record).

    Beside the rates it lists the run's per-query outcomes on the held-out and OOD splits
    (:func:`star_lib.experiments.results.held_out_outcomes`: ``eval_query``, ``eval_final_pass``, …,
    ``ood_sum``), so intervals can be bootstrapped over queries as well as seeds; no trajectories.

    Raises:
        FileNotFoundError: the run has no ``metrics.parquet`` (it has not finished).

    """
    import polars as pl

    from star_lib.experiments.results import (
        AXIS_SCHEMA,
        HELD_OUT_CURVE,
        RL_CURVE,
        held_out_outcomes,
        outcome_schema,
    )
    from star_lib.experiments.runner import read_run_record

    path = run_dir / "metrics.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run {config.name} has not finished")
    metrics = pl.read_parquet(path)
    record = read_run_record(run_dir) or {}
    final = metrics.filter(pl.col("step").is_null())
    values: dict[str, float] = {}
    for stage, metric, value in final.select("stage", "metric", "value").iter_rows():
        if (metric.startswith(HELD_OUT_PREFIXES) and stage == "eval") or (
            metric.startswith(RL_STEP_MEANS) and stage == "rl"
        ):
            values[metric] = value
        elif metric == "cost/stage_wall_s":
            values[f"cost/{stage}_s"] = value
    curve = metrics.filter((pl.col("stage") == "rl") & (pl.col("metric") == RL_CURVE)).sort("step")
    held_out = _held_out_curve(metrics, HELD_OUT_CURVE)
    outcomes = held_out_outcomes(run_dir)
    # the code that ran, as run.json recorded it at the start; `commit` only for runs older than that record
    ran_at = (record["commit"], bool(record.get("dirty"))) if record.get("commit") else commit
    axes = config.axes()
    axes["curriculum_boundaries"] = ",".join(f"{b:.4g}" for b in config.curriculum_boundaries)
    row: dict[str, Any] = {
        "finding": grid.finding or grid.name,
        "grid": grid.name,
        "run": config.name,
        "arm": _arm(config.name),
        "seed": config.seed,
        "commit": ran_at[0],
        "dirty": ran_at[1],
        "config_hash": config.fingerprint(),
        "wall_s": float(record.get("wall_s") or 0.0),
        "compute_s": float(sum(s.get("wall_s", 0.0) for s in record.get("stages") or [])),
        "finished": float(record.get("finished") or time.time()),
        "cpu": str((record.get("machine") or {}).get("cpu", "")),
        **{k: axes[k] for k in AXIS_SCHEMA},
        "config": json.dumps(config.to_dict(), sort_keys=True),
        "rl_steps": [int(s) for s in curve["step"].to_list()],
        "rl_reward": [float(v) for v in curve["value"].to_list()],
        **held_out,
        **values,
        **outcomes,
    }
    schema = {
        **{k: AXIS_SCHEMA[k] for k in AXIS_SCHEMA},
        "rl_steps": pl.List(pl.Int64),
        "rl_reward": pl.List(pl.Float64),
        **{k: pl.List(pl.Int64 if k == "heldout_steps" else pl.Float64) for k in held_out},
        **outcome_schema(outcomes),
    }
    return pl.DataFrame([row], schema_overrides=schema)


def _held_out_curve(metrics: Any, names: Sequence[str]) -> dict[str, list[Any]]:
    """Return the RL stage's held-out scores per evaluated step (``heldout_steps``, ``heldout_final_pass`` …).

    Empty when the run's RL did not evaluate its held-out tasks during training (``rl.eval_data``).
    """
    import polars as pl

    rows = metrics.filter(
        (pl.col("stage") == "rl") & pl.col("step").is_not_null() & pl.col("metric").is_in(list(names))
    )
    if not rows.height:
        return {}
    wide = rows.pivot(on="metric", index="step", values="value", aggregate_function="last").sort("step")
    curve: dict[str, list[Any]] = {"heldout_steps": [int(s) for s in wide["step"]]}
    for name in names:
        if name in wide.columns:
            curve["heldout_" + name.removeprefix("eval/")] = [float(v) for v in wide[name]]
    return curve


def _arm(run: str) -> str:
    return run.split("__")[1] if run.count("__") >= 2 else run


def published_hash(path: Path) -> str | None:
    """Return the ``config_hash`` of a published summary (None when there is none or it cannot be read)."""
    import polars as pl

    try:
        return pl.read_parquet(path, columns=["config_hash"])["config_hash"][0]
    except (OSError, pl.exceptions.PolarsError, IndexError):
        return None


def write_summary(frame: Any, path: Path) -> Path:
    """Write a run summary atomically."""
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp)
    return path


def published_runs(out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Map each config fingerprint published under ``out_dir`` to a summary of it (the first by path)."""
    found: dict[str, Path] = {}
    for path in sorted(Path(out_dir).glob("*/*.parquet")):
        fingerprint = published_hash(path)
        if fingerprint is not None:
            found.setdefault(fingerprint, path)
    return found


def publication_status(grids: Sequence[Grid], out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Map each run :func:`.run.run_study` will not run to ``published`` (its summary is out) or ``shared``.

    ``shared``: another run of the same config is published (the study publishes a copy of it).
    """
    published = published_runs(out_dir)
    status = {}
    for grid in grids:
        for config in grid.runs:
            fingerprint = config.fingerprint()
            if published_hash(summary_path(out_dir, grid, config.name)) == fingerprint:
                status[config.name] = "published"
            elif fingerprint in published:
                status[config.name] = "shared"
    return status


def shared_summary(grid: Grid, config: ExperimentConfig, twin: Path) -> Any:
    """Return ``config``'s summary as a copy of ``twin``, the published summary of the same config.

    Every stage of the two runs has the same content, so every metric, per-query outcome and the RL curve
    are the twin's; only the names change (``finding``, ``grid``, ``run``, ``arm``), ``wall_s`` is 0 (the
    run added no compute, as with a full cache hit) and ``same_as`` names the published run it copies.
    """
    import polars as pl

    frame = pl.read_parquet(twin)
    if frame["config_hash"][0] != config.fingerprint():
        raise StudyError(f"{twin} is not a summary of {config.name}'s config")
    names = {
        "finding": grid.finding or grid.name,
        "grid": grid.name,
        "run": config.name,
        "arm": _arm(config.name),
        "same_as": frame["same_as"][0] if "same_as" in frame.columns else frame["run"][0],
    }
    return frame.with_columns(
        *(pl.lit(v, dtype=pl.String).alias(k) for k, v in names.items()),
        pl.lit(0.0).alias("wall_s"),
        pl.lit(time.time()).alias("finished"),
    )


def publish_run(
    grid: Grid, config: ExperimentConfig, run_dir: Path, out_dir: Any, commit: bool
) -> tuple[Path, bool]:
    """Write a finished run's summary unless the same config's is published; commit it when asked."""
    path = summary_path(out_dir, grid, config.name)
    if published_hash(path) != config.fingerprint():
        write_summary(run_summary(grid, config, run_dir, git_commit_of(PROJECT_ROOT)), path)
    if not commit:
        return path, False
    return path, commit_file(path, commit_message(grid, config))


def commit_message(grid: Grid, config: ExperimentConfig) -> str:
    """Return the git commit message of a run's published summary."""
    return f"tiny study: {config.name} ({grid.finding or grid.name} grid), held-out and OOD summary"


def git_root(folder: str | os.PathLike[str]) -> Path:
    """Return the top of the git work tree holding ``folder`` (or its nearest existing parent).

    Raises:
        StudyError: it is not inside a git repository.

    """
    here = Path(folder).resolve()
    while not here.exists():
        here = here.parent
    top = subprocess.run(
        ["git", "-C", str(here), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if top.returncode != 0:
        raise StudyError(f"--commit: {folder} is not inside a git repository")
    return Path(top.stdout.strip())


def check_committable(out_dir: str | os.PathLike[str]) -> None:
    """Refuse ``--commit`` into a folder git would not track: outside a repository, or ignored.

    Raises:
        StudyError: naming the folder and what to change.

    """
    root = git_root(out_dir)
    probe = Path(out_dir).resolve() / "finding" / "run.parquet"  # a summary's path (need not exist)
    ignored = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "-q", "--no-index", "--", str(probe)], capture_output=True
    )
    if ignored.returncode == 0:
        raise StudyError(
            f"--commit: git ignores {out_dir} (a .gitignore rule matches its summaries); publish into a "
            "tracked folder (--out) or add a '!' rule for it to .gitignore"
        )


def commit_file(path: Path, message: str, attempts: int = 5) -> bool:
    """``git commit`` exactly ``path`` (other staged or changed files stay as they are); False if unchanged.

    Raises:
        StudyError: ``path`` is not inside a git repository, or git refuses the commit (its message).

    """
    root = str(git_root(path.parent))
    rel = os.path.relpath(path.resolve(), Path(root).resolve())
    for attempt in range(attempts):
        add = subprocess.run(["git", "-C", root, "add", "--", rel], capture_output=True, text=True)
        if add.returncode == 0:
            changed = subprocess.run(["git", "-C", root, "diff", "--cached", "--quiet", "--", rel])
            if changed.returncode == 0:
                return False
            done = subprocess.run(
                ["git", "-C", root, "commit", "-q", "-m", message, "--only", "--", rel],
                capture_output=True,
                text=True,
            )
            if done.returncode == 0:
                return True
            error = (done.stderr or done.stdout).strip()
        else:
            error = add.stderr.strip()
        if "index.lock" not in error or attempt == attempts - 1:
            raise StudyError(
                f"--commit: git refused to commit {rel}: {error.splitlines()[-1] if error else '?'}"
            )
        time.sleep(2.0)
    return False
