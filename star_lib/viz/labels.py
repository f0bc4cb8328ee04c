"""Names the findings share: the metrics they compare, the axes' display labels and orders, number formats.

Nothing here computes: :mod:`star_lib.viz.stats`, :mod:`star_lib.viz.verdicts` and the findings
(:mod:`star_lib.viz.findings`) all speak of ``eval/final_pass``, ``1.5B`` and ``+2.0 pts`` through these.
"""

from __future__ import annotations

import math
from typing import Any

from star_lib.experiments.grids import PAPER_MODELS
from star_lib.train.models import TINY_SCALE

FINAL = "eval/final_pass"
"""The paper's headline metric: TravelPlanner final pass rate (a fraction)."""
PAPER_OOD = "qa/average/em"
"""The paper's OOD measure: exact match averaged over the QA sets (the ``qa-eval`` stage)."""
TINY_OOD = "ood/cs_micro"
"""The tiny study's OOD measure: the commonsense micro rate on the OOD split (longer trips and constraint
combinations never trained on, from unseen worlds; ``star_lib.experiments.ood``). Its final pass has no
signal: most tiny OOD episodes end malformed and almost none passes."""
_METRIC_LABELS: dict[str, str] = {
    FINAL: "final pass",
    PAPER_OOD: "avg OOD EM",
    TINY_OOD: "OOD cs micro",
}


def ood_metric(scale: str) -> str:
    """Return the OOD rate findings 2 and 4 compare at ``scale`` (:data:`TINY_OOD` or :data:`PAPER_OOD`)."""
    return TINY_OOD if scale == "tiny" else PAPER_OOD


def metric_label(metric: str) -> str:
    """Short display name of a compared metric (``eval/final_pass`` → ``final pass``); else the metric."""
    return _METRIC_LABELS.get(metric, metric)


CLEAN_FINAL = "eval/clean/final_pass"
"""Final pass of the same models with clean tools (``eval.also_clean``, the noise grid)."""
IN_DOMAIN: tuple[str, ...] = (
    "eval/delivery",
    "eval/cs_micro",
    "eval/cs_macro",
    "eval/hard_micro",
    "eval/hard_macro",
    FINAL,
)
"""TravelPlanner metrics of Table 1, in the paper's column order."""
CURVE_METRICS: tuple[str, ...] = ("env/final_pass", "reward", "env/faults", "env/truncation_rate", "loss")
"""Per-step metrics the noise figure plots when a run logged them (RL: success, reward, faults; SFT: loss)."""
TOKEN_METRICS: tuple[str, ...] = (
    "rl/final/train/num_tokens",
    "rl/final/num_tokens",
    "sft/final/train/num_tokens",
    "sft/final/num_tokens",
)
"""Final metrics that count training tokens (the trainers' last ``num_tokens``; RL's first, then SFT's)."""


def is_curve_metric(metric: str) -> bool:
    """Tell whether a per-step metric is in :data:`CURVE_METRICS`, bare or under a prefix (``train/loss``)."""
    if metric.startswith("summary/"):
        return False
    return any(metric == m or metric.endswith("/" + m) for m in CURVE_METRICS)


FINDING_TITLES: dict[str, str] = {
    "reward": "Reward design (Table 1, Table 2)",
    "scale": "Model scale (Fig. 4)",
    "data": "RL data quantity (Fig. 5)",
    "difficulty": "RL data difficulty (Table 3)",
    "algorithm": "RL algorithms and training cost (Table 4)",
    "noise": "Environment noise (Fig. 6)",
    "interactions": "Interactions between the axes (factorial view)",
}
"""Title of each finding's notebook section."""
_MODEL_LABELS = {
    **{name: name for name in TINY_SCALE},
    "qwen2.5-1.5b": "1.5B",
    "qwen2.5-3b": "3B",
    "qwen2.5-7b": "7B",
}
MODEL_ORDER: tuple[str, ...] = (*TINY_SCALE, *PAPER_MODELS)
"""Model presets smallest first: the tiny study's sizes, then the paper's."""
DIFFICULTY_ORDER: tuple[str, ...] = ("easy", "medium", "hard", "4:3:3")
"""RL prompt difficulties in the paper's order (Table 3)."""
REWARD_ORDER: tuple[str, ...] = ("sum", "macro", "success", "curriculum", "milestone")
"""Rewards in the paper's order (Table 1)."""
ALGORITHM_ORDER: tuple[str, ...] = ("grpo", "dapo", "arpo")
"""RL algorithms in the paper's order (Table 4)."""


def model_label(model: str | None) -> str:
    """Short display name of a model preset (``qwen2.5-1.5b`` → ``1.5B``)."""
    return _MODEL_LABELS.get(model or "", model or "–")


def scale_models(scale: str) -> tuple[str, ...]:
    """Model presets of a scale: ``tiny`` → the tiny study's three sizes, ``paper`` → the Qwen2.5 sizes."""
    return TINY_SCALE if scale == "tiny" else PAPER_MODELS


def pct(value: float | None) -> str:
    """Format a fraction as a percentage with one decimal (``0.349`` → ``34.9 %``); ``–`` when unknown."""
    return "–" if value is None else f"{100 * value:.1f} %"


def pts(value: float) -> str:
    """Format a difference of fractions in signed percentage points (``0.02`` → ``+2.0 pts``)."""
    return f"{100 * value:+.1f} pts"


def pts_abs(value: float) -> str:
    """Format a size in percentage points, unsigned (``0.031`` → ``3.1 pts``)."""
    return f"{100 * value:.1f} pts"


def finite(value: Any) -> float | None:
    """Return ``value`` as a float, None when it is missing or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)
