"""DAPO on TRL's GRPO trainer: dynamic sampling and soft overlong shaping on model tokens.

DAPO (Yu et al., 2025, arXiv:2503.14476) is GRPO with four changes. Two are ``trl.GRPOConfig`` settings
that :func:`star_lib.train.rl.build_grpo_config` already applies — clip-higher (ε_low 0.2, ε_high 0.28, §3.1)
and the token-level loss (``loss_type="dapo"``, §3.3). This module adds the two TRL lacks
(``../shared/STACK.md``):

- **Dynamic sampling** (§3.2): a group whose rewards are all equal has zero advantage everywhere and
  teaches nothing, yet its tokens dilute the token-level normaliser. :class:`DynamicSamplingMixin`
  overrides ``GRPOTrainer._generate_and_score_completions``: it scores the batch, drops such groups,
  rolls out fresh prompts (whole groups, scored by TRL as usual) until the batch holds as many useful rows
  as before or ``max_refill_rounds`` is reached, then re-pads the kept rows into one batch and recomputes
  ``num_items_in_batch``. At the cap the batch is still full: the missing places hold dropped rows whose
  loss mask is zeroed (no gradient, not in the normaliser). Keep/drop decisions use the *gathered* rewards
  and every rank runs the same number of rounds, so several processes stay in step.
- **Soft overlong punishment** (§3.4, Eq. 13): :func:`soft_overlong_penalty` — 0 up to
  ``max_tokens - buffer_tokens`` model tokens, then falling linearly to ``-penalty`` at ``max_tokens``.
  ``trl.rewards.get_soft_overlong_punishment`` counts tool responses too; here only the model's own tokens
  (``env_mask == 1``) count, so long tool outputs are never punished.

Both are used by the ``DAPO`` object of :mod:`star_lib.train.algorithms` (``algorithm: dapo``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DAPOConfig",
    "DynamicSamplingMixin",
    "concat_batches",
    "constant_groups",
    "dapo_trainer_class",
    "model_token_count",
    "overlong_reward",
    "soft_overlong_penalty",
]


@dataclass
class DAPOConfig:
    """DAPO's additions to GRPO (clip-higher and the token-level loss live in ``RLRunConfig``)."""

    max_refill_rounds: int = 3
    """Most extra rollout rounds per step replacing groups whose rewards are all equal (0: no refill)."""
    overlong_shaping: bool = True
    """Add the soft overlong punishment (model tokens only) to the reward."""
    overlong_max_tokens: int | None = None
    """Model tokens at which the punishment reaches ``-overlong_penalty``; None: half the context budget."""
    overlong_buffer_tokens: int | None = None
    """Width of the linear punishment zone before ``overlong_max_tokens``; None: a quarter of it (DAPO §3.4
    uses 4,096 of 20,480)."""
    overlong_penalty: float = 1.0
    """Punishment at (and beyond) ``overlong_max_tokens``."""

    def __post_init__(self) -> None:
        if self.max_refill_rounds < 0:
            raise ValueError(f"max_refill_rounds must be >= 0 (0 = no refill), got {self.max_refill_rounds}")
        if self.overlong_max_tokens is not None and self.overlong_max_tokens < 1:
            raise ValueError(f"overlong_max_tokens must be >= 1 or None, got {self.overlong_max_tokens}")
        if self.overlong_buffer_tokens is not None and self.overlong_buffer_tokens < 1:
            raise ValueError(
                f"overlong_buffer_tokens must be >= 1 or None, got {self.overlong_buffer_tokens}"
            )
        if (
            self.overlong_max_tokens is not None
            and self.overlong_buffer_tokens is not None
            and self.overlong_buffer_tokens > self.overlong_max_tokens
        ):
            raise ValueError("overlong_buffer_tokens must not exceed overlong_max_tokens")
        if not self.overlong_penalty >= 0:
            raise ValueError(f"overlong_penalty must be >= 0, got {self.overlong_penalty}")

    def overlong_limits(self, max_context_tokens: int) -> tuple[int, int]:
        """Return ``(max_tokens, buffer_tokens)``, filling the defaults from the context budget."""
        max_tokens = self.overlong_max_tokens or max(1, max_context_tokens // 2)
        buffer = self.overlong_buffer_tokens or max(1, max_tokens // 4)
        return max_tokens, min(buffer, max_tokens)


# ───────────────────────────── overlong shaping (pure) ─────────────────────────────


def model_token_count(env_mask: Sequence[int]) -> int:
    """Count the model's own tokens of an episode (``env_mask == 1``).

    >>> model_token_count([1, 1, 0, 0, 0, 1])
    3
    """
    return int(sum(1 for m in env_mask if m))


def soft_overlong_penalty(
    model_tokens: int, max_tokens: int, buffer_tokens: int, penalty: float = 1.0
) -> float:
    """DAPO's soft overlong punishment (Eq. 13) on the count of model tokens.

    Args:
        model_tokens: Tokens the model wrote in the episode (tool responses excluded).
        max_tokens: Where the punishment reaches ``-penalty``.
        buffer_tokens: Width of the linear zone ending at ``max_tokens``.
        penalty: Size of the full punishment.

    Returns:
        0 up to ``max_tokens - buffer_tokens``, then linear down to ``-penalty``, ``-penalty`` beyond.

    >>> soft_overlong_penalty(100, max_tokens=200, buffer_tokens=50)
    0.0
    >>> soft_overlong_penalty(175, max_tokens=200, buffer_tokens=50)
    -0.5
    >>> soft_overlong_penalty(999, max_tokens=200, buffer_tokens=50)
    -1.0

    """
    if buffer_tokens < 1 or max_tokens < buffer_tokens:
        raise ValueError(f"need 1 <= buffer_tokens <= max_tokens, got {buffer_tokens} and {max_tokens}")
    start = max_tokens - buffer_tokens
    if model_tokens <= start:
        return 0.0
    if model_tokens <= max_tokens:
        return -penalty * (model_tokens - start) / buffer_tokens
    return -float(penalty)


def overlong_reward(max_tokens: int, buffer_tokens: int, penalty: float = 1.0) -> Callable[..., list[float]]:
    """Build a TRL reward function applying :func:`soft_overlong_penalty` to model tokens only.

    The function reads the ``model_tokens`` column (our ``rollout_func`` adds it) or, failing that, an
    ``env_mask`` column; without either it counts every completion token (single-turn completions, where all
    tokens are the model's).

    >>> reward = overlong_reward(max_tokens=200, buffer_tokens=50)
    >>> reward(["a", "b"], model_tokens=[10, 175])
    [0.0, -0.5]
    """
    soft_overlong_penalty(0, max_tokens, buffer_tokens, penalty)  # validate now, not at the first step

    def overlong(completions: Sequence[Any], **columns: Any) -> list[float]:
        counts = columns.get("model_tokens")
        if counts is None and columns.get("env_mask") is not None:
            counts = [model_token_count(m) for m in columns["env_mask"]]
        if counts is None:
            counts = [len(ids) for ids in columns.get("completion_ids") or [[]] * len(completions)]
        return [soft_overlong_penalty(int(n), max_tokens, buffer_tokens, penalty) for n in counts]

    overlong.__name__ = "overlong_reward"
    return overlong


# ───────────────────────────── dynamic sampling (pure parts) ─────────────────────────────


def constant_groups(rewards: Sequence[float], group_size: int, atol: float = 1e-6) -> list[bool]:
    """Say, per group of ``group_size`` consecutive rewards, whether all its rewards are equal.

    NaN rewards (unscorable rows) are ignored; a group with fewer than two scored rows counts as constant.

    >>> constant_groups([1.0, 1.0, 0.0, 1.0, float("nan"), 0.5], 2)
    [True, False, True]
    """
    if group_size < 1 or len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    out = []
    for start in range(0, len(rewards), group_size):
        values = [float(r) for r in rewards[start : start + group_size] if not math.isnan(float(r))]
        out.append(len(values) < 2 or max(values) - min(values) <= atol)
    return out


_LEFT_PADDED = {"prompt_ids": None, "prompt_mask": 0}
"""Keys padded on the left (``None``: the tokenizer's pad id)."""
_RIGHT_PADDED = {
    "completion_ids": None,
    "completion_mask": 0,
    "tool_mask": 1,
    "old_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
    "importance_sampling_ratio": 1.0,
}
"""Per-token keys padded on the right, with their padding value (TRL's own choices)."""


def concat_batches(
    batches: Sequence[dict[str, Any]], pad_token_id: int, pad_to_multiple_of: int | None = None
) -> dict[str, Any]:
    """Concatenate scored GRPO batches row-wise, re-padding prompts (left) and completions (right).

    ``num_items_in_batch`` is left to the caller (it depends on which rows keep their loss).

    Raises:
        ValueError: On a tensor key this function does not know how to pad.

    """
    import torch
    import torch.nn.functional as F

    def width(key: str) -> int:
        w = max(b[key].size(1) for b in batches)
        if pad_to_multiple_of:
            w = -(-w // pad_to_multiple_of) * pad_to_multiple_of
        return w

    out: dict[str, Any] = {}
    prompt_w, completion_w = width("prompt_ids"), width("completion_ids")
    for key, first in batches[0].items():
        values = [b[key] for b in batches]
        if key == "num_items_in_batch" or first is None:
            continue
        if not isinstance(first, torch.Tensor):
            out[key] = [x for v in values for x in v] if isinstance(first, list) else first
        elif key in _LEFT_PADDED:
            fill = pad_token_id if _LEFT_PADDED[key] is None else _LEFT_PADDED[key]
            out[key] = torch.cat([F.pad(v, (prompt_w - v.size(1), 0), value=fill) for v in values])
        elif (
            key in _RIGHT_PADDED and first.ndim == 2 and first.size(1) == batches[0]["completion_ids"].size(1)
        ):
            fill = pad_token_id if _RIGHT_PADDED[key] is None else _RIGHT_PADDED[key]
            out[key] = torch.cat([F.pad(v, (0, completion_w - v.size(1)), value=fill) for v in values])
        elif first.ndim == 1 or (first.ndim == 2 and all(v.size(1) == first.size(1) for v in values)):
            out[key] = torch.cat(values)  # advantages (B,), sequence-level ratios (B, 1)
        else:
            raise ValueError(
                f"dynamic sampling cannot re-pad batch key {key!r} of shape {tuple(first.shape)}"
            )
    return out


def _take_rows(batch: dict[str, Any], rows: Sequence[int]) -> dict[str, Any]:
    """Select rows of a scored batch (tensors and lists with one entry per row)."""
    import torch

    n = batch["completion_ids"].size(0)
    index = torch.tensor(list(rows), dtype=torch.long, device=batch["completion_ids"].device)
    out: dict[str, Any] = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.size(0) == n:
            out[key] = value.index_select(0, index)
        elif isinstance(value, list) and len(value) == n:
            out[key] = [value[i] for i in rows]
        else:
            out[key] = value
    return out


# ───────────────────────────── the trainer mixin ─────────────────────────────


class DynamicSamplingMixin:
    """Put before ``trl.GRPOTrainer`` in the bases: DAPO's dynamic sampling in training batches.

    Set ``max_refill_rounds`` on the instance (default 3). Metrics per step: ``dapo/refill_rounds``,
    ``dapo/dropped_groups`` (all-equal groups seen, all rounds), ``dapo/kept_groups``,
    ``dapo/filler_rows`` (places filled with loss-free rows at the cap) and ``dapo/generated_groups``.
    """

    max_refill_rounds: int = 3
    _star_rewards: Any = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: D102
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._star_rewards = rewards_per_func.detach().clone()  # gathered over processes: (B_global, F)
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):  # noqa: D102
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        import torch

        target = len(inputs)  # local rows the step needs
        batches, keeps, seen_prompts = [], [], self._gathered_prompts(inputs)
        counts = {"dropped": 0, "kept": 0, "generated": 0}
        rounds = 0
        while True:
            current = inputs if rounds == 0 else self._refill_inputs(len(inputs), rounds, seen_prompts)
            batches.append(super()._generate_and_score_completions(current))
            keep = self._local_keep_rows(len(current), counts)
            keeps.append(keep)
            kept_local = torch.tensor(sum(len(k) for k in keeps), device=self.accelerator.device)
            enough = int(self.accelerator.gather(kept_local.reshape(1)).min().item()) >= target
            if enough or rounds >= self.max_refill_rounds:  # identical on every rank: gathered counts
                break
            rounds += 1
        batch, fillers = self._assemble(batches, keeps, target)
        metrics = self._metrics["train"]
        metrics["dapo/refill_rounds"].append(float(rounds))
        metrics["dapo/dropped_groups"].append(float(counts["dropped"]))
        metrics["dapo/kept_groups"].append(float(counts["kept"]))
        metrics["dapo/generated_groups"].append(float(counts["generated"]))
        metrics["dapo/filler_rows"].append(float(fillers))
        return batch

    # ── helpers ──

    def _gathered_prompts(self, inputs: Sequence[dict[str, Any]]) -> set[str]:
        from accelerate.utils import gather_object

        return {str(p) for p in gather_object([x["prompt"] for x in inputs])}

    def _refill_inputs(self, local_rows: int, round_: int, seen: set[str]) -> list[dict[str, Any]]:
        """Fresh prompts for one refill round: the same global choice on every rank, this rank's slice."""
        import numpy as np

        group = self.num_generations
        world = self.accelerator.num_processes
        n_prompts = local_rows * world // group
        dataset = self.train_dataset
        rng = np.random.default_rng([int(self.args.seed), int(self.state.global_step), 7919])
        order = [int(i) for i in rng.permutation(len(dataset))]
        fresh = [i for i in order if str(dataset[i]["prompt"]) not in seen]
        # unseen prompts first; a small dataset falls back to reusing prompts, rotating with the round
        stale = [i for i in order if i not in set(fresh)]
        shift = (round_ - 1) * n_prompts % max(1, len(stale))
        pool = fresh + stale[shift:] + stale[:shift]
        chosen = [pool[k % len(pool)] for k in range(n_prompts)]
        for i in chosen:
            seen.add(str(dataset[i]["prompt"]))
        rows = [dict(dataset[i]) for i in chosen for _ in range(group)]
        rank = self.accelerator.process_index
        return rows[rank * local_rows : (rank + 1) * local_rows]

    def _local_keep_rows(self, local_rows: int, counts: dict[str, int]) -> list[int]:
        """Return this rank's rows whose group (decided on gathered rewards) has unequal rewards."""
        import torch

        rewards = self._star_rewards
        weights = self.reward_weights.to(rewards.device)
        total = (rewards * weights.unsqueeze(0)).nansum(dim=1)
        total[torch.isnan(rewards).all(dim=1)] = torch.nan
        constant = constant_groups(total.tolist(), self.num_generations)
        counts["dropped"] += sum(constant)
        counts["kept"] += len(constant) - sum(constant)
        counts["generated"] += len(constant)
        offset = self.accelerator.process_index * local_rows
        return [i for i in range(local_rows) if not constant[(offset + i) // self.num_generations]]

    def _assemble(
        self, batches: list[dict[str, Any]], keeps: list[list[int]], target: int
    ) -> tuple[dict[str, Any], int]:
        """Keep the useful rows (first ``target``); fill any shortfall with loss-free dropped rows."""
        parts, taken = [], 0
        for batch, keep in zip(batches, keeps, strict=True):
            rows = keep[: target - taken]
            if rows:
                parts.append(_take_rows(batch, rows))
                taken += len(rows)
        fillers = target - taken
        if fillers:
            for batch, keep in zip(batches, keeps, strict=True):
                kept = set(keep)
                rows = [i for i in range(_len_rows(batch)) if i not in kept][: target - taken]
                if rows:
                    part = _take_rows(batch, rows)
                    part["completion_mask"] = part["completion_mask"] * 0  # no loss, not in the normaliser
                    parts.append(part)
                    taken += len(rows)
        merged = concat_batches(parts, self._tokenizer.pad_token_id, self.pad_to_multiple_of)
        loss_mask = merged["completion_mask"]
        if merged.get("tool_mask") is not None:
            loss_mask = loss_mask * merged["tool_mask"]
        merged["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return merged, fillers


def _len_rows(batch: dict[str, Any]) -> int:
    return int(batch["completion_ids"].size(0))


@functools.cache
def dapo_trainer_class() -> type:
    """Return ``DAPOTrainer``: :class:`DynamicSamplingMixin` over ``trl.GRPOTrainer`` (imports TRL once)."""
    from trl import GRPOTrainer

    return type(
        "DAPOTrainer",
        (DynamicSamplingMixin, GRPOTrainer),
        {"__doc__": "GRPOTrainer with DAPO's dynamic sampling (see star_lib.train.dapo)."},
    )
