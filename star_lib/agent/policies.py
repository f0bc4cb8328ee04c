"""Policies: anything that writes the next assistant turn for a batch of conversations.

One interface (:class:`Policy`) serves every use of the episode runner: a local Hugging Face model
(:class:`TransformersPolicy`), a vLLM engine on GPU (:class:`VLLMPolicy`, import-guarded), any
OpenAI-compatible endpoint (:class:`~star_lib.agent.openai_policy.OpenAIPolicy`: hosted teachers, a vLLM
server, or :mod:`star_lib.agent.serve`), and the programmatic expert
(:class:`star_lib.agent.expert.ExpertPolicy`).

Token-level backends return the sampled token ids and their log-probabilities *after* temperature and
top-p/top-k processing (what vLLM calls ``processed_logprobs``, which TRL's importance-sampling correction
expects). Backend failures come back as data (``Generation.error``), never as exceptions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from star_lib.types import QueryRecord

# ───────────────────────────── interface ─────────────────────────────


@dataclass
class Conversation:
    """One live episode as a policy sees it."""

    messages: list[dict[str, Any]]
    """Chat messages so far (``system``, ``user``, ``assistant``, ``tool``)."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """OpenAI-style tool schemas, given to the chat template as ``tools=``."""
    prompt_ids: list[int] | None = None
    """The exact token context (prompt + completion so far, ending in the generation prompt), when known."""
    query: QueryRecord | None = None
    """The task, for policies that act on it directly (the expert)."""
    key: int = 0
    """Index of the episode in its batch."""
    max_new_tokens: int | None = None
    """Most tokens this turn may add: the room the runner leaves under its context limit (None: the call's
    ``max_new_tokens``). Backends ask for :func:`clamp_max_tokens` of it, never more."""


@dataclass
class Generation:
    """One assistant turn from a policy."""

    text: str
    """The turn's text without the end-of-turn token."""
    token_ids: list[int] | None = None
    """Sampled token ids, including the end-of-turn token when the model emitted it."""
    logprobs: list[float] | None = None
    """Log-probability of each sampled token (same length as ``token_ids``)."""
    finish_reason: str = "stop"
    """``stop`` (end-of-turn emitted), ``length`` (``max_new_tokens`` reached) or ``error``."""
    error: str | None = None
    """Why the backend produced no turn, when ``finish_reason == "error"``."""


@dataclass
class EntropyGeneration(Generation):
    """A :class:`Generation` with the normalised entropy of the first sampled tokens (ARPO branches on it)."""

    entropies: list[float] | None = None
    """Entropy of the raw distribution each leading token was sampled from, divided by log(candidates)."""


def token_entropies(logits: Any) -> list[float]:
    """Normalised entropy of each row of ``logits`` (``(T, V)``): ``H / log V`` in [0, 1].

    ``-inf`` logits (tokens masked out) contribute nothing.
    """
    import torch

    logits = logits.float()
    logp = torch.log_softmax(logits, dim=-1)  # (T, V)
    p = logp.exp()
    h = -(p * torch.where(torch.isfinite(logp), logp, torch.zeros_like(logp))).sum(dim=-1)  # (T,)
    return (h / math.log(logits.size(-1))).clamp(0.0, 1.0).tolist()


@runtime_checkable
class Policy(Protocol):
    """Writes the next assistant turn of each conversation; ``tokenizer`` may be None."""

    tokenizer: Any

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int) -> list[Generation]:
        """Return one :class:`Generation` per conversation, in order."""
        ...


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings shared by the token-level backends."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 = off)."""
    top_k: int = 0
    """Keep only the k most likely tokens (0 = off)."""
    seed: int | None = None
    """Seed for reproducible sampling; None leaves the global generator alone."""

    def __post_init__(self) -> None:
        if not 0 <= self.temperature < float("inf"):  # NaN fails too
            raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")


def clamp_max_tokens(prompt_tokens: int, max_new_tokens: int, limit: int | None = None) -> int:
    """Return the ``max_tokens`` of a request: ``max_new_tokens``, cut so that prompt + reply fits ``limit``.

    Every generation request goes through it (the runner for its context budget, each backend for its
    engine's context), so ``prompt_tokens + max_tokens <= limit`` always holds; 0 means no room at all.

    >>> clamp_max_tokens(100, 64, 128), clamp_max_tokens(100, 64, 256), clamp_max_tokens(300, 64, 256)
    (28, 64, 0)
    """
    room = max_new_tokens if limit is None else min(max_new_tokens, limit - prompt_tokens)
    return max(0, room)


def request_max_tokens(conversation: Any, prompt_tokens: int, max_new_tokens: int, limit: int | None) -> int:
    """Apply :func:`clamp_max_tokens` to a conversation: the call's cap, its room, the engine's limit."""
    room = getattr(conversation, "max_new_tokens", None)  # tests pass bare namespaces
    cap = max_new_tokens if room is None else min(max_new_tokens, room)
    return clamp_max_tokens(prompt_tokens, cap, limit)


def no_room(prompt_tokens: int, limit: int | None) -> Generation:
    """Answer (as data, not an exception) a request whose prompt leaves no room under the context limit."""
    return Generation(
        text="",
        finish_reason="error",
        error=f"context full: a prompt of {prompt_tokens} tokens leaves no room under the limit of {limit}",
    )


def stop_token_ids(tokenizer: Any) -> list[int]:
    """Return the ids that end an assistant turn: ``<|im_end|>`` when the vocabulary has it, plus EOS.

    Args:
        tokenizer: A Hugging Face tokenizer.

    Returns:
        Distinct token ids, end-of-turn first.

    """
    ids: list[int] = []
    vocab = tokenizer.get_vocab()
    for token in ("<|im_end|>", tokenizer.eos_token):
        if token is not None and token in vocab and vocab[token] not in ids:
            ids.append(vocab[token])
    if not ids:
        raise ValueError("the tokenizer has neither <|im_end|> nor an eos_token; set tokenizer.eos_token")
    return ids


def to_generation(
    tokenizer: Any,
    stop_ids: Sequence[int],
    ids: list[int],
    logprobs: list[float],
    entropies: list[float] | None = None,
) -> Generation:
    """Cut sampled ids at the first stop token and decode them (the stop token stays in ``token_ids``).

    Args:
        tokenizer: Decodes the turn's text.
        stop_ids: Ids that end a turn (:func:`stop_token_ids`).
        ids: The sampled ids (possibly past a stop token, in a batch that ran on).
        logprobs: Their log-probabilities.
        entropies: Entropies of the leading tokens, when asked for (then an :class:`EntropyGeneration`).

    """
    end = next((i for i, tok in enumerate(ids) if tok in stop_ids), None)
    kept, reason = (ids, "length") if end is None else (ids[: end + 1], "stop")
    body = kept[:-1] if reason == "stop" else kept
    text = tokenizer.decode(body, skip_special_tokens=False)
    generation = Generation(text=text, token_ids=kept, logprobs=logprobs[: len(kept)], finish_reason=reason)
    if entropies is None:
        return generation
    return EntropyGeneration(**vars(generation), entropies=entropies[: max(1, len(kept))])


def render_prompt_ids(tokenizer: Any, conversation: Conversation) -> list[int]:
    """Render a conversation with the tokenizer's chat template and tokenise it (generation prompt added)."""
    text = tokenizer.apply_chat_template(
        conversation.messages, tools=conversation.tools or None, add_generation_prompt=True, tokenize=False
    )
    return list(tokenizer.encode(text, add_special_tokens=False))


# ───────────────────────────── Hugging Face transformers ─────────────────────────────


class TransformersPolicy:
    """Batched, left-padded ``model.generate`` with the KV cache, on CPU or GPU.

    Args:
        model: A causal LM (``AutoModelForCausalLM``).
        tokenizer: Its tokenizer (with a chat template).
        sampling: Sampling settings.
        batch_size: Most conversations per ``generate`` call; a batch is split into chunks of this size.
        entropy_tokens: Also return the normalised entropies of each turn's first ``entropy_tokens`` tokens
            (from the raw logits) as :class:`EntropyGeneration` (ARPO); 0: plain generations.
        context_limit: Most tokens of prompt + reply (None: only the conversations' own room).

    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: SamplingParams | None = None,
        *,
        batch_size: int = 16,
        entropy_tokens: int = 0,
        context_limit: int | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if entropy_tokens < 0:
            raise ValueError(f"entropy_tokens must be >= 0 (0 = off), got {entropy_tokens}")
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling or SamplingParams()
        self.batch_size = batch_size
        self.entropy_tokens = entropy_tokens
        self.context_limit = context_limit
        self.stop_ids = stop_token_ids(tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_ids[-1]
        self._calls = 0

    @classmethod
    def from_pretrained(
        cls,
        path: str,
        *,
        sampling: SamplingParams | None = None,
        device: str | None = None,
        batch_size: int = 16,
        entropy_tokens: int = 0,
    ) -> TransformersPolicy:
        """Load a model folder (or hub id) with its tokenizer; ``device`` defaults to CUDA when present.

        :func:`star_lib.agent.factory.make_policy` also checks the folder's protocol first.
        """
        model, tokenizer = load_model(path, device=device)
        return cls(model, tokenizer, sampling, batch_size=batch_size, entropy_tokens=entropy_tokens)

    def generate(
        self,
        conversations: Sequence[Conversation],
        *,
        max_new_tokens: int,
        min_new_tokens: int = 0,
        seed: int | None = None,
    ) -> list[Generation]:
        """Generate one turn per conversation, in chunks of ``batch_size``.

        Args:
            conversations: The live conversations (``prompt_ids`` used when set).
            max_new_tokens: Most tokens per turn (each row is clamped by :func:`request_max_tokens`).
            min_new_tokens: Fewest tokens per turn (benchmarks).
            seed: Seed for this call only (e.g. an HTTP request's ``seed``); by default
                ``sampling.seed`` plus the number of earlier calls.

        Returns:
            One generation per conversation (an error one where the prompt leaves no room).

        """
        contexts = [c.prompt_ids or render_prompt_ids(self.tokenizer, c) for c in conversations]
        budgets = [
            request_max_tokens(c, len(ids), max_new_tokens, self.context_limit)
            for c, ids in zip(conversations, contexts, strict=True)
        ]
        if seed is None and self.sampling.seed is not None:
            seed = self.sampling.seed + self._calls
        self._calls += 1
        out: list[Generation] = [no_room(len(ids), self.context_limit) for ids in contexts]
        rows = [i for i, budget in enumerate(budgets) if budget > 0]
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            chunk_contexts, chunk_budgets = [contexts[i] for i in chunk], [budgets[i] for i in chunk]
            for i, generation in zip(
                chunk, self._generate_chunk(chunk_contexts, chunk_budgets, min_new_tokens, seed), strict=True
            ):
                out[i] = generation
        return out

    def _generate_chunk(
        self, contexts: list[list[int]], budgets: list[int], min_new_tokens: int, seed: int | None
    ) -> list[Generation]:
        """Generate a chunk with the largest budget, then cut each row at its own (``budgets``)."""
        import torch

        k = self.entropy_tokens
        device = self.model.device
        width = max(len(ids) for ids in contexts)
        input_ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)  # (B, T) left-padded
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, ids in enumerate(contexts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids) :] = 1
        if seed is not None:
            torch.manual_seed(seed)
        with torch.inference_mode():
            result = self.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                **self._generate_kwargs(max(budgets), min(min_new_tokens, min(budgets))),
            )
            # (B, new) log-probabilities of the chosen tokens under the processed distribution
            scores = self.model.compute_transition_scores(
                result.sequences, result.scores, normalize_logits=True
            )
            entropies: list[Any] = [None] * len(contexts)
            if k:
                head = torch.stack(result.logits[:k], dim=1)  # (B, k, V) raw logits of the first tokens
                entropies = [token_entropies(row) for row in head]
        new_tokens = result.sequences[:, width:].tolist()
        return [
            to_generation(self.tokenizer, self.stop_ids, ids[:budget], lps[:budget], ent)
            for ids, lps, ent, budget in zip(
                new_tokens, scores.float().tolist(), entropies, budgets, strict=True
            )
        ]

    def _generate_kwargs(self, max_new_tokens: int, min_new_tokens: int) -> dict[str, Any]:
        greedy = self.sampling.temperature == 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "min_new_tokens": min_new_tokens,
            "do_sample": not greedy,
            "eos_token_id": self.stop_ids,
            "pad_token_id": self.pad_id,
            "use_cache": True,
            "repetition_penalty": 1.0,  # override checkpoint defaults (Qwen ships 1.05)
            "return_dict_in_generate": True,
            "output_scores": True,
            "output_logits": bool(self.entropy_tokens),
        }
        if not greedy:
            kwargs.update(
                temperature=self.sampling.temperature, top_p=self.sampling.top_p, top_k=self.sampling.top_k
            )
        return kwargs


def load_model(path: str | Path, *, device: str | None = None) -> tuple[Any, Any]:
    """Load a causal LM folder (or hub id) and its tokenizer for inference (``eval()`` mode).

    Args:
        path: The model folder or hub id.
        device: Where to put the model; defaults to CUDA when present.

    """
    import torch
    from transformers import AutoModelForCausalLM

    from star_lib.agent.tokenizer import load_tokenizer

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype="auto").to(device).eval()
    return model, tokenizer


# ───────────────────────────── vLLM ─────────────────────────────


class VLLMPolicy:
    """Generation with a vLLM engine (GPU); returns sampled token ids and their log-probabilities.

    Built from TRL's colocated engine (``trainer.vllm_generation``, a ``VLLMGeneration``), the policy does
    what TRL's own ``generate`` does and a ``rollout_func`` otherwise misses:

    - **sleep mode**: before a ``rollout_func`` TRL wakes only the engine's *weights*; the first turn wakes
      the KV cache (``wake_up(tags=["kv_cache"])``), :meth:`release` puts the engine back to sleep (level 2)
      and marks its weights as discarded, so a second rollout in the same step (DAPO's refills) re-pushes
      them first (``sync_weights``), as TRL's ``generate`` does;
    - **tensor parallelism**: the ranks of a TP group share one engine, whose every call is collective. Each
      turn gathers the group's prompts (``all_gather_object`` on TRL's ``tp_group``), generates them all and
      keeps this rank's slice. Multi-turn episodes end at different turns on different ranks, so a rank that
      is done calls :meth:`release`, which keeps joining the group's calls until every rank is done.

    Args:
        llm: TRL's ``VLLMGeneration``, a ``vllm.LLM``, or a model path to start one.
        tokenizer: The Hugging Face tokenizer; loaded from ``llm`` when it is a path.
        sampling: Sampling settings.
        vllm_module: The ``vllm`` module (default: imported); tests pass a stand-in with ``SamplingParams``.
        **engine_kwargs: Passed to ``vllm.LLM`` when ``llm`` is a path.

    Raises:
        ImportError: When vLLM is not installed (``pip install 'star-lab[gpu]'``).

    """

    top_logprobs: int = 0
    """Top log-probabilities vLLM returns per step (0: the sampled token only; ARPO raises it)."""
    owner: Any = None
    """TRL's ``VLLMGeneration`` owning the engine (sleep state, weight sync, TP group); None: a bare one."""
    enable_sleep_mode: bool = False
    """The engine sleeps between rollouts (TRL's ``vllm_enable_sleep_mode``)."""
    tp_size: int = 1
    """Ranks sharing the engine (TRL's ``vllm_tensor_parallel_size``)."""
    tp_group: Any = None
    """The ``torch.distributed`` group of those ranks."""
    tp_rank: int | None = None
    """This rank's index in the group (default: asked from ``torch.distributed``)."""
    gather: Any = None
    """``obj -> [obj of every group rank]`` (default: ``all_gather_object`` on ``tp_group``)."""
    context_limit: int | None = None
    """The engine's ``max_model_len`` (read from it when it says): prompt + ``max_tokens`` stays within it."""
    _kv_awake: bool = False
    _owns_engine: bool = False
    """The policy started the engine itself (from a model path): :meth:`close` shuts it down."""

    def __init__(
        self,
        llm: Any,
        tokenizer: Any = None,
        sampling: SamplingParams | None = None,
        *,
        vllm_module: Any = None,
        **engine_kwargs: Any,
    ):
        if vllm_module is None:
            try:
                import vllm as vllm_module
            except ImportError as exc:
                raise ImportError(
                    "VLLMPolicy needs vLLM on a CUDA machine: pip install 'star-lab[gpu]'"
                ) from exc
        self._vllm = vllm_module
        if not isinstance(llm, str) and hasattr(llm, "sync_weights") and hasattr(llm, "llm"):
            self.owner = llm  # TRL's VLLMGeneration
            self.enable_sleep_mode = bool(getattr(llm, "enable_sleep_mode", False))
            self.tp_size = int(getattr(llm, "tensor_parallel_size", 1) or 1)
            self.tp_group = getattr(llm, "tp_group", None)
            # TRL sleeps the engine right after building it; its KV cache is asleep until we wake it
            self._kv_awake = not self.enable_sleep_mode
            llm = llm.llm
        if isinstance(llm, str):
            from star_lib.agent.tokenizer import load_tokenizer

            tokenizer = tokenizer or load_tokenizer(llm)
            # logprobs after temperature/top-p, as TRL's importance-sampling correction expects
            engine_kwargs.setdefault("logprobs_mode", "processed_logprobs")
            llm = vllm_module.LLM(model=llm, **engine_kwargs)
            self._owns_engine = True
        if tokenizer is None:
            tokenizer = llm.get_tokenizer()
        self.llm = llm
        self.tokenizer = tokenizer
        self.sampling = sampling or SamplingParams()
        self.stop_ids = stop_token_ids(tokenizer)
        self.context_limit = _engine_context_limit(llm)
        self._calls = 0

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int) -> list[Generation]:
        """Generate one turn per conversation in a single vLLM call (collective within a TP group).

        Each prompt's ``max_tokens`` is :func:`request_max_tokens` of it, so vLLM never sees a request longer
        than its context; a prompt with no room left gets an error generation and is not sent.
        """
        return [self._to_generation(c) for c in self._sample(conversations, max_new_tokens)]

    def release(self) -> None:
        """End this rank's rollout: serve the TP group's remaining calls, then put the engine to sleep.

        Call it once per rollout batch on every rank (the RL ``rollout_func`` does); harmless without a
        TP group or sleep mode.
        """
        if self.tp_size > 1:
            while self._group_call([], []) is not None:  # others still have episodes running
                pass
        if self.owner is not None and self.enable_sleep_mode and self._kv_awake:
            self.llm.sleep(level=2)  # level 2 discards the weights too: TRL re-pushes them before use
            self.owner._llm_weights_sleeping = True
            self._kv_awake = False

    def close(self) -> None:
        """Shut down an engine this policy started, so the next one finds the GPU memory free.

        vLLM frees an engine's memory when its engine core stops, not when the ``LLM`` object is dropped:
        ``LLM.shutdown`` where the installed vLLM has it, else its engine's. TRL's engine is left alone.
        """
        if not self._owns_engine:
            return
        self._owns_engine = False
        llm = self.llm
        stop = getattr(llm, "shutdown", None) or getattr(getattr(llm, "llm_engine", None), "shutdown", None)
        if callable(stop):
            stop()
        self.llm = None
        del llm
        import gc

        import torch

        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _wake(self) -> None:
        """Make the engine ready: current weights loaded (re-pushed after a sleep), KV cache allocated."""
        if self.owner is None or not self.enable_sleep_mode:
            return
        if getattr(self.owner, "_llm_weights_sleeping", False):
            self.owner.sync_weights()  # wakes the weights and loads the training model's (collective)
            self.owner._llm_weights_sleeping = False
        if not self._kv_awake:
            self.llm.wake_up(tags=["kv_cache"])
            self._kv_awake = True

    def _options(self, max_new_tokens: int) -> dict[str, Any]:
        options: dict[str, Any] = {
            "n": 1,
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "max_tokens": max_new_tokens,
            "stop_token_ids": self.stop_ids,
            "logprobs": self.top_logprobs,  # 0: the sampled token's logprob only
            "skip_special_tokens": False,
            "seed": None if self.sampling.seed is None else self.sampling.seed + self._calls,
        }
        if self.sampling.top_k > 0:  # leave vLLM's own "off" value alone (it changed across versions)
            options["top_k"] = self.sampling.top_k
        return options

    def _sample(self, conversations: Sequence[Conversation], max_new_tokens: int) -> list[Any]:
        """Run one vLLM call and return each conversation's completion (vLLM's ``CompletionOutput``).

        A conversation whose prompt leaves no room gets an error :class:`Generation` in its place instead.
        """
        contexts = [list(c.prompt_ids or render_prompt_ids(self.tokenizer, c)) for c in conversations]
        budgets = [
            request_max_tokens(c, len(ids), max_new_tokens, self.context_limit)
            for c, ids in zip(conversations, contexts, strict=True)
        ]
        sent = [i for i, budget in enumerate(budgets) if budget > 0]
        prompts = [{"prompt_token_ids": contexts[i]} for i in sent]
        base = self._options(max_new_tokens)
        options = [{**base, "max_tokens": budgets[i]} for i in sent]  # one per prompt: budgets differ
        self._calls += 1
        if self.tp_size > 1:
            completions = self._group_call(prompts, options) or []
        elif not prompts:
            completions = []
        else:
            self._wake()
            params = [self._vllm.SamplingParams(**o) for o in options]
            one = all(o == options[0] for o in options)  # one SamplingParams for all when they agree
            outputs = self.llm.generate(prompts, params[0] if one else params, use_tqdm=False)
            completions = [output.outputs[0] for output in outputs]
        out: list[Any] = [no_room(len(ids), self.context_limit) for ids in contexts]
        for i, completion in zip(sent, completions, strict=True):
            out[i] = completion
        return out

    def _group_call(self, prompts: list[dict[str, Any]], options: list[dict[str, Any]]) -> list[Any] | None:
        """One collective call of the TP group: gather every rank's prompts, generate all, keep ours.

        Returns None when no rank of the group had a prompt (everyone is done; no engine call is made).
        """
        gathered = self._gather_group((prompts, options))
        if not any(rank_prompts for rank_prompts, _ in gathered):
            return None
        self._wake()
        all_prompts = [p for rank_prompts, _ in gathered for p in rank_prompts]
        params = [  # one SamplingParams per prompt: prompts ask different max_tokens
            self._vllm.SamplingParams(**prompt_options)
            for _, rank_options in gathered
            for prompt_options in rank_options
        ]
        outputs = self.llm.generate(all_prompts, params, use_tqdm=False)
        start = sum(len(rank_prompts) for rank_prompts, _ in gathered[: self._group_rank()])
        return [out.outputs[0] for out in outputs[start : start + len(prompts)]]

    def _gather_group(self, obj: Any) -> list[Any]:
        if self.gather is not None:
            return list(self.gather(obj))
        import torch.distributed as dist

        out: list[Any] = [None] * self.tp_size
        dist.all_gather_object(out, obj, group=self.tp_group)
        return out

    def _group_rank(self) -> int:
        if self.tp_rank is not None:
            return self.tp_rank
        import torch.distributed as dist

        return dist.get_rank(group=self.tp_group)

    def _to_generation(self, completion: Any) -> Generation:
        if isinstance(completion, Generation):  # a prompt that was not sent (no room left)
            return completion
        ids = list(completion.token_ids)
        logprobs = [
            _vllm_logprob(step, tok) for step, tok in zip(completion.logprobs or [], ids, strict=False)
        ]
        reason = "stop" if ids and ids[-1] in self.stop_ids else "length"
        body = ids[:-1] if reason == "stop" else ids
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        return Generation(text=text, token_ids=ids, logprobs=logprobs or None, finish_reason=reason)


def _engine_context_limit(llm: Any) -> int | None:
    """Return the ``max_model_len`` of a ``vllm.LLM`` (None when the engine does not say, e.g. a stand-in)."""
    config = getattr(getattr(llm, "llm_engine", None), "model_config", None)
    limit = getattr(config, "max_model_len", None)
    return limit if isinstance(limit, int) else None


def _vllm_logprob(step: dict[int, Any] | None, token: int) -> float:
    """Pick the sampled token's log-probability out of one vLLM logprobs entry (NaN when missing)."""
    if not step or token not in step:
        return math.nan
    value = step[token].logprob
    return math.nan if value is None else float(value)
