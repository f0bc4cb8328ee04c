"""Resuming a training run (RL or SFT) from its last checkpoint with the same data order and RNG streams.

What a resumed run must reproduce, and who restores it:

- model, optimizer, scheduler, global step, data order (TRL's ``RepeatSampler`` is seeded; the trainer
  skips the batches already consumed) and the global Python/NumPy/torch generators (which sample the
  rollout tokens and shuffle the batch) — ``transformers.Trainer`` via ``resume_from_checkpoint``;
- our own streams: every episode's fault-injector seed, ARPO's branching draws and the rollout seed offsets
  derive from the number of ``rollout_func`` calls so far (:class:`RolloutState`), which DAPO's refills make
  data-dependent. :class:`RolloutStateCallback` writes it beside each checkpoint (``star_state.json``) and
  :func:`load_rollout_state` reads it back;
- running totals ``transformers``/TRL keep only in memory (TRL's SFT token count, the loss sum behind the
  end-of-training ``train_loss``) — :class:`TrainerCountersCallback` saves them beside each checkpoint;
- the run's tables: :func:`trim_run_logs` drops ``metrics.parquet`` / ``rollouts.parquet`` rows written
  after the checkpoint (a run killed mid-way), so the resumed run appends to exactly what the checkpoint saw.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from star_lib.io import write_json_atomic, write_parquet_atomic

STATE_FILE = "star_state.json"
"""Our RNG-stream counters, saved inside each ``checkpoint-<step>`` folder."""
COUNTERS_FILE = "star_counters.json"
"""Running totals of the trainer that ``transformers``/TRL do not restore on resume (in each checkpoint)."""

__all__ = [
    "COUNTERS_FILE",
    "STATE_FILE",
    "RolloutState",
    "RolloutStateCallback",
    "TrainerCountersCallback",
    "checkpoint_step",
    "find_checkpoint",
    "load_rollout_state",
    "trim_run_logs",
]


@dataclass
class RolloutState:
    """Counters behind the rollout RNG streams (episode fault seeds, ARPO draws)."""

    calls: int = 0
    """``rollout_func`` calls so far; call ``n`` seeds its episodes from ``seed + n × batch``."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutState:
        """Read the JSON form (unknown keys are ignored)."""
        return cls(calls=int(data.get("calls", 0)))


class RolloutStateCallback(TrainerCallback):
    """Write a :class:`RolloutState` into every checkpoint folder the trainer saves."""

    def __init__(self, state: RolloutState) -> None:
        self.state = state

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Save ``star_state.json`` beside the trainer's own state (main process only)."""
        if not getattr(args, "should_save", True):
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        write_json_atomic(folder / STATE_FILE, self.state.to_dict())


class TrainerCountersCallback(TrainerCallback):
    """Save the trainer's running totals with each checkpoint; restore them when resuming from ``checkpoint``.

    Without it a resumed run restarts TRL's SFT ``num_tokens`` count at 0, and its end-of-training
    ``train_loss`` divides only the resumed steps' losses by the whole run's step count.
    """

    def __init__(self, trainer: Any, checkpoint: str | Path | None = None) -> None:
        self.trainer = trainer
        file = Path(checkpoint) / COUNTERS_FILE if checkpoint is not None else None
        self.saved = json.loads(file.read_text(encoding="utf-8")) if file and file.is_file() else {}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Restore the totals (the trainer has just zeroed them for this process)."""
        if self.saved:
            self.trainer._total_train_tokens = self.saved["train_tokens"]
            self.trainer._total_loss_scalar = self.saved["loss_sum"]

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write ``star_counters.json`` into the checkpoint folder (main process only)."""
        if not getattr(args, "should_save", True):
            return
        unlogged = getattr(self.trainer, "_tr_loss", None)  # losses since the last log
        payload = {
            "train_tokens": int(getattr(self.trainer, "_total_train_tokens", 0)),
            "loss_sum": float(getattr(self.trainer, "_total_loss_scalar", 0.0))
            + (float(unlogged.item()) if unlogged is not None else 0.0),
        }
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / COUNTERS_FILE).write_text(json.dumps(payload), encoding="utf-8")


def find_checkpoint(path: str | Path) -> Path:
    """Return the checkpoint to resume from: ``path`` itself, or the last complete one under a run folder.

    Complete means the trainer's state and ``star_state.json`` are both there (a process killed between the
    two writes leaves a checkpoint without our state; the one before it is used instead).

    Args:
        path: A ``checkpoint-<step>`` folder, a run folder (with ``checkpoints/``) or its ``checkpoints/``.

    Raises:
        FileNotFoundError: When no checkpoint exists, saying where it looked.

    """
    folder = Path(path)
    if (folder / "trainer_state.json").is_file():
        return folder
    for candidate in (folder / "checkpoints", folder):
        saved = sorted(
            (p for p in candidate.glob("checkpoint-*") if (p / "trainer_state.json").is_file()),
            key=lambda p: int(p.name.rsplit("-", 1)[-1]) if p.name.rsplit("-", 1)[-1].isdigit() else -1,
        )
        complete = [p for p in saved if (p / STATE_FILE).is_file()]  # a kill can land between the two writes
        if complete or saved:
            return (complete or saved)[-1]
    raise FileNotFoundError(
        f"no checkpoint under {folder}: a run saves one every save_steps steps into <run>/checkpoints/; "
        "start without resume, or lower save_steps"
    )


def checkpoint_step(checkpoint: str | Path) -> int:
    """Return the global step a checkpoint was saved at (from its ``trainer_state.json``)."""
    data = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
    return int(data["global_step"])


def load_rollout_state(checkpoint: str | Path) -> RolloutState:
    """Read the :class:`RolloutState` saved with a checkpoint.

    Raises:
        FileNotFoundError: When the checkpoint has no ``star_state.json`` (not saved by ``run_rl``).

    """
    file = Path(checkpoint) / STATE_FILE
    if not file.is_file():
        raise FileNotFoundError(
            f"{file} is missing: this checkpoint was not written by star_lib.train.rl.run_rl, so its rollout "
            "RNG streams cannot be restored; start a fresh run instead"
        )
    return RolloutState.from_dict(json.loads(file.read_text(encoding="utf-8")))


def trim_run_logs(run_dir: str | Path, step: int, stages: tuple[str, ...] | None = None) -> dict[str, int]:
    """Drop rows written after checkpoint ``step`` (and end-of-training summaries) from the run's tables.

    ``metrics.parquet`` rows and evaluation episodes carry the step they follow; training episodes in
    ``rollouts.parquet`` carry the step they were sampled at, which the *next* update consumed. With
    ``stages``, only rows of those stages are trimmed (SFT keeps its copy warm-up's ``warmup`` rows, whose
    steps count warm-up steps).

    Returns:
        Rows removed per file name.

    """
    import polars as pl

    removed: dict[str, int] = {}
    for name in ("metrics.parquet", "rollouts.parquet"):
        path = Path(run_dir) / name
        if not path.is_file():
            continue
        frame = pl.read_parquet(path)
        keep = pl.col("step") <= step
        if "stage" in frame.columns and name == "rollouts.parquet":
            # training episodes carry the step they were sampled at (before that step's update)
            keep = pl.when(pl.col("stage") == "train").then(pl.col("step") < step).otherwise(keep)
        summary = [c for c in frame.columns if c.startswith("summary/")]
        if summary:
            keep = keep & pl.all_horizontal([pl.col(c).is_null() for c in summary])
        if stages is not None and "stage" in frame.columns:
            keep = keep | ~pl.col("stage").is_in(list(stages))
        kept = frame.filter(keep)
        removed[name] = frame.height - kept.height
        if removed[name]:
            write_parquet_atomic(path, kept)
    return removed
