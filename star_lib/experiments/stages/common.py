"""What several stages share: metric rows, the world the world stage wrote, faults, episodes, the expert."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from star_lib.io import write_parquet_atomic


def metrics_rows(values: Mapping[str, float], step: int | None = None) -> list[dict[str, Any]]:
    """Return final (``step=None``) or per-step metric rows from a flat dict, numeric values only."""
    return [
        {"step": step, "metric": key, "value": float(value)}
        for key, value in values.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ]


def write_metrics(out_dir: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``metrics.parquet`` (``step`` nullable int, ``metric``, ``value``) atomically."""
    import polars as pl

    frame = pl.DataFrame(
        {
            "step": pl.Series([r.get("step") for r in rows], dtype=pl.Int64),
            "metric": pl.Series([str(r["metric"]) for r in rows], dtype=pl.String),
            "value": pl.Series([float(r["value"]) for r in rows], dtype=pl.Float64),
        }
    )
    return write_parquet_atomic(out_dir / "metrics.parquet", frame)


def load_world(folder: Path) -> Any:
    """Return the world a ``world`` stage wrote: a ``World``, or a ``WorldSet`` of per-query worlds."""
    from star_lib.travel.worldset import load_worlds

    return load_worlds(folder)


def fault_config(failure_rate: float, latency_ms: float, corruption_rate: float, seed: int) -> Any:
    """Return the experiment's tool-fault axes as a ``FaultConfig`` (None when all are zero)."""
    if not (failure_rate or latency_ms or corruption_rate):
        return None
    from star_lib.travel.faults import FaultConfig

    return FaultConfig(
        failure_rate=float(failure_rate),
        latency_ms=float(latency_ms),
        corruption_rate=float(corruption_rate),
        seed=seed,
    )


def protocol_fields(protocol: str) -> dict[str, Any]:
    """Return the ``RolloutConfig`` fields the experiment's ``protocol`` decides (no section sets them)."""
    if protocol == "compact":
        from star_lib.agent.compact import CONTEXT_LIMIT_PROMPT, SYSTEM_PROMPT

        return {
            "protocol": "compact",
            "tools_in_system_prompt": True,
            "system_prompt": SYSTEM_PROMPT,
            "context_limit_prompt": CONTEXT_LIMIT_PROMPT,
        }
    return {
        "protocol": protocol,
        "tools_in_system_prompt": False,
        "system_prompt": None,
        "context_limit_prompt": None,
    }


def rollout_config(protocol: str, **values: Any) -> Any:
    """Return the episode settings of ``protocol`` with ``values`` on top (compact: its short limits)."""
    from star_lib.agent.compact import compact_rollout_config
    from star_lib.agent.config import RolloutConfig

    settings = {**values, **protocol_fields(protocol)}
    return compact_rollout_config(**settings) if protocol == "compact" else RolloutConfig(**settings)


def rollout_config_type() -> type:
    """Return ``RolloutConfig``, the episode settings a teacher or eval section may set."""
    from star_lib.agent.config import RolloutConfig

    return RolloutConfig


def expert(protocol: str, seed: int) -> Any:
    """Return the programmatic expert that speaks ``protocol``."""
    from star_lib.agent.factory import make_policy

    return make_policy("expert", protocol=protocol, seed=seed)
