"""How one RL step's batch of episodes splits over training processes (ranks) and micro-batches.

The configured batch (``prompts_per_step × num_generations`` episodes) is global: each rank rolls out and
trains on its share, whole GRPO groups only, one micro-batch per forward/backward pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


def env_world_size(env: dict[str, str] | None = None) -> int:
    """Return the number of training processes from ``$WORLD_SIZE`` (torchrun, accelerate); 1 outside them."""
    value = (os.environ if env is None else env).get("WORLD_SIZE", "1") or "1"
    try:
        size = int(value)
    except ValueError:
        raise ValueError(f"WORLD_SIZE={value!r} is not an integer") from None
    if size < 1:
        raise ValueError(f"WORLD_SIZE={size} must be >= 1")
    return size


@dataclass(frozen=True)
class BatchLayout:
    """How one optimizer step's episodes split over ranks and backward passes."""

    global_batch: int
    """Episodes per optimizer step over all ranks (``prompts_per_step × num_generations``)."""
    world_size: int
    """Ranks sharing the step."""
    per_rank: int
    """Episodes each rank rolls out and trains on (whole groups)."""
    micro_batch: int
    """Episodes per forward/backward pass (TRL's ``per_device_train_batch_size``)."""
    accumulation: int
    """Backward passes per step on a rank (TRL's gradient accumulation = steps per generation)."""


def batch_layout(
    global_batch: int,
    group_size: int,
    world_size: int,
    micro_batch: int | None = None,
    *,
    explicit_micro: bool = True,
) -> BatchLayout:
    """Split a global batch of episodes over ``world_size`` ranks and micro-batches.

    The configured batch is the global one: a rank gets ``global_batch / world_size`` episodes, which must be
    whole groups (GRPO's advantages and ARPO's branching compare the G episodes of a prompt on one rank).
    ``micro_batch`` None means the rank's whole share; a preset default (``explicit_micro=False``) that does
    not divide the share falls back to 1.

    >>> batch_layout(128, 8, 8, 1)
    BatchLayout(global_batch=128, world_size=8, per_rank=16, micro_batch=1, accumulation=16)

    Raises:
        ValueError: naming the option to change when the batch does not split.

    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if global_batch % world_size:
        raise ValueError(
            f"the batch of {global_batch} episodes (prompts_per_step × num_generations) does not divide over "
            f"{world_size} GPUs; make prompts_per_step × num_generations a multiple of {world_size}"
        )
    per_rank = global_batch // world_size
    if per_rank % group_size:
        raise ValueError(
            f"each of the {world_size} GPUs would get {per_rank} episodes, not whole groups of "
            f"num_generations={group_size}; make prompts_per_step a multiple of {world_size}"
        )
    micro = per_rank if micro_batch is None else int(micro_batch)
    if micro < 1 or per_rank % micro:
        if explicit_micro:
            raise ValueError(
                f"micro_batch_size={micro} must be >= 1 and divide the {per_rank} episodes a GPU trains on "
                f"(prompts_per_step × num_generations / world size = {global_batch} / {world_size})"
            )
        micro = 1
    return BatchLayout(global_batch, world_size, per_rank, micro, per_rank // micro)
