"""What ``star submit`` checks before any ``sbatch``: every run's every stage, and whether it fits the GPUs.

A job array that dies at start-up costs its GPUs' queue time and says so only in a log; a run that does not
fit its GPUs dies at its first optimizer step, hours in. Both are knowable on the login node:

- :func:`check_stages` resolves every stage config of every run (what the job would do first);
- :func:`plan_run` runs the memory planner (:mod:`.memory`) for a run's training stages on the profile's
  GPUs, under the strategy its accelerate config names (DDP without one: what ``accelerate launch
  --multi_gpu`` runs);
- :func:`check_grid` does both for a grid and raises one :class:`ConfigError` naming the runs and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from star_lib.experiments.config import ConfigError, ExperimentConfig
from star_lib.experiments.memory import (
    MemoryPlan,
    gpu_memory_of_profile,
    plan_training,
    rl_inputs,
    sft_inputs,
    strategy_of_accelerate_config,
)
from star_lib.experiments.profiles import ClusterProfile
from star_lib.experiments.stages import build_registry
from star_lib.io import read_yaml

__all__ = ["check_grid", "check_stages", "plan_run", "rl_plan_config", "strategy_of_profile"]


def strategy_of_profile(profile: ClusterProfile, accelerate_config: str | None = None) -> str:
    """Return how the profile's jobs spread the training state: from its accelerate config, else ``ddp``.

    Raises:
        ConfigError: an accelerate config that is not a mapping or names a type the planner does not know.

    """
    path = accelerate_config or profile.accelerate_config
    if path is None:
        return "ddp"
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"accelerate config {path}: expected a mapping (an accelerate config file)")
    return strategy_of_accelerate_config(data, str(path))


def rl_plan_config(
    section: Mapping[str, Any], preset: str, algorithm: str | None, gpus: int, where: str
) -> Any:
    """Return the ``RLRunConfig`` of an ``rl:`` section on ``gpus`` ranks (paths do not change memory).

    Raises:
        ValueError: naming ``where`` when the section does not make a valid config on that many GPUs.

    """
    from star_lib.train.rl import RLRunConfig

    known = set(RLRunConfig.__dataclass_fields__)
    values = {k: v for k, v in section.items() if k in known}
    values.update(preset=preset, world_size=gpus)
    if algorithm is not None:
        values["algorithm"] = algorithm
    for key in ("data", "output_dir", "model_path"):
        values.setdefault(key, "-")
    try:
        return RLRunConfig(**values)
    except ValueError as exc:
        raise ValueError(f"{where}: rl on {gpus} GPUs: {exc}") from None


def plan_run(
    config: ExperimentConfig,
    profile: ClusterProfile,
    *,
    strategy: str | None = None,
    gpu_memory_gib: float | None = None,
) -> list[MemoryPlan]:
    """Return the memory plans of ``config``'s training stages (sft, rl) on ``profile``'s GPUs.

    A profile without GPUs (a CPU rehearsal) plans nothing.
    """
    gpus = profile.nodes * profile.gpus_per_node
    if gpus < 1:
        return []
    strategy = strategy or strategy_of_profile(profile)
    memory = gpu_memory_gib if gpu_memory_gib is not None else gpu_memory_of_profile(profile)
    plans = []
    if "sft" in config.stages:
        plans.append(sft_inputs(config.model, config.section("sft")))
    if "rl" in config.stages:
        rl = rl_plan_config(config.section("rl"), config.model, config.algorithm, gpus, config.name)
        plans.append(rl_inputs(rl))
    return [plan_training(p, gpus=gpus, gpu_memory_gib=memory, strategy=strategy) for p in plans]


def check_stages(runs: list[ExperimentConfig]) -> None:
    """Resolve every stage config of every run, as each job would first thing.

    Raises:
        ConfigError: naming the first run and stage that cannot run with what its config names.

    """
    registry = build_registry()
    for config in runs:
        try:
            registry.check(config)
        except ConfigError as exc:
            raise ConfigError(f"run {config.name}: {exc}") from None


def check_grid(runs: list[ExperimentConfig], profile: ClusterProfile) -> None:
    """Refuse, before any job is submitted, runs that cannot start or cannot fit the profile's GPUs.

    Raises:
        ConfigError: one message naming the runs that do not fit, their peak and what to change.

    """
    check_stages(runs)
    misfits: dict[str, list[str]] = {}  # run name -> the training stages that do not fit
    first: MemoryPlan | None = None
    for config in runs:
        for plan in plan_run(config, profile):
            if not plan.fits:
                misfits.setdefault(config.name, []).append(f"{plan.stage} of {plan.preset}")
                first = first or plan
    if first is None:
        return
    names = ", ".join(f"{name} ({' and '.join(stages)})" for name, stages in misfits.items())
    raise ConfigError(
        f"{len(misfits)} run(s) do not fit the cluster profile {profile.name} ({first.gpus} × "
        f"{first.gpu_memory_gib:g} GiB, {first.strategy}): {names}. {first.stage} of {first.preset} peaks at "
        f"{first.peak_gib:.1f} GiB of {first.budget_gib:.1f} usable; {first.problems[0]}. Submit them with a "
        "profile whose accelerate_config shards the training state (slurm/a100-8gpu-zero3.yaml: ZeRO-3 on "
        "one node; slurm/a100-16gpu-2node.yaml: on 2 nodes); `star plan CONFIG --cluster PROFILE` prints "
        "each plan"
    )
