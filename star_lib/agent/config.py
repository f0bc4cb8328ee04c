"""Configuration of the agent stage: episodes, limits, tokenisation and scoring."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from star_lib.rewards import REWARD_NAMES

EPISODE_REWARDS: tuple[str, ...] = (*(name for name in REWARD_NAMES if name != "curriculum"), "none")
"""Episode rewards: those of :data:`star_lib.rewards.REWARD_NAMES` an episode can compute alone (CURRICULUM
needs the training progress; the RL trainer computes it) and ``none``."""
PROTOCOLS: tuple[str, ...] = ("react", "compact")
"""Episode protocols: ``react`` (:mod:`star_lib.agent.react`) and ``compact`` (:mod:`star_lib.agent.compact`);
:func:`star_lib.agent.protocol.get_protocol` returns their objects."""


@dataclass(frozen=True)
class RolloutConfig:
    """How episodes run (shared by the environment, the runner, the teacher and ``star rollout``)."""

    max_turns: int = 30
    """Most assistant turns per episode (STAR's inference code allows 50; our expert needs up to ~20)."""
    max_context_tokens: int = 32_768
    """Context budget; on overflow the model is asked once for its final plan, then the episode stops."""
    max_new_tokens: int = 1024
    """Most tokens per assistant turn."""
    on_format_error: Literal["observe", "stop"] = "observe"
    """``observe``: tell the model what was wrong and go on; ``stop``: end the episode as malformed."""
    max_format_errors: int = 3
    """End the episode as malformed after this many format errors (0 = never)."""
    eval_mode: Literal["strict", "official"] = "strict"
    """Evaluator mode for the final plan (§5/§6 of the spec; strict is the project default)."""
    evaluate: bool = True
    """Evaluate the final plan (off only for pure data generation)."""
    reward: str = "success"
    """Episode reward, one of :data:`EPISODE_REWARDS` (every reward but curriculum, or ``none``)."""
    token_ids: Literal["canonical", "sampled"] = "canonical"
    """``canonical``: re-tokenise assistant text so ids equal the tokenised chat template (logprobs of a
    re-tokenised turn become NaN); ``sampled``: keep the backend's ids (exact logprobs)."""
    tools_in_system_prompt: bool = False
    """List the tools in the system text instead of the chat template's ``tools=`` argument."""
    system_prompt: str | None = None
    """Override of the protocol's system message (None: the protocol's own)."""
    context_limit_prompt: str | None = None
    """What the model is told when its context overflows (None: the protocol's own)."""
    chars_per_token: float = 4.0
    """Estimate used for the context budget when the policy has no tokenizer (expert, remote teachers)."""
    seed: int = 0
    """Base seed; episode ``i`` seeds its fault injector with ``seed + i``."""
    protocol: str = "react"
    """Episode protocol: ``react`` (JSON tool calls, official JSON plan) or ``compact`` (short calls, one-line
    observations, a compact plan expanded to the official one before evaluation; for tiny models, see
    :mod:`star_lib.agent.compact`). The compact protocol shows no tool schemas, whatever
    ``tools_in_system_prompt`` says."""

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.max_new_tokens < 1 or self.max_context_tokens <= self.max_new_tokens:
            raise ValueError("need max_new_tokens >= 1 and max_context_tokens > max_new_tokens")
        if self.on_format_error not in ("observe", "stop"):
            raise ValueError(f"on_format_error must be 'observe' or 'stop', got {self.on_format_error!r}")
        if self.max_format_errors < 0:
            raise ValueError(f"max_format_errors must be >= 0 (0 = unlimited), got {self.max_format_errors}")
        if self.eval_mode not in ("strict", "official"):
            raise ValueError(f"eval_mode must be 'strict' or 'official', got {self.eval_mode!r}")
        if self.reward not in EPISODE_REWARDS:
            raise ValueError(f"reward must be one of {EPISODE_REWARDS}, got {self.reward!r}")
        if self.token_ids not in ("canonical", "sampled"):
            raise ValueError(f"token_ids must be 'canonical' or 'sampled', got {self.token_ids!r}")
        if self.chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be > 0, got {self.chars_per_token}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
