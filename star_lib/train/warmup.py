r"""Copy-task warm-up: teach a from-scratch model to copy tokens before SFT.

The tiny-model probe (``../shared/STACK.md``) found that without it nothing works (0 % valid tool calls),
and that a few CPU-minutes of copying random token lists — the copy loss collapses after 700–1,600 steps —
was decisive: trajectories are mostly copying names, dates and numbers from the prompt and tool results.

Each example is a chat turn pair in the model's own format, with the loss on the copy only::

    <|im_start|>user\n t1 t2 … tn<|im_end|>\n<|im_start|>assistant\n t1 t2 … tn<|im_end|>

A plain PyTorch loop (no dataset, no trainer): examples are drawn on the fly from a seeded generator.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from star_lib.train.metrics import MetricsLog


@dataclass(frozen=True)
class CopyWarmupConfig:
    """Copy-task warm-up settings (defaults sized for the ``tiny`` preset on 2 CPU cores)."""

    steps: int = 1500
    """Optimizer steps at most (the probe's copy loss collapsed after 700–1,600 steps)."""
    batch_size: int = 16
    """Sequences per step."""
    min_tokens: int = 4
    """Shortest token list to copy."""
    max_tokens: int = 48
    """Longest token list to copy."""
    learning_rate: float = 1e-3
    """Peak AdamW learning rate (linear warm-up, then cosine decay over ``steps``)."""
    warmup_steps: int = 50
    """Linear warm-up steps."""
    min_lr_rate: float = 0.0
    """The cosine decays to ``min_lr_rate × learning_rate`` (transformers' ``cosine_with_min_lr``)."""
    pool: str = "content"
    """Tokens to copy: ``content`` (the learned BPE tokens) or ``all`` (every non-special token, the
    whole-word entities included — the names trajectories copy)."""
    stop_loss: float | None = 0.02
    """Stop early once the mean copy loss of the last ``log_every`` steps is below this (None: never)."""
    time_budget_s: float | None = None
    """Stop after this many seconds (None: no limit)."""
    bf16: bool = False
    """bfloat16 autocast (off: CPUs run fp32 by default, see :func:`star_lib.train.models.check_bf16`)."""
    log_every: int = 50
    """Record the mean loss every this many steps."""
    seed: int = 0
    """Seed of the token lists."""
    labelled_logits_only: bool = False
    """Apply the LM head only at the positions that have a label (the copied half; :func:`labelled_lm_loss`)
    instead of the model's full ``(B, T, vocab)`` logits: the same loss for a fraction of the head's time and
    memory, which dominate with a large vocabulary (the 18.4 k real-entity one). Off: the model's own loss."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or self.log_every < 1:
            raise ValueError("steps, batch_size and log_every must be >= 1")
        if not 1 <= self.min_tokens <= self.max_tokens:
            raise ValueError(f"need 1 <= min_tokens <= max_tokens, got {self.min_tokens}, {self.max_tokens}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.time_budget_s is not None and self.time_budget_s <= 0:
            raise ValueError("time_budget_s must be > 0 or None")
        if not 0.0 <= self.min_lr_rate < 1.0:
            raise ValueError(f"min_lr_rate must be in [0, 1), got {self.min_lr_rate}")
        if self.pool not in ("content", "all"):
            raise ValueError(f"pool must be 'content' or 'all', got {self.pool!r}")


@dataclass
class CopyWarmupResult:
    """What a warm-up did."""

    steps: int
    """Optimizer steps run."""
    seconds: float
    """Wall-clock time."""
    losses: list[tuple[int, float]] = field(default_factory=list)
    """``(step, mean loss over the last log_every steps)`` pairs."""
    stopped: str = "steps"
    """Why it stopped: ``steps`` | ``loss`` | ``time``."""

    @property
    def final_loss(self) -> float:
        """The last recorded mean loss (nan when nothing was recorded)."""
        return self.losses[-1][1] if self.losses else math.nan


def content_token_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids of ordinary vocabulary tokens (no special, protocol or other added tokens) — what gets copied."""
    added = set(tokenizer.get_added_vocab().values()) | set(tokenizer.all_special_ids)
    return sorted(i for i in tokenizer.get_vocab().values() if i not in added)


def copy_pool(tokenizer: PreTrainedTokenizerBase, pool: str = "content") -> list[int]:
    """Ids the copy task draws from: ``content`` (:func:`content_token_ids`) or ``all`` non-special ids."""
    if pool == "content":
        return content_token_ids(tokenizer)
    special = set(tokenizer.all_special_ids)
    return sorted(i for i in tokenizer.get_vocab().values() if i not in special)


_SCALED_HEAD_FIELDS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)
"""Config fields of models whose logits are not the plain LM-head projection."""


def check_plain_head(model: PreTrainedModel, option: str = "labelled_logits_only") -> None:
    """Refuse ``option`` for a model whose logits are not ``lm_head(hidden)`` (softcapped, scaled or MoE).

    Raises:
        ValueError: naming the option and the model config field that prevents it.

    """
    text_config = model.config.get_text_config()
    for name in (*_SCALED_HEAD_FIELDS, "output_router_logits"):
        if getattr(text_config, name, None) not in (None, False):
            raise ValueError(
                f"{option} needs a model whose logits are the plain LM-head projection, but its config sets "
                f"{name}={getattr(text_config, name)!r}; set {option}: false"
            )


def labelled_lm_loss(model: PreTrainedModel, batch: dict[str, Any]) -> Any:
    """Return the causal-LM loss of ``batch``, the LM head applied only where the shifted label is not -100.

    Equals ``model(**batch).loss`` (mean cross-entropy over the labelled tokens, logits in fp32 as
    transformers' ``ForCausalLMLoss``) without the ``(B, T, vocab)`` logits: the model body runs to its last
    hidden states, then the head projects the labelled positions only. A batch without any label gives a
    zero loss that is still part of the graph (``backward()`` works, every gradient 0) where the full loss is
    nan.

    Args:
        model: a causal LM whose logits are ``model.get_output_embeddings()(hidden)`` (see
            :func:`check_plain_head`) and whose body is ``model.base_model``.
        batch: ``input_ids``, ``labels`` (B, T) and optionally ``attention_mask``.

    """
    import torch.nn.functional as F  # noqa: N812 (torch's own spelling)

    body = {k: v for k, v in batch.items() if k != "labels"}
    hidden = model.base_model(**body, use_cache=False).last_hidden_state[:, :-1]  # (B, T-1, H)
    labels = batch["labels"][:, 1:].to(hidden.device)  # (B, T-1): position t predicts token t+1
    mask = labels != -100
    logits = model.get_output_embeddings()(hidden[mask]).float()  # (N, V), N labelled positions
    if logits.shape[0] == 0:
        return logits.sum()  # 0, connected to the graph
    return F.cross_entropy(logits, labels[mask])


def copy_batch(
    tokenizer: PreTrainedTokenizerBase, pool: Any, cfg: CopyWarmupConfig, generator: Any
) -> dict[str, Any]:
    """One padded batch of copy examples: ``input_ids``, ``attention_mask``, ``labels`` (-100 off the copy).

    Args:
        tokenizer: supplies the chat-format pieces and the pad id.
        pool: 1-D tensor of token ids to draw from (:func:`content_token_ids`).
        cfg: lengths and batch size.
        generator: a seeded ``torch.Generator``.

    """
    import torch

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    head, middle, tail = (
        ids("<|im_start|>user\n"),
        ids("<|im_end|>\n<|im_start|>assistant\n"),
        ids("<|im_end|>"),
    )
    rows, labels = [], []
    for _ in range(cfg.batch_size):
        n = int(torch.randint(cfg.min_tokens, cfg.max_tokens + 1, (1,), generator=generator))
        src = pool[torch.randint(len(pool), (n,), generator=generator)].tolist()
        prompt = head + src + middle
        rows.append(prompt + src + tail)
        labels.append([-100] * len(prompt) + src + tail)
    width = max(map(len, rows))
    pad = tokenizer.pad_token_id
    return {
        "input_ids": torch.tensor([r + [pad] * (width - len(r)) for r in rows]),  # (B, T)
        "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),  # (B, T)
        "labels": torch.tensor([lab + [-100] * (width - len(lab)) for lab in labels]),  # (B, T)
    }


def copy_warmup(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    cfg: CopyWarmupConfig | None = None,
    *,
    metrics: MetricsLog | None = None,
) -> CopyWarmupResult:
    """Train ``model`` in place on the copy task; returns the loss curve.

    Args:
        model: a causal LM (usually the freshly built tiny model).
        tokenizer: its tokenizer (chat tokens ``<|im_start|>``/``<|im_end|>`` and a pad token).
        cfg: settings; defaults to :class:`CopyWarmupConfig()`.
        metrics: when given, each logged mean loss goes there as stage ``warmup`` (``train/loss``).

    The learning rate warms up linearly over ``warmup_steps``, then decays by a cosine to
    ``min_lr_rate × learning_rate`` at ``steps``; the copied tokens come from ``cfg.pool``. With
    ``cfg.labelled_logits_only`` the loss is :func:`labelled_lm_loss` (the same value, the head applied to the
    copied positions only).

    """
    import torch
    from transformers.optimization import get_cosine_with_min_lr_schedule_with_warmup

    cfg = cfg or CopyWarmupConfig()
    if cfg.labelled_logits_only:
        check_plain_head(model, "copy_warmup.labelled_logits_only")
    generator = torch.Generator().manual_seed(cfg.seed)
    pool = torch.tensor(copy_pool(tokenizer, cfg.pool))
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    schedule = get_cosine_with_min_lr_schedule_with_warmup(
        optimizer, cfg.warmup_steps, cfg.steps, min_lr_rate=cfg.min_lr_rate
    )
    result, window, start = CopyWarmupResult(steps=0, seconds=0.0), [], time.monotonic()
    model.train()
    for step in range(1, cfg.steps + 1):
        batch = {k: v.to(device) for k, v in copy_batch(tokenizer, pool, cfg, generator).items()}
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            loss = labelled_lm_loss(model, batch) if cfg.labelled_logits_only else model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        window.append(loss.item())
        result.steps = step
        timed_out = cfg.time_budget_s is not None and time.monotonic() - start >= cfg.time_budget_s
        if step % cfg.log_every == 0 or step == cfg.steps or timed_out:
            mean = sum(window) / len(window)
            window.clear()
            result.losses.append((step, mean))
            if metrics is not None:
                metrics.append("warmup", step, {"loss": mean, "learning_rate": schedule.get_last_lr()[0]})
            if cfg.stop_loss is not None and mean < cfg.stop_loss:
                result.stopped = "loss"
                break
        if timed_out:
            result.stopped = "time"
            break
    model.eval()
    result.seconds = time.monotonic() - start
    return result
