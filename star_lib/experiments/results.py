"""The results store: every run under a folder as one tidy polars table, beside the paper's figures.

:func:`load_results` reads ``runs/<grid>/<run>/`` folders into one row per run × metric, with the config axes
as columns, ``source = "ours"`` and the run's status. Runs that are unfinished or failed contribute no
metric rows; they are listed in :attr:`Results.problems` (and their partial files are never read half-written:
every file is written atomically). :func:`paper_reference` gives the paper's reference figures
(``../shared/spec/TRAVELPLANNER.md`` §9) as the same table with ``source = "paper"``.

Metric names: ``eval/<rate>`` (``final_pass``, ``cs_micro``, ``cs_macro``, ``hard_micro``, ``hard_macro``,
``delivery``; fractions in [0, 1]), ``qa/<dataset>/<em|f1|cover_em>``, ``cost/gpu_hours``, ``cost/wall_s``,
plus whatever else stages log (``train/…``, ``reward/…``).
"""

from __future__ import annotations

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

_P = "paper"
_REFERENCE: list[dict[str, Any]] = [
    # finding, model, reward, algorithm, rl_data_size, difficulty, failure, metric, value(%), relation, note
    {"finding": "reward", "model": "qwen2.5-7b", "reward": "sum", "metric": "eval/final_pass", "value": 62.8},
    {
        "finding": "reward",
        "model": "qwen2.5-1.5b",
        "reward": "curriculum",
        "metric": "eval/final_pass",
        "value": 34.9,
    },
    {
        "finding": "reward",
        "model": "qwen2.5-1.5b",
        "reward": "sum",
        "metric": "eval/final_pass",
        "value": 33.1,
    },
    {
        "finding": "baseline",
        "model": "qwen2.5-1.5b",
        "stage": "sft",
        "metric": "eval/final_pass",
        "value": 6.9,
        "note": "SFT only (no RL)",
    },
    {
        "finding": "baseline",
        "run": "Kimi-K2.5",
        "metric": "eval/final_pass",
        "value": 15.0,
        "relation": "<",
        "note": "Kimi-K2.5 (frontier model, prompted)",
    },
    {"finding": "data", "rl_data_size": 100, "metric": "eval/final_pass", "value": 37.5},
    {"finding": "data", "rl_data_size": 1000, "metric": "eval/final_pass", "value": 49.9},
    {"finding": "data", "rl_data_size": 1000, "metric": "qa/average/em", "value": 35.0, "note": "avg OOD"},
    {"finding": "data", "rl_data_size": 2000, "metric": "eval/final_pass", "value": 50.8},
    {"finding": "data", "rl_data_size": 2000, "metric": "qa/average/em", "value": 32.2, "note": "avg OOD"},
    {"finding": "difficulty", "difficulty": "easy", "metric": "eval/cs_macro", "value": 79.7},
    {"finding": "difficulty", "difficulty": "4:3:3", "metric": "eval/final_pass", "value": 49.9},
    {
        "finding": "difficulty",
        "difficulty": "hard",
        "metric": "eval/final_pass",
        "value": None,
        "note": "hard-only training collapses",
    },
    {
        "finding": "algorithm",
        "model": "qwen2.5-1.5b",
        "algorithm": "arpo",
        "metric": "eval/final_pass",
        "value": 37.5,
    },
    {
        "finding": "algorithm",
        "model": "qwen2.5-1.5b",
        "algorithm": "dapo",
        "metric": "eval/final_pass",
        "value": 36.9,
    },
    {
        "finding": "algorithm",
        "model": "qwen2.5-1.5b",
        "algorithm": "grpo",
        "metric": "eval/final_pass",
        "value": 30.1,
    },
    {
        "finding": "algorithm",
        "model": "qwen2.5-7b",
        "algorithm": "grpo",
        "metric": "eval/final_pass",
        "value": 62.8,
    },
    {
        "finding": "algorithm",
        "model": "qwen2.5-7b",
        "algorithm": "dapo",
        "metric": "eval/final_pass",
        "value": 58.4,
    },
    {
        "finding": "algorithm",
        "model": "qwen2.5-7b",
        "algorithm": "arpo",
        "metric": "eval/final_pass",
        "value": 58.3,
    },
    {
        "finding": "algorithm",
        "model": "qwen2.5-1.5b",
        "algorithm": "grpo",
        "metric": "cost/gpu_hours",
        "value": 164.0,
        "unit": "h",
    },
    {
        "finding": "algorithm",
        "model": "qwen2.5-7b",
        "algorithm": "arpo",
        "metric": "cost/gpu_hours",
        "value": 547.0,
        "unit": "h",
    },
    {"finding": "ood", "model": "qwen2.5-3b", "reward": "curriculum", "metric": "qa/nq/em", "value": 41.0},
    {"finding": "ood", "run": "Search-R1", "metric": "qa/nq/em", "value": 34.1, "note": "Search-R1 baseline"},
    {
        "finding": "ood",
        "model": "qwen2.5-7b",
        "reward": "curriculum",
        "metric": "qa/hotpotqa/em",
        "value": 48.4,
    },
    {
        "finding": "ood",
        "run": "Search-R1",
        "metric": "qa/hotpotqa/em",
        "value": 37.0,
        "note": "Search-R1 baseline",
    },
    {
        "finding": "ood",
        "model": "qwen2.5-7b",
        "reward": "macro",
        "metric": "qa/2wikimultihopqa/em",
        "value": 38.3,
    },
    {
        "finding": "ood",
        "run": "Search-R1",
        "metric": "qa/2wikimultihopqa/em",
        "value": 41.4,
        "note": "Search-R1 baseline",
    },
    {"finding": "ood", "model": "qwen2.5-7b", "reward": "macro", "metric": "qa/bamboogle/em", "value": 52.8},
    {
        "finding": "ood",
        "run": "Search-R1",
        "metric": "qa/bamboogle/em",
        "value": 36.8,
        "note": "Search-R1 baseline",
    },
    {
        "finding": "noise",
        "model": "qwen2.5-3b",
        "tool_failure_rate": 0.05,
        "metric": "eval/final_pass",
        "value": None,
        "note": "stable for tool failure rate <= 5 %",
    },
    {
        "finding": "noise",
        "model": "qwen2.5-3b",
        "tool_failure_rate": 0.10,
        "metric": "eval/final_pass",
        "value": None,
        "note": "clear drop at 10 %",
    },
]
"""Spec §9, one entry per reported number (percentages; GPU-hours in hours). Unstated axes stay null."""


def paper_reference() -> pl.DataFrame:
    """Return the paper's reference figures (spec §9) as the results table with ``source = "paper"``.

    Rates are fractions like ours (62.8 % → 0.628); qualitative statements have a null value and a note.
    OOD "accuracy" is recorded as exact match (``qa/<set>/em``), the Search-R1 protocol's metric.
    """
    rows = []
    for entry in _REFERENCE:
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
            source=_P,
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
    (``rl_steps``, ``rl_reward``). Runs missing a metric another run has get null there.

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
