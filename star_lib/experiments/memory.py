"""Per-GPU memory planner: will a training stage fit the GPUs of a cluster profile? (``star plan``).

Pure arithmetic, no torch: the model's shape (:data:`MODEL_SHAPES`, copied from the checkpoints'
``config.json``), the run's micro-batch and context, the distributed strategy and the vLLM share give a
per-GPU estimate, and a run that cannot fit is refused *before* it is submitted, naming what to change.

The terms (bytes per GPU; ``P`` parameters, ``N`` GPUs sharing the training state, ``T`` tokens per
micro-batch = ``micro_batch_size × context``):

- **training state**: mixed-precision Adam keeps 16 bytes per parameter — fp32 weights (the master copy,
  4), fp32 gradients (4), Adam's two fp32 moments (8) — the figure of the ZeRO paper (Rajbhandari et al.,
  2020, §3.1: 2 + 2 + 12 bytes with bf16 weights and an fp32 master copy; the same 16 here, where the
  weights *are* the fp32 master and bf16 is autocast). DDP replicates all of it; ZeRO-2 shards gradients
  and moments over ``N``; ZeRO-3 and FSDP2 (full shard) shard everything, and gather one layer's bf16
  weights at a time (the largest module, the embedding, counted twice for prefetch).
- **DDP's gradient buckets** (plain DDP on more than one GPU): PyTorch's ``DistributedDataParallel``
  all-reduces gradients through flat buckets of its own, each capped at ``bucket_cap_mb`` (25 MiB by
  default) but allocated together for *every* parameter when DDP wraps the model, so they add up to the
  whole gradient size in the gradients' dtype (fp32 here: ``4·P``). With ``gradient_as_bucket_view=True``
  the gradients are views into the buckets instead — the DDP docstring's "the saved memory size will be
  equal to the total gradients size" — but transformers' Trainer builds its
  ``DistributedDataParallelKwargs`` without that flag (accelerate's default: False), so each GPU holds
  both copies; the buckets live as long as the DDP module, through the rollout too. One GPU is not wrapped
  in DDP; ZeRO and FSDP reduce through their own (sharded) buffers and are not counted here.
- **activations** (bf16, FlashAttention/SDPA: no ``T²`` term): with gradient checkpointing one hidden state
  per layer is kept (``2·h·T·L``) plus one layer recomputed in full; without it every layer's tensors
  (``2·(8h + 2·kv + 4i)·T`` per layer: norms, q/k/v, attention output, residuals, the gated MLP).
- **logits**: the loss needs log-probabilities over the vocabulary for every completion token: bf16 logits
  and their gradient, ``4·V·T``. On a 32k context this is the largest term (≈ 20 GB for Qwen's 152k vocab).
- **vLLM share** (colocate): ``vllm_gpu_memory_utilization × GPU memory`` while rolling out; with sleep
  mode the engine releases it during the update (:data:`VLLM_ASLEEP_GIB` stays), so the peak is the larger
  of the *update* (training state + activations + logits) and the *rollout* (weights + moments + vLLM). The
  share must hold the engine's bf16 weights (split over tensor-parallel ranks) and one full context of KV.
- **CUDA context and NCCL buffers**: :data:`CUDA_OVERHEAD_GIB`.

A run fits when the peak is at most :data:`USABLE_FRACTION` of the GPU's memory (allocator fragmentation).
Estimates, not measurements: they decide whether to try, and say which term to shrink.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from star_lib.experiments.config import ConfigError
from star_lib.train.models import PRESETS, TINY_SCALE

GIB = 1024**3
"""Bytes in a GiB (GPU memory is sold in GiB: an "80GB" A100 has 80 GiB)."""
BYTES_PER_PARAM_ADAM = 16
"""Mixed-precision AdamW: fp32 weights 4 + fp32 gradients 4 + fp32 moments 8 (ZeRO paper's 16Ψ)."""
CUDA_OVERHEAD_GIB = 1.5
"""CUDA context, cuBLAS workspaces and NCCL buffers per GPU."""
VLLM_ASLEEP_GIB = 1.0
"""What a colocated vLLM engine keeps while asleep (level 2: weights and KV cache released)."""
USABLE_FRACTION = 0.95
"""Share of a GPU's memory a plan may use (the rest absorbs allocator fragmentation)."""
STRATEGIES: tuple[str, ...] = ("ddp", "zero2", "zero3", "fsdp2")
"""How the training state is spread over GPUs: replicated (DDP), optimizer+gradients sharded (ZeRO-2), all of
it sharded (ZeRO-3, FSDP2 full shard)."""


@dataclass(frozen=True)
class ModelShape:
    """What the arithmetic needs of a decoder-only transformer (``config.json`` fields)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    tie_word_embeddings: bool
    attention_bias: bool = True
    """Qwen2 has biases on q/k/v (Llama does not)."""

    @property
    def kv_dim(self) -> int:
        """Width of the key (or value) projection: kv heads × head dim."""
        return self.num_key_value_heads * (self.hidden_size // self.num_attention_heads)

    @property
    def parameters(self) -> int:
        """Parameter count (embedding, layers, final norm, LM head unless tied)."""
        h, i, kv = self.hidden_size, self.intermediate_size, self.kv_dim
        attention = 2 * h * h + 2 * h * kv + ((h + 2 * kv) if self.attention_bias else 0)
        layer = attention + 3 * h * i + 2 * h
        embedding = self.vocab_size * h
        return embedding * (1 if self.tie_word_embeddings else 2) + self.num_hidden_layers * layer + h

    @property
    def embedding_parameters(self) -> int:
        """The largest single module (embedding or LM head), gathered whole under ZeRO-3."""
        return self.vocab_size * self.hidden_size

    def kv_cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV cache per token (keys and values of every layer)."""
        return 2 * self.num_hidden_layers * self.kv_dim * dtype_bytes

    def layer_activation_bytes_per_token(self) -> int:
        """bf16 tensors one layer keeps for its backward pass, per token (no ``T²`` attention term)."""
        h, i = self.hidden_size, self.intermediate_size
        return 2 * (8 * h + 2 * self.kv_dim + 4 * i)


TINY_VOCAB = 4400
"""Vocabulary of the tiny presets' shapes: the tiny tokenizer's ~4.4 k tokens (the learning-signal recipe's
is ~2.7 k, so its models are a little smaller than planned here)."""


def tiny_shape(preset: str) -> ModelShape:
    """Return the shape of a from-scratch preset (``tiny``, ``tiny-s``, ``tiny-l``) from its architecture.

    The numbers are those of ``star_lib.train.models.PRESETS[preset].architecture`` (not restated here), with
    :data:`TINY_VOCAB` tokens.

    Raises:
        ConfigError: ``preset`` is not a from-scratch preset.

    """
    arch = PRESETS[preset].architecture if preset in PRESETS else None
    if arch is None:
        tiny = sorted(name for name, p in PRESETS.items() if p.is_tiny)
        raise ConfigError(f"model {preset!r} is not built from an architecture; choose one of {tiny}")
    return ModelShape(
        arch.hidden_size,
        arch.intermediate_size,
        arch.num_hidden_layers,
        arch.num_attention_heads,
        arch.num_key_value_heads,
        TINY_VOCAB,
        tie_word_embeddings=arch.tie_word_embeddings,
    )


# Shapes from each checkpoint's config.json on the Hugging Face hub (Qwen/Qwen2.5-{1.5B,3B,7B}-Instruct,
# HuggingFaceTB/SmolLM2-135M-Instruct); the tiny ones from their star_lib.train.models architectures with
# the tiny tokenizer's ~4.4k vocabulary (tiny_shape).
MODEL_SHAPES: dict[str, ModelShape] = {
    "qwen2.5-1.5b": ModelShape(1536, 8960, 28, 12, 2, 151936, tie_word_embeddings=True),
    "qwen2.5-3b": ModelShape(2048, 11008, 36, 16, 2, 151936, tie_word_embeddings=True),
    "qwen2.5-7b": ModelShape(3584, 18944, 28, 28, 4, 152064, tie_word_embeddings=False),
    "smollm2-135m": ModelShape(576, 1536, 30, 9, 3, 49152, tie_word_embeddings=True, attention_bias=False),
    **{name: tiny_shape(name) for name in TINY_SCALE},
}
"""Model shapes by preset name."""

GPU_MEMORY_GIB: dict[str, float] = {
    "h200": 141.0,
    "h100": 80.0,
    "a100-40gb": 40.0,
    "a100": 80.0,  # the paper's A100s are the 80 GB ones; say a100-40gb (constraint or name) otherwise
    "l40s": 48.0,
    "a10": 24.0,
}
"""GPU memory by a name found in a profile's name, partition or ``constraint`` (longest match first)."""


@dataclass(frozen=True)
class TrainingPlanInput:
    """What one training stage asks of each GPU."""

    preset: str
    """Model preset (a key of :data:`MODEL_SHAPES`)."""
    stage: str = "rl"
    """``rl`` or ``sft`` (SFT has no vLLM)."""
    micro_batch_size: int = 1
    """Sequences per forward/backward pass on one GPU."""
    context_tokens: int = 32768
    """Tokens per sequence (the RL context budget, the SFT ``max_length``)."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass."""
    use_vllm: bool = False
    """A colocated vLLM engine on every GPU (RL)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Its share of the GPU."""
    vllm_sleep_mode: bool = True
    """The engine releases its share during the update."""
    vllm_tensor_parallel_size: int = 1
    """GPUs one engine spans."""
    gradient_as_bucket_view: bool = False
    """DDP's gradients are views into its all-reduce buckets (no second copy). transformers' Trainer never
    sets it (its ``DistributedDataParallelKwargs`` takes accelerate's default, False)."""


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU estimate of one stage on one cluster layout (GiB)."""

    stage: str
    preset: str
    strategy: str
    gpus: int
    gpu_memory_gib: float
    terms: dict[str, float]
    """``weights``, ``gradients``, ``ddp_buckets`` (DDP's all-reduce copy of the gradients),
    ``optimizer``, ``gathered_weights``, ``activations``, ``logits``, ``vllm`` (its share while rolling
    out), ``overhead`` — GiB per GPU."""
    update_gib: float
    """Peak while computing the loss and its gradient."""
    rollout_gib: float
    """Peak while vLLM rolls out (weights + moments + vLLM share; 0 without vLLM)."""
    problems: list[str] = field(default_factory=list)
    """Why it cannot fit, each naming what to change (empty: it fits)."""

    @property
    def peak_gib(self) -> float:
        """The larger of the two phases."""
        return max(self.update_gib, self.rollout_gib)

    @property
    def budget_gib(self) -> float:
        """What the plan may use: :data:`USABLE_FRACTION` of the GPU's memory."""
        return self.gpu_memory_gib * USABLE_FRACTION

    @property
    def fits(self) -> bool:
        """True when nothing stands in the way."""
        return not self.problems

    def table(self) -> str:
        """Return the plan as aligned text lines (what ``star plan`` prints)."""
        where = f"{self.gpus} GPU(s) of {self.gpu_memory_gib:g} GiB"
        lines = [f"{self.stage}: {self.preset} on {where}, {self.strategy}"]
        for key, value in self.terms.items():
            lines.append(f"  {key:<17}{value:8.1f} GiB")
        lines.append(f"  {'update peak':<17}{self.update_gib:8.1f} GiB")
        if self.rollout_gib:
            lines.append(f"  {'rollout peak':<17}{self.rollout_gib:8.1f} GiB")
        verdict = "fits" if self.fits else "does NOT fit"
        lines.append(f"  peak {self.peak_gib:.1f} GiB of {self.budget_gib:.1f} GiB usable: {verdict}")
        lines.extend(f"  - {problem}" for problem in self.problems)
        return "\n".join(lines)


def model_shape(preset: str) -> ModelShape:
    """Return the shape of a preset; ConfigError naming the known ones."""
    try:
        return MODEL_SHAPES[preset]
    except KeyError:
        raise ConfigError(f"model {preset!r}: no known shape; choose one of {sorted(MODEL_SHAPES)}") from None


def plan_training(
    inputs: TrainingPlanInput, *, gpus: int, gpu_memory_gib: float, strategy: str
) -> MemoryPlan:
    """Estimate one GPU's memory for a training stage and list what stands in the way of fitting.

    Example:
        >>> plan = plan_training(TrainingPlanInput("qwen2.5-7b"), gpus=8, gpu_memory_gib=80, strategy="ddp")
        >>> plan.fits, round(plan.terms["weights"] + plan.terms["gradients"] + plan.terms["optimizer"], 1)
        (False, 113.5)

    Raises:
        ConfigError: an unknown preset or strategy, or a layout that makes no sense (no GPUs).

    """
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy: {strategy!r} is not allowed; choose one of {list(STRATEGIES)}")
    if gpus < 1:
        raise ConfigError("the cluster profile has no GPUs (gpus_per_node: 0); plan a GPU profile")
    if not gpu_memory_gib > 0:
        raise ConfigError(f"GPU memory must be > 0 GiB, got {gpu_memory_gib}")
    if inputs.micro_batch_size < 1 or inputs.context_tokens < 1:
        raise ConfigError("micro_batch_size and the context must be >= 1")
    shape = model_shape(inputs.preset)
    p = shape.parameters
    shard_state = gpus if strategy in ("zero3", "fsdp2") else 1
    shard_rest = gpus if strategy != "ddp" else 1
    tokens = inputs.micro_batch_size * inputs.context_tokens
    if inputs.gradient_checkpointing:
        activations = 2 * shape.hidden_size * tokens * shape.num_hidden_layers
        activations += shape.layer_activation_bytes_per_token() * tokens
    else:
        activations = shape.layer_activation_bytes_per_token() * tokens * shape.num_hidden_layers
    buckets = strategy == "ddp" and gpus > 1 and not inputs.gradient_as_bucket_view
    terms = {
        "weights": 4 * p / shard_state / GIB,
        "gradients": 4 * p / shard_rest / GIB,
        "ddp_buckets": 4 * p / GIB if buckets else 0.0,  # fp32, like the gradients they copy
        "optimizer": 8 * p / shard_rest / GIB,
        "gathered_weights": (2 * 2 * shape.embedding_parameters / GIB) if shard_state > 1 else 0.0,
        "activations": activations / GIB,
        "logits": 4 * shape.vocab_size * tokens / GIB,
        "vllm": 0.0,
        "overhead": CUDA_OVERHEAD_GIB,
    }
    vllm = inputs.use_vllm and inputs.stage == "rl"
    share = inputs.vllm_gpu_memory_utilization * gpu_memory_gib if vllm else 0.0
    terms["vllm"] = share
    held_in_update = (VLLM_ASLEEP_GIB if inputs.vllm_sleep_mode else share) if vllm else 0.0
    update = sum(v for k, v in terms.items() if k != "vllm") + held_in_update
    rollout = 0.0
    if vllm:  # gradients are freed after the step; weights, moments and DDP's buckets stay on the GPU
        kept = terms["weights"] + terms["ddp_buckets"] + terms["optimizer"] + terms["gathered_weights"]
        rollout = kept + share + CUDA_OVERHEAD_GIB
    plan = MemoryPlan(
        stage=inputs.stage,
        preset=inputs.preset,
        strategy=strategy,
        gpus=gpus,
        gpu_memory_gib=float(gpu_memory_gib),
        terms=terms,
        update_gib=update,
        rollout_gib=rollout,
    )
    plan.problems.extend(_problems(plan, inputs, shape))
    return plan


def _problems(plan: MemoryPlan, inputs: TrainingPlanInput, shape: ModelShape) -> list[str]:
    """Say what to change, biggest lever first."""
    budget, terms, out = plan.budget_gib, plan.terms, []
    state = terms["weights"] + terms["gradients"] + terms["optimizer"]
    if plan.update_gib > budget:
        if plan.strategy != "zero3" and plan.strategy != "fsdp2" and state > budget / 2:
            out.append(
                f"the training state alone takes {state:.1f} GiB per GPU under {plan.strategy} "
                f"(16 bytes × {shape.parameters / 1e9:.2f} B parameters"
                + (" replicated" if plan.strategy == "ddp" else "")
                + "): shard it with --strategy zero3 (slurm/accelerate/zero3.yaml, or zero3-2node.yaml "
                "on 2 nodes), or use more GPUs"
            )
        if terms["ddp_buckets"] > 0:
            out.append(
                f"DDP's gradient buckets take {terms['ddp_buckets']:.1f} GiB (PyTorch's all-reduce buffers, "
                "a second fp32 copy of the gradients: transformers leaves gradient_as_bucket_view off): "
                "--strategy zero3 (slurm/accelerate/zero3.yaml) reduces through sharded buffers instead"
            )
        if not inputs.gradient_checkpointing:
            out.append(f"activations take {terms['activations']:.1f} GiB: turn gradient_checkpointing on")
        per_token = terms["activations"] + terms["logits"]
        if per_token > budget / 3:
            out.append(
                f"activations + logits take {per_token:.1f} GiB at {inputs.micro_batch_size} × "
                f"{inputs.context_tokens} tokens: lower micro_batch_size"
                + (" (1 is the least)" if inputs.micro_batch_size == 1 else "")
                + " or the context (max_context_tokens / max_length)"
            )
        if inputs.use_vllm and not inputs.vllm_sleep_mode:
            out.append(
                f"vLLM holds {terms['vllm']:.1f} GiB during the update: set vllm_sleep_mode: true "
                "or lower vllm_gpu_memory_utilization"
            )
        if not out:
            out.append(f"the update needs {plan.update_gib:.1f} GiB of {budget:.1f}: use more or larger GPUs")
    if plan.rollout_gib > budget:
        out.append(
            f"rolling out needs {plan.rollout_gib:.1f} GiB (training state on the GPU + vLLM's "
            f"{terms['vllm']:.1f} GiB share): lower vllm_gpu_memory_utilization or shard the state "
            "with --strategy zero3"
        )
    if inputs.use_vllm and inputs.stage == "rl":
        tp = max(1, inputs.vllm_tensor_parallel_size)
        need = (
            2 * shape.parameters / tp + shape.kv_cache_bytes_per_token() / tp * inputs.context_tokens
        ) / GIB
        if terms["vllm"] < need:
            out.append(
                f"vLLM's share ({terms['vllm']:.1f} GiB) cannot hold the bf16 weights and one "
                f"{inputs.context_tokens}-token context ({need:.1f} GiB): raise vllm_gpu_memory_utilization "
                "or vllm_tensor_parallel_size"
            )
    return out


# ───────────────────────────── inputs from configs and profiles ─────────────────────────────


def gpu_memory_of_profile(profile: Any) -> float:
    """Return the GPU memory (GiB) a cluster profile's GPUs have.

    A ``gpu_memory_gb`` field wins when the profile has one; else a GPU name (:data:`GPU_MEMORY_GIB`) or an
    ``<n>gb`` in the profile's ``additional.constraint``, name or partition.

    Raises:
        ConfigError: when nothing says, naming the ``--gpu-memory-gb`` option.

    """
    explicit = getattr(profile, "gpu_memory_gb", None)
    if explicit:
        return float(explicit)
    additional = getattr(profile, "additional", {}) or {}
    texts = [str(additional.get("constraint") or ""), str(profile.name or ""), str(profile.partition or "")]
    for text in (t.lower() for t in texts):
        sized = re.search(r"(\d+)\s*gb", text)
        if sized:
            return float(sized.group(1))
        for name in sorted(GPU_MEMORY_GIB, key=len, reverse=True):
            if name in text:
                return GPU_MEMORY_GIB[name]
    raise ConfigError(
        f"cluster profile {profile.name!r} does not say which GPUs it has (no GPU name or '<n>gb' in its "
        "name, partition or constraint); pass --gpu-memory-gb"
    )


def strategy_of_accelerate_config(data: Mapping[str, Any], path: str = "accelerate config") -> str:
    """Map an accelerate config (``distributed_type``, DeepSpeed's ``zero_stage``, FSDP) to a strategy."""
    kind = str(data.get("distributed_type", "")).upper()
    if kind in ("MULTI_GPU", "NO", ""):
        return "ddp"
    if kind == "DEEPSPEED":
        stage = int((data.get("deepspeed_config") or {}).get("zero_stage", 0))
        if stage >= 3:
            return "zero3"
        if stage == 2:
            return "zero2"
        return "ddp"  # ZeRO-1 shards only the moments: planned as DDP (a little pessimistic)
    if kind == "FSDP":
        fsdp = data.get("fsdp_config") or {}
        reshard = fsdp.get("fsdp_reshard_after_forward", fsdp.get("fsdp_sharding_strategy", True))
        if str(reshard).upper() in ("FALSE", "SHARD_GRAD_OP"):
            return "zero2"
        return "fsdp2"
    raise ConfigError(
        f"{path}: distributed_type {kind!r} is not one the planner knows (MULTI_GPU, DEEPSPEED, FSDP)"
    )


def rl_inputs(cfg: Any) -> TrainingPlanInput:
    """Build the RL stage's plan input from an ``RLRunConfig`` (its ``world_size`` set to the cluster's).

    The micro-batch is the one :func:`star_lib.train.rl.build_grpo_config` would use on that many GPUs
    (building the layout also refuses a batch that does not split over them).
    """
    from star_lib.train.models import get_preset

    hyper = get_preset(cfg.preset).rl
    checkpointing = cfg.trl_overrides.get("gradient_checkpointing", hyper.gradient_checkpointing)
    return TrainingPlanInput(
        preset=cfg.preset,
        stage="rl",
        micro_batch_size=cfg.batch_layout().micro_batch,
        context_tokens=int(cfg._pick("max_context_tokens")),
        gradient_checkpointing=bool(checkpointing),
        use_vllm=bool(cfg.use_vllm),
        vllm_gpu_memory_utilization=float(cfg.vllm_gpu_memory_utilization),
        vllm_sleep_mode=bool(cfg.vllm_sleep_mode),
        vllm_tensor_parallel_size=int(cfg.vllm_tensor_parallel_size),
    )


def sft_inputs(preset: str, values: Mapping[str, Any]) -> TrainingPlanInput:
    """Build the SFT stage's plan input from its settings (``SFTRunConfig`` fields) over the preset's."""
    from star_lib.train.models import get_preset

    hyper = get_preset(preset).sft
    overrides = dict(values.get("trl_overrides") or {})

    def pick(key: str, default: Any) -> Any:
        value = values.get(key)
        return default if value is None else value

    return TrainingPlanInput(
        preset=preset,
        stage="sft",
        micro_batch_size=int(pick("per_device_train_batch_size", hyper.per_device_train_batch_size)),
        context_tokens=int(pick("max_length", hyper.max_length)),
        gradient_checkpointing=bool(overrides.get("gradient_checkpointing", hyper.gradient_checkpointing)),
    )
