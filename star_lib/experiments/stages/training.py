"""What the sft and rl stages share: running under the job's launcher, turning a training log into metrics.

A preempted job resumes from :func:`star_lib.train.resume.resume_point`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from star_lib.experiments.stages.common import metrics_rows, write_metrics

EXPLORATION: tuple[str, ...] = (
    "dapo/refill_rounds",
    "dapo/dropped_groups",
    "arpo/branches_per_group",
    "arpo/topup_chains",
)
"""Per-step counters of how an algorithm explores, averaged over the run's steps as ``rl/mean/<counter>``."""
FIRST_STEPS = 25
"""How many first steps ``rl/first/<metric>`` averages: how much signal the rollouts find at the start."""
EARLY: tuple[str, ...] = ("env/final_pass", "train/reward", "train/frac_reward_zero_std")
"""Per-step metrics averaged over the first :data:`FIRST_STEPS` steps (e.g. how sparse SUCCESS is)."""


def train_and_record(run_cfg: Any, out: Path, stage: str, run_fn: Callable[[Any], Any]) -> None:
    """Run a training function in-process or under the job's launcher; then turn its log into metrics rows."""
    import polars as pl

    from star_lib.experiments.launch import run_launched, wants_launcher

    if wants_launcher():
        run_launched(stage, run_cfg, out)
    else:
        run_fn(run_cfg)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    log_path = out / "metrics.parquet"
    logged = pl.read_parquet(log_path) if log_path.is_file() else pl.DataFrame()
    rows = _training_rows(logged, stage)
    own = [r for r in rows if r["phase"] == stage]
    steps = [r["step"] for r in own if r["step"] is not None]
    last = {r["metric"]: r["value"] for r in own}  # the last logged value of each metric
    rows += metrics_rows({f"{stage}/steps": max(steps) if steps else 0})
    rows += metrics_rows(
        {f"{stage}/final/{k}": v for k, v in last.items() if not k.startswith(("time/", "stage"))}
    )
    rows += metrics_rows(_step_means(own, stage))
    if log_path.is_file():
        os.replace(log_path, out / "train_log.parquet")
    write_metrics(out, rows)


def _step_means(rows: list[dict[str, Any]], stage: str) -> dict[str, float]:
    """Return ``<stage>/mean/<counter>`` over every logged step and ``<stage>/first/<metric>`` over the first.

    The counters are :data:`EXPLORATION` (what DAPO refills and ARPO branches per step), the early metrics
    :data:`EARLY` over steps 1 to :data:`FIRST_STEPS`; a metric the run never logged is left out.
    """
    means: dict[str, float] = {}
    for names, label, last_step in ((EXPLORATION, "mean", None), (EARLY, "first", FIRST_STEPS)):
        for name in names:
            values = [
                r["value"]
                for r in rows
                if r["metric"] == name
                and r["step"] is not None
                and (last_step is None or r["step"] <= last_step)
            ]
            if values:
                means[f"{stage}/{label}/{name}"] = sum(values) / len(values)
    return means


def _training_rows(logged: Any, stage: str) -> list[dict[str, Any]]:
    """Per-step rows from a training log (one row per log event, one column per metric).

    Rows the log holds for another phase (the copy warm-up before SFT) are prefixed with it:
    ``warmup/train/loss``; keys that already carry it keep theirs (RL's held-out curve: ``eval/final_pass``).
    """
    if not getattr(logged, "height", 0) or "step" not in logged.columns:
        return []
    rows = []
    for record in logged.iter_rows(named=True):
        step = record.get("step")
        phase = record.get("stage")
        prefix = f"{phase}/" if phase and phase != stage else ""
        for key, value in record.items():
            if key in ("step", "stage") or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if value == value:  # drop NaN
                rows.append(
                    {
                        "step": int(step) if step is not None else None,
                        "metric": key if key.startswith(prefix) else f"{prefix}{key}",
                        "value": float(value),
                        "phase": phase or stage,
                    }
                )
    return rows
