"""One episode summary: what a set of episodes achieved, and the behaviour behind it.

Reads the episode table :func:`star_lib.agent.rollout.episodes_frame` writes (one row per episode, the
columns of :func:`~star_lib.agent.rollout.episode_row`), so the same numbers come out of live episodes, an
evaluation's ``eval.parquet`` or a published study's files.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from star_lib.types import Termination

TRANSPORTS: tuple[str, ...] = ("flight", "self-driving", "taxi")
"""Transport kinds counted in a plan's travel legs."""


def standard_error(values: list[float]) -> float:
    """Return the standard error of the mean (sample SD / sqrt(n); 0 for fewer than two values).

    >>> round(standard_error([0.0, 1.0, 0.0, 1.0]), 4)
    0.2887
    """
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def _transport(leg: str) -> str | None:
    text = leg.strip().lower()
    if text in ("", "-"):
        return None
    for kind in TRANSPORTS:
        if text.startswith(kind):
            return kind
    return "self-driving"  # strict mode classifies any other transport as driving (spec §6)


def transport_mix(plans: list[str | None]) -> dict[str, float]:
    """Shares of the plans' travel legs by kind (``flight`` / ``self-driving`` / ``taxi``).

    >>> transport_mix(['[{"transportation": "Flight Number: F1, from A to B"}, {"transportation": "-"}]'])
    {'flight': 1.0, 'self-driving': 0.0, 'taxi': 0.0}
    """
    counts: Counter[str] = Counter()
    for text in plans:
        if not text:
            continue
        try:
            days = json.loads(text)
        except ValueError:
            continue
        for day in days if isinstance(days, list) else []:
            kind = _transport(str(day.get("transportation", "-"))) if isinstance(day, dict) else None
            if kind is not None:
                counts[kind] += 1
    total = sum(counts.values())
    return {kind: counts[kind] / total if total else 0.0 for kind in TRANSPORTS}


def episode_summary(frame: Any, reward_column: str = "sum") -> dict[str, float]:
    """Summarise an episode table: success, rates, reward mean and SE, behaviour.

    Keys: ``n``; ``final_pass`` (a malformed episode never passes), ``cs_micro`` (of the delivered plan, 0
    without one), ``hard_micro``; ``<reward_column>`` and ``<reward_column>_se`` when the column exists;
    ``valid_tool_calls`` (share of tool calls with a known tool and well-formed arguments),
    ``parseable_plans``, ``format_error_rate``, ``turns``, ``tool_calls``, ``model_tokens`` (per episode);
    ``delivered``, ``malformed_rate``, ``truncation_rate`` (turn or context limit), ``faults`` (injected
    tool faults per episode); ``termination/<answer|turn_limit|context_limit|malformed>`` shares;
    ``transport/<kind>`` shares of the travel legs and ``flight_legs`` (= ``transport/flight``).

    The same keys name the same quantity everywhere: ``env/…`` over training rollouts (``train/rl.py``),
    ``eval/…`` over held-out episodes (the eval stage).
    """
    n = frame.height
    if n == 0:
        return {"n": 0.0}
    rows = frame.to_dicts()
    calls = sum(int(r["tool_calls"]) for r in rows)
    out: dict[str, float] = {
        "n": float(n),
        "final_pass": sum(bool(r["final_pass"]) and not r["malformed"] for r in rows) / n,
        "cs_micro": sum(float(r["cs_micro"] or 0.0) for r in rows) / n,
        "hard_micro": sum(float(r["hard_micro"] or 0.0) for r in rows) / n,
    }
    if reward_column in frame.columns:
        rewards = [float(r[reward_column]) for r in rows]
        out[reward_column] = sum(rewards) / n
        out[f"{reward_column}_se"] = standard_error(rewards)
    out.update(
        {
            "valid_tool_calls": sum(int(r["valid_tool_calls"]) for r in rows) / calls if calls else 0.0,
            "parseable_plans": sum(r["plan"] is not None for r in rows) / n,
            "format_error_rate": sum(int(r["format_errors"]) > 0 for r in rows) / n,
            "turns": sum(int(r["turns"]) for r in rows) / n,
            "tool_calls": calls / n,
            "model_tokens": sum(int(r["model_tokens"]) for r in rows) / n,
            "delivered": sum(bool(r["delivered"]) for r in rows) / n,
            "malformed_rate": sum(bool(r["malformed"]) for r in rows) / n,
            "faults": sum(sum(json.loads(r["faults"] or "{}").values()) for r in rows) / n,
        }
    )
    ends = Counter(str(r["termination"]) for r in rows)
    out.update({f"termination/{t.value}": ends[t.value] / n for t in Termination})
    out["truncation_rate"] = sum(ends[t.value] for t in Termination if t.truncated) / n
    mix = transport_mix([r["plan"] for r in rows])
    out.update({f"transport/{kind}": share for kind, share in mix.items()})
    out["flight_legs"] = mix["flight"]
    return out


def paired_difference(after: list[float], before: list[float]) -> dict[str, float]:
    """Mean and standard error of the per-task differences ``after - before`` (same tasks, same order).

    >>> paired_difference([1.0, 1.0], [0.0, 1.0])
    {'mean': 0.5, 'se': 0.5}
    """
    if len(after) != len(before):
        raise ValueError(f"paired scores need the same tasks: got {len(after)} and {len(before)} scores")
    diffs = [a - b for a, b in zip(after, before, strict=True)]
    if not diffs:
        return {"mean": 0.0, "se": 0.0}
    return {"mean": sum(diffs) / len(diffs), "se": standard_error(diffs)}
