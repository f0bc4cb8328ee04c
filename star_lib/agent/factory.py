"""One way to build a policy: :func:`make_policy` for every backend the runner, trainers and CLIs use.

========================  ==========================================================================
kind                      backend
========================  ==========================================================================
``transformers``          :class:`~star_lib.agent.policies.TransformersPolicy` (HF ``generate``, CPU/GPU)
``fast``                  :class:`~star_lib.agent.fastgen.FastPolicy` (lean KV-cached sampler, Qwen2)
``vllm``                  :class:`~star_lib.agent.policies.VLLMPolicy` (GPU, import-guarded)
``openai``                :class:`~star_lib.agent.openai_policy.OpenAIPolicy` (any OpenAI-compatible endpoint)
``expert``                the protocol's programmatic expert (acts out reference plans)
========================  ==========================================================================

A model given as a folder is checked against the episodes' ``protocol`` before anything is loaded
(:func:`star_lib.agent.protocol.check_protocol`): a checkpoint trained on the other protocol is refused
with one sentence naming both.

>>> make_policy("expert", protocol="compact")  # doctest: +ELLIPSIS
<star_lib.agent.compact.CompactExpert object at ...>
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from star_lib.agent.openai_policy import OpenAIConfig, OpenAIPolicy
from star_lib.agent.policies import Policy, SamplingParams

POLICY_KINDS: tuple[str, ...] = ("transformers", "fast", "vllm", "openai", "expert")
"""The backends :func:`make_policy` builds."""

_OPTIONS: dict[str, frozenset[str]] = {
    "transformers": frozenset(),
    "fast": frozenset({"reuse_cache"}),
    "vllm": frozenset(),  # any vllm.LLM keyword (engine options) is passed through
    "openai": frozenset(f.name for f in fields(OpenAIConfig)) - {"model"},
    "expert": frozenset({"max_retries", "seed"}),
}


class PolicyOptionError(ValueError):
    """A policy kind that does not exist, or an option its backend does not take."""


def make_policy(
    kind: str,
    *,
    model: Any = None,
    tokenizer: Any = None,
    sampling: SamplingParams | None = None,
    protocol: str | None = None,
    device: str | None = None,
    batch_size: int = 16,
    entropy_tokens: int = 0,
    **options: Any,
) -> Policy:
    """Build the policy of backend ``kind``.

    Args:
        kind: One of :data:`POLICY_KINDS`.
        model: A model folder or hub id (loaded here), or a loaded causal LM (then pass ``tokenizer``); for
            ``openai`` the model name sent with each request; unused by ``expert``.
        tokenizer: The tokenizer of a loaded model (for ``openai``: optional, to count tokens).
        sampling: Temperature, top-p, top-k and seed.
        protocol: The episodes' protocol: a model folder that records another one is refused, and
            ``expert`` acts in it (default ``react``).
        device: Where a loaded ``transformers`` model goes (default CUDA when present); ``fast`` runs on
            the CPU unless told otherwise.
        batch_size: Conversations per ``generate`` call (``transformers``).
        entropy_tokens: Return the entropies of each turn's first tokens (``transformers``, ``fast``: ARPO).
        **options: Backend options: ``reuse_cache`` (``fast``), the :class:`OpenAIConfig` fields
            (``openai``: ``base_url``, ``concurrency``, …), ``max_retries``/``seed`` (``expert``), engine
            keywords (``vllm``).

    Raises:
        PolicyOptionError: An unknown kind, an option the backend does not take, or a missing model.
        star_lib.agent.protocol.ProtocolMismatchError: A model folder trained on the other protocol.

    """
    if kind not in POLICY_KINDS:
        raise PolicyOptionError(f"policy kind must be one of {POLICY_KINDS}, got {kind!r}")
    unknown = sorted(set(options) - _OPTIONS[kind]) if kind != "vllm" else []
    if unknown:
        allowed = sorted(_OPTIONS[kind]) or "none"
        raise PolicyOptionError(f"the {kind} policy takes no option(s) {unknown} (its options: {allowed})")
    if entropy_tokens and kind not in ("transformers", "fast"):
        raise PolicyOptionError(f"entropy_tokens is for the transformers and fast policies, not {kind}")
    if kind == "expert":
        from star_lib.agent.protocol import get_protocol

        return get_protocol(protocol or "react").expert(**options)
    if model is None:
        raise PolicyOptionError(f"the {kind} policy needs a model (a folder, a hub id or a loaded model)")
    if kind == "openai":
        return OpenAIPolicy(OpenAIConfig(model=str(model), **options), sampling, tokenizer=tokenizer)
    if isinstance(model, (str, Path)) and protocol is not None:
        from star_lib.agent.protocol import check_protocol

        check_protocol(model, protocol)
    if kind == "vllm":
        from star_lib.agent.policies import VLLMPolicy

        return VLLMPolicy(str(model) if isinstance(model, Path) else model, tokenizer, sampling, **options)
    if isinstance(model, (str, Path)):
        from star_lib.agent.policies import load_model

        model, tokenizer = load_model(model, device=device or ("cpu" if kind == "fast" else None))
    elif tokenizer is None:
        raise PolicyOptionError(f"the {kind} policy needs the tokenizer of the loaded model")
    if kind == "fast":
        from star_lib.agent.fastgen import FastPolicy

        return FastPolicy(model, tokenizer, sampling, entropy_tokens=entropy_tokens, **options)
    from star_lib.agent.policies import TransformersPolicy

    return TransformersPolicy(
        model, tokenizer, sampling, batch_size=batch_size, entropy_tokens=entropy_tokens
    )
