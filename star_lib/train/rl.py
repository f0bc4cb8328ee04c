"""Multi-turn GRPO, DAPO and ARPO on TRL: the RL stage, from :class:`RLRunConfig` to :func:`run_rl`.

TRL 1.16 gives the algorithm (group-relative advantages, clip-higher, token-level DAPO loss, no KL with
``beta=0``); the kit adds only what TRL lacks for tool-using agents (``../shared/STACK.md``). A run reads top
to bottom here:

1. :class:`RLRunConfig` — the run's settings, checked at load time; ``None`` values take the preset's.
2. :func:`build_grpo_config` — the ``trl.GRPOConfig``: the paper's modifications, the config's values, then
   ``trl_overrides``.
3. :func:`make_grpo_trainer` — the algorithm (:mod:`star_lib.train.algorithms`: GRPO; DAPO — the same trainer
   plus dynamic sampling and soft overlong shaping; ARPO — entropy-based adaptive rollouts) with its trainer
   class and reward functions, the rollout bridge (:mod:`star_lib.train.rollouts`: TRL's ``rollout_func``
   running whole episodes, truncated ones masked out of the loss), the held-out evaluation
   (:mod:`star_lib.train.evaluation`), metrics and checkpoint callbacks.
4. :func:`run_rl` — resume or start fresh, train, save (:mod:`star_lib.train.finish`).

- **Strict protocol**: rewards come from :mod:`star_lib.rewards` with the format gate — a malformed or
  unfinished episode earns 0 whatever its plan. ``mask_truncated_completions`` additionally masks any
  completion that does not end in EOS.
- **CURRICULUM**: the reward switches SUM → MACRO → SUCCESS at ``curriculum_boundaries`` (fractions of
  ``max_steps``); the active stage is logged per step (``curriculum/stage``: 0 SUM, 1 MACRO, 2 SUCCESS).
- **Noise**: ``faults`` applies to training rollouts, ``eval_faults`` to the held-out evaluation
  (train noisy / test clean and vice versa).
- **Resume**: checkpoints every ``save_steps``; :func:`run_rl` with ``resume=True`` continues from the last
  one with the same data order and RNG streams (:mod:`star_lib.train.resume`).
- **Logging**: each step's ``metrics.parquet`` row holds TRL's metrics (``reward``, ``rewards/<fn>/mean``,
  ``frac_reward_zero_std``, ``entropy``, ``clip_ratio/*``, ``completions/*``) and ours (``env/…``: success,
  format-error, truncation and malformed rates, tool calls, faults, response tokens; ``reward/<component>``;
  ``dapo/…`` / ``arpo/…`` counters; ``time/…``); sample episodes go to ``rollouts.parquet``; a held-out set
  is evaluated every ``eval_steps``.

Run folder (``output_dir``): ``config.yaml``, ``checkpoints/``, ``model/``, ``metrics.parquet``,
``rollouts.parquet``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from star_lib.agent.policies import SamplingParams
from star_lib.io import read_yaml
from star_lib.rewards import REWARD_NAMES  # the rewards a run trains on (spec §8's four, then MILESTONE)
from star_lib.train.algorithms import algorithm_for
from star_lib.train.batching import BatchLayout, batch_layout, env_world_size
from star_lib.train.importance_sampling import IS_MODES, log_importance_sampling
from star_lib.train.models import PRESETS, check_bf16, get_preset, has_accelerator
from star_lib.train.rollouts import PolicyFactory, RolloutLog, make_rollout_func, prompt_dataset, read_queries

if TYPE_CHECKING:
    from trl import GRPOConfig, GRPOTrainer

    from star_lib.agent.config import RolloutConfig
    from star_lib.train.evaluation import HeldOutEvalCallback
    from star_lib.train.metrics import MetricsLog
    from star_lib.train.resume import RolloutState


SEED_STRIDE = 1_000_003
"""Spacing of the episode-seed ranges of runs with consecutive seeds (a prime above any run's episodes)."""

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
    """``grpo`` | ``dapo`` (dynamic sampling, overlong shaping) | ``arpo`` (entropy-driven branching); see
    :mod:`star_lib.train.algorithms`."""
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
        if self.learning_rate is not None and not 0 < self.learning_rate < math.inf:
            raise ValueError(f"learning_rate must be a finite number > 0, got {self.learning_rate}")
        # the rollouts' sampling rules, checked here rather than when the first rollout starts
        SamplingParams(temperature=0.0 if self.temperature is None else self.temperature, top_p=self.top_p)
        algorithm = algorithm_for(self.algorithm)  # refuses an unknown name
        if self.protocol not in ("react", "compact"):
            raise ValueError(f"protocol must be 'react' or 'compact', got {self.protocol!r}")
        self._check_rollout_overrides()
        self._coerce_nested()
        self._check_vllm()
        algorithm.check(self)  # DAPO: the token-level loss; ARPO: top logprobs vLLM serves
        self.curriculum_boundaries = tuple(self.curriculum_boundaries)  # type: ignore[assignment]
        if self.reward == "curriculum":
            from star_lib.rewards import validate_boundaries

            validate_boundaries(self.curriculum_boundaries)

    def _check_vllm(self) -> None:
        """Refuse vLLM settings the rollouts cannot honour (server mode, fields TRL must not get twice)."""
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
        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(f"RL config {file} does not exist")
        data = read_yaml(file) or {}
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
        "bf16": check_bf16(bool(cfg._pick("bf16")), on_accelerator=has_accelerator()),
        "gradient_checkpointing": hp.gradient_checkpointing,
        "logging_steps": cfg.logging_steps,
        "save_strategy": "steps",
        "save_steps": cfg.save_steps,
        "save_total_limit": cfg.save_total_limit,
        "seed": cfg.seed,
        "data_seed": cfg.seed,
        "report_to": "none",
        "remove_unused_columns": False,
        "use_cpu": not has_accelerator(),
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
        # the runner clamps every request to this length (prompt + max_tokens <= max_context_tokens, see
        # star_lib.agent.rollout); an episode with no room left ends truncated, so vLLM never refuses one
        "vllm_max_model_length": int(cfg._pick("max_context_tokens")),
        "vllm_importance_sampling_correction": mode != "off",
    }
    if mode != "off":
        out["vllm_importance_sampling_mode"] = mode
        out["vllm_importance_sampling_clip_max"] = cfg.vllm_importance_sampling_cap
    return out


def make_reward_funcs(cfg: RLRunConfig) -> list[Callable[..., list[float]]]:
    """Return the reward functions of the run.

    ``cfg.reward`` of :mod:`star_lib.rewards` (format gate included), then the algorithm's own (DAPO: the
    soft overlong punishment on model tokens when ``dapo.overlong_shaping`` is on).
    """
    from star_lib.rewards import trl_reward

    return [
        trl_reward(cfg.reward, cfg.curriculum_boundaries),
        *algorithm_for(cfg.algorithm).extra_reward_funcs(cfg),
    ]


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
    """Build the trainer: the algorithm's trainer class (DAPO's: dynamic sampling) + rollouts, rewards, logs.

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
    from star_lib.train.metrics import MetricsLog
    from star_lib.train.models import load_model_and_tokenizer
    from star_lib.train.resume import RolloutState
    from star_lib.travel.worldset import load_worlds

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16
    out = Path(cfg.output_dir)
    algorithm = algorithm_for(cfg.algorithm)
    world = world if world is not None else load_worlds(cfg.world)
    metrics = metrics if metrics is not None else MetricsLog(out / "metrics.parquet")
    state = state if state is not None else RolloutState()
    rollout_log = RolloutLog(out / "rollouts.parquet")
    # the trainer's args first: under an accelerate DeepSpeed ZeRO-3 config they switch on zero.Init, so the
    # fp32 weights are partitioned while loading instead of materialised whole on every rank
    args = build_grpo_config(cfg)
    model, tokenizer = load_model_and_tokenizer(cfg.preset, path=cfg.model_path)
    hooks, evaluator = _trainer_callbacks(
        cfg, world, metrics, rollout_log, state, callbacks, eval_policy_factory
    )
    trainer = algorithm.trainer_class()(
        model=model,
        reward_funcs=make_reward_funcs(cfg),
        args=args,
        train_dataset=prompt_dataset(read_queries(cfg.data)),
        processing_class=tokenizer,
        callbacks=hooks,
        rollout_func=make_rollout_func(
            cfg,
            world,
            algorithm,
            policy_factory=policy_factory,
            tools=tools,
            rollout_log=rollout_log,
            state=state,
        ),
    )
    algorithm.configure_trainer(trainer, cfg)
    if cfg.use_vllm and cfg.vllm_importance_sampling != "off":
        log_importance_sampling(trainer, cfg.vllm_importance_sampling, cfg.vllm_importance_sampling_cap)
    if evaluator is not None:
        evaluator.trainer = trainer
    trainer.star_metrics = metrics  # type: ignore[attr-defined]
    trainer.star_rollouts = rollout_log  # type: ignore[attr-defined]
    trainer.star_state = state  # type: ignore[attr-defined]
    return trainer


def _trainer_callbacks(
    cfg: RLRunConfig,
    world: Any,
    metrics: MetricsLog,
    rollout_log: RolloutLog,
    state: RolloutState,
    callbacks: Sequence[Any],
    eval_policy_factory: Callable[[Any, Any], Any] | None,
) -> tuple[list[Any], HeldOutEvalCallback | None]:
    """Return the trainer's callbacks and the held-out evaluator (None without ``eval_data``).

    In order: metrics, rollout RNG state, ``callbacks``, the time budget, the held-out evaluation.
    """
    from star_lib.train.evaluation import HeldOutEvalCallback
    from star_lib.train.metrics import ParquetMetricsCallback, TimeBudgetCallback
    from star_lib.train.resume import RolloutStateCallback

    hooks: list[Any] = [ParquetMetricsCallback(metrics, stage="rl"), RolloutStateCallback(state), *callbacks]
    if cfg.time_budget_s is not None:
        hooks.append(TimeBudgetCallback(cfg.time_budget_s))
    if not cfg.eval_data:
        return hooks, None
    evaluator = HeldOutEvalCallback(
        cfg,
        read_queries(cfg.eval_data, cfg.eval_limit),
        world,
        metrics,
        rollout_log,
        policy_factory=eval_policy_factory,
    )
    hooks.append(evaluator.callback())
    return hooks, evaluator


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
    from star_lib.train.finish import train_and_save
    from star_lib.train.resume import TrainerCountersCallback

    out = Path(cfg.output_dir)
    checkpoint, state = _start_or_resume(cfg, out, resume)
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
    _show_progress(trainer)
    metrics = trainer.star_metrics  # type: ignore[attr-defined]
    queries = trainer.star_rollouts.queries  # type: ignore[attr-defined]
    model_dir, seconds = train_and_save(
        trainer,
        checkpoint,
        out,
        tokenizer=trainer.processing_class,
        protocol=cfg.protocol,
        metrics=metrics,
        rank_facts={"queries_per_call": queries},
    )
    return RLResult(
        output_dir=out,
        model_dir=model_dir,
        metrics_path=metrics.path,
        rollouts_path=trainer.star_rollouts.path,  # type: ignore[attr-defined]
        steps=trainer.state.global_step,
        seconds=seconds,
        rewards=metrics.values("rl", "train/reward"),
    )


def _start_or_resume(
    cfg: RLRunConfig, out: Path, resume: bool | str | Path
) -> tuple[Path | None, RolloutState | None]:
    """Return the checkpoint and rollout state to resume from (None, None: a fresh run) and prepare the logs.

    A resumed run's logs lose the rows after its checkpoint; a fresh run's old logs are deleted. A missing
    model folder is refused before anything is written.
    """
    from star_lib.train.metrics import is_main_process
    from star_lib.train.models import resolve_model_source
    from star_lib.train.resume import checkpoint_step, find_checkpoint, load_rollout_state, trim_run_logs

    checkpoint = state = None
    if resume:
        checkpoint = find_checkpoint(out if resume is True else Path(resume))
        state = load_rollout_state(checkpoint)
        trim_run_logs(out, checkpoint_step(checkpoint))
    resolve_model_source(cfg.preset, cfg.model_path)  # a missing model folder is refused before config.yaml
    if checkpoint is None and is_main_process():  # restarted from scratch: new logs, not appended
        for name in ("metrics.parquet", "rollouts.parquet"):
            (out / name).unlink(missing_ok=True)
    return checkpoint, state


def _show_progress(trainer: Any) -> None:
    """Report progress into run.json under the experiments runner; else keep TRL's bar, logs unprinted."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from star_lib.train.progress import progress_callback

    progress = progress_callback("rl")  # under the experiments runner: step, reward, ETA into run.json
    if progress is not None or trainer.args.disable_tqdm:  # else every log dict is printed (metrics.parquet)
        trainer.remove_callback(PrinterCallback)
    if progress is not None:  # the runner's table shows the progress; the bar would print the dicts too
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(progress)
