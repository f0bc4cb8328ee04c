"""The pipeline's stages, one module each: world → synth → teacher → sft → rl → eval → qa-eval.

Each stage module holds its config, its run function and its registration (``STAGE``);
:func:`build_registry` assembles them and :func:`load_config` checks an experiment's stage sections against
them. Nothing computes a result here: a stage reads its inputs, calls ``star_lib``, writes its outputs.

========  ==========================================  ==================================================
stage     reads                                       writes
========  ==========================================  ==================================================
world     —                                           ``db/`` (official CSVs), ``summary.json``
synth     world ``db/``                               ``base/`` (SFT + held-out test), ``rl/`` (RL prompts)
teacher   world, synth ``base/train.jsonl``           ``train.jsonl`` (TRL conversational SFT set), rollouts
sft       teacher ``train.jsonl``                     ``model/``, metrics
rl        sft ``model/`` (or the preset), synth ``rl/``  ``model/``, metrics, rollouts
eval      world, synth ``base/test.jsonl``, the model ``eval.parquet``, ``rollouts.parquet``, metrics
          (rl > sft > the expert teacher)
qa-eval   the latest model                            ``qa.parquet``, metrics
========  ==========================================  ==================================================

``load_config`` lives here rather than beside :class:`~star_lib.experiments.config.ExperimentConfig`: it
needs the registry, and the stages import the config module, so ``config.py`` stays below them (and free
of the stage packages' imports).
"""

from __future__ import annotations

from pathlib import Path

from star_lib.experiments.config import ConfigError, ExperimentConfig, read_config
from star_lib.experiments.stages import eval as eval_stage
from star_lib.experiments.stages import qa_eval, rl, sft, synth, teacher, world
from star_lib.experiments.stages.registry import Registry, RunConfigSpec, RunSection, Stage

__all__ = ["Registry", "RunConfigSpec", "RunSection", "Stage", "build_registry", "load_config"]


def build_registry() -> Registry:
    """Return the registry of every stage, in pipeline order."""
    registry = Registry()
    for module in (world, synth, teacher, sft, rl, eval_stage, qa_eval):
        registry.add(module.STAGE)
    return registry


def load_config(spec: str | Path) -> ExperimentConfig:
    """Load and validate an experiment YAML (a path or a named config), nested stage sections included.

    Raises:
        ConfigError: naming the file, the offending key and what is allowed.

    """
    config = read_config(spec)
    try:
        build_registry().validate(config)
    except ConfigError as exc:
        raise ConfigError(f"{spec}: {exc}") from None
    return config
