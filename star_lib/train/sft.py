r"""SFT cold start: TRL ``SFTTrainer`` on the teacher's trajectories, loss on assistant turns only.

Input: JSONL rows ``{"messages": [...], "tools": [...]}`` as ``star teacher`` writes them. Assistant
``content`` is the raw model text (``<think>…</think><tool_call>{…}</tool_call>`` or
``…<answer>[…]</answer>``); tool results are ``role: "tool"`` messages that the Qwen2.5 template renders
as ``<tool_response>`` user turns.

``assistant_only_loss=True`` needs ``{% generation %}`` markers; our tokenizers carry TRL's exact ``qwen2_5``
template, so TRL swaps in its training variant (``../shared/STACK.md``). The trained tokens of each assistant
turn are ``"\n" + content + "<|im_end|>\n"`` — the turn's text plus the stop token the model must learn.

Run folder (``output_dir``)::

    config.yaml          this run's SFTRunConfig
    base/                the freshly built tiny model + tokenizer (tiny preset without model_path)
    checkpoints/         TRL checkpoints (checkpoint-<step>/)
    model/               the final model + tokenizer
    metrics.parquet      one row per log event (stage warmup | sft), see star_lib.train.metrics
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from star_lib.train.models import PRESETS, ModelPreset, check_bf16, get_preset, has_accelerator
from star_lib.train.tokenizer import TokenizerConfig
from star_lib.train.warmup import CopyWarmupConfig

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase
    from trl import SFTConfig

ROLES = ("system", "user", "assistant", "tool")
"""Message roles the SFT data may use."""


# ───────────────────────────── config ─────────────────────────────


@dataclass
class SFTRunConfig:
    """One SFT run; ``None`` hyperparameters take the preset's values (``ModelPreset.sft``)."""

    data: str
    """A JSONL file, or a folder whose ``*.jsonl`` files are read in name order."""
    output_dir: str
    """The run folder (``runs/<experiment>/<run>``); created."""
    preset: str = "tiny"
    """Model preset name (``tiny``, ``qwen2.5-1.5b``, ``qwen2.5-3b``, ``qwen2.5-7b``)."""
    model_path: str | None = None
    """Start from this checkpoint folder (or hub id) instead of the preset's source; ``tiny`` without it is
    built from scratch (tokenizer trained on the SFT data)."""
    eval_data: str | None = None
    """Optional held-out JSONL file/folder, evaluated every ``eval_steps``."""
    learning_rate: float | None = None
    """Peak learning rate."""
    lr_scheduler_type: str | None = None
    """Transformers scheduler name (``cosine``, ``linear``, ``constant_with_warmup``…)."""
    warmup_ratio: float | None = None
    """Share of steps warming up, in [0, 1)."""
    num_train_epochs: float | None = None
    """Passes over the data (ignored when ``max_steps`` > 0)."""
    max_steps: int = -1
    """Stop after this many optimizer steps (-1: run the epochs)."""
    per_device_train_batch_size: int | None = None
    """Conversations per device per micro-batch."""
    gradient_accumulation_steps: int | None = None
    """Micro-batches per optimizer step."""
    max_length: int | None = None
    """Longest tokenised conversation; longer ones are truncated (keep the start)."""
    bf16: bool | None = None
    """bfloat16 mixed precision (autocast on CPU)."""
    pad_to_multiple_of: int | None = 64
    """Pad batches to a multiple of this length (STACK.md: unpadded, widely varying lengths grew CPU memory
    to 4.7 GB); None disables."""
    logging_steps: int = 10
    """Log (and write metrics.parquet) every this many steps."""
    save_steps: int = 500
    """Checkpoint every this many steps."""
    save_total_limit: int | None = 2
    """Keep at most this many checkpoints (None: all)."""
    eval_steps: int = 200
    """Evaluate on ``eval_data`` every this many steps."""
    seed: int = 0
    """Seed for initialisation, shuffling and the copy warm-up."""
    time_budget_s: float | None = None
    """Stop SFT after this many seconds (the model is still saved); None: no limit."""
    copy_warmup: CopyWarmupConfig | None = None
    """Run the copy-task warm-up before SFT (decisive for from-scratch tiny models, STACK.md); None: skip."""
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    """Tokenizer training options (``tiny`` built from scratch only); in YAML ``whole_words`` may name a
    vocabulary of :mod:`star_lib.travel.vocabulary` (``tiny-entities``)."""
    resume_from_checkpoint: str | None = None
    """Resume from a ``checkpoints/checkpoint-<step>`` folder or the last complete checkpoint under a run
    folder. Metrics logged after that step are dropped and the copy warm-up is not repeated."""
    trl_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra ``trl.SFTConfig`` fields (e.g. ``{"weight_decay": 0.01}``), applied last."""
    progress: bool = True
    """Show TRL's progress bar."""
    labelled_logits_only: bool = False
    """Score the LM head only at the positions that have a label (the assistant tokens; see
    :func:`add_labelled_lm_head`). TRL's fused head scores every position on CPU (its compact path is
    Triton-only), and with a large vocabulary the head dominates a step; this gives the same loss, gradients,
    ``entropy`` and ``mean_token_accuracy`` for the labelled fraction of its cost. Off: TRL's forward."""

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"preset {self.preset!r} is unknown; choose one of {sorted(PRESETS)}")
        if self.warmup_ratio is not None and not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"max_steps must be -1 (use epochs) or >= 1, got {self.max_steps}")
        for name in ("learning_rate", "num_train_epochs", "time_budget_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 (or None for the preset's value), got {value}")
        for name in (
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "max_length",
            "pad_to_multiple_of",
        ):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 (or None), got {value}")
        if min(self.logging_steps, self.save_steps, self.eval_steps) < 1:
            raise ValueError("logging_steps, save_steps and eval_steps must be >= 1")
        if isinstance(self.copy_warmup, dict):
            self.copy_warmup = CopyWarmupConfig(**self.copy_warmup)
        if isinstance(self.tokenizer, dict):
            values = dict(self.tokenizer)
            if isinstance(values.get("whole_words"), str):  # a named vocabulary, e.g. "tiny-entities"
                from star_lib.travel.vocabulary import whole_words

                values["whole_words"] = whole_words(values["whole_words"])
            elif isinstance(values.get("whole_words"), list):
                values["whole_words"] = tuple(values["whole_words"])
            self.tokenizer = TokenizerConfig(**values)
        self._check_overrides()

    def _check_overrides(self) -> None:
        if not self.trl_overrides:
            return
        import dataclasses

        from trl import SFTConfig

        known = {f.name for f in dataclasses.fields(SFTConfig)}
        unknown = sorted(set(self.trl_overrides) - known)
        if unknown:
            raise ValueError(f"trl_overrides has fields trl.SFTConfig lacks: {unknown}")
        fixed = sorted(set(self.trl_overrides) & {"assistant_only_loss", "output_dir"})
        if fixed:
            raise ValueError(
                f"trl_overrides may not set {fixed}: assistant-only loss and the run layout are fixed"
            )

    @property
    def model_preset(self) -> ModelPreset:
        """The preset object."""
        return get_preset(self.preset)


def build_sft_config(cfg: SFTRunConfig) -> SFTConfig:
    """Build the ``trl.SFTConfig``: preset defaults, then ``cfg``'s values, then ``trl_overrides``."""
    from trl import SFTConfig

    hp = cfg.model_preset.sft

    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    kwargs: dict[str, Any] = {
        "output_dir": str(Path(cfg.output_dir) / "checkpoints"),
        "assistant_only_loss": True,
        "packing": False,
        "pad_to_multiple_of": cfg.pad_to_multiple_of,
        "learning_rate": pick(cfg.learning_rate, hp.learning_rate),
        "lr_scheduler_type": pick(cfg.lr_scheduler_type, hp.lr_scheduler_type),
        "warmup_steps": float(
            pick(cfg.warmup_ratio, hp.warmup_ratio)
        ),  # a float < 1 is a ratio in transformers 5
        "num_train_epochs": pick(cfg.num_train_epochs, hp.num_train_epochs),
        "max_steps": cfg.max_steps,
        "per_device_train_batch_size": pick(cfg.per_device_train_batch_size, hp.per_device_train_batch_size),
        "gradient_accumulation_steps": pick(cfg.gradient_accumulation_steps, hp.gradient_accumulation_steps),
        "max_length": pick(cfg.max_length, hp.max_length),
        "bf16": check_bf16(bool(pick(cfg.bf16, hp.bf16)), on_accelerator=has_accelerator()),
        "gradient_checkpointing": hp.gradient_checkpointing,
        "logging_steps": cfg.logging_steps,
        "logging_first_step": True,
        "save_strategy": "steps",
        "save_steps": cfg.save_steps,
        "save_total_limit": cfg.save_total_limit,
        "eval_strategy": "steps" if cfg.eval_data else "no",
        "eval_steps": cfg.eval_steps,
        "seed": cfg.seed,
        "data_seed": cfg.seed,
        "report_to": "none",
        "disable_tqdm": not cfg.progress,
        "dataloader_num_workers": 0,
        "use_cpu": not has_accelerator(),  # transformers refuses bf16 on CPU unless told it is on CPU
    }
    kwargs.update(cfg.trl_overrides)
    return SFTConfig(**kwargs)


# ───────────────────────────── data ─────────────────────────────


def _jsonl_files(path: str | Path) -> list[Path]:
    root = Path(path)
    if root.is_dir():
        files = sorted(root.glob("*.jsonl"))
        if not files:
            raise FileNotFoundError(f"{root} holds no *.jsonl files; point --data at the teacher's output")
        return files
    if not root.is_file():
        raise FileNotFoundError(f"SFT data {root} does not exist; write it with `star teacher` first")
    return [root]


def _clean_row(row: Any, where: str) -> dict[str, Any]:
    """Validate one JSONL row; keep ``role``/``content`` of each message and ``tools`` as a JSON string."""
    if not isinstance(row, dict) or not isinstance(row.get("messages"), list) or not row["messages"]:
        raise ValueError(f"{where}: a row needs a non-empty 'messages' list")
    messages = []
    for i, message in enumerate(row["messages"]):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ValueError(f"{where}: message {i} needs a role in {ROLES}")
        if message.get("tool_calls"):
            raise ValueError(
                f"{where}: message {i} uses 'tool_calls'; write the call as raw text in 'content' "
                '(<tool_call>{"name": …, "arguments": {…}}</tool_call>), the protocol the agent parses'
            )
        if not isinstance(message.get("content"), str):
            raise ValueError(f"{where}: message {i} ({message['role']}) needs a string 'content'")
        messages.append({"role": message["role"], "content": message["content"]})
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError(f"{where}: no assistant message, nothing to train on")
    tools = row.get("tools") or None
    if isinstance(tools, str):  # `star teacher` stores the schemas as JSON text (one Arrow type per column)
        try:
            tools = json.loads(tools)
        except ValueError as exc:
            raise ValueError(f"{where}: 'tools' is a string but not JSON: {exc}") from exc
    if tools is not None and not isinstance(tools, list):
        raise ValueError(f"{where}: 'tools' must be a list of function schemas (or its JSON text)")
    # A JSON string, because Arrow would merge the tools' different schemas and fill missing keys with nulls;
    # TRL json-decodes string tools before rendering.
    return {"messages": messages, "tools": json.dumps(tools)}


def read_sft_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read the validated rows of a JSONL file or folder (``messages`` + ``tools`` as a JSON string).

    Raises:
        FileNotFoundError: no such file, or a folder without ``*.jsonl``.
        ValueError: a malformed row (message names file and line).

    """
    rows = []
    for file in _jsonl_files(path):
        with file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                where = f"{file}:{number}"
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{where}: not JSON ({exc})") from None
                rows.append(_clean_row(data, where))
    if not rows:
        raise ValueError(f"{path}: no conversations")
    return rows


def normalise_rows(rows: Iterable[dict[str, Any]], source: str = "rows") -> list[dict[str, Any]]:
    """Validate in-memory conversations the way :func:`read_sft_rows` validates a file's."""
    return [_clean_row(row, f"{source}[{i}]") for i, row in enumerate(rows)]


def load_sft_dataset(path: str | Path) -> Dataset:
    """Load the SFT data as a ``datasets.Dataset`` in TRL's conversational format (:func:`read_sft_rows`)."""
    from datasets import Dataset

    return Dataset.from_list(read_sft_rows(path))


def render_conversations(rows: Iterable[dict[str, Any]], tokenizer: PreTrainedTokenizerBase) -> Iterator[str]:
    """Each row rendered with ``tokenizer``'s chat template — the text the model is trained on."""
    for row in rows:
        tools = json.loads(row["tools"]) if isinstance(row.get("tools"), str) else row.get("tools")
        yield tokenizer.apply_chat_template(row["messages"], tools=tools, tokenize=False)


def tokenizer_corpus(rows: list[dict[str, Any]]) -> Iterator[str]:
    """Texts for training the tiny tokenizer: the conversations rendered with the Qwen2.5 template.

    A throw-away byte-level tokenizer renders them (rendering needs only the template, not a vocabulary).
    """
    from star_lib.train.tokenizer import train_tokenizer

    renderer = train_tokenizer(["a"], TokenizerConfig(vocab_size=300, digits="single"))
    return render_conversations(rows, renderer)


def check_assistant_masking(tokenizer: PreTrainedTokenizerBase) -> str:
    """Return the chat template TRL will use for ``assistant_only_loss``; raise when masking cannot work.

    Raises:
        ValueError: saying how to fix the tokenizer's template.

    """
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = tokenizer.chat_template
    if isinstance(template, str) and has_generation_markers(template):
        return template
    try:
        training = get_training_chat_template(tokenizer)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            "assistant-only loss needs a chat template with {% generation %} markers or one TRL knows "
            "byte for byte; set tokenizer.chat_template = "
            "star_lib.train.tokenizer.trl_qwen2_5_chat_template() "
            f"(TRL said: {exc})"
        ) from None
    return training if training is not None else template


# ───────────────────────────── run ─────────────────────────────


@dataclass
class SFTResult:
    """What :func:`run_sft` produced."""

    output_dir: Path
    """The run folder."""
    model_dir: Path
    """The final model + tokenizer."""
    metrics_path: Path
    """``metrics.parquet``."""
    steps: int
    """Optimizer steps run."""
    first_loss: float
    """The first logged training loss."""
    last_loss: float
    """The last logged training loss."""
    train_tokens: int
    """Non-padding tokens seen in SFT."""
    seconds: float
    """Wall-clock time of ``trainer.train()``."""
    warmup: Any = None
    """The :class:`star_lib.train.warmup.CopyWarmupResult`, when a warm-up ran."""

    @property
    def tokens_per_s(self) -> float:
        """SFT throughput (non-padding tokens per second, including data and logging overhead)."""
        return self.train_tokens / self.seconds if self.seconds > 0 else 0.0


def _save_config(cfg: SFTRunConfig, out: Path) -> None:
    import yaml

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump({"sft": asdict(cfg)}, sort_keys=False), encoding="utf-8")


def prepare_model(cfg: SFTRunConfig, rows: list[dict[str, Any]]) -> tuple[Any, Any]:
    """Load the model SFT starts from: ``model_path``, the preset's checkpoint, or a new tiny model."""
    from star_lib.train.models import build_tiny, load_model_and_tokenizer

    preset = cfg.model_preset
    if cfg.model_path is not None:
        return load_model_and_tokenizer(preset, path=cfg.model_path)
    if not preset.is_tiny:
        return load_model_and_tokenizer(preset)
    from star_lib.train.metrics import main_process_first

    base = Path(cfg.output_dir) / "base"
    with main_process_first():  # rank 0 builds base/; the other ranks then load it
        if not (base / "config.json").is_file():  # a resumed run keeps the tokenizer it was trained with
            build_tiny(
                tokenizer_corpus(rows),
                base,
                tokenizer_config=cfg.tokenizer,
                architecture=preset.architecture,
                seed=cfg.seed,
            )
    return load_model_and_tokenizer(preset, path=base)


def make_sft_trainer(cfg: SFTRunConfig, model: Any, tokenizer: Any, rows: list[dict[str, Any]], callbacks=()):
    """Build the configured ``trl.SFTTrainer`` (it tokenises the data; trains nothing yet)."""
    from datasets import Dataset
    from trl import SFTTrainer

    check_assistant_masking(tokenizer)
    trainer = SFTTrainer(
        model=model,
        args=build_sft_config(cfg),
        train_dataset=Dataset.from_list(rows),
        eval_dataset=load_sft_dataset(cfg.eval_data) if cfg.eval_data else None,
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    if cfg.labelled_logits_only:
        add_labelled_lm_head(trainer.model)
    return trainer


_VOCAB_TILE = 32768
"""Vocabulary columns per LM-head tile, as TRL's fused head (``_CHUNKED_LOGPROB_CHUNK_SIZE``)."""
_FUSED_OUTPUTS = ("log_probs", "entropy", "is_top1")
"""The per-token fields ``SFTTrainer`` asks its fused head for (the loss, ``entropy``,
``mean_token_accuracy``)."""


def add_labelled_lm_head(model: Any) -> None:
    """Make ``model(..., fused_lm_head=True)`` score only the positions whose shifted label is not -100.

    ``SFTTrainer`` patches the model's forward with TRL's fused LM head
    (``trl.trainer.utils.add_fused_lm_head``): per-token log-probabilities computed in tiles without the
    ``(B, T, vocab)`` logits. On CUDA with Triton it projects only the labelled positions, elsewhere (our
    CPUs) every position, then zeroes the unlabelled ones. This wraps that forward: the fused calls run the
    model body, gather the labelled hidden states and give them to the same kernel
    (``trl.kernels.ChunkedLogProbFunction``), then scatter the results back to ``(B, T-1)`` as TRL's compact
    path does; the loss is TRL's (sum over labels / label count, or / ``num_items_in_batch`` when the trainer
    passes it). A batch without labels yields a zero loss that still back-propagates. Calls without
    ``fused_lm_head`` (generation, ``return_outputs``) go to TRL's forward unchanged.

    Args:
        model: the trainer's model, after ``SFTTrainer`` patched it.

    Raises:
        ValueError: the model's logits are scaled or softcapped, or it is a mixture of experts (the
            configuration should turn ``labelled_logits_only`` off).

    """
    import functools
    import types

    from trl.kernels import ChunkedLogProbFunction
    from trl.trainer.utils import FusedCausalLMOutput

    from star_lib.train.warmup import check_plain_head

    check_plain_head(model, "sft.labelled_logits_only")
    fused_forward = model.forward  # TRL's patched forward (a bound method)

    @functools.wraps(type(model).forward)  # generate() validates its kwargs against this signature
    def _labelled_forward(
        self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None, **kwargs
    ):
        if not fused_lm_head:
            return fused_forward(
                *args,
                labels=labels,
                shift_labels=shift_labels,
                num_items_in_batch=num_items_in_batch,
                **kwargs,
            )
        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state  # (B, T, H)
        if shift_labels is None:
            hidden, labels = hidden[:, :-1], labels[:, 1:]  # position t predicts token t+1
        else:  # pre-shifted labels (context/sequence parallelism)
            labels = shift_labels
        head = self.get_output_embeddings()
        hidden, labels = hidden.to(head.weight.device), labels.to(head.weight.device)
        mask = labels != -100  # (B, T-1)
        per_token = ChunkedLogProbFunction.apply(
            hidden[mask], head.weight, head.bias, labels[mask], 1.0, _VOCAB_TILE, None, 1.0, _FUSED_OUTPUTS
        )
        # masked_scatter keeps an all-unlabelled batch connected to the model (a differentiable zero)
        log_probs, entropy, log_sum_sq_probs, mean_logits, is_top1 = (
            None if x is None else x.new_zeros(mask.shape).masked_scatter(mask, x) for x in per_token
        )
        denominator = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        return FusedCausalLMOutput(
            loss=-log_probs.sum() / denominator,
            log_probs=log_probs,
            entropy=entropy,
            log_sum_sq_probs=log_sum_sq_probs,
            mean_logits=mean_logits,
            is_top1=is_top1,
            label_mask=mask,
            aux_loss=None,
        )

    _labelled_forward.labelled_logits_only = True  # marks the patch (wraps copied the model's name)
    model.forward = types.MethodType(_labelled_forward, model)


def _resume_point(cfg: SFTRunConfig) -> Path | None:
    """Return the checkpoint to resume from (None: a fresh run) and trim the logs written after it.

    Raises:
        FileNotFoundError: ``resume_from_checkpoint`` holds no complete checkpoint.

    """
    from star_lib.train.resume import checkpoint_step, find_checkpoint, trim_run_logs

    if cfg.resume_from_checkpoint is None:
        return None
    checkpoint = find_checkpoint(cfg.resume_from_checkpoint)
    if int(os.environ.get("RANK", "0")) == 0:  # under torchrun only the main process owns the logs
        trim_run_logs(cfg.output_dir, checkpoint_step(checkpoint), stages=("sft",))
    return checkpoint


def run_sft(cfg: SFTRunConfig) -> SFTResult:
    """Run SFT (optionally after the copy warm-up) and save the final model under ``output_dir/model``."""
    from star_lib.train.metrics import MetricsLog, ParquetMetricsCallback, TimeBudgetCallback
    from star_lib.train.resume import TrainerCountersCallback
    from star_lib.train.warmup import copy_warmup

    out = Path(cfg.output_dir)
    rows = read_sft_rows(cfg.data)
    checkpoint = _resume_point(cfg)
    _save_config(cfg, out)
    model, tokenizer = prepare_model(cfg, rows)
    if checkpoint is None and int(os.environ.get("RANK", "0")) == 0:
        (out / "metrics.parquet").unlink(missing_ok=True)  # restarted from scratch: new logs, not appended
    metrics = MetricsLog(out / "metrics.parquet")
    warm = None
    if cfg.copy_warmup and checkpoint is None:  # a resumed run's weights come from its checkpoint
        warm = copy_warmup(model, tokenizer, cfg.copy_warmup, metrics=metrics)

    callbacks: list[Any] = [ParquetMetricsCallback(metrics, stage="sft")]
    if cfg.time_budget_s is not None:
        callbacks.append(TimeBudgetCallback(cfg.time_budget_s))
    trainer = make_sft_trainer(cfg, model, tokenizer, rows, callbacks)
    trainer.add_callback(TrainerCountersCallback(trainer, checkpoint))
    if not cfg.progress:  # without a bar transformers prints every log dict (metrics.parquet has them)
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    from star_lib.train.progress import progress_callback

    if (progress := progress_callback("sft")) is not None:  # under the experiments runner: step, loss, ETA
        trainer.add_callback(progress)
    from star_lib.agent.protocol import detect_protocol
    from star_lib.train.finish import train_and_save

    protocol = detect_protocol(rows[0]["messages"])  # the protocol its data speaks
    facts = {}
    if trainer.accelerator.num_processes > 1:  # for ranks.json: each rank iterates its own share of the rows
        facts["batches_per_epoch"] = len(trainer.get_train_dataloader())
    model_dir, seconds = train_and_save(
        trainer, checkpoint, out, tokenizer=tokenizer, protocol=protocol, metrics=metrics, rank_facts=facts
    )
    losses = metrics.values("sft", "train/loss")
    return SFTResult(
        output_dir=out,
        model_dir=model_dir,
        metrics_path=metrics.path,
        steps=trainer.state.global_step,
        first_loss=losses[0] if losses else float("nan"),
        last_loss=losses[-1] if losses else float("nan"),
        train_tokens=int(getattr(trainer, "_total_train_tokens", 0)),
        seconds=seconds,
        warmup=warm,
    )
