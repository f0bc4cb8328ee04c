"""vLLM importance sampling: what TRL's correction of the vLLM/trainer log-probability mismatch did.

With ``use_vllm`` the rollouts' tokens come from vLLM, whose log-probabilities differ slightly from the
trainer's; TRL corrects the policy-gradient with a capped importance ratio (``vllm_importance_sampling``:
per token or per sequence, truncated or masked beyond the cap). :func:`log_importance_sampling` counts per
step the tokens and episodes it masked or clipped (``sampling/is_…`` in ``metrics.parquet``).
"""

from __future__ import annotations

from typing import Any

IS_MODES: tuple[str, ...] = ("off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
"""TRL's vLLM importance-sampling modes, plus ``off`` (no correction)."""


def importance_sampling_counts(ratio: Any, mask: Any, mode: str, cap: float) -> dict[str, float]:
    """Count what TRL's vLLM importance-sampling correction did to one batch.

    Args:
        ratio: TRL's ``importance_sampling_ratio``: ``(B, T)`` for ``token_*`` modes, ``(B, 1)`` for
            ``sequence_*`` modes (0 where a ``*_mask`` mode masked).
        mask: ``(B, T)`` model-token mask (``completion_mask × tool_mask``).
        mode: The importance-sampling mode.
        cap: Its upper bound (a ``*_truncate`` mode clips there).

    Returns:
        ``sampling/is_masked_tokens``, ``…_episodes`` (``*_mask`` modes: tokens/episodes left out of the loss;
        an episode counts when all its model tokens are out), ``sampling/is_clipped_tokens`` /
        ``…_episodes`` (``*_truncate`` modes: ratios cut down to ``cap``), and the model tokens and
        episodes they are out of (``sampling/is_tokens``, ``sampling/is_episodes``).

    """
    mask = mask.bool()
    if ratio.dim() == 1:
        ratio = ratio.unsqueeze(-1)
    per_token = ratio.expand_as(mask) if ratio.size(-1) == 1 else ratio
    live = mask.any(dim=-1)  # episodes with model tokens (truncated ones are all-masked already)
    masking = mode.endswith("_mask")
    hit = ((per_token == 0) if masking else (per_token >= cap * (1 - 1e-6))) & mask
    if masking:  # an episode is masked when none of its model tokens is left
        episodes = ((hit | ~mask).all(dim=-1) & live).sum()
    else:  # an episode is clipped when any of its ratios was cut down
        episodes = (hit.any(dim=-1) & live).sum()
    kind = "masked" if masking else "clipped"
    return {
        f"sampling/is_{kind}_tokens": float(hit.sum()),
        f"sampling/is_{kind}_episodes": float(episodes),
        "sampling/is_tokens": float(mask.sum()),
        "sampling/is_episodes": float(live.sum()),
    }


def log_importance_sampling(trainer: Any, mode: str, cap: float) -> None:
    """Wrap ``trainer._generate_and_score_completions`` to log :func:`importance_sampling_counts` per step.

    The counts are summed over ranks and added to the step's TRL metrics (``metrics.parquet``).
    """
    original = trainer._generate_and_score_completions

    def generate_and_score(inputs: Any) -> Any:
        output = original(inputs)
        ratio = output.get("importance_sampling_ratio") if isinstance(output, dict) else None
        if ratio is None:
            return output
        mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            mask = mask * output["tool_mask"]
        counts = importance_sampling_counts(ratio, mask, mode, cap)
        import torch

        local = torch.tensor(list(counts.values()), dtype=torch.float64, device=ratio.device)
        total = trainer.accelerator.gather(local).view(-1, len(counts)).sum(dim=0).tolist()
        mode_key = "train" if trainer.model.training else "eval"
        for key, value in zip(counts, total, strict=True):
            trainer._metrics[mode_key][key].append(value)
        return output

    trainer._generate_and_score_completions = generate_and_score
