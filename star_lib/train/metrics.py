"""Training metrics to ``<run>/metrics.parquet``: one row per logging event, keys grouped by prefix.

:class:`MetricsLog` keeps the rows and rewrites the parquet file atomically after each event (so a notebook
can read it mid-run); :class:`ParquetMetricsCallback` feeds it from a ``transformers``/TRL trainer's logs
(SFT and GRPO alike). Key names follow STYLE.md: ``train/…``, ``eval/…``, ``reward/…``, ``env/…``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

_RENAMES = {"loss": "train/loss", "learning_rate": "train/learning_rate", "grad_norm": "train/grad_norm"}
_SUMMARY = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "total_flos"}
"""Keys of the trainer's end-of-training summary (``train_loss`` is the run's mean loss, not a step's)."""


def metric_key(key: str) -> str:
    """Map a trainer log key to its prefixed metric name.

    ``loss`` → ``train/loss``, ``eval_loss`` → ``eval/loss``, the end-of-training summary ``train_loss`` →
    ``summary/loss``; keys that already have a prefix pass unchanged.

    >>> metric_key("eval_loss"), metric_key("mean_token_accuracy"), metric_key("reward/sum")
    ('eval/loss', 'train/mean_token_accuracy', 'reward/sum')
    """
    if key in _RENAMES:
        return _RENAMES[key]
    if key in _SUMMARY:
        return "summary/" + key.removeprefix("train_")
    if key.startswith("eval_"):
        return "eval/" + key.removeprefix("eval_")
    if "/" in key:
        return key
    return "train/" + key


def is_main_process(env: Mapping[str, str] | None = None) -> bool:
    """Return True on the process that writes a run's files: global rank 0.

    An initialised ``accelerate`` state decides (the trainer's); else ``$RANK`` (torchrun, accelerate launch);
    a single process is always the main one.
    """
    if env is None:
        from accelerate.state import PartialState

        if PartialState._shared_state:  # an accelerator (the trainer's) is set up: it knows the rank
            return bool(PartialState().is_main_process)
        env = os.environ
    try:
        return int(env.get("RANK", "0") or 0) == 0
    except ValueError:
        raise ValueError(f"RANK={env.get('RANK')!r} is not an integer") from None


@contextmanager
def main_process_first() -> Iterator[None]:
    """Run the block on global rank 0 first, then on the other ranks (a no-op in a single process).

    For files every rank reads and rank 0 alone writes (a tiny run's ``base/``). The state is the one the
    trainer will use: on CPU ranks (``ACCELERATE_USE_CPU=1``) a gloo group, else the launcher's backend.
    """
    from accelerate.state import PartialState
    from accelerate.utils import parse_flag_from_env

    with PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU")).main_process_first():
        yield


class MetricsLog:
    """Rows of metrics written to one parquet file; an existing file is appended to (resumed runs).

    Every rank keeps the rows, only the main process (global rank 0, :func:`is_main_process`) writes the
    file: on 8 GPUs, 8 writers would race on one path.
    """

    def __init__(self, path: str | Path, *, write: bool | None = None) -> None:
        self.path = Path(path)
        self.write = is_main_process() if write is None else write
        """Whether :meth:`flush` writes the file (default: on the main process only)."""
        self.rows: list[dict[str, Any]] = []
        if self.path.is_file():
            import polars as pl

            self.rows = pl.read_parquet(self.path).to_dicts()

    def append(
        self, stage: str, step: int, values: Mapping[str, Any], *, flush: bool = True
    ) -> dict[str, Any]:
        """Add one row: ``stage``, ``step``, wall-clock ``time`` and every finite numeric value (as float).

        Non-numeric values (strings, lists) are dropped; keys are passed through :func:`metric_key`.
        """
        row: dict[str, Any] = {"stage": stage, "step": int(step), "time": time.time()}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isfinite(value):
                row[metric_key(key)] = float(value)
        self.rows.append(row)
        if flush:
            self.flush()
        return row

    def values(self, stage: str, key: str) -> list[float]:
        """Return ``key``'s logged values of ``stage``, in order (rows without it are skipped)."""
        return [r[key] for r in self.rows if r["stage"] == stage and r.get(key) is not None]

    def flush(self) -> None:
        """Rewrite the parquet file atomically (write a temporary file, then rename); main process only."""
        if not self.rows or not self.write:
            return
        import polars as pl

        from star_lib.io import write_parquet_atomic

        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(self.path, pl.from_dicts(self.rows, infer_schema_length=None))


class ParquetMetricsCallback(TrainerCallback):
    """Send every trainer log event to a :class:`MetricsLog` (stage ``sft`` or ``rl``)."""

    def __init__(self, log: MetricsLog, stage: str) -> None:
        self.log = log
        self.stage = stage
        self._step_start = time.monotonic()
        self._step_s: float | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Start the step clock."""
        self._step_start = time.monotonic()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Stop the step clock (``time/step_s`` of the next log row: rollouts + update for GRPO)."""
        self._step_s = time.monotonic() - self._step_start

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """Record ``logs`` with the global step, epoch and the last step's duration."""
        if logs:
            extra = {"epoch": state.epoch or 0.0}
            if self._step_s is not None:
                extra["time/step_s"] = self._step_s
            self.log.append(self.stage, state.global_step, {**logs, **extra})


class TimeBudgetCallback(TrainerCallback):
    """Stop training once ``budget_s`` seconds of training have passed (checked after each step)."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.start = time.monotonic()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Start the clock."""
        self.start = time.monotonic()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Ask the trainer to stop (it then saves and returns normally) when the budget is spent."""
        if time.monotonic() - self.start >= self.budget_s:
            control.should_training_stop = True
