"""The results store: every run under a folder as one tidy polars table, beside the paper's figures.

:func:`load_results` reads ``runs/<grid>/<run>/`` folders into one row per run × metric, with the config axes
as columns, ``source = "ours"`` and the run's status. Runs that are unfinished or failed contribute no
metric rows; they are listed in :attr:`Results.problems` (and their partial files are never read half-written:
every file is written atomically). :func:`paper_reference` gives the paper's reference figures
(``../shared/spec/TRAVELPLANNER.md`` §9, kept in ``paper_reference.yaml`` beside this module) as the same
table with ``source = "paper"``.

Metric names: ``eval/<rate>`` (``final_pass``, ``cs_micro``, ``cs_macro``, ``hard_micro``, ``hard_macro``,
``delivery``; fractions in [0, 1]), ``qa/<dataset>/<em|f1|cover_em>``, ``cost/gpu_hours``, ``cost/wall_s``,
plus whatever else stages log (``train/…``, ``reward/…``).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from star_lib.experiments.config import ConfigError, ExperimentConfig
from star_lib.experiments.runner import read_run_record
from star_lib.io import read_yaml

AXIS_SCHEMA: dict[str, Any] = {
    "model": pl.String,
    "reward": pl.String,
    "curriculum_boundaries": pl.String,
    "algorithm": pl.String,
    "rl_data_size": pl.Int64,
    "difficulty": pl.String,
    "tool_failure_rate": pl.Float64,
    "tool_latency_ms": pl.Float64,
    "tool_corruption_rate": pl.Float64,
    "seed": pl.Int64,
    "protocol": pl.String,
}
"""Axis columns of the results table."""
SCHEMA: dict[str, Any] = {
    "source": pl.String,
    "grid": pl.String,
    "run": pl.String,
    "finding": pl.String,
    "status": pl.String,
    **AXIS_SCHEMA,
    "stage": pl.String,
    "metric": pl.String,
    "value": pl.Float64,
    "relation": pl.String,
    "note": pl.String,
}
"""Columns of the tidy table (``relation`` is ``=`` for measured values, ``<`` for an upper bound)."""
CURVE_SCHEMA: dict[str, Any] = {
    "grid": pl.String,
    "run": pl.String,
    "finding": pl.String,
    **AXIS_SCHEMA,
    "stage": pl.String,
    "step": pl.Int64,
    "metric": pl.String,
    "value": pl.Float64,
}
"""Columns of the per-step training curves (one row per run × stage × step × metric)."""
RL_CURVE = "train/reward"
"""The RL stage's per-step metric a published summary keeps as its training curve (``rl_steps``,
``rl_reward``): the mean reward of each step's rollouts."""
HELD_OUT_CURVE: tuple[str, ...] = ("eval/final_pass", "eval/cs_micro", "eval/parseable_plans")
"""The RL stage's held-out metrics (``rl.eval_data: held-out``) a published summary keeps per evaluated step
(``heldout_steps`` and one list per metric, ``heldout_final_pass`` …): the pilot's learning curve."""


@dataclass
class Results:
    """The tidy table plus the runs that contributed nothing (and why)."""

    frame: pl.DataFrame
    """One row per run × final metric (see :data:`SCHEMA`)."""
    problems: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(
            schema={"grid": pl.String, "run": pl.String, "status": pl.String, "error": pl.String}
        )
    )
    """Runs that are pending, running, failed, or whose files could not be read."""

    @property
    def runs(self) -> int:
        """Number of runs with metrics."""
        return self.frame.select(pl.struct("grid", "run").n_unique()).item() if self.frame.height else 0

    def wide(self, metrics: list[str] | None = None) -> pl.DataFrame:
        """One row per run, one column per metric (handy for notebooks)."""
        frame = self.frame if metrics is None else self.frame.filter(pl.col("metric").is_in(metrics))
        index = ["source", "grid", "run", *AXIS_SCHEMA]
        return frame.pivot(on="metric", index=index, values="value", aggregate_function="first")


def _axis_values(config: ExperimentConfig) -> dict[str, Any]:
    values = config.axes()
    values["curriculum_boundaries"] = ",".join(f"{b:.4g}" for b in config.curriculum_boundaries)
    return values


def _grid_finding(grid_folder: Path) -> str | None:
    manifest = grid_folder / "grid.yaml"
    if manifest.is_file():
        try:
            return (read_yaml(manifest) or {}).get("finding")
        except ValueError:
            return None
    return None


def _run_rows(
    run_dir: Path, grid: str, finding: str | None
) -> tuple[pl.DataFrame | None, dict[str, Any] | None]:
    """Metric rows of one finished run, or a problem row."""
    record = read_run_record(run_dir) or {}
    status = record.get("status", "pending")
    problem = {"grid": grid, "run": run_dir.name, "status": status, "error": record.get("error")}
    if status != "done":
        return None, problem
    try:
        config = ExperimentConfig.from_dict(read_yaml(run_dir / "config.yaml"))
        metrics = pl.read_parquet(run_dir / "metrics.parquet")
    except (OSError, ValueError, ConfigError, pl.exceptions.PolarsError) as exc:
        return None, {**problem, "status": "unreadable", "error": f"{type(exc).__name__}: {exc}"}
    final = metrics.filter(pl.col("step").is_null()) if "step" in metrics.columns else metrics
    constants = {
        "source": "ours",
        "grid": grid,
        "run": run_dir.name,
        "finding": finding,
        "status": status,
        **_axis_values(config),
        "relation": "=",
        "note": None,
    }
    frame = final.select("stage", "metric", "value").with_columns(
        [pl.lit(v, dtype=SCHEMA[k]).alias(k) for k, v in constants.items()]
    )
    return frame.select(list(SCHEMA)), None


def load_results(root: str | os.PathLike[str] = "runs", grids: list[str] | None = None) -> Results:
    """Load every run under ``root`` (``root/<grid>/<run>/``), or under one grid folder.

    Args:
        root: The runs folder, or a single grid folder (one holding ``grid.yaml``).
        grids: Only these grid names.

    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no runs folder {root}")
    grid_folders = (
        [root]
        if (root / "grid.yaml").is_file()
        else sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    )
    frames: list[pl.DataFrame] = []
    problems: list[dict[str, Any]] = []
    for grid_folder in grid_folders:
        if grids is not None and grid_folder.name not in grids:
            continue
        finding = _grid_finding(grid_folder)
        for run_dir in sorted(
            p for p in grid_folder.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))
        ):
            if not (run_dir / "config.yaml").is_file():
                continue
            frame, problem = _run_rows(run_dir, grid_folder.name, finding)
            if frame is not None:
                frames.append(frame)
            if problem is not None:
                problems.append(problem)
    frame = pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=SCHEMA)
    problem_frame = pl.DataFrame(
        problems, schema={"grid": pl.String, "run": pl.String, "status": pl.String, "error": pl.String}
    )
    return Results(frame, problem_frame)


# ───────────────────────────── the paper's figures (spec §9) ─────────────────────────────

PAPER_REFERENCE = Path(__file__).with_name("paper_reference.yaml")
"""The paper's reference numbers (spec §9), one entry per number with where the paper reports it (``cited``);
shipped with the package."""


@functools.cache
def _reference_entries() -> tuple[dict[str, Any], ...]:
    """Return the entries of :data:`PAPER_REFERENCE` (read once)."""
    return tuple(read_yaml(PAPER_REFERENCE))


SPLITS: dict[str, str] = {
    "eval": "the synthetic held-out tasks",
    "ood": "the synthetic OOD tasks",
    "validation": "the official validation set (180 queries)",
    "test": "the official test set (1,000 queries)",
}
"""What each metric prefix is measured on: ``eval/…`` and ``ood/…`` on the synth stage's tasks,
``validation/…`` and ``test/…`` on the official splits a paper run also scores (``eval.splits``)."""
PAPER_SPLIT = "the official TravelPlanner test set (1,000 queries), scored by the official evaluator"
"""What the paper's numbers (:func:`paper_reference`) are measured on (spec §9)."""


def split_of(metric: str) -> str:
    """Say what ``metric`` is measured on (:data:`SPLITS`), from its prefix."""
    return SPLITS.get(metric.split("/", 1)[0], "the runs themselves")


def paper_reference() -> pl.DataFrame:
    """Return the paper's reference figures (spec §9) as the results table with ``source = "paper"``.

    Rates are fractions like ours (62.8 % → 0.628); qualitative statements have a null value and a note.
    OOD "accuracy" is recorded as exact match (``qa/<set>/em``), the Search-R1 protocol's metric. The final
    pass rates are on :data:`PAPER_SPLIT`; ours of the same name (``eval/…``) on :func:`split_of` theirs.
    """
    rows = []
    for entry in _reference_entries():
        value = entry.get("value")
        if value is not None and entry.get("unit") != "h":
            value = value / 100.0
        row = {key: None for key in SCHEMA}
        row.update({k: v for k, v in entry.items() if k in SCHEMA})
        run = (
            entry.get("run")
            or "-".join(
                str(entry[k])
                for k in ("model", "reward", "algorithm", "rl_data_size", "difficulty", "tool_failure_rate")
                if entry.get(k) is not None
            )
            or entry["finding"]
        )
        row.update(
            source="paper",
            grid=f"paper-{entry['finding']}",
            run=run,
            status="done",
            value=value,
            relation=entry.get("relation", "="),
            stage=entry.get("stage", "eval" if entry["metric"].startswith("eval/") else None),
        )
        rows.append(row)
    return pl.DataFrame(rows, schema=SCHEMA)


def with_reference(results: Results) -> pl.DataFrame:
    """Our rows and the paper's in one table (``source`` tells them apart)."""
    return pl.concat([results.frame, paper_reference()], how="vertical")


# ───────────────────────────── the published tiny study ─────────────────────────────

STUDY_RESULTS = Path(__file__).resolve().parents[2] / "reports" / "tiny-study"
"""The published tiny study: one summary parquet per run (``star study --scale tiny`` writes them)."""


def load_study(
    folder: str | os.PathLike[str] = STUDY_RESULTS, findings: list[str] | None = None
) -> pl.DataFrame:
    """Load the published per-run summaries (``<folder>/<finding>/<grid>__<arm>__s<seed>.parquet``).

    One row per run: ``finding``, ``grid``, ``run``, ``arm``, ``seed``, ``commit``, ``dirty``,
    ``config_hash``, ``wall_s``, ``compute_s``, ``finished``, the axes, the held-out metrics (``eval/…``,
    ``ood/…``), the stage times (``cost/<stage>_s``), the run's ``config`` (JSON) and its RL curve
    (``rl_steps``, ``rl_reward``), and the per-query outcomes of the held-out and OOD splits
    (:func:`held_out_outcomes`: list columns ``eval_query``, ``eval_final_pass``, …; absent from summaries
    published before they existed). Runs missing a metric another run has get null there.

    Args:
        folder: The published study (default ``reports/tiny-study`` of this checkout).
        findings: Only these findings' sub-folders.

    Raises:
        FileNotFoundError: ``folder`` does not exist.
        ValueError: a summary that cannot be read, naming the file.

    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"no published study at {root} (star study --scale tiny writes it)")
    frames = []
    for path in sorted(root.glob("*/*.parquet")):
        if findings is not None and path.parent.name not in findings:
            continue
        try:
            frames.append(pl.read_parquet(path))
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise ValueError(f"{path}: not a readable run summary ({type(exc).__name__}: {exc})") from None
    if not frames:
        return pl.DataFrame(
            schema={"finding": pl.String, "grid": pl.String, "run": pl.String, "seed": pl.Int64}
        )
    return pl.concat(frames, how="diagonal_relaxed").sort("finding", "run")


OUTCOME_COLUMNS: dict[str, str] = {
    "final_pass": "final_pass",
    "cs_macro": "commonsense_pass",
    "hard_macro": "hard_pass",
    "cs_micro": "cs_micro",
    "sum": "sum",
}
"""Per-query outcomes a run summary lists per split (``<split>_<name>``) and the episode column each comes
from; a plan that was not delivered scores 0 on all of them but SUM, as in
:func:`star_lib.travel.metrics.compute_metrics`, so a list's mean is the split's rate."""
OUTCOME_SPLITS: dict[str, str] = {"eval": "eval.parquet", "ood": "ood.parquet"}
"""The held-out splits whose per-query outcomes a summary lists, and the eval stage's episode file of each."""


def held_out_outcomes(run_dir: str | os.PathLike[str]) -> dict[str, list[Any]]:
    """Return a finished run's per-query outcomes on the held-out (``eval``) and OOD (``ood``) splits.

    Reads the eval stage's episodes of the run's result model (``eval.parquet`` of the run, else of its
    cached eval stage; ``ood.parquet`` of that stage) and lists, one entry per query in the split's order
    (``query_index``): ``<split>_query`` (the query id ``idx``, or its position when ids are missing),
    ``<split>_final_pass``, ``<split>_cs_macro``, ``<split>_hard_macro`` (0/1), ``<split>_cs_micro`` and
    ``<split>_sum`` (floats; see :data:`OUTCOME_COLUMNS`). A split without an episode table is left out; a
    run without either gives ``{}``.
    """
    run = Path(run_dir)
    stage = eval_stage_folder(run)
    out: dict[str, list[Any]] = {}
    for split, filename in OUTCOME_SPLITS.items():
        candidates = ([run / filename] if split == "eval" else []) + ([stage / filename] if stage else [])
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            continue
        try:
            frame = pl.read_parquet(path)
        except (OSError, pl.exceptions.PolarsError):
            continue
        out.update(_outcome_lists(frame, split))
    return out


def _outcome_lists(frame: pl.DataFrame, split: str) -> dict[str, list[Any]]:
    """Return the per-query outcome lists of one episode table (sorted by ``query_index``)."""
    if "query_index" not in frame.columns or "final_pass" not in frame.columns:
        return {}
    frame = frame.sort("query_index")
    delivered = frame["delivered"].fill_null(False) if "delivered" in frame.columns else None
    ids = frame["idx"] if "idx" in frame.columns and frame["idx"].null_count() == 0 else frame["query_index"]
    out: dict[str, list[Any]] = {f"{split}_query": [int(v) for v in ids.to_list()]}
    for name, column in OUTCOME_COLUMNS.items():
        if column not in frame.columns:
            continue
        values = frame[column].cast(pl.Float64).fill_null(0.0)
        if name != "sum" and delivered is not None:
            values = values * delivered.cast(pl.Float64)
        if name in ("final_pass", "cs_macro", "hard_macro"):
            out[f"{split}_{name}"] = [int(v) for v in values.to_list()]
        else:
            out[f"{split}_{name}"] = [float(v) for v in values.to_list()]
    return out


def outcome_schema(outcomes: dict[str, list[Any]]) -> dict[str, Any]:
    """Return the polars list types of :func:`held_out_outcomes`' columns (ids and 0/1 as ints)."""
    floats = ("_cs_micro", "_sum")
    return {k: pl.List(pl.Float64 if k.endswith(floats) else pl.Int64) for k in outcomes}


def eval_stage_folder(run: Path) -> Path | None:
    """Return the cached output folder of a run's eval stage (it holds ``eval_models.parquet``).

    The stage cache is the one ``run.json`` names (``star run --cache``), else the runs folder's default.
    """
    from star_lib.experiments.runner import default_cache

    record = read_run_record(run) or {}
    key = next((s.get("key") for s in record.get("stages", []) if s.get("stage") == "eval"), None)
    if not key:
        return None
    cache = Path(record["cache"]) if record.get("cache") else default_cache(run)
    folder = cache / "eval" / key
    return folder if folder.is_dir() else None
