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
    stage = _eval_stage_folder(run)
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


# ───────────────────────────── real TravelPlanner queries (issue 14) ─────────────────────────────

REAL_RUN = "real-tiny"
"""The config whose runs notebook 08 reads (``configs/real-tiny.yaml``)."""
REAL_DATA = Path("..") / "shared" / "data" / "travelplanner"
"""The real data beside the project (relative to the project root): ``train.jsonl`` and ``database/``."""
PAPER_POINTS: tuple[tuple[str, str], ...] = (
    ("qwen2.5-7b", "sum"),
    ("qwen2.5-1.5b", "curriculum"),
    ("qwen2.5-1.5b", "sum"),
)
"""The paper's RL results (model, reward) shown beside ours; the SFT-only and prompted baselines are added."""


REAL_PUBLISHED = Path(__file__).resolve().parents[2] / "reports" / "real-tiny"
"""The published ``real-tiny`` run (``star run configs/real-tiny.yaml --publish reports/real-tiny``):
notebook 08 shows it when the results folder holds no run of its own."""
PUBLISHED_FILES: tuple[str, ...] = ("run.json", "config.yaml", "metrics.parquet", "eval.parquet")
"""The files of a run folder :func:`publish_run` copies as they are (no weights, no checkpoints)."""


def publish_run(run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Copy a finished run's held-out results (no weights) to ``<out_dir>/<grid>/<run>/``; return that folder.

    Besides the run's record, config, metrics and result-model episodes (:data:`PUBLISHED_FILES`) it writes
    the eval stage's table of every evaluated model (``eval_models.parquet``, read from the stage cache) and
    the evaluation episodes' transcripts (``rollouts.parquet``, stage ``eval`` only), so
    :func:`find_real_run` and :func:`real_run_episodes` read the published folder like the run itself.

    Raises:
        FileNotFoundError: The run has not finished (no ``metrics.parquet`` or its status is not done).

    """
    import shutil

    from star_lib.io import write_parquet_atomic

    run = Path(run_dir)
    if (read_run_record(run) or {}).get("status") != "done" or not (run / "metrics.parquet").is_file():
        raise FileNotFoundError(f"{run} is not a finished run (star status shows where it stands)")
    out = Path(out_dir) / run.parent.name / run.name
    out.mkdir(parents=True, exist_ok=True)
    for name in PUBLISHED_FILES:
        if (run / name).is_file():
            shutil.copyfile(run / name, out / name)
    stage = _eval_stage_folder(run)
    if stage is not None and (stage / "eval_models.parquet").is_file():
        shutil.copyfile(stage / "eval_models.parquet", out / "eval_models.parquet")
    if (run / "rollouts.parquet").is_file():
        rollouts = pl.read_parquet(run / "rollouts.parquet")
        if "stage" in rollouts.columns:
            rollouts = rollouts.filter(pl.col("stage") == "eval")
        write_parquet_atomic(out / "rollouts.parquet", rollouts)
    return out


def find_real_run(root: str | os.PathLike[str] = "runs", name: str = REAL_RUN) -> Path | None:
    """Return the newest finished run of the ``real-tiny`` config under a runs folder (None: there is none).

    ``star run configs/real-tiny.yaml`` files it as ``<root>/adhoc/real-tiny``, ``star pipeline --config
    real-tiny`` as ``<root>/learning-signal/real-tiny__s<seed>``; a ``--quick`` run (``real-tiny-quick``)
    counts only when no full run is finished.
    """
    folder = Path(root)
    if not folder.is_dir():
        return None
    done = []
    for record in folder.glob(f"*/{name}*/run.json"):
        run = record.parent
        stem = run.name.split("__")[0]
        if stem not in (name, f"{name}-quick") or not (run / "metrics.parquet").is_file():
            continue
        if (read_run_record(run) or {}).get("status") == "done":
            done.append((stem == name, record.stat().st_mtime, run))
    return max(done)[2] if done else None


def real_run_episodes(run_dir: str | os.PathLike[str]) -> pl.DataFrame:
    """Return a finished run's evaluation episodes, one row per model × held-out query (``model`` column).

    Raises:
        FileNotFoundError: The run has no evaluation table.

    """
    run = Path(run_dir)
    stage = _eval_stage_folder(run)
    published = run / "eval_models.parquet"  # a published run (publish_run) carries it in the run folder
    for path in (stage / "eval_models.parquet" if stage else None, published, run / "eval.parquet"):
        if path is not None and path.is_file():
            frame = pl.read_parquet(path)
            return frame if "model" in frame.columns else frame.with_columns(pl.lit("rl").alias("model"))
    raise FileNotFoundError(f"{run} has no eval.parquet: its eval stage has not finished (star status)")


def _eval_stage_folder(run: Path) -> Path | None:
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


def expert_real_episodes(
    queries: str | os.PathLike[str],
    database: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    protocol: str = "compact",
    max_turns: int = 16,
) -> pl.DataFrame:
    """Run the programmatic expert on real queries through the eval stage (strict and official verdicts).

    The expert acts out each query's gold plan (``annotated_plan``) with the tools on the real tables: the
    reference profile a trained model is compared with (a few seconds for the 45 train queries).

    Args:
        queries: The official train split (JSONL with ``annotated_plan``).
        database: The real database folder.
        out_dir: Where the eval stage writes its files (``rollouts.parquet`` holds the transcripts).
        protocol: The episode protocol of the trained model.
        max_turns: The turn limit.

    Returns:
        The episode table with ``model = "expert"``.

    """
    from star_lib.experiments.pipeline import EvalStageConfig, run_eval, with_annotated_plans
    from star_lib.io import read_queries, write_jsonl_atomic

    source, out = Path(queries), Path(out_dir)
    held_out = with_annotated_plans(source, list(read_queries(source)))
    data = write_jsonl_atomic(out / "queries.jsonl", [q.to_dict() for q in held_out])
    cfg = EvalStageConfig(
        protocol=protocol, also_modes=("official",), chunk_size=50, options={"max_turns": max_turns}
    )
    run_eval(cfg, {"world": Path(database), "data": data}, out)
    return pl.read_parquet(out / "eval.parquet").with_columns(pl.lit("expert").alias("model"))


def real_query_table(episodes: pl.DataFrame, mode: str | None = None) -> pl.DataFrame:
    """Return the held-out rates per model: overall, per level and per trip length, in one table.

    Rows are ``group`` = ``all`` | ``easy`` | ``medium`` | ``hard`` | ``3 days`` | ``5 days`` | ``7 days`` per
    model, columns ``n``, :data:`star_lib.travel.metrics.RATE_KEYS`; ``mode`` as in
    :func:`star_lib.travel.metrics.episode_breakdown` (``official`` reads the ``official/…`` verdicts).
    """
    from star_lib.travel.metrics import RATE_KEYS, episode_breakdown

    order = {"easy": 1, "medium": 2, "hard": 3}
    parts = [
        episode_breakdown(episodes, by=None, mode=mode).with_columns(
            pl.lit("all").alias("group"), pl.lit(0).alias("_o")
        )
    ]
    level = episode_breakdown(episodes, by="level", mode=mode)
    parts.append(
        level.with_columns(
            pl.col("level").alias("group"), pl.col("level").replace_strict(order, default=9).alias("_o")
        ).drop("level")
    )
    days = episode_breakdown(episodes, by="days", mode=mode)
    parts.append(
        days.with_columns(
            (pl.col("days").cast(pl.String) + " days").alias("group"), (pl.col("days") + 1).alias("_o")
        ).drop("days")
    )
    columns = ["model", "group", "n", *RATE_KEYS]
    frame = pl.concat([p.select(*columns, "_o") for p in parts], how="vertical_relaxed")
    return frame.sort("model", "_o").select(columns)


def paper_final_pass() -> pl.DataFrame:
    """Return the paper's final pass rates on the TravelPlanner test set (spec §9) as ``label``, ``value``."""
    reference = paper_reference().filter(pl.col("metric") == "eval/final_pass")
    rows = []
    for model, reward in PAPER_POINTS:
        hit = reference.filter(
            (pl.col("model") == model) & (pl.col("reward") == reward) & (pl.col("finding") == "reward")
        )
        if hit.height:
            rows.append({"label": f"{model} RL ({reward})", "value": hit["value"][0], "relation": "="})
    for row in reference.filter(pl.col("finding") == "baseline").iter_rows(named=True):
        label = f"{row['model']} SFT only" if row["model"] else str(row["run"])
        rows.append({"label": label, "value": row["value"], "relation": row["relation"]})
    return pl.DataFrame(rows, schema={"label": pl.String, "value": pl.Float64, "relation": pl.String})


def real_data_paths(
    run_dir: str | os.PathLike[str] | None, root: str | os.PathLike[str]
) -> tuple[Path, Path]:
    """Return the held-out query file and the database a real-queries run used (its ``config.yaml``).

    Without a run (or when its config names neither), the real data beside the project: :data:`REAL_DATA`
    ``/train.jsonl`` and ``/database``. Relative paths resolve against ``root`` (the project root, where
    ``star run`` reads them from).
    """
    queries, database = REAL_DATA / "train.jsonl", REAL_DATA / "database"
    config = Path(run_dir) / "config.yaml" if run_dir else None
    if config is not None and config.is_file():
        data = read_yaml(config) or {}
        queries = Path((data.get("synth") or {}).get("test_queries") or queries)
        database = Path((data.get("world") or {}).get("csv_dir") or database)
    base = Path(root)
    return (base / queries).resolve(), (base / database).resolve()  # an absolute path stays as it is
