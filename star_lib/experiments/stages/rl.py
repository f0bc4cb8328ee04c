"""The rl stage: GRPO / DAPO / ARPO from the SFT model on the RL prompts (``star_lib.train.rl``).

Reads the world, synth ``rl/train.jsonl`` and the SFT ``model/``; writes ``model/``, the training metrics
and the rollouts. The policy sees the experiment's tool faults. The section sets any ``RLRunConfig`` field the
stage does not set itself (:func:`axis_fields`, :func:`path_fields`); ``eval_data: held-out`` scores the
run's held-out tasks (synth ``base/test.jsonl``, clean tools) every ``eval_steps`` during training, the
learning curve a pilot reads (``eval/…`` metrics per step, stage ``rl`` of the run's ``metrics.parquet``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.stages.common import fault_config
from star_lib.experiments.stages.registry import RunConfigSpec, RunSection, Stage
from star_lib.experiments.stages.training import train_and_record


def axis_fields(axes: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``RLRunConfig`` fields the experiment axes decide."""
    faults = (axes["tool_failure_rate"], axes["tool_latency_ms"], axes["tool_corruption_rate"])
    return {
        "preset": axes["model"],
        "reward": axes["reward"],
        "curriculum_boundaries": tuple(axes["curriculum_boundaries"]),
        "faults": fault_config(*faults, seed=axes["seed"]),
        "seed": axes["seed"],
        "protocol": axes["protocol"],
        "algorithm": axes["algorithm"],
    }


HELD_OUT = "held-out"
"""The ``rl.eval_data`` value that names the run's own held-out tasks."""


def path_fields(inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Return the ``RLRunConfig`` fields of where the run reads and writes."""
    return {
        "data": str(inputs["data"]),
        "output_dir": str(out),
        "model_path": str(inputs["model"]),
        "world": str(inputs["world"]),
    }


def run_rl_stage(cfg: RunSection, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run RL from the SFT model on the RL prompts; the policy sees the experiment's tool faults."""
    from star_lib.train.resume import resume_point
    from star_lib.train.rl import RLRunConfig, run_rl

    options = dict(cfg.options)
    if options.get("eval_data") == HELD_OUT:
        options["eval_data"] = str(inputs["held_out"])
    run_cfg = RLRunConfig(**path_fields(inputs, out), **axis_fields(cfg.axes), **options)
    checkpoint = resume_point(out)  # a requeued job continues from what its previous attempt saved here
    train_and_record(run_cfg, out, "rl", lambda run_cfg: run_rl(run_cfg, resume=checkpoint or False))
    return {"resumed_from": checkpoint.name if checkpoint else None}


def _stage_fields() -> dict[str, Any]:
    """Return what :func:`axis_fields` and :func:`path_fields` set, for default axes and any paths."""
    inputs = {"data": Path(), "model": Path(), "world": Path()}
    return {**axis_fields(ExperimentConfig().axes()), **path_fields(inputs, Path())}


def _rl_inputs(stages: tuple[str, ...], config: RunSection) -> dict[str, tuple[str, str]]:
    """Return the RL inputs: world, prompts, the SFT model, and the held-out tasks when the curve reads them.

    Only a run with ``eval_data: held-out`` reads synth ``base/test.jsonl``, so only its key depends on the
    held-out set: runs that differ in it alone (a ``test_mix``) share their RL stage otherwise.
    """
    inputs = {"world": ("world", "db"), "data": ("synth", "rl/train.jsonl"), "model": ("sft", "model")}
    if config.options.get("eval_data") == HELD_OUT:
        inputs["held_out"] = ("synth", "base/test.jsonl")
    return inputs


def _rl_config_type() -> type:
    from star_lib.train.rl import RLRunConfig

    return RLRunConfig


STAGE = Stage(
    "rl",
    run_rl_stage,
    inputs=_rl_inputs,
    reads=(
        "model",
        "reward",
        "curriculum_boundaries",
        "algorithm",
        "seed",
        "tool_failure_rate",
        "tool_latency_ms",
        "tool_corruption_rate",
        "protocol",
    ),
    run_config=RunConfigSpec(_rl_config_type, _stage_fields),
    uses_gpu=True,
    distributed=True,
    scores_plans=True,  # rewards
)
