"""``star plan CONFIG --cluster slurm/<profile>.yaml``: per-GPU memory of the training stages, before submit.

CONFIG is an experiment YAML (``model:`` + ``sft:``/``rl:`` sections, as ``star run`` takes) or an RL config
(``RLRunConfig`` fields, at top level or under ``rl:``, as ``star rl --config`` takes). The cluster profile
gives the GPUs (nodes × gpus_per_node) and their memory (``--gpu-memory-gb`` when its name does not say);
``--strategy`` or ``--accelerate-config`` says how the training state is spread (default: DDP). A stage that
cannot fit is printed with what to change, and the command fails (exit 2) naming the first fix.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``star plan`` to the ``star`` parser."""
    plan = sub.add_parser(
        "plan",
        help="per-GPU memory of a config's training stages on a cluster profile; refuses what cannot fit",
    )
    plan.add_argument("config", help="experiment YAML (model + rl/sft sections) or RL config YAML")
    plan.add_argument("--cluster", required=True, help="cluster profile, e.g. slurm/a100-8gpu.yaml")
    plan.add_argument(
        "--strategy",
        default=None,
        help="how the training state is spread: ddp | zero2 | zero3 | fsdp2 (default: from "
        "--accelerate-config, else ddp)",
    )
    plan.add_argument(
        "--accelerate-config",
        default=None,
        help="accelerate config (slurm/accelerate/*.yaml): its distributed_type/zero_stage set the strategy",
    )
    plan.add_argument(
        "--gpu-memory-gb",
        type=float,
        default=None,
        help="memory of one GPU in GiB (default: from the profile)",
    )
    plan.add_argument(
        "--stage", default="all", help="which training stage to plan: rl | sft | all (default: all in CONFIG)"
    )
    plan.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    from star_lib.experiments.config import ConfigError
    from star_lib.experiments.memory import STRATEGIES, gpu_memory_of_profile, plan_training
    from star_lib.experiments.preflight import strategy_of_profile
    from star_lib.experiments.profiles import load_profile

    if args.stage not in ("rl", "sft", "all"):
        raise ConfigError(f"--stage: {args.stage!r} is not allowed; choose rl, sft or all")
    if args.strategy is not None and args.strategy not in STRATEGIES:
        raise ConfigError(f"--strategy: {args.strategy!r} is not allowed; choose one of {list(STRATEGIES)}")
    profile = load_profile(args.cluster)
    gpus = profile.nodes * profile.gpus_per_node
    if gpus < 1:
        raise ConfigError(f"--cluster {args.cluster}: the profile has no GPUs (gpus_per_node: 0)")
    memory = args.gpu_memory_gb if args.gpu_memory_gb is not None else gpu_memory_of_profile(profile)
    if not memory > 0:
        raise ConfigError(f"--gpu-memory-gb must be > 0, got {memory}")
    strategy = args.strategy or strategy_of_profile(profile, args.accelerate_config)
    inputs = _stage_inputs(Path(args.config), gpus, args.stage)
    if not inputs:
        raise ConfigError(f"{args.config}: no sft or rl stage to plan")
    refused = []
    for stage_inputs in inputs:
        plan = plan_training(stage_inputs, gpus=gpus, gpu_memory_gib=memory, strategy=strategy)
        print(plan.table())
        if not plan.fits:
            refused.append(plan)
    if refused:
        first = refused[0]
        raise ConfigError(
            f"{args.config}: {first.stage} of {first.preset} does not fit {gpus} × {memory:g} GiB under "
            f"{strategy} (peak {first.peak_gib:.1f} GiB): {first.problems[0]}"
        )
    return 0


def _stage_inputs(path: Path, gpus: int, stage: str) -> list[Any]:
    """Return the plan inputs of CONFIG's training stages (``rl`` as an RLRunConfig on ``gpus`` ranks)."""
    from star_lib.experiments.config import ExperimentConfig
    from star_lib.experiments.memory import rl_inputs, sft_inputs
    from star_lib.experiments.preflight import rl_plan_config
    from star_lib.experiments.stages import load_config
    from star_lib.io import read_yaml

    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping (an experiment or RL config)")
    experiment_keys = {f for f in ExperimentConfig.__dataclass_fields__} - {"rl", "sft"}
    out: list[Any] = []
    if set(data) & experiment_keys:
        config = load_config(path)
        stages = [s for s in ("sft", "rl") if s in config.stages and stage in (s, "all")]
        for name in stages:
            section = config.section(name)
            if name == "sft":
                out.append(sft_inputs(config.model, section))
            else:
                out.append(
                    rl_inputs(rl_plan_config(section, config.model, config.algorithm, gpus, str(path)))
                )
        return out
    if stage == "sft":
        return []
    section = data.get("rl", data)
    if not isinstance(section, dict):
        raise ValueError(f"{path}: rl: expected a mapping of RLRunConfig fields")
    return [rl_inputs(rl_plan_config(section, section.get("preset", "tiny"), None, gpus, str(path)))]
