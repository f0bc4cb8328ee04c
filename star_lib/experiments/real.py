"""The real-queries walkthrough (notebook ``08_real_queries``): the ``real-tiny`` run on the 45 real queries.

Finds the newest finished ``real-tiny`` run (:func:`find_real_run`) or its published copy
(:data:`REAL_PUBLISHED`, written by :func:`publish_run`), reads its evaluation episodes per model
(:func:`real_run_episodes`), runs the programmatic expert on the same queries through the eval stage
(:func:`expert_real_episodes`) and tabulates the rates per level and trip length (:func:`real_query_table`)
beside the paper's final pass rates (:func:`paper_final_pass`).
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from star_lib.experiments.results import eval_stage_folder, paper_reference
from star_lib.experiments.runner import read_run_record
from star_lib.io import read_yaml

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
    stage = eval_stage_folder(run)
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
    stage = eval_stage_folder(run)
    published = run / "eval_models.parquet"  # a published run (publish_run) carries it in the run folder
    for path in (stage / "eval_models.parquet" if stage else None, published, run / "eval.parquet"):
        if path is not None and path.is_file():
            frame = pl.read_parquet(path)
            return frame if "model" in frame.columns else frame.with_columns(pl.lit("rl").alias("model"))
    raise FileNotFoundError(f"{run} has no eval.parquet: its eval stage has not finished (star status)")


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
    from star_lib.experiments.stages.eval import EvalStageConfig, run_eval
    from star_lib.experiments.stages.synth import with_annotated_plans
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
