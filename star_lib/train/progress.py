"""Live progress of a training stage for ``star run-grid`` / ``star status``: step, total and reward so far.

The experiments runner points :data:`PROGRESS_ENV` at the run's ``run.json`` while a stage runs; SFT and RL
then add :func:`progress_callback`'s trainer callback, which merges into that record (main process only,
atomic writes, at most every :data:`MIN_INTERVAL_S` seconds and at the last step):

- ``stage_step`` / ``stage_steps`` — the optimizer step reached and the planned total;
- ``stage_reward`` — the last logged mean training reward (RL), ``stage_loss`` — the last loss (SFT);
- ``stage_eta_s`` — seconds left at this stage's pace so far.

Without the variable (``star sft``, ``star rl``, tests) there is no callback and nothing is written.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

PROGRESS_ENV = "STAR_PROGRESS_RECORD"
"""Environment variable: the ``run.json`` a training stage reports its progress into."""
MIN_INTERVAL_S = 1.0
"""Fewest seconds between two progress writes (a tiny model takes many steps a second)."""


def progress_callback(stage: str) -> Any | None:
    """Return a ``transformers.TrainerCallback`` reporting ``stage``'s progress, or None when not asked to.

    Args:
        stage: The stage's name in the record (``sft`` or ``rl``).

    """
    path = os.environ.get(PROGRESS_ENV, "").strip()
    if not path:
        return None
    from transformers import TrainerCallback

    from star_lib.train.metrics import is_main_process

    if not is_main_process():
        return None

    class StageProgressCallback(TrainerCallback):
        """Merge step, total, reward/loss and ETA into the run record (see the module docstring)."""

        def __init__(self) -> None:
            self.record = Path(path)
            self.started = time.monotonic()
            self.first_step = 0
            self.last_write = -math.inf
            self.values: dict[str, Any] = {}

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started, self.first_step = time.monotonic(), int(state.global_step)
            self._write(state, force=True)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            for key, name in (("reward", "stage_reward"), ("loss", "stage_loss")):
                value = (logs or {}).get(key)
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                    self.values[name] = float(value)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._write(state, force=state.global_step >= state.max_steps)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._write(state, force=True)

        def _write(self, state: Any, *, force: bool) -> None:
            now = time.monotonic()
            if not force and now - self.last_write < MIN_INTERVAL_S:
                return
            self.last_write = now
            step, steps = int(state.global_step), int(state.max_steps or 0)
            done = step - self.first_step
            eta = (now - self.started) / done * max(steps - step, 0) if done > 0 and steps else None
            write_progress(
                self.record,
                current_stage=stage,
                stage_step=step,
                stage_steps=steps or None,
                stage_eta_s=eta,
                **self.values,
            )

    return StageProgressCallback()


def write_progress(record: str | os.PathLike[str], **values: Any) -> None:
    """Merge ``values`` into the JSON record at ``record`` (atomically); a missing record is left alone."""
    from star_lib.io import read_json, write_json_atomic

    try:
        data = read_json(record)
    except (FileNotFoundError, ValueError):
        return
    if isinstance(data, dict):
        write_json_atomic(record, {**data, **values, "stage_updated": time.time()})
