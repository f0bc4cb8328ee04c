"""The ceiling benchmark: how far each training and inference stage of the tiny recipe is from fp32 peak.

What is measured (``--threads`` torch threads, set before anything else):

1. ``peak_gflops``: the fp32 matmul peak of this torch build — square matmuls of n = 1,024 and 2,048, a few
   warm-up calls, then enough calls for ~1 s each; the best GFLOP/s (2·n³ per matmul).
2. For each preset in ``--presets``, the preset's architecture with random weights
   (``star_lib.train.models.build_tiny_model``, vocabulary 1,988: the learning-signal tokenizer's size; fp32),
   and per stage 1–2 warm-up calls, then the median of ``--repeats`` timed calls:

   - ``warmup``: a copy warm-up step, 16 × 40 tokens: forward + backward (causal LM loss) + AdamW step.
   - ``sft``: an SFT step as ``SFTTrainer`` runs it, 16 × 355 tokens (the learning-signal recipe's mean
     real tokens per sequence: 2.67 M tokens over 470 steps of 16), 45 % of them labelled (the assistant's),
     through TRL's fused LM head (on CPU it scores every position): forward + backward + AdamW step.
   - ``sft_labelled``: the same with ``sft.labelled_logits_only`` (the head on labelled positions only).
   - ``rl_update``: the GRPO update of one step, 16 × 500 tokens, through TRL's fused LM head as
     ``GRPOTrainer`` patches it (temperature 0.8, log-probs + entropy; the first 32 prompt positions
     unlabeled); loss = sum of log-probs / 1,000, backward, AdamW step. On its own copy of the model.
   - ``decode``: one KV-cached decode step of ``star_lib.agent.fastgen.FastQwen2`` at batch 16 after a
     250-token prefill (untimed), sampling at temperature 0.8 as a GRPO rollout does: the mean of 64 steps.
   - ``eval_decode``: the same at batch 50 (evaluation's chunk size), greedy.

Analytic FLOPs (``gflop`` per call). P = matmul parameters per token: per layer the q, k, v, o projections
and the MLP's gate, up and down, summed over layers, plus the LM head (vocab × hidden). A forward of T = B·L
tokens (B sequences of length L) costs 2·P·T + 2·B·L²·hidden·layers (QKᵀ and AV, the causal half of
4·B·L²·hidden); a backward twice the forward; the optimizer is not counted. The fused LM head of
``rl_update`` and ``sft_labelled`` project only labelled positions, but the LM head is counted for all T (the
same work, done faster, reads as a higher fraction). A decode step
at context c with batch b costs 2·P·b + 4·b·c·hidden·layers (c = the mean context over the 64 steps).
``gflops`` = gflop / s; ``fraction`` = gflops / peak_gflops.

Usage: ``python benchmarks/bench_ceiling.py [--threads 2] [--presets tiny,tiny-l] [--repeats 5] [--seed 0]``.
Last line: ``{"cpu": …, "avx512f": …, "avx2": …, "threads": …, "torch": …, "peak_gflops": …, "stages": …}``.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

VOCAB = 1988
"""The learning-signal tokenizer's vocabulary size."""
DECODE_STEPS = 64
PREFILL = 250
PROMPT = 32
ASSISTANT_SHARE = 0.45
"""Labelled (assistant) share of an SFT trajectory's tokens: ~173 model tokens of ~400 in the recipe's."""


@dataclass
class _Vocab:
    """What ``build_tiny_model`` reads of a tokenizer (its size and special ids): no trained one needed."""

    size: int
    eos_token_id: int = 0
    pad_token_id: int = 0

    def __len__(self) -> int:
        return self.size


# ───────────────────────────── machine ─────────────────────────────


def cpu_info() -> tuple[str, set[str]]:
    """The CPU's model name and feature flags (from ``/proc/cpuinfo`` where there is one)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return name, flags
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            name = value.strip()
        elif key.strip() == "flags":
            flags = set(value.split())
    return name, flags


def peak_gflops(sizes: tuple[int, ...] = (1024, 2048), seconds: float = 1.0) -> float:
    """Best fp32 GFLOP/s of square matmuls over ``sizes``."""
    best = 0.0
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        start = time.perf_counter()
        for _ in range(3):
            torch.mm(a, b)
        calls = max(1, round(seconds * 3 / (time.perf_counter() - start)))
        start = time.perf_counter()
        for _ in range(calls):
            torch.mm(a, b)
        best = max(best, 2 * n**3 * calls / (time.perf_counter() - start) / 1e9)
    return best


def median_of(fn: Callable[[], float], repeats: int) -> float:
    """Median of ``repeats`` self-timed calls of ``fn`` (each returns its seconds) after one warm-up call."""
    fn()
    return statistics.median(fn() for _ in range(repeats))


# ───────────────────────────── model and FLOPs ─────────────────────────────


def build_model(preset: str, seed: int) -> Any:
    """The preset's architecture with random fp32 weights, built as the project builds it."""
    from star_lib.train.models import PRESETS, build_tiny_model

    return build_tiny_model(_Vocab(VOCAB), PRESETS[preset].architecture, seed=seed).float()  # type: ignore[arg-type]


def matmul_params(config: Any) -> int:
    """P: weights of the per-token matmuls (attention projections, MLP, LM head)."""
    d, f = config.hidden_size, config.intermediate_size
    kv = config.num_key_value_heads * (d // config.num_attention_heads)
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * f
    return per_layer * config.num_hidden_layers + config.vocab_size * d


def forward_gflop(config: Any, batch: int, length: int) -> float:
    """Forward FLOPs (GFLOP) of ``batch`` sequences of ``length`` tokens."""
    matmuls = 2 * matmul_params(config) * batch * length
    attention = 2 * batch * length**2 * config.hidden_size * config.num_hidden_layers
    return (matmuls + attention) / 1e9


def decode_gflop(config: Any, batch: int, context: float) -> float:
    """FLOPs (GFLOP) of one decode step of ``batch`` rows at ``context`` cached positions."""
    attention = 4 * batch * context * config.hidden_size * config.num_hidden_layers
    return (2 * matmul_params(config) * batch + attention) / 1e9


# ───────────────────────────── stages ─────────────────────────────


def timed_step(model: Any, loss: Callable[[], Any]) -> Callable[[], float]:
    """A timed training step of ``model``: ``loss()`` (the forward), backward, AdamW step; seconds."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> float:
        start = time.perf_counter()
        loss().backward()
        optimizer.step()
        optimizer.zero_grad()
        return time.perf_counter() - start

    return step


def lm_step(model: Any, batch: int, length: int) -> Callable[[], float]:
    """One timed causal-LM training step on random tokens (the warm-up's plain loss)."""
    ids = torch.randint(VOCAB, (batch, length))  # (B, L)
    mask = torch.ones_like(ids)
    return timed_step(model, lambda: model(input_ids=ids, attention_mask=mask, labels=ids).loss)


def sft_step(model: Any, batch: int, length: int, labelled: bool) -> Callable[[], float]:
    """One timed SFT step as ``SFTTrainer`` runs it: TRL's fused LM head, labels on the assistant tokens.

    ``labelled``: the recipe's ``sft.labelled_logits_only`` (``star_lib.train.sft.add_labelled_lm_head``),
    the head applied to the labelled positions only. Patches ``model``.
    """
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model, outputs=("log_probs", "entropy"))  # what SFTTrainer does
    if labelled:
        from star_lib.train.sft import add_labelled_lm_head

        add_labelled_lm_head(model)
    ids = torch.randint(VOCAB, (batch, length))  # (B, L)
    mask = torch.ones_like(ids)
    labels = ids.masked_fill(torch.rand(batch, length) > ASSISTANT_SHARE, -100)
    return timed_step(
        model, lambda: model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).loss
    )


def rl_step(model: Any, batch: int, length: int) -> Callable[[], float]:
    """One timed GRPO update through TRL's fused LM head (patches ``model``)."""
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model, temperature=0.8, outputs=("log_probs", "entropy"))
    ids = torch.randint(VOCAB, (batch, length))  # (B, L)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    labels[:, :PROMPT] = -100

    def loss() -> Any:
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        return out.log_probs.sum() / 1000

    return timed_step(model, loss)


def sampler() -> Callable[..., Any]:
    """``star_lib.agent.fastgen.sample_tokens``; on a checkout before it existed, ``FastPolicy._sample``."""
    try:
        from star_lib.agent.fastgen import sample_tokens
    except ImportError:  # measuring the old code ("before")
        from types import SimpleNamespace

        from star_lib.agent.fastgen import FastPolicy

        def sample_tokens(logits: Any, sampling: Any, generator: Any = None) -> Any:
            return FastPolicy._sample(SimpleNamespace(sampling=sampling), logits, generator)

    return sample_tokens


def decode_steps(model: Any, batch: int, temperature: float) -> Callable[[], float]:
    """Prefill ``batch`` rows of ``PREFILL`` tokens, time ``DECODE_STEPS`` decode steps: seconds per step.

    Each step samples its tokens as ``FastPolicy`` does at ``temperature`` (0: greedy).
    """
    from star_lib.agent.fastgen import FastQwen2
    from star_lib.agent.policies import SamplingParams

    engine = FastQwen2(model)
    sample, sampling = sampler(), SamplingParams(temperature=temperature)
    generator = torch.Generator().manual_seed(0)
    cache = engine.new_cache(batch, 1024)
    ids = torch.randint(VOCAB, (batch, PREFILL))  # (B, N)
    positions = torch.arange(PREFILL).expand(batch, PREFILL)  # (B, N)

    @torch.inference_mode()
    def run() -> float:
        hidden = engine.forward(ids, positions, cache)  # (B, N, C)
        token = engine.logits(hidden[:, -1]).argmax(-1)  # (B,)
        pos = torch.full((batch,), PREFILL)
        start = time.perf_counter()
        for _ in range(DECODE_STEPS):
            hidden = engine.forward(token.unsqueeze(1), pos.unsqueeze(1), cache)  # (B, 1, C)
            token, _ = sample(engine.logits(hidden[:, 0]), sampling, generator)
            pos += 1
        return (time.perf_counter() - start) / DECODE_STEPS

    return run


def report(tokens: int, gflop: float, seconds: float, peak: float) -> dict[str, float]:
    """One stage's numbers."""
    gflops = gflop / seconds
    return {
        "tokens": tokens,
        "gflop": round(gflop, 3),
        "s": round(seconds, 6),
        "gflops": round(gflops, 2),
        "fraction": round(gflops / peak, 4),
    }


def bench_preset(preset: str, repeats: int, seed: int, peak: float) -> dict[str, dict[str, float]]:
    """All stages of one preset."""
    model = build_model(preset, seed)
    rl_model = copy.deepcopy(model)
    cfg = model.config
    stages: dict[str, dict[str, float]] = {}
    seconds = median_of(lm_step(model, 16, 40), repeats)
    stages["warmup"] = report(16 * 40, 3 * forward_gflop(cfg, 16, 40), seconds, peak)
    for name, labelled in {"sft": False, "sft_labelled": True}.items():
        seconds = median_of(sft_step(copy.deepcopy(model), 16, 355, labelled), repeats)
        stages[name] = report(16 * 355, 3 * forward_gflop(cfg, 16, 355), seconds, peak)
    seconds = median_of(rl_step(rl_model, 16, 500), repeats)
    stages["rl_update"] = report(16 * 500, 3 * forward_gflop(cfg, 16, 500), seconds, peak)
    context = PREFILL + (DECODE_STEPS + 1) / 2  # mean keys attended over the steps
    # rollouts sample at the recipe's temperature; evaluation is greedy
    for name, (batch, temperature) in {"decode": (16, 0.8), "eval_decode": (50, 0.0)}.items():
        seconds = median_of(decode_steps(model, batch, temperature), repeats)
        stages[name] = report(batch, decode_gflop(cfg, batch, context), seconds, peak)
    for name, row in stages.items():
        line = f"{row['s']:10.5f} s  {row['gflops']:8.2f} GFLOP/s  {row['fraction']:.3f} of peak"
        print(f"{preset:8s} {name:12s} {line}")
    return stages


def main() -> None:
    """Parse arguments, measure the peak and every preset's stages, print the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--presets", default="tiny,tiny-l")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    peak = peak_gflops()
    print(f"peak fp32 matmul: {peak:.1f} GFLOP/s on {args.threads} threads")
    stages = {p: bench_preset(p, args.repeats, args.seed, peak) for p in args.presets.split(",")}
    name, flags = cpu_info()
    summary = {
        "cpu": name,
        "avx512f": "avx512f" in flags,
        "avx2": "avx2" in flags,
        "threads": args.threads,
        "torch": torch.__version__,
        "peak_gflops": round(peak, 2),
        "stages": stages,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
