"""The learning signal of a run: untrained vs SFT vs RL on the same held-out tasks, read from its metrics.

A run of the ``learning-signal`` config (``configs/learning-signal.yaml``; ``star pipeline --preset tiny``,
``benchmarks/learning_signal.py``) evaluates three models on one held-out set; its ``metrics.parquet`` holds
``eval/<model>/<metric>`` for each, ``eval/paired/rl-sft/{mean,se}`` and the RL stage's per-step training
reward. :func:`learning_signal` gathers them; :func:`print_learning_signal` prints the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from star_lib.experiments.config import ExperimentConfig

MODELS: tuple[str, ...] = ("base", "sft", "rl")
"""The evaluated models, in training order."""
QUICK: dict[str, dict[str, Any]] = {
    "top": {"rl_data_size": 20},
    "synth": {"n_base": 240, "n_test": 20},
    "sft": {"max_steps": 40, "logging_steps": 10, "save_steps": 20, "copy_warmup": {"steps": 80}},
    "rl": {"max_steps": 10, "save_steps": 5},
}
"""A minute-scale smoke run of the recipe (its numbers mean nothing; it checks every stage runs)."""
_ROWS: tuple[tuple[str, str, str], ...] = (
    ("final pass", "final_pass", "pct"),
    ("commonsense micro", "cs_micro", "pct"),
    ("mean SUM reward", "sum", "sum"),
    ("valid tool calls", "valid_tool_calls", "pct"),
    ("parseable plans", "parseable_plans", "pct"),
    ("format-error episodes", "format_error_rate", "pct"),
    ("episodes ended by the turn limit", "termination/turn_limit", "pct"),
    ("travel legs by flight", "flight_legs", "pct"),
    ("model tokens / episode", "model_tokens", "num"),
)


@dataclass
class LearningSignal:
    """What a learning-signal run measured."""

    models: dict[str, dict[str, float]]
    """``base`` | ``sft`` | ``rl`` → ``eval/<model>/…`` metrics on the held-out tasks."""
    paired: dict[str, float]
    """RL − SFT per held-out task: mean difference of SUM and its standard error."""
    rl_curve: list[tuple[int, float]] = field(default_factory=list)
    """(step, mean reward of that step's training rollouts)."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    """Wall seconds of each stage (0 for a stage reused from the cache)."""
    minutes: float = 0.0
    """Minutes of compute behind the numbers: the sum of the stages' wall times (a stage reused from the
    cache counts what it took when it ran), so a resumed or cached run reports what the recipe costs."""

    def final_json(self) -> dict[str, float]:
        """Return the benchmark's last line (the keys ``benchmarks/learning_signal.py`` always printed)."""
        base, sft, rl = (self.models.get(k, {}) for k in MODELS)
        return {
            "cs_micro_base": round(base.get("cs_micro", 0.0), 4),
            "cs_micro_sft": round(sft.get("cs_micro", 0.0), 4),
            "sum_sft": round(sft.get("sum", 0.0), 4),
            "sum_rl": round(rl.get("sum", 0.0), 4),
            "sum_rl_se": round(rl.get("sum_se", 0.0), 4),
            "success_sft": round(sft.get("final_pass", 0.0), 4),
            "success_rl": round(rl.get("final_pass", 0.0), 4),
            "minutes": round(self.minutes, 2),
        }


GRID = "learning-signal"
"""The grid folder learning-signal runs are filed under."""


def signal_run_dir(runs_root: str | Path, config: ExperimentConfig) -> Path:
    """Return where a learning-signal run of ``config`` lives: ``<runs>/learning-signal/<name>__s<seed>``."""
    return Path(runs_root) / GRID / f"{config.name}__s{config.seed}"


def quick_config(config: ExperimentConfig) -> ExperimentConfig:
    """Return ``config`` with the minute-scale budgets of :data:`QUICK`."""
    data = config.to_dict()
    data.update(QUICK["top"])
    for section in ("synth", "sft", "rl"):
        merged = dict(data[section])
        for key, value in QUICK[section].items():
            merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
        data[section] = merged
    return ExperimentConfig.from_dict(data)


def learning_signal(run_dir: str | Path) -> LearningSignal:
    """Read a finished run's learning signal from its ``metrics.parquet``.

    Raises:
        FileNotFoundError: The run folder has no metrics (the run has not finished).

    """
    import polars as pl

    path = Path(run_dir) / "metrics.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the run has not finished (star run / star status)")
    frame = pl.read_parquet(path)
    final = {m: v for m, v in frame.filter(pl.col("step").is_null()).select("metric", "value").iter_rows()}
    models = {
        name: {k.split("/", 2)[2]: v for k, v in final.items() if k.startswith(f"eval/{name}/")}
        for name in MODELS
    }
    paired = {k: final.get(f"eval/paired/rl-sft/{k}", math.nan) for k in ("mean", "se")}
    curve_rows = frame.filter((pl.col("stage") == "rl") & (pl.col("metric") == "train/reward"))
    curve = [(int(s), float(v)) for s, v in curve_rows.select("step", "value").iter_rows() if s is not None]
    stages = frame.filter(pl.col("metric") == "cost/stage_wall_s").select("stage", "value").iter_rows()
    seconds = {s: round(float(v), 1) for s, v in stages}
    return LearningSignal(
        models=models,
        paired=paired,
        rl_curve=sorted(curve),
        stage_seconds=seconds,
        minutes=sum(seconds.values()) / 60,
    )


def curve_text(curve: list[tuple[int, float]], points: int = 12) -> str:
    """Render the RL reward curve as ``steps: mean`` over equal windows of steps.

    >>> curve_text([(1, 0.0), (2, 1.0)], points=1)
    'RL mean reward of the training rollouts by steps — 1-2: 0.500'
    """
    if not curve:
        return "RL reward curve: no steps logged"
    size = max(1, math.ceil(len(curve) / points))
    parts = []
    for start in range(0, len(curve), size):
        window = curve[start : start + size]
        parts.append(f"{window[0][0]}-{window[-1][0]}: {sum(r for _, r in window) / len(window):.3f}")
    return "RL mean reward of the training rollouts by steps — " + " | ".join(parts)


def print_learning_signal(signal: LearningSignal, console: Any = None) -> None:
    """Print the per-model table, the paired RL − SFT difference, the RL curve and the stage times."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    n = int(signal.models.get("sft", {}).get("n", 0))
    table = Table(title=f"Held-out tasks from unseen worlds (n={n}, greedy, strict evaluator)")
    table.add_column("metric")
    for name in MODELS:
        table.add_column({"base": "untrained", "sft": "SFT", "rl": "SFT + RL"}[name], justify="right")
    for label, key, kind in _ROWS:
        cells = []
        for name in MODELS:
            metrics = signal.models.get(name, {})
            value = metrics.get(key, 0.0)
            if kind == "pct":
                cells.append(f"{100 * value:.1f} %")
            elif kind == "sum":
                cells.append(f"{value:.3f} ± {metrics.get('sum_se', 0.0):.3f}")
            else:
                cells.append(f"{value:.0f}")
        table.add_row(label, *cells)
    console.print(table)
    diff, se = signal.paired["mean"], signal.paired["se"]
    console.print(f"RL − SFT mean SUM reward per task: {diff:+.3f} ± {se:.3f} (paired standard error)")
    console.print(curve_text(signal.rl_curve))
    console.print("stage seconds: " + ", ".join(f"{k} {v}" for k, v in signal.stage_seconds.items()))
