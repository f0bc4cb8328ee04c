"""The sft stage: supervised fine-tuning on the teacher's trajectories (``star_lib.train.sft``).

Reads the teacher's ``train.jsonl``; writes ``model/`` (and ``base/``, the untrained model SFT started from)
and the training metrics. The section sets any ``SFTRunConfig`` field the stage does not set itself
(:func:`axis_fields`, :func:`path_fields`); the run resumes from the newest checkpoint a preempted job left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from star_lib.experiments.config import ExperimentConfig
from star_lib.experiments.stages.registry import RunConfigSpec, RunSection, Stage
from star_lib.experiments.stages.training import train_and_record


def axis_fields(axes: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``SFTRunConfig`` fields the experiment axes decide: the model preset."""
    return {"preset": axes["model"]}


def path_fields(inputs: Mapping[str, Path], out: Path, checkpoint: Path | None) -> dict[str, Any]:
    """Return the ``SFTRunConfig`` fields of where the run reads, writes and resumes from."""
    return {
        "data": str(inputs["sft_data"]),
        "output_dir": str(out),
        "resume_from_checkpoint": str(checkpoint) if checkpoint else None,
    }


def run_sft_stage(cfg: RunSection, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Run SFT into ``out``, resuming from the newest checkpoint a preempted job left there.

    Under torchrun/accelerate when the job holds several GPUs (see :mod:`star_lib.experiments.launch`).
    """
    from star_lib.train.resume import resume_point
    from star_lib.train.sft import SFTRunConfig, run_sft

    checkpoint = resume_point(out)  # a requeued job continues from what its previous attempt saved here
    values = {"progress": False, **cfg.options}
    run_cfg = SFTRunConfig(**path_fields(inputs, out, checkpoint), **axis_fields(cfg.axes), **values)
    train_and_record(run_cfg, out, "sft", run_sft)
    return {"resumed_from": checkpoint.name if checkpoint else None}


def _stage_fields() -> dict[str, Any]:
    """Return what :func:`axis_fields` and :func:`path_fields` set, for default axes and any paths."""
    return {**axis_fields(ExperimentConfig().axes()), **path_fields({"sft_data": Path()}, Path(), None)}


def _sft_config_type() -> type:
    from star_lib.train.sft import SFTRunConfig

    return SFTRunConfig


def _sft_key_facts(cfg: RunSection) -> dict[str, Any]:
    """Return the shape of a from-scratch preset (``tiny-s`` …) for the key: a new shape is a new model."""
    from star_lib.train.models import PRESETS

    preset = PRESETS.get(cfg.axes["model"])
    if preset is None or preset.architecture is None:
        return {}  # a hub model: its name is its identity
    return {"architecture": asdict(preset.architecture)}


STAGE = Stage(
    "sft",
    run_sft_stage,
    inputs=lambda stages, config: {"sft_data": ("teacher", "train.jsonl")},
    reads=("model", "protocol"),  # the protocol of the teacher data is recorded in the checkpoint
    run_config=RunConfigSpec(_sft_config_type, _stage_fields),
    uses_gpu=True,
    distributed=True,
    key_facts=_sft_key_facts,
)
