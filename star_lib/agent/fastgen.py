"""Lean batched sampling for small Qwen2-architecture models on CPU, with a KV cache kept across turns.

``model.generate`` costs far more than the arithmetic of a 2 M-parameter model: logits processors,
stopping criteria, cache objects and mask construction run in Python at every step, and each lockstep turn
of an episode re-reads the whole conversation. :class:`FastPolicy` keeps only what sampling needs:

- :class:`FastQwen2` runs the model's own weights (no copies, so a policy built during RL sees the current
  parameters) in plain ``torch`` — RMSNorm, rotary embeddings, grouped-query attention with
  ``scaled_dot_product_attention``, SiLU MLP — with one preallocated key/value cache row per conversation;
- the cache of a conversation survives between turns: the next turn's context is compared with the
  tokens already cached, and only the new suffix (the tool response) is prefilled;
- finished rows leave the decoding batch (rows are regrouped when half of them are done);
- sampling (temperature, top-p, top-k) and the log-probability of each sampled token under the processed
  distribution, as :class:`~star_lib.agent.policies.TransformersPolicy` returns them.

It implements :class:`~star_lib.agent.policies.Policy`; :func:`check_against_transformers` compares its
logits with the Hugging Face forward.

Example:
    >>> policy = FastPolicy(model, tokenizer, SamplingParams(temperature=0.0))  # doctest: +SKIP
    >>> episodes = run_episodes(policy, queries, world, cfg)  # doctest: +SKIP

"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from star_lib.agent.policies import Conversation, Generation, SamplingParams


@dataclass
class _Layer:
    """References to one decoder layer's weights."""

    norm1: Any
    q_w: Any
    q_b: Any
    k_w: Any
    k_b: Any
    v_w: Any
    v_b: Any
    o_w: Any
    norm2: Any
    gate: Any
    up: Any
    down: Any


class FastQwen2:
    """An inference-only forward of a ``Qwen2ForCausalLM`` over its live weights, with a per-row KV cache.

    Args:
        model: A Hugging Face Qwen2 causal LM (the ``tiny`` preset builds one).

    Raises:
        ValueError: For other architectures or sliding-window attention (use ``TransformersPolicy``).

    """

    def __init__(self, model: Any) -> None:
        cfg = model.config
        if getattr(cfg, "model_type", None) != "qwen2":
            raise ValueError(f"FastQwen2 runs Qwen2 models, got model_type={cfg.model_type!r}")
        if getattr(cfg, "use_sliding_window", False):
            raise ValueError("FastQwen2 has no sliding-window attention; use TransformersPolicy")
        base = model.model
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.embed = base.embed_tokens.weight
        self.norm = base.norm.weight
        self.lm_head = model.lm_head.weight
        self.inv_freq = base.rotary_emb.inv_freq
        self.rope_scale = float(getattr(base.rotary_emb, "attention_scaling", 1.0))
        self._cos: torch.Tensor | None = None  # rotary tables, grown on demand (see _rope)
        self._sin: torch.Tensor | None = None
        self.layers = [
            _Layer(
                layer.input_layernorm.weight,
                layer.self_attn.q_proj.weight,
                layer.self_attn.q_proj.bias,
                layer.self_attn.k_proj.weight,
                layer.self_attn.k_proj.bias,
                layer.self_attn.v_proj.weight,
                layer.self_attn.v_proj.bias,
                layer.self_attn.o_proj.weight,
                layer.post_attention_layernorm.weight,
                layer.mlp.gate_proj.weight,
                layer.mlp.up_proj.weight,
                layer.mlp.down_proj.weight,
            )
            for layer in base.layers
        ]

    def new_cache(self, rows: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Allocate an empty key/value cache: one ``(rows, kv_heads, length, head_dim)`` pair per layer."""
        import torch

        shape = (rows, self.kv_heads, length, self.head_dim)
        dtype, device = self.embed.dtype, self.embed.device
        # zeros, not empty: masked positions get zero attention weight, but 0 * NaN garbage would still be NaN
        return [
            (torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
            for _ in self.layers
        ]

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        import torch

        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def _rope(self, positions: torch.Tensor, span: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotary cos/sin at ``positions`` (B, N), as (B, 1, N, D), from a table grown to ``span`` rows.

        The table holds the same products as computing them per call (position × inverse frequency, then
        cos/sin), so the values are identical; a decode step then indexes it instead of running six ops.
        """
        import torch

        if self._cos is None or self._cos.shape[0] < span:
            size = max(span, 256, 2 * (0 if self._cos is None else self._cos.shape[0]))
            freqs = torch.arange(size, device=self.inv_freq.device).unsqueeze(-1).to(self.inv_freq.dtype)
            emb = torch.cat((freqs * self.inv_freq, freqs * self.inv_freq), dim=-1)  # (T, D)
            self._cos, self._sin = emb.cos() * self.rope_scale, emb.sin() * self.rope_scale
        return self._cos[positions].unsqueeze(1), self._sin[positions].unsqueeze(1)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        import torch

        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(
        self, ids: torch.Tensor, positions: torch.Tensor, cache: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Run ``ids`` (B, N) at ``positions`` (B, N); their keys/values go into rows 0..B-1 of ``cache``.

        A token attends to the cached positions ``<=`` its own (so rows may have different lengths, and
        padding past a row's real end is harmless: it is overwritten before anything attends to it).

        Returns:
            The final hidden states (B, N, C), before the LM head.

        """
        import torch
        import torch.nn.functional as F

        batch, n = ids.shape
        rows = torch.arange(batch, device=ids.device).unsqueeze(1).expand(batch, n)  # (B, N)
        span = int(positions.max()) + 1
        key_pos = torch.arange(span, device=ids.device)
        mask = (key_pos.view(1, 1, 1, span) <= positions.view(batch, 1, n, 1)).contiguous()  # (B, 1, N, L)
        cos, sin = self._rope(positions, span)
        x = F.embedding(ids, self.embed)  # (B, N, C)
        for layer, (k_cache, v_cache) in zip(self.layers, cache, strict=True):
            h = self._rms(x, layer.norm1)
            q = F.linear(h, layer.q_w, layer.q_b).view(batch, n, self.heads, self.head_dim).transpose(1, 2)
            k = F.linear(h, layer.k_w, layer.k_b).view(batch, n, self.kv_heads, self.head_dim).transpose(1, 2)
            v = F.linear(h, layer.v_w, layer.v_b).view(batch, n, self.kv_heads, self.head_dim)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            k_cache[rows, :, positions] = k.transpose(1, 2)  # (B, N, KV, D) into (B, KV, T, D)
            v_cache[rows, :, positions] = v
            att = F.scaled_dot_product_attention(
                q, k_cache[:batch, :, :span], v_cache[:batch, :, :span], attn_mask=mask, enable_gqa=True
            )  # (B, H, N, D)
            x = x + F.linear(att.transpose(1, 2).reshape(batch, n, -1), layer.o_w)
            h = self._rms(x, layer.norm2)
            x = x + F.linear(F.silu(F.linear(h, layer.gate)) * F.linear(h, layer.up), layer.down)
        return self._rms(x, self.norm)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Project hidden states to vocabulary logits."""
        import torch.nn.functional as F

        return F.linear(hidden, self.lm_head)


# ───────────────────────────── the policy ─────────────────────────────


@dataclass
class GenerationStats:
    """Counters of a :class:`FastPolicy` (cumulative)."""

    calls: int = 0
    """``generate`` calls."""
    new_tokens: int = 0
    """Sampled tokens returned (including stop tokens)."""
    prefill_tokens: int = 0
    """Context tokens run through the model (the rest came from the cache)."""
    reused_tokens: int = 0
    """Context tokens found in the cache."""
    seconds: float = 0.0
    """Time inside ``generate``."""

    @property
    def tokens_per_s(self) -> float:
        """Sampled tokens per second of ``generate`` time."""
        return self.new_tokens / self.seconds if self.seconds else 0.0


@dataclass
class _Slot:
    """Where a conversation's cache lives after a call: its row and the token ids that row holds."""

    row: int
    ids: list[int]


class FastPolicy:
    """Batched sampling with :class:`FastQwen2`; implements :class:`~star_lib.agent.policies.Policy`.

    Args:
        model: A Qwen2 causal LM (its live weights are used; build a new policy after loading others).
        tokenizer: Its tokenizer (chat template, stop tokens).
        sampling: Temperature, top-p, top-k and seed.
        reuse_cache: Keep each conversation's cache between calls (keyed by ``Conversation.key``) and
            prefill only the new tokens; turn off to prefill every context from scratch.
        entropy_tokens: Also return the normalised entropies of each turn's first ``entropy_tokens`` tokens
            (from the raw logits, as :class:`~star_lib.agent.policies.TransformersPolicy` does) as
            :class:`~star_lib.agent.policies.EntropyGeneration` (ARPO); 0: plain generations.
        context_limit: Most tokens of prompt + reply (None: only the conversations' own room).

    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: SamplingParams | None = None,
        *,
        reuse_cache: bool = True,
        entropy_tokens: int = 0,
        context_limit: int | None = None,
    ) -> None:
        from star_lib.agent.policies import SamplingParams, stop_token_ids

        if entropy_tokens < 0:
            raise ValueError(f"entropy_tokens must be >= 0 (0 = off), got {entropy_tokens}")
        self.entropy_tokens = entropy_tokens
        self.context_limit = context_limit

        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling or SamplingParams()
        self.engine = FastQwen2(model)
        self.stop_ids = stop_token_ids(tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_ids[-1]
        self.reuse_cache = reuse_cache
        self.stats = GenerationStats()
        self._cache: list[tuple[Any, Any]] | None = None
        self._slots: dict[Any, _Slot] = {}

    def reset_cache(self) -> None:
        """Forget every cached conversation (call after the weights change)."""
        self._cache, self._slots = None, {}

    def generate(
        self, conversations: Sequence[Conversation], *, max_new_tokens: int, seed: int | None = None
    ) -> list[Generation]:
        """Generate one turn per conversation in one batch.

        Args:
            conversations: The live conversations (``prompt_ids`` used when set, else the chat template).
            max_new_tokens: Most tokens per turn (each row is clamped by ``request_max_tokens``).
            seed: Seed for this call; by default ``sampling.seed`` plus the number of earlier calls.

        Returns:
            One generation per conversation, with sampled ids and their log-probabilities (an error one
            where the prompt leaves no room).

        """
        import torch

        from star_lib.agent.policies import no_room, render_prompt_ids, request_max_tokens, to_generation

        start = time.perf_counter()
        all_contexts = [list(c.prompt_ids or render_prompt_ids(self.tokenizer, c)) for c in conversations]
        out = [no_room(len(ids), self.context_limit) for ids in all_contexts]
        budgets = [
            request_max_tokens(c, len(ids), max_new_tokens, self.context_limit)
            for c, ids in zip(conversations, all_contexts, strict=True)
        ]
        rows = [i for i, budget in enumerate(budgets) if budget > 0]
        if not rows:
            return out
        contexts, keys = [all_contexts[i] for i in rows], [conversations[i].key for i in rows]
        if seed is None and self.sampling.seed is not None:
            seed = self.sampling.seed + self.stats.calls
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        with torch.inference_mode():
            tokens, logprobs, entropies, order, cache = self._run(
                contexts, keys, [budgets[i] for i in rows], generator
            )
        for j, i in enumerate(rows):
            out[i] = to_generation(self.tokenizer, self.stop_ids, tokens[j], logprobs[j], entropies[j])
        self._remember(keys, contexts, tokens, order, cache)
        self.stats.calls += 1
        self.stats.new_tokens += sum(len(g.token_ids or []) for g in out)
        self.stats.seconds += time.perf_counter() - start
        return out

    # ── one batched call ──

    def _reusable(self, key: Any, context: list[int]) -> tuple[int, int]:
        """(row of the old cache, tokens of ``context`` already there) for one conversation."""
        slot = self._slots.get(key) if self.reuse_cache else None
        if slot is None:
            return 0, 0
        same = 0
        limit = min(len(slot.ids), len(context) - 1)  # keep >= 1 token to prefill (its logits are needed)
        while same < limit and slot.ids[same] == context[same]:
            same += 1
        return slot.row, same

    def _run(
        self, contexts: list[list[int]], keys: list[Any], budgets: list[int], generator: Any
    ) -> tuple[list[list[int]], list[list[float]], list[Any], list[int], Any]:
        import torch

        max_new = max(budgets)

        batch = len(contexts)
        reuse = [self._reusable(k, c) for k, c in zip(keys, contexts, strict=True)]
        kept = torch.tensor([r for _, r in reuse])
        width = max(len(c) - r for c, (_, r) in zip(contexts, reuse, strict=True))
        capacity = int(kept.max()) + width + max_new + 1
        cache = self.engine.new_cache(batch, capacity)
        if self._cache is not None and int(kept.max()) > 0:
            rows = torch.tensor([row for row, _ in reuse])
            span = int(kept.max())
            for (k_new, v_new), (k_old, v_old) in zip(cache, self._cache, strict=True):
                k_new[:, :, :span] = k_old.index_select(0, rows)[:, :, :span]
                v_new[:, :, :span] = v_old.index_select(0, rows)[:, :, :span]
        self.stats.reused_tokens += int(kept.sum())
        # prefill the new suffixes, right-padded: (B, width)
        ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        lengths = torch.tensor([len(c) for c in contexts])
        for i, (context, (_, r)) in enumerate(zip(contexts, reuse, strict=True)):
            ids[i, : len(context) - r] = torch.tensor(context[r:], dtype=torch.long)
        self.stats.prefill_tokens += int((lengths - kept).sum())
        positions = kept.unsqueeze(1) + torch.arange(width).unsqueeze(0)  # (B, width)
        hidden = self.engine.forward(ids, positions, cache)
        last = hidden[torch.arange(batch), lengths - kept - 1]  # (B, C)
        logits = self.engine.logits(last)
        return self._decode(logits, lengths, cache, budgets, generator)

    def _decode(
        self, logits: Any, lengths: Any, cache: Any, budgets: list[int], generator: Any
    ) -> tuple[list[list[int]], list[list[float]], list[Any], list[int], Any]:
        """Sample until every row stops or fills its budget; finished rows move behind the active ones.

        ``order`` tracks which conversation's cache is in which row.

        Returns:
            Per conversation: sampled ids, their log-probabilities, the leading entropies (None when not
            asked for); then the cache's row order and the cache.

        """
        import torch

        from star_lib.agent.policies import token_entropies

        batch = logits.shape[0]
        tokens: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        entropies: list[Any] = [[] if self.entropy_tokens else None for _ in range(batch)]
        order = list(range(batch))  # order[row] = index of the conversation whose cache is in that row
        active = batch  # rows 0..active-1 are in the decoding batch
        live = torch.ones(batch, dtype=torch.bool)  # (active,) rows still sampling
        stops = torch.tensor(self.stop_ids)
        position = lengths.clone()  # (B,) next free cache position of each row
        max_new = max(budgets)
        for step in range(max_new):
            heads = token_entropies(logits) if step < self.entropy_tokens else None  # raw logits, (active,)
            token, logprob = sample_tokens(logits, self.sampling, generator)  # (active,), (active,)
            picked, picked_logprob = token.tolist(), logprob.tolist()  # one conversion per step, not per row
            for row in torch.nonzero(live).flatten().tolist():
                tokens[order[row]].append(picked[row])
                logprobs[order[row]].append(picked_logprob[row])
                if heads is not None:
                    entropies[order[row]].append(heads[row])
                if len(tokens[order[row]]) >= budgets[order[row]]:
                    live[row] = False  # this row's room is used up
            live &= ~torch.isin(token, stops)
            if step + 1 >= max_new or not bool(live.any()):
                break
            if int(live.sum()) <= active // 2:  # regroup: live rows first; the others keep their cache
                front = torch.cat([torch.nonzero(live).flatten(), torch.nonzero(~live).flatten()])
                full = torch.cat([front, torch.arange(active, batch)])
                cache = [(k.index_select(0, full), v.index_select(0, full)) for k, v in cache]
                order = [order[int(i)] for i in full]
                position, token = position[full], token[front]
                active = int(live.sum())
                live = torch.ones(active, dtype=torch.bool)
            hidden = self.engine.forward(token[:active].unsqueeze(1), position[:active].unsqueeze(1), cache)
            position[:active] += 1
            logits = self.engine.logits(hidden[:, 0])  # (active, V)
        return tokens, logprobs, entropies, order, cache

    def _remember(
        self,
        keys: list[Any],
        contexts: list[list[int]],
        tokens: list[list[int]],
        order: list[int],
        cache: Any,
    ) -> None:
        """Record which cache row holds which conversation's tokens (context + all sampled but the last)."""
        if not self.reuse_cache:
            return
        row_of = {conv: row for row, conv in enumerate(order)}
        self._cache = cache
        self._slots = {
            key: _Slot(row=row_of[i], ids=contexts[i] + tokens[i][:-1]) for i, key in enumerate(keys)
        }


def sampling_logprobs(logits: Any, sampling: SamplingParams) -> Any:
    """Log-probabilities (B, V) of the distribution a sampled decode step draws from.

    ``logits`` divided by the temperature, then top-k and top-p (removed tokens get ``-inf``); for
    ``temperature > 0`` only.
    """
    import torch

    logits = logits.float() / sampling.temperature
    if sampling.top_k > 0:
        kth = torch.topk(logits, min(sampling.top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if sampling.top_p < 1.0:
        ordered, index = torch.sort(logits, descending=True)
        probs = torch.softmax(ordered, -1)
        drop = probs.cumsum(-1) - probs > sampling.top_p
        logits = logits.scatter(-1, index, ordered.masked_fill(drop, float("-inf")))
    return torch.log_softmax(logits, -1)


def sample_tokens(logits: Any, sampling: SamplingParams, generator: Any = None) -> tuple[Any, Any]:
    """Pick one token per row of ``logits`` (B, V), as :class:`FastPolicy` samples a decode step.

    Returns:
        The tokens (B,) and their log-probabilities under the processed distribution (temperature, top-k,
        top-p; :func:`sampling_logprobs`).

    """
    import torch

    if sampling.temperature == 0:
        logits = logits.float()
        token = logits.argmax(-1)
        return token, torch.log_softmax(logits, -1).gather(-1, token.unsqueeze(-1)).squeeze(-1)
    logp = sampling_logprobs(logits, sampling)
    # inverse-CDF sampling, one uniform per row: torch.multinomial draws an exponential per vocabulary
    # entry, which cost ~0.85 ms of a ~4 ms decode step of the tiny model at batch 16
    cdf = logp.exp().cumsum(-1)  # (B, V)
    total = cdf[:, -1:]
    u = torch.rand(total.shape, generator=generator, dtype=cdf.dtype) * total
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))  # < total: a token of p > 0
    token = torch.searchsorted(cdf, u, right=True).squeeze(-1)  # first entry whose cdf exceeds u
    return token, logp.gather(-1, token.unsqueeze(-1)).squeeze(-1)


# ───────────────────────────── checks and measurements ─────────────────────────────


def check_against_transformers(model: Any, ids: Sequence[Sequence[int]]) -> float:
    """Return the largest absolute logit difference between :class:`FastQwen2` and the HF forward.

    Args:
        model: A Qwen2 causal LM.
        ids: Token sequences (same length or not; each is compared on its own).

    """
    import torch

    engine = FastQwen2(model)
    worst = 0.0
    with torch.inference_mode():
        for seq in ids:
            x = torch.tensor([list(seq)], dtype=torch.long)
            reference = model(input_ids=x).logits[0]  # (N, V)
            cache = engine.new_cache(1, len(seq) + 1)
            ours = engine.logits(engine.forward(x, torch.arange(len(seq)).unsqueeze(0), cache))[0]
            worst = max(worst, float((reference - ours).abs().max()))
    return worst


def compare_generation_speed(
    model: Any, tokenizer: Any, conversations: Sequence[Conversation], *, max_new_tokens: int = 64
) -> dict[str, float]:
    """Time :class:`FastPolicy` and ``TransformersPolicy`` (HF ``generate``) on the same greedy batch.

    Returns:
        ``fast_tokens_per_s``, ``hf_tokens_per_s``, ``speedup`` and the token counts of each.

    """
    from star_lib.agent.policies import SamplingParams, TransformersPolicy

    greedy = SamplingParams(temperature=0.0)
    results: dict[str, float] = {}
    for name, policy in (
        ("hf", TransformersPolicy(model, tokenizer, greedy, batch_size=len(conversations))),
        ("fast", FastPolicy(model, tokenizer, greedy, reuse_cache=False)),
    ):
        start = time.perf_counter()
        out = policy.generate(list(conversations), max_new_tokens=max_new_tokens)
        seconds = time.perf_counter() - start
        count = sum(len(g.token_ids or []) for g in out)
        results[f"{name}_tokens"] = float(count)
        results[f"{name}_seconds"] = seconds
        results[f"{name}_tokens_per_s"] = count / seconds if seconds else 0.0
    results["speedup"] = results["fast_tokens_per_s"] / max(results["hf_tokens_per_s"], 1e-9)
    return results
