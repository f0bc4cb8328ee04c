"""The teacher stage: the programmatic expert acts out the synthesised tasks; its episodes are the SFT set.

Reads the world and synth ``base/train.jsonl``; writes ``train.jsonl`` (TRL conversational SFT set) and the
episodes as ``rollouts.parquet``. ``options`` are ``star_lib.agent.config.RolloutConfig`` fields, except those
the experiment's protocol decides.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from star_lib.experiments.stages.common import (
    expert,
    fault_config,
    load_world,
    metrics_rows,
    protocol_fields,
    rollout_config,
    rollout_config_type,
    write_metrics,
)
from star_lib.experiments.stages.registry import RunConfigSpec, Stage
from star_lib.io import read_queries

TEACHERS: tuple[str, ...] = ("expert",)


@dataclass(frozen=True)
class TeacherStageConfig:
    """Trajectories for SFT, written by a teacher acting out the synthesised tasks (``train`` split)."""

    teacher: str = "expert"
    """``expert``: the programmatic expert of the experiment's protocol acting out each reference plan."""
    teacher_seed: int = 0
    """Seed of the expert's wording choices."""
    max_records: int | None = None
    """Use at most this many records (None: all)."""
    protocol: str = "react"
    """Episode protocol (axis): the teacher writes its trajectories in it."""
    failure_rate: float = field(default=0.0, metadata={"key": "when-set"})
    """Probability that a teacher's tool call returns a service error: the expert retries every failed
    call, so the SFT set shows recovering from them (issue 21's noise grid). 0: clean tools."""
    options: dict[str, Any] = field(default_factory=dict)
    """``star_lib.agent.RolloutConfig`` fields (``max_turns``, …)."""

    def __post_init__(self) -> None:
        if self.teacher not in TEACHERS:
            raise ValueError(f"teacher {self.teacher!r} is not allowed; choose one of {list(TEACHERS)}")
        if self.max_records is not None and self.max_records < 1:
            raise ValueError(f"max_records must be >= 1 or null, got {self.max_records}")
        rate = self.failure_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            raise ValueError(f"teacher.failure_rate must be a probability in [0, 1), got {rate!r}")


def run_teacher(cfg: TeacherStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Act out the records with the expert; writes the TRL conversational SFT set ``train.jsonl``."""
    from star_lib.agent.teacher import build_sft_dataset

    world = load_world(inputs["world"])
    queries = read_queries(inputs["data"])[: cfg.max_records]
    values = {"reward": "none", **({"max_turns": 30} if cfg.protocol == "compact" else {}), **cfg.options}
    faults = fault_config(cfg.failure_rate, 0.0, 0.0, cfg.teacher_seed)
    stats = build_sft_dataset(
        expert(cfg.protocol, cfg.teacher_seed),
        queries,
        world,
        out,
        rollout_config(cfg.protocol, **values),
        faults,
    )
    if (out / "episodes.parquet").is_file():
        os.replace(out / "episodes.parquet", out / "rollouts.parquet")
    faults_seen = {f"teacher/faults/{kind}": n for kind, n in stats.faults.items()}
    write_metrics(
        out, metrics_rows({**{f"teacher/{k}": v for k, v in stats.to_dict().items()}, **faults_seen})
    )
    return {}


STAGE = Stage(
    "teacher",
    run_teacher,
    TeacherStageConfig,
    inputs=lambda stages, config: {"world": ("world", "db"), "data": ("synth", "base/train.jsonl")},
    run_config=RunConfigSpec(rollout_config_type, lambda: protocol_fields("react")),
    scores_plans=True,  # keeps the episodes whose plan passes
)
