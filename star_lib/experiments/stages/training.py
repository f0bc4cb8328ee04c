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
    if log_path.is_file():
        os.replace(log_path, out / "train_log.parquet")
    write_metrics(out, rows)


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
