"""Multi-turn GRPO, DAPO and ARPO on TRL: ``GRPOTrainer`` + our ``rollout_func`` running whole episodes.

TRL 1.16 gives the algorithm (group-relative advantages, clip-higher, token-level DAPO loss, no KL with
``beta=0``); this module adds only what TRL lacks for tool-using agents (``../shared/STACK.md``):

- **Rollouts**: TRL hands :func:`make_rollout_func`'s function the batch's prompts, each repeated
  ``num_generations`` times in consecutive groups. Every prompt is a JSON query record; the function runs one
  episode per prompt with :func:`star_lib.agent.rollout.run_episodes` (the current policy, the tools, optional
  fault injection) and returns TRL's rows: ``prompt_ids``, ``completion_ids`` (all turns, tool responses
  included), ``env_mask`` (1 on model tokens only — tool output never enters the loss), ``logprobs`` (vLLM),
  plus ``report``/``malformed``/``progress`` columns for the reward functions.
- **Strict protocol**: rewards come from :mod:`star_lib.rewards` with the format gate — a malformed or
  unfinished episode earns 0 whatever its plan.
- **Truncation** (the paper's overlong masking): an episode that hit the turn or context limit gets an
  all-zero ``env_mask``: it leaves the loss and the token normaliser, but its reward still enters its
  group's mean and standard deviation (TRL computes advantages from all rows). ``mask_truncated_completions``
  additionally masks any completion that does not end in EOS.
- **Algorithms** (``algorithm``): ``grpo``; ``dapo`` — the same trainer plus dynamic sampling and soft
  overlong shaping on model tokens (:mod:`star_lib.train.dapo`); ``arpo`` — entropy-based adaptive rollouts
  inside the rollout function (:mod:`star_lib.train.arpo`). Their counters go to ``dapo/…`` / ``arpo/…``.
- **CURRICULUM**: the reward switches SUM → MACRO → SUCCESS at ``curriculum_boundaries`` (fractions of
  ``max_steps``); the active stage is logged per step (``curriculum/stage``: 0 SUM, 1 MACRO, 2 SUCCESS).
- **Noise**: ``faults`` applies to training rollouts, ``eval_faults`` to the held-out evaluation
  (train noisy / test clean and vice versa).
- **Resume**: checkpoints every ``save_steps``; :func:`run_rl` with ``resume=True`` continues from the last
  one with the same data order and RNG streams (:mod:`star_lib.train.resume`).
- **Logging**: each step's ``metrics.parquet`` row holds TRL's metrics (``reward``, ``rewards/<fn>/mean``,
  ``frac_reward_zero_std``, ``entropy``, ``clip_ratio/*``, ``completions/*``) and ours (``env/…``: success,
  format-error, truncation and malformed rates, tool calls, faults, response tokens; ``reward/<component>``;
  ``time/…``); sample episodes go to ``rollouts.parquet``; a held-out set is evaluated every ``eval_steps``.

Run folder (``output_dir``): ``config.yaml``, ``checkpoints/``, ``model/``, ``metrics.parquet``,
``rollouts.parquet``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from star_lib.rewards import REWARD_NAMES  # the rewards a run trains on (spec §8's four, then MILESTONE)
from star_lib.train.models import PRESETS, check_bf16, get_preset

if TYPE_CHECKING:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from star_lib.agent.config import RolloutConfig
    from star_lib.agent.env import Episode
    from star_lib.train.metrics import MetricsLog
    from star_lib.train.resume import RolloutState


ALGORITHMS: tuple[str, ...] = ("grpo", "dapo", "arpo")
"""RL algorithms: GRPO, DAPO (GRPO + dynamic sampling + overlong shaping), ARPO (adaptive rollouts)."""


SEED_STRIDE = 1_000_003
"""Spacing of the episode-seed ranges of runs with consecutive seeds (a prime above any run's episodes)."""

PolicyFactory = Callable[[Any, "RLRunConfig"], Any]
"""``(trainer, cfg) -> Policy``: builds the policy that writes the rollout turns (tests inject scripts)."""

VLLM_MAX_LOGPROBS = 20
"""vLLM's default ``max_logprobs`` (TRL's colocated engine keeps it): asking for more top logprobs fails."""

IS_MODES: tuple[str, ...] = ("off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
"""TRL's vLLM importance-sampling modes, plus ``off`` (no correction)."""

TRL_FIXED = frozenset(
    {
        "use_vllm",
        "vllm_mode",
        "vllm_enable_sleep_mode",
        "vllm_gpu_memory_utilization",
        "vllm_tensor_parallel_size",
        "vllm_importance_sampling_correction",
        "vllm_importance_sampling_mode",
        "vllm_importance_sampling_clip_max",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "steps_per_generation",
        "generation_batch_size",
    }
)
"""``GRPOConfig`` fields :func:`build_grpo_config` sets from ``RLRunConfig`` fields (not via overrides)."""


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


# ───────────────────────────── config ─────────────────────────────


@dataclass
class RLRunConfig:
    """One RL run (GRPO, DAPO or ARPO). ``None`` values take the preset's (``ModelPreset.rl``)."""

    data: str
    """Training queries: a JSONL split written by ``star synth`` (QueryRecord per line)."""
    output_dir: str
    """The run folder (``runs/<experiment>/<run>``); created."""
    model_path: str
    """The policy to start from: the SFT run's ``model/`` folder (or a hub id)."""
    world: str = "synthetic:small:0"
    """The database behind tools and evaluator: a folder, or ``synthetic:<tiny|small|full>:<seed>``."""
    preset: str = "tiny"
    """Model preset whose RL defaults apply."""
    algorithm: str = "grpo"
    """``grpo`` | ``dapo`` (dynamic sampling, overlong shaping) | ``arpo`` (entropy-driven branching)."""
    dapo: Any = None
    """A :class:`star_lib.train.dapo.DAPOConfig` (or its dict); used when ``algorithm == "dapo"``."""
    arpo: Any = None
    """A :class:`star_lib.train.arpo.ARPOConfig` (or its dict); used when ``algorithm == "arpo"``."""
    reward: str = "sum"
    """``sum`` | ``macro`` | ``success`` | ``curriculum`` (spec §8); all behind the format gate."""
    curriculum_boundaries: tuple[float, float] = (1 / 3, 2 / 3)
    """Training fractions where CURRICULUM switches SUM → MACRO → SUCCESS."""
    eval_mode: Literal["strict", "official"] = "strict"
    """Evaluator mode for rewards (strict closes the official evaluator's loopholes)."""
    num_generations: int | None = None
    """Episodes per prompt (group size G)."""
    prompts_per_step: int = 2
    """Distinct prompts per optimizer step (the step's batch holds ``prompts_per_step × G`` episodes)."""
    micro_batch_size: int | None = None
    """Episodes per forward/backward pass on one rank (gradient accumulation fills the step); None: the
    preset's (1 for the Qwen presets: one trajectory of up to 32k tokens per backward pass), else the rank's
    whole share of the batch."""
    world_size: int | None = None
    """Training processes (GPUs) sharing each step's batch; None: ``$WORLD_SIZE`` (set by torchrun and
    accelerate), else 1. ``prompts_per_step × num_generations`` is the *global* batch: each rank rolls out and
    trains on its ``1/world_size`` share (whole groups only)."""
    learning_rate: float | None = None
    """Peak learning rate (constant after warm-up)."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up steps."""
    max_steps: int = 50
    """Optimizer steps (= rollout batches: one on-policy update per batch)."""
    beta: float = 0.0
    """KL coefficient; the paper drops the KL term (no reference model)."""
    epsilon: float = 0.2
    """Lower clip range of the importance ratio (DAPO §3.1: 0.2)."""
    epsilon_high: float = 0.28
    """Upper clip range (clip-higher, DAPO §3.1: 0.28); must exceed ``epsilon``."""
    loss_type: str = "dapo"
    """TRL loss aggregation: ``dapo`` (token-level, DAPO §3.3; required by ``algorithm: dapo``), ``grpo``,
    ``dr_grpo``, ``bnpo``…"""
    scale_rewards: str = "group"
    """Advantage scaling: ``group`` | ``batch`` | ``none``."""
    temperature: float | None = None
    """Rollout sampling temperature."""
    top_p: float = 1.0
    """Rollout nucleus sampling mass."""
    max_turns: int | None = None
    """Most assistant turns per episode (then the episode is truncated)."""
    max_context_tokens: int | None = None
    """Context budget per episode (then the model is asked for its plan once and the episode is truncated)."""
    max_new_tokens: int | None = None
    """Most tokens per assistant turn."""
    token_ids: Literal["canonical", "sampled"] = "canonical"
    """Recorded assistant ids: ``canonical`` (re-tokenised text) or ``sampled`` (backend ids)."""
    protocol: Literal["react", "compact"] = "react"
    """Turn protocol of the episodes: ``react`` (think / tool_call / answer tags, the paper's) or ``compact``
    (one short line per call, :mod:`star_lib.agent.compact`: the tiny CPU recipe of ``star pipeline``). The
    policy must have been trained on the same protocol."""
    rollout_overrides: dict[str, Any] = field(default_factory=dict)
    """Other ``star_lib.agent.RolloutConfig`` fields of the episodes (``{"on_format_error": "stop"}``…)."""
    use_vllm: bool = False
    """Roll out with a vLLM engine (GPU, ``pip install 'star-lab[gpu]'``) instead of ``model.generate``."""
    vllm_mode: Literal["colocate", "server"] = "colocate"
    """``colocate``: an engine inside every training process (TRL's); ``server`` (a separate
    ``trl vllm-serve`` process) is refused: our rollouts drive the engine turn by turn, which only colocate
    mode allows, and it is untested here."""
    vllm_sleep_mode: bool = True
    """Colocate: put the engine to sleep (weights and KV cache released) during the optimizer step; the
    rollout policy wakes the KV cache itself (TRL wakes only the weights before a ``rollout_func``)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Colocate: share of each GPU's memory vLLM may take (weights + KV cache), the rest is training's."""
    vllm_tensor_parallel_size: int = 1
    """Colocate: GPUs each engine spans; must divide the world size."""
    vllm_importance_sampling: Literal[
        "off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"
    ] = "token_truncate"
    """TRL's correction for the vLLM/trainer log-probability mismatch. TRL's default ``sequence_mask`` sums
    the log-ratio over a whole trajectory and masks it beyond the cap: on 16–32k-token episodes that drops
    whole episodes, so the default here clips per token. Masked tokens/episodes are logged
    (``sampling/is_masked_tokens``, ``sampling/is_masked_episodes``)."""
    vllm_importance_sampling_cap: float = 3.0
    """Upper bound C_max of the importance ratio (TRL's default)."""
    fast_generation: bool = False
    """Write the rollouts with :class:`star_lib.agent.fastgen.FastPolicy` (KV-cached batched sampling for
    Qwen2-architecture models on CPU) instead of ``model.generate``; ignored when TRL runs vLLM."""
    faults: Any = None
    """``FaultConfig`` (or its dict) for the *training* rollouts' tools; None: a clean environment."""
    eval_faults: Any = None
    """``FaultConfig`` (or its dict) for the held-out evaluation's tools; None: a clean environment."""
    seed: int = 0
    """Seed for data order, sampling and fault injection."""
    bf16: bool | None = None
    """bfloat16 mixed precision."""
    logging_steps: int = 1
    """Log every this many steps."""
    save_steps: int = 50
    """Checkpoint every this many steps."""
    save_total_limit: int | None = 2
    """Keep at most this many checkpoints."""
    rollouts_per_step: int = 4
    """Episodes per step written to ``rollouts.parquet`` (0: none)."""
    eval_data: str | None = None
    """Held-out queries (JSONL); evaluated greedily every ``eval_steps`` and at the end."""
    eval_steps: int = 25
    """Evaluate the held-out set every this many steps."""
    eval_limit: int = 100
    """Evaluate at most this many held-out queries."""
    time_budget_s: float | None = None
    """Stop after this many seconds of training (the model is still saved)."""
    trl_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra ``trl.GRPOConfig`` fields, applied last."""

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"preset {self.preset!r} is unknown; choose one of {sorted(PRESETS)}")
        if self.reward not in REWARD_NAMES:
            raise ValueError(f"reward {self.reward!r} is unknown; choose one of {REWARD_NAMES}")
        if self.eval_mode not in ("strict", "official"):
            raise ValueError(f"eval_mode must be 'strict' or 'official', got {self.eval_mode!r}")
        if not 0 <= self.epsilon < self.epsilon_high:
            raise ValueError(
                f"need 0 <= epsilon < epsilon_high (clip-higher), got {self.epsilon} and {self.epsilon_high}"
            )
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0 (0 = no KL, as in the paper), got {self.beta}")
        if self.max_steps < 1 or self.prompts_per_step < 1:
            raise ValueError("max_steps and prompts_per_step must be >= 1")
        if self.num_generations is not None and self.num_generations < 2:
            raise ValueError(
                f"num_generations must be >= 2 (GRPO compares episodes), got {self.num_generations}"
            )
        self.batch_layout()  # refuses a batch that does not split into whole groups per rank
        if min(self.logging_steps, self.save_steps, self.eval_steps, self.eval_limit) < 1:
            raise ValueError("logging_steps, save_steps, eval_steps and eval_limit must be >= 1")
        if self.rollouts_per_step < 0:
            raise ValueError("rollouts_per_step must be >= 0")
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise ValueError("time_budget_s must be > 0 or None")
        if self.learning_rate is not None and not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm {self.algorithm!r} is unknown; choose one of {ALGORITHMS}")
        if self.algorithm == "dapo" and self.loss_type != "dapo":
            raise ValueError(
                f"DAPO trains with the token-level loss: set loss_type: dapo (got {self.loss_type!r}) "
                "or choose algorithm: grpo"
            )
        if self.protocol not in ("react", "compact"):
            raise ValueError(f"protocol must be 'react' or 'compact', got {self.protocol!r}")
        self._check_rollout_overrides()
        self._coerce_nested()
        self._check_vllm()
        self.curriculum_boundaries = tuple(self.curriculum_boundaries)  # type: ignore[assignment]
        if self.reward == "curriculum":
            from star_lib.rewards import validate_boundaries

            validate_boundaries(self.curriculum_boundaries)

    def _check_vllm(self) -> None:
        """Refuse vLLM settings the rollouts cannot honour (server mode, too many top logprobs)."""
        taken = sorted(set(self.trl_overrides) & TRL_FIXED)
        if taken:
            raise ValueError(
                f"trl_overrides: {taken} come from RLRunConfig fields (use_vllm, vllm_*, micro_batch_size, "
                "world_size, prompts_per_step); set those instead"
            )
        if self.vllm_mode not in ("colocate", "server"):
            raise ValueError(f"vllm_mode must be 'colocate' or 'server', got {self.vllm_mode!r}")
        if self.use_vllm and self.vllm_mode == "server":
            raise ValueError(
                "vllm_mode: server is not supported: the multi-turn rollouts drive the engine turn by turn "
                "inside each training process, and TRL would push weights every step to a server they never "
                "use; set vllm_mode: colocate"
            )
        if self.vllm_importance_sampling not in IS_MODES:
            raise ValueError(
                f"vllm_importance_sampling must be one of {list(IS_MODES)}, "
                f"got {self.vllm_importance_sampling!r}"
            )
        if not self.vllm_importance_sampling_cap > 1:
            raise ValueError(
                f"vllm_importance_sampling_cap must be > 1, got {self.vllm_importance_sampling_cap}"
            )
        if not 0 < self.vllm_gpu_memory_utilization < 1:
            raise ValueError(
                f"vllm_gpu_memory_utilization must be in (0, 1), got {self.vllm_gpu_memory_utilization}"
            )
        tp = self.vllm_tensor_parallel_size
        if tp < 1 or self.resolved_world_size % tp:
            raise ValueError(
                f"vllm_tensor_parallel_size={tp} must be >= 1 and divide the world size "
                f"{self.resolved_world_size}"
            )
        if self.use_vllm and self.algorithm == "arpo" and self.arpo.top_logprobs > VLLM_MAX_LOGPROBS:
            raise ValueError(
                f"arpo.top_logprobs={self.arpo.top_logprobs} exceeds vLLM's max_logprobs "
                f"({VLLM_MAX_LOGPROBS}, the engine TRL starts); set arpo.top_logprobs <= {VLLM_MAX_LOGPROBS}"
            )

    def _check_rollout_overrides(self) -> None:
        from star_lib.agent.config import RolloutConfig

        fixed = {
            "max_turns",
            "max_context_tokens",
            "max_new_tokens",
            "eval_mode",
            "reward",
            "token_ids",
            "seed",
        }
        unknown = sorted(set(self.rollout_overrides) - set(RolloutConfig.__dataclass_fields__))
        taken = sorted(set(self.rollout_overrides) & (fixed | {"protocol"}))
        if unknown or taken:
            raise ValueError(
                f"rollout_overrides: unknown RolloutConfig fields {unknown}"
                if unknown
                else f"rollout_overrides: {taken} are RLRunConfig fields; set them there"
            )

    def _coerce_nested(self) -> None:
        """Turn dict values of the nested configs into their dataclasses (and fill the defaults)."""
        from star_lib.train.arpo import ARPOConfig
        from star_lib.train.dapo import DAPOConfig
        from star_lib.travel.faults import FaultConfig

        for name, kind, default in (
            ("faults", FaultConfig, False),
            ("eval_faults", FaultConfig, False),
            ("dapo", DAPOConfig, True),
            ("arpo", ARPOConfig, True),
        ):
            value = getattr(self, name)
            if isinstance(value, dict):
                unknown = sorted(set(value) - set(kind.__dataclass_fields__))
                if unknown:
                    raise ValueError(f"{name}: unknown {kind.__name__} fields {unknown}")
                setattr(self, name, kind(**value))
            elif value is None and default:
                setattr(self, name, kind())
            elif value is not None and not isinstance(value, kind):
                raise ValueError(f"{name} must be a {kind.__name__} or a dict of its fields, got {value!r}")

    def _pick(self, name: str) -> Any:
        value = getattr(self, name)
        return getattr(get_preset(self.preset).rl, name) if value is None else value

    @property
    def group_size(self) -> int:
        """G: episodes per prompt."""
        return int(self._pick("num_generations"))

    @property
    def batch_size(self) -> int:
        """Episodes per optimizer step, over all ranks (the global batch)."""
        return self.prompts_per_step * self.group_size

    @property
    def resolved_world_size(self) -> int:
        """Training processes: ``world_size``, else ``$WORLD_SIZE``, else 1."""
        if self.world_size is not None:
            return int(self.world_size)
        return env_world_size()

    def batch_layout(self) -> BatchLayout:
        """Split the global batch over ranks and micro-batches (see :func:`batch_layout`)."""
        micro = self.micro_batch_size
        if micro is None:
            micro = get_preset(self.preset).rl.micro_batch_size
        return batch_layout(
            self.batch_size,
            self.group_size,
            self.resolved_world_size,
            micro,
            explicit_micro=self.micro_batch_size is not None,
        )

    def rollout_config(self, *, seed_offset: int = 0) -> RolloutConfig:
        """Build the episode settings (shared with evaluation).

        Episode ``i`` of a batch seeds its fault injector with ``faults.seed + seed × SEED_STRIDE +
        seed_offset + i``: the stride keeps the streams of runs with neighbouring seeds apart (with a plain
        ``seed + offset`` run 5's first call would replay run 4's episodes shifted by one).
        """
        from star_lib.agent.compact import compact_rollout_config
        from star_lib.agent.config import RolloutConfig

        values: dict[str, Any] = {
            "max_turns": int(self._pick("max_turns")),
            "max_context_tokens": int(self._pick("max_context_tokens")),
            "max_new_tokens": int(self._pick("max_new_tokens")),
            "eval_mode": self.eval_mode,
            "reward": self.reward if self.reward != "curriculum" else "sum",  # the episode's logged reward
            "token_ids": self.token_ids,
            "seed": self.seed * SEED_STRIDE + seed_offset,
            **self.rollout_overrides,
        }
        return compact_rollout_config(**values) if self.protocol == "compact" else RolloutConfig(**values)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> RLRunConfig:
        """Read a YAML file holding the fields (at top level or under ``rl:``); ``overrides`` win."""
        import yaml

        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(f"RL config {file} does not exist")
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        data = data.get("rl", data)
        if not isinstance(data, dict):
            raise ValueError(f"{file}: expected a mapping of RLRunConfig fields")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"{file}: unknown RLRunConfig fields {unknown}")
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)


def build_grpo_config(cfg: RLRunConfig) -> GRPOConfig:
    """Build the ``trl.GRPOConfig``: the paper's modifications, ``cfg``'s values, then ``trl_overrides``."""
    from trl import GRPOConfig

    from star_lib.train.sft import _has_accelerator

    hp = get_preset(cfg.preset).rl
    layout = cfg.batch_layout()
    kwargs: dict[str, Any] = {
        "output_dir": str(Path(cfg.output_dir) / "checkpoints"),
        "beta": cfg.beta,  # paper: no KL term
        "epsilon": cfg.epsilon,
        "epsilon_high": cfg.epsilon_high,  # clip-higher
        "loss_type": cfg.loss_type,
        "scale_rewards": cfg.scale_rewards,
        "mask_truncated_completions": True,
        "num_generations": cfg.group_size,
        # the configured batch is global: each rank rolls out and trains on its share, micro-batch by micro
        "per_device_train_batch_size": layout.micro_batch,
        "gradient_accumulation_steps": layout.accumulation,
        "steps_per_generation": layout.accumulation,  # one on-policy update per rollout batch
        "num_iterations": 1,
        "max_completion_length": int(cfg._pick("max_context_tokens")),  # only dr_grpo's normaliser reads it
        "temperature": float(cfg._pick("temperature")),
        "top_p": cfg.top_p,
        "learning_rate": float(cfg._pick("learning_rate")),
        "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": cfg.warmup_steps,
        "max_steps": cfg.max_steps,
        "bf16": check_bf16(bool(cfg._pick("bf16")), on_accelerator=_has_accelerator()),
        "gradient_checkpointing": hp.gradient_checkpointing,
        "logging_steps": cfg.logging_steps,
        "save_strategy": "steps",
        "save_steps": cfg.save_steps,
        "save_total_limit": cfg.save_total_limit,
        "seed": cfg.seed,
        "data_seed": cfg.seed,
        "report_to": "none",
        "remove_unused_columns": False,
        "use_cpu": not _has_accelerator(),
        **vllm_kwargs(cfg),
    }
    kwargs.update(cfg.trl_overrides)
    return GRPOConfig(**kwargs)


def vllm_kwargs(cfg: RLRunConfig) -> dict[str, Any]:
    """``GRPOConfig`` fields of the vLLM settings (``use_vllm: false``: just ``use_vllm=False``)."""
    if not cfg.use_vllm:
        return {"use_vllm": False}
    mode = cfg.vllm_importance_sampling
    out: dict[str, Any] = {
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_enable_sleep_mode": cfg.vllm_sleep_mode,
        "vllm_gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
        "vllm_tensor_parallel_size": cfg.vllm_tensor_parallel_size,
        "vllm_max_model_length": int(cfg._pick("max_context_tokens")),
        "vllm_importance_sampling_correction": mode != "off",
    }
    if mode != "off":
        out["vllm_importance_sampling_mode"] = mode
        out["vllm_importance_sampling_clip_max"] = cfg.vllm_importance_sampling_cap
    return out


# ───────────────────────────── data ─────────────────────────────


def read_queries(path: str | Path, limit: int | None = None) -> list[Any]:
    """Read the query records of a JSONL split (``star synth`` output).

    Raises:
        FileNotFoundError: saying how to make the file.

    """
    from star_lib.io import read_queries as read_query_file

    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"queries {file} do not exist; write them with `star synth`")
    queries = read_query_file(file)
    if not queries:
        raise ValueError(f"{file}: no query records")
    return queries[:limit] if limit else queries


def prompt_dataset(queries: Sequence[Any]) -> Dataset:
    """Build the prompt dataset: each ``prompt`` is a query record as JSON (the rollout rebuilds the task)."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": json.dumps(q.to_dict(), ensure_ascii=False)} for q in queries])


def query_from_prompt(prompt: Any) -> Any:
    """Rebuild the :class:`~star_lib.types.QueryRecord` a prompt of :func:`prompt_dataset` carries."""
    from star_lib.types import QueryRecord

    if not isinstance(prompt, str):
        raise ValueError("GRPO prompts must be JSON query records (build the dataset with prompt_dataset)")
    return QueryRecord.from_dict(json.loads(prompt))


def group_ids(prompts: Sequence[Any], group_size: int) -> list[int]:
    """Return each prompt's group index, checking that TRL repeated each prompt ``group_size`` times in a row.

    Raises:
        ValueError: when the prompts do not come in groups (the advantages would compare the wrong episodes).

    """
    if len(prompts) % group_size:
        raise ValueError(f"{len(prompts)} prompts is not a multiple of num_generations={group_size}")
    for start in range(0, len(prompts), group_size):
        if any(p != prompts[start] for p in prompts[start : start + group_size]):
            raise ValueError(
                "rollout prompts are not in consecutive groups of num_generations identical prompts"
            )
    return [i // group_size for i in range(len(prompts))]


# ───────────────────────────── rollouts ─────────────────────────────


def mask_truncated_episodes(output: dict[str, Any], episodes: Sequence[Episode]) -> dict[str, Any]:
    """Zero the ``env_mask`` of episodes that hit the turn or context limit (in place; returns ``output``).

    They then contribute no loss and no tokens to the normaliser, while their rewards stay in the group
    statistics — TRL computes advantages from every row before masking.
    """
    for i, ep in enumerate(episodes):
        if ep.termination.truncated:
            output["env_mask"][i] = [0] * len(output["env_mask"][i])
    return output


def episode_metrics(episodes: Sequence[Episode], prefix: str = "env/") -> dict[str, float]:
    """Return the one episode summary (:func:`star_lib.agent.summary.episode_summary`) under ``prefix``.

    Keys: ``{prefix}<summary key>`` (``final_pass``, ``cs_micro``, ``truncation_rate``, ``faults``, …) with
    the training reward as ``{prefix}reward`` / ``{prefix}reward_se``; and ``reward/<ingredient>`` (before
    the format gate) with ``reward/format_ok``.
    """
    from star_lib.agent.rollout import episodes_frame
    from star_lib.agent.summary import episode_summary
    from star_lib.rewards import reward_components

    if not episodes:
        return {}
    summary = episode_summary(episodes_frame(episodes), reward_column="reward")
    metrics = {f"{prefix}{k}": float(v) for k, v in summary.items()}
    components: dict[str, list[float]] = {}
    for ep in episodes:
        for key, value in reward_components(ep.report, ep.malformed).items():
            components.setdefault(key, []).append(float(value))
    # reward_components names its keys ``reward/<ingredient>`` (before the format gate) + ``reward/format_ok``
    metrics.update({k if "/" in k else f"reward/{k}": sum(v) / len(v) for k, v in components.items()})
    return metrics


class RolloutLog:
    """Sample episodes appended to ``rollouts.parquet`` (rewritten atomically; an existing file is kept).

    Only the main process (global rank 0) records and writes: the other ranks' episodes are the same kind of
    sample, and several writers would race on one file.
    """

    def __init__(self, path: str | Path, *, write: bool | None = None) -> None:
        from star_lib.train.metrics import is_main_process

        self.path = Path(path)
        self.write = is_main_process() if write is None else write
        """Whether :meth:`append` records anything (default: on the main process only)."""
        self.frames: list[Any] = []
        if self.path.is_file():
            import polars as pl

            self.frames.append(pl.read_parquet(self.path))

    def append(self, step: int, stage: str, episodes: Sequence[Episode]) -> None:
        """Add rows (``episode_row`` + ``step``, ``stage``, the conversation as JSON); rewrite the file."""
        import polars as pl

        from star_lib.agent.rollout import episodes_frame

        if not episodes or not self.write:
            return
        frame = episodes_frame(episodes).with_columns(
            pl.lit(step).alias("step"),
            pl.lit(stage).alias("stage"),
            pl.Series("messages", [json.dumps(ep.messages, ensure_ascii=False) for ep in episodes]),
        )
        self.frames.append(frame)
        merged = pl.concat(self.frames, how="diagonal_relaxed")
        self.frames = [merged]
        from star_lib.io import write_parquet_atomic

        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(self.path, merged)


def default_policy(trainer: Any, cfg: RLRunConfig) -> Any:
    """Wrap the current model as a sampling policy.

    vLLM when TRL colocates an engine (:class:`~star_lib.agent.policies.VLLMPolicy` handles sleep mode and
    tensor-parallel groups); else :class:`~star_lib.agent.fastgen.FastPolicy` with
    ``fast_generation``; else ``model.generate``.
    """
    from star_lib.agent.policies import SamplingParams, TransformersPolicy, VLLMPolicy

    sampling = SamplingParams(temperature=float(cfg._pick("temperature")), top_p=cfg.top_p)
    tokenizer = trainer.processing_class
    if getattr(trainer, "use_vllm", False):  # colocate (server mode is refused by RLRunConfig)
        # the TRL generation object: the policy wakes its KV cache, follows its TP group, sleeps it after
        return VLLMPolicy(trainer.vllm_generation, tokenizer, sampling)
    model = trainer.accelerator.unwrap_model(trainer.model)
    if cfg.fast_generation:
        from star_lib.agent.fastgen import FastPolicy

        return FastPolicy(model, tokenizer, sampling)  # built per batch: the weights changed since the last
    return TransformersPolicy(model, tokenizer, sampling, batch_size=cfg.batch_size)


@contextlib.contextmanager
def _generation_mode(trainer: Any):
    """Unwrap the model for generation (turns gradient checkpointing off and back on, as TRL does)."""
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(
        trainer.model_wrapped,
        trainer.accelerator,
        gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
    ) as unwrapped:
        was_training = unwrapped.training
        unwrapped.eval()
        try:
            yield unwrapped
        finally:
            unwrapped.train(was_training)


def _log_metrics(trainer: Any, metrics: dict[str, float]) -> None:
    """Hand metrics to TRL's per-step averaging (they appear in the step's log row)."""
    log = getattr(trainer, "_log_metric", None)
    for key, value in metrics.items():
        if log is not None:
            log(key, value)
        else:
            trainer._metrics["train"][key].append(value)


def make_rollout_func(
    cfg: RLRunConfig,
    world: Any,
    *,
    policy_factory: PolicyFactory | None = None,
    tools: Any = None,
    rollout_log: RolloutLog | None = None,
    state: RolloutState | None = None,
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """Build TRL's ``rollout_func(prompts, trainer) -> dict``: one full episode per prompt.

    Args:
        cfg: the run config (algorithm, episode limits, faults, group size, reward).
        world: the database behind tools and evaluator.
        policy_factory: ``(trainer, cfg) -> Policy``; defaults to :func:`default_policy` (the trained model;
            for ARPO :func:`star_lib.train.arpo.entropy_policy`, which also returns entropies).
        tools: tools to use instead of the world's registry (tests).
        rollout_log: where sample episodes go (``rollouts_per_step`` of them per call).
        state: the counters behind the RNG streams (saved with checkpoints; see :mod:`star_lib.train.resume`).

    """
    from star_lib.train.resume import RolloutState

    state = state if state is not None else RolloutState()
    if policy_factory is None:
        from star_lib.train.arpo import entropy_policy

        policy_factory = entropy_policy if cfg.algorithm == "arpo" else default_policy

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from star_lib.agent.rollout import trl_rollout_output

        start = time.perf_counter()
        step = int(trainer.state.global_step)
        call = state.calls
        state.calls += 1
        rollout_cfg = cfg.rollout_config(seed_offset=call * len(prompts))
        with _generation_mode(trainer):
            policy = policy_factory(trainer, cfg)
            try:
                episodes, metrics = _run_rollouts(
                    cfg, policy, prompts, world, rollout_cfg, call, trainer, tools
                )
            finally:
                release = getattr(policy, "release", None)
                if callable(release):  # vLLM: drain the TP group, put the engine back to sleep
                    release()
        output = mask_truncated_episodes(trl_rollout_output(episodes), episodes)
        output.pop("episode", None)  # not a reward input; keeps TRL's per-row merge cheap
        output.pop("reward", None)  # the trainer's reward functions recompute it (curriculum needs progress)
        progress = min(1.0, step / max(1, cfg.max_steps))
        output["progress"] = [progress] * len(episodes)
        if cfg.reward == "milestone":  # the reward function's input: each episode's step-level credit
            from star_lib.rewards import milestone_reward

            output["milestone"] = [
                milestone_reward(ep.plan, ep.steps, ep.query, ep.malformed, ep.report) for ep in episodes
            ]
            metrics["reward/milestone_credit"] = sum(output["milestone"]) / max(1, len(episodes))
        output["model_tokens"] = [sum(mask) for mask in output["env_mask"]]  # overlong shaping input
        metrics.update(episode_metrics(episodes))
        if cfg.reward == "curriculum":
            from star_lib.rewards import CURRICULUM_STAGES, curriculum_stage

            stage = curriculum_stage(progress, cfg.curriculum_boundaries)
            metrics["curriculum/stage"] = float(CURRICULUM_STAGES.index(stage))
            metrics["curriculum/progress"] = progress
        metrics["time/rollout_s"] = time.perf_counter() - start
        _log_metrics(trainer, metrics)
        if rollout_log is not None and cfg.rollouts_per_step:
            rollout_log.append(step, "train", episodes[: cfg.rollouts_per_step])
        return output

    return rollout_func


def _run_rollouts(
    cfg: RLRunConfig,
    policy: Any,
    prompts: list[Any],
    world: Any,
    rollout_cfg: RolloutConfig,
    call: int,
    trainer: Any,
    tools: Any,
) -> tuple[list[Episode], dict[str, float]]:
    """Run the batch's episodes: one per prompt (GRPO, DAPO) or G per group with branching (ARPO)."""
    groups = group_ids(prompts, cfg.group_size)
    if cfg.algorithm != "arpo":
        from star_lib.agent.rollout import run_episodes

        queries = [query_from_prompt(p) for p in prompts]
        episodes = run_episodes(
            policy,
            queries,
            world,
            rollout_cfg,
            cfg.faults,
            group_ids=groups,
            tools=tools,
            tokenizer=trainer.processing_class,
        )
        return episodes, {}
    import numpy as np

    from star_lib.train.arpo import ARPOStats, run_arpo_episodes

    stats = ARPOStats()
    episodes = run_arpo_episodes(
        policy,
        [query_from_prompt(p) for p in prompts[:: cfg.group_size]],
        world,
        rollout_cfg,
        cfg.arpo,
        cfg.group_size,
        np.random.default_rng([cfg.seed, call, 0xA490]),
        faults=cfg.faults,
        tools=tools,
        tokenizer=trainer.processing_class,
        stats=stats,
    )
    return episodes, stats.metrics()


def make_reward_funcs(cfg: RLRunConfig) -> list[Callable[..., list[float]]]:
    """Return the reward functions of the run.

    ``cfg.reward`` of :mod:`star_lib.rewards` (format gate included), plus DAPO's soft overlong punishment
    on model tokens when ``algorithm == "dapo"`` and ``dapo.overlong_shaping`` is on.
    """
    from star_lib.rewards import trl_reward

    funcs = [trl_reward(cfg.reward, cfg.curriculum_boundaries)]
    if cfg.algorithm == "dapo" and cfg.dapo.overlong_shaping:
        from star_lib.train.dapo import overlong_reward

        max_tokens, buffer = cfg.dapo.overlong_limits(int(cfg._pick("max_context_tokens")))
        funcs.append(overlong_reward(max_tokens, buffer, cfg.dapo.overlong_penalty))
    return funcs


# ───────────────────────────── evaluation ─────────────────────────────


def evaluate_policy(policy: Any, queries: Sequence[Any], world: Any, rollout_cfg: RolloutConfig, **kw: Any):
    """Run one episode per query and return ``(episodes, metrics)`` with ``eval/…`` keys (SUM reward too)."""
    from dataclasses import replace

    from star_lib.agent.rollout import run_episodes

    episodes = run_episodes(policy, list(queries), world, replace(rollout_cfg, reward="sum"), **kw)
    metrics = episode_metrics(episodes, prefix="eval/")
    metrics = {k if k.startswith("eval/") else "eval/" + k: v for k, v in metrics.items()}
    return episodes, metrics


def _greedy_policy(model: Any, tokenizer: Any) -> Any:
    from star_lib.agent.policies import SamplingParams, TransformersPolicy

    return TransformersPolicy(model, tokenizer, SamplingParams(temperature=0.0), batch_size=16)


class HeldOutEvalCallback:
    """Greedy evaluation on held-out queries every ``eval_steps`` and at the end (stage ``eval``).

    Tools run under ``cfg.eval_faults`` (independent of the training rollouts' ``cfg.faults``). The policy is
    the trained model, decoding greedily, unless ``policy_factory(model, tokenizer)`` builds another (tests).
    """

    def __init__(
        self,
        cfg: RLRunConfig,
        queries: Sequence[Any],
        world: Any,
        metrics: MetricsLog,
        rollout_log: RolloutLog | None = None,
        policy_factory: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.cfg, self.queries, self.world = cfg, list(queries), world
        self.metrics, self.rollout_log = metrics, rollout_log
        self.policy_factory = policy_factory or _greedy_policy
        self.trainer: Any = None
        self.done_steps: set[int] = set()

    def callback(self) -> Any:
        """Return the ``transformers.TrainerCallback`` to register."""
        from transformers import TrainerCallback

        outer = self

        class _Callback(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if state.global_step % outer.cfg.eval_steps == 0:
                    outer.run(state.global_step)

            def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                outer.run(state.global_step)

        return _Callback()

    def run(self, step: int) -> dict[str, float]:
        """Evaluate now (once per step) and log the metrics."""
        if step in self.done_steps or self.trainer is None:
            return {}
        self.done_steps.add(step)
        start = time.perf_counter()
        with _generation_mode(self.trainer) as model:
            policy = self.policy_factory(model, self.trainer.processing_class)
            episodes, metrics = evaluate_policy(
                policy, self.queries, self.world, self.cfg.rollout_config(), faults=self.cfg.eval_faults
            )
        metrics["eval/seconds"] = time.perf_counter() - start
        self.metrics.append("eval", step, metrics)
        if self.rollout_log is not None:
            self.rollout_log.append(step, "eval", episodes[: self.cfg.rollouts_per_step])
        return metrics


# ───────────────────────────── run ─────────────────────────────


@dataclass
class RLResult:
    """What :func:`run_rl` produced."""

    output_dir: Path
    """The run folder."""
    model_dir: Path
    """The final model + tokenizer."""
    metrics_path: Path
    """``metrics.parquet``."""
    rollouts_path: Path
    """``rollouts.parquet``."""
    steps: int
    """Optimizer steps run."""
    seconds: float
    """Wall-clock time of ``trainer.train()``."""
    rewards: list[float] = field(default_factory=list)
    """Mean training reward of each logged step (the RL curve)."""


def make_grpo_trainer(
    cfg: RLRunConfig,
    *,
    policy_factory: PolicyFactory | None = None,
    tools: Any = None,
    world: Any = None,
    metrics: MetricsLog | None = None,
    state: RolloutState | None = None,
    callbacks: Sequence[Any] = (),
    eval_policy_factory: Callable[[Any, Any], Any] | None = None,
) -> GRPOTrainer:
    """Build the trainer: ``trl.GRPOTrainer`` (DAPO: with dynamic sampling) + rollouts, rewards, logging.

    Args:
        cfg: The run config.
        policy_factory: ``(trainer, cfg) -> Policy`` for the rollouts (tests inject scripted policies).
        tools: Tools to use instead of the world's registry.
        world: The world, when already loaded.
        metrics: The metrics log (default: ``<output_dir>/metrics.parquet``).
        state: Rollout RNG-stream counters (a resumed run passes the checkpoint's).
        callbacks: Extra ``transformers.TrainerCallback`` objects.
        eval_policy_factory: ``(model, tokenizer) -> Policy`` for the held-out evaluation (default: greedy).

    """
    from trl import GRPOTrainer

    from star_lib.train.metrics import MetricsLog, ParquetMetricsCallback, TimeBudgetCallback
    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.resume import RolloutState, RolloutStateCallback
    from star_lib.travel.worldset import load_worlds

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16
    out = Path(cfg.output_dir)
    world = world if world is not None else load_worlds(cfg.world)
    metrics = metrics if metrics is not None else MetricsLog(out / "metrics.parquet")
    state = state if state is not None else RolloutState()
    rollout_log = RolloutLog(out / "rollouts.parquet")
    # the trainer's args first: under an accelerate DeepSpeed ZeRO-3 config they switch on zero.Init, so the
    # fp32 weights are partitioned while loading instead of materialised whole on every rank
    args = build_grpo_config(cfg)
    model, tokenizer = load_model_and_tokenizer(cfg.preset, path=cfg.model_path)
    hooks: list[Any] = [ParquetMetricsCallback(metrics, stage="rl"), RolloutStateCallback(state), *callbacks]
    if cfg.time_budget_s is not None:
        hooks.append(TimeBudgetCallback(cfg.time_budget_s))
    evaluator = None
    if cfg.eval_data:
        evaluator = HeldOutEvalCallback(
            cfg,
            read_queries(cfg.eval_data, cfg.eval_limit),
            world,
            metrics,
            rollout_log,
            policy_factory=eval_policy_factory,
        )
        hooks.append(evaluator.callback())
    trainer_class: Any = GRPOTrainer
    if cfg.algorithm == "dapo":
        from star_lib.train.dapo import dapo_trainer_class

        trainer_class = dapo_trainer_class()
    trainer = trainer_class(
        model=model,
        reward_funcs=make_reward_funcs(cfg),
        args=args,
        train_dataset=prompt_dataset(read_queries(cfg.data)),
        processing_class=tokenizer,
        callbacks=hooks,
        rollout_func=make_rollout_func(
            cfg, world, policy_factory=policy_factory, tools=tools, rollout_log=rollout_log, state=state
        ),
    )
    if cfg.algorithm == "dapo":
        trainer.max_refill_rounds = cfg.dapo.max_refill_rounds
    if cfg.use_vllm and cfg.vllm_importance_sampling != "off":
        log_importance_sampling(trainer, cfg.vllm_importance_sampling, cfg.vllm_importance_sampling_cap)
    if evaluator is not None:
        evaluator.trainer = trainer
    trainer.star_metrics = metrics  # type: ignore[attr-defined]
    trainer.star_rollouts = rollout_log  # type: ignore[attr-defined]
    trainer.star_state = state  # type: ignore[attr-defined]
    return trainer


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


def _save_config(cfg: RLRunConfig, out: Path) -> None:
    import yaml

    from star_lib.train.metrics import is_main_process

    if not is_main_process():
        return
    data = asdict(cfg)  # nested dataclasses (faults, dapo, arpo) become dicts
    data["curriculum_boundaries"] = list(cfg.curriculum_boundaries)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump({"rl": data}, sort_keys=False), encoding="utf-8")


def run_rl(
    cfg: RLRunConfig,
    *,
    policy_factory: PolicyFactory | None = None,
    tools: Any = None,
    resume: bool | str | Path = False,
    callbacks: Sequence[Any] = (),
    eval_policy_factory: Callable[[Any, Any], Any] | None = None,
) -> RLResult:
    """Run GRPO / DAPO / ARPO and save the final model under ``output_dir/model``.

    Args:
        cfg: The run config.
        policy_factory: ``(trainer, cfg) -> Policy`` for the rollouts (default: the trained model).
        tools: Tools to use instead of the world's registry.
        resume: ``True``: continue from the last checkpoint under ``output_dir``; a path: from that
            checkpoint. Data order, RNG streams and logs continue as if the run had never stopped.
        callbacks: Extra ``transformers.TrainerCallback`` objects.
        eval_policy_factory: ``(model, tokenizer) -> Policy`` for the held-out evaluation (default: greedy).

    Raises:
        FileNotFoundError: When ``resume`` is set and there is no checkpoint.

    """
    from star_lib.train.resume import (
        TrainerCountersCallback,
        checkpoint_step,
        find_checkpoint,
        load_rollout_state,
        trim_run_logs,
    )

    out = Path(cfg.output_dir)
    checkpoint = state = None
    if resume:
        checkpoint = find_checkpoint(out if resume is True else Path(resume))
        state = load_rollout_state(checkpoint)
        trim_run_logs(out, checkpoint_step(checkpoint))
    from star_lib.train.models import resolve_model_source

    resolve_model_source(cfg.preset, cfg.model_path)  # a missing model folder is refused before config.yaml
    from star_lib.train.metrics import is_main_process

    if checkpoint is None and is_main_process():  # restarted from scratch: new logs, not appended
        for name in ("metrics.parquet", "rollouts.parquet"):
            (out / name).unlink(missing_ok=True)
    _save_config(cfg, out)
    trainer = make_grpo_trainer(
        cfg,
        policy_factory=policy_factory,
        tools=tools,
        state=state,
        callbacks=callbacks,
        eval_policy_factory=eval_policy_factory,
    )
    trainer.add_callback(TrainerCountersCallback(trainer, checkpoint))
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from star_lib.train.progress import progress_callback

    progress = progress_callback("rl")  # under the experiments runner: step, reward, ETA into run.json
    if progress is not None or trainer.args.disable_tqdm:  # else every log dict is printed (metrics.parquet)
        trainer.remove_callback(PrinterCallback)
    if progress is not None:  # the runner's table shows the progress; the bar would print the dicts too
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(progress)
    start = time.monotonic()
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    seconds = time.monotonic() - start
    model_dir = out / "model"
    trainer.save_model(str(model_dir))  # transformers saves on the main process only
    if is_main_process():
        trainer.processing_class.save_pretrained(model_dir)
        from star_lib.agent.protocol import write_protocol

        write_protocol(model_dir, cfg.protocol)  # the protocol its episodes spoke
    metrics = trainer.star_metrics  # type: ignore[attr-defined]
    metrics.flush()
    rewards = [
        r["train/reward"] for r in metrics.rows if r["stage"] == "rl" and r.get("train/reward") is not None
    ]
    return RLResult(
        output_dir=out,
        model_dir=model_dir,
        metrics_path=metrics.path,
        rollouts_path=trainer.star_rollouts.path,  # type: ignore[attr-defined]
        steps=trainer.state.global_step,
        seconds=seconds,
        rewards=rewards,
    )
