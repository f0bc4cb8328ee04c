"""The world stage: build or load the database the experiment plans over, written as official CSVs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from star_lib.experiments.stages.common import metrics_rows, write_metrics
from star_lib.experiments.stages.registry import Stage
from star_lib.io import write_json_atomic

WORLD_SOURCES: tuple[str, ...] = ("synthetic", "synthetic-per-query", "csv")


@dataclass(frozen=True)
class WorldStageConfig:
    """Which database the experiment plans over."""

    source: str = "synthetic"
    """``synthetic`` (one seeded generated world), ``synthetic-per-query`` (every task in its own seeded
    world, :mod:`star_lib.travel.worldset`: the tiny recipe) or ``csv`` (official TravelPlanner CSVs in
    ``csv_dir``)."""
    scale: str = "small"
    """Synthetic world size: ``tiny`` | ``small`` | ``full`` (default ``small``: one ``tiny`` world has too
    few routes for varied SFT/test splits of every difficulty; per-query worlds are ``tiny``)."""
    data_seed: int = 0
    """Seed of the synthetic world (per-query worlds take theirs from the tasks)."""
    csv_dir: str | None = None
    """Folder of official CSVs (flat or nested layout) when ``source: csv``."""

    def __post_init__(self) -> None:
        if self.source not in WORLD_SOURCES:
            raise ValueError(f"source {self.source!r} is not allowed; choose one of {list(WORLD_SOURCES)}")
        if self.scale not in ("tiny", "small", "full"):
            raise ValueError(f"scale {self.scale!r} is not allowed; choose one of ['tiny', 'small', 'full']")
        if self.source == "csv" and not self.csv_dir:
            raise ValueError("source csv needs csv_dir (a folder of official TravelPlanner CSVs)")


def run_world(cfg: WorldStageConfig, inputs: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """Build or load the world and write it as official CSVs under ``db/`` (per-query: its spec only)."""
    from star_lib.travel.world import World
    from star_lib.travel.worldset import WorldSet

    if cfg.source == "synthetic-per-query":
        worlds = WorldSet(cfg.scale)
        worlds.write_spec(out / "db")
        summary: dict[str, Any] = {"kind": worlds.spec, "scale": cfg.scale}
    else:
        world = (
            World.synthetic(seed=cfg.data_seed, scale=cfg.scale)
            if cfg.source == "synthetic"
            else World.from_csv_dir(cfg.csv_dir)
        )
        world.to_csv_dir(out / "db")
        summary = world.summary()
    write_json_atomic(out / "summary.json", summary)
    write_metrics(out, metrics_rows({f"world/{k}": v for k, v in summary.items()}))
    return {}


STAGE = Stage("world", run_world, WorldStageConfig)
