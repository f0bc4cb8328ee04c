"""ARPO: entropy-based adaptive rollouts for multi-turn tool use, inside TRL's ``rollout_func``.

ARPO (Dong et al., 2025, arXiv:2507.19849) observes that the first tokens a model writes after a tool
response are far more uncertain than the rest, and spends its sampling budget there (§3.2):

1. **Initial chains**: each group of G episodes starts with ``round(G × initial_share)`` full chains
   (paper: half of the budget; at least one).
2. **Entropy probes**: the chain's *initial entropy* H₀ is the mean normalised entropy of the first ``k``
   tokens of its first turn. After every tool response, the first ``k`` tokens of the next turn give H_t.
3. **Branching**: with probability ``clip(α + β·(H_t − H₀), 0, 1)`` (defaults α 0.5, β 0.2) the chain's
   state just after the tool response is copied (messages, token trace, fault-injector state) and the copy
   samples its own next turn; branching stops once the group has G members.
4. **Top-up**: a group whose chains all ended before reaching G members gets fresh full chains.

Every member of a group is its own row (the paper's *soft advantage attribution*: rows share their prefix
tokens, so GRPO's token-level loss gives a shared token the mean of its rows' advantages, §3.3). Exactly G
rows per prompt come back, in TRL's order.

Entropies are normalised to [0, 1] (divided by the log of the number of candidate tokens): from the full
logits with transformers and FastPolicy (their ``entropy_tokens=k`` option) and from the top-k
log-probabilities with vLLM (:class:`EntropyVLLMPolicy`, import-guarded). Any policy returning
:class:`EntropyGeneration` works (tests inject entropies); a policy without entropies never branches (its
groups are filled by top-ups).

Counters (``arpo/…`` in ``metrics.parquet``): branches per group, top-up chains, entropy deltas (mean,
max), branch probability, initial entropy, branch decisions.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from star_lib.agent.policies import (
    EntropyGeneration,
    Generation,
    TransformersPolicy,
    VLLMPolicy,
    token_entropies,
)

__all__ = [
    "ARPOConfig",
    "ARPOStats",
    "EntropyGeneration",
    "EntropyTransformersPolicy",
    "EntropyVLLMPolicy",
    "branch_probability",
    "entropy_from_top_logprobs",
    "initial_chains",
    "run_arpo_episodes",
    "token_entropies",
]


@dataclass
class ARPOConfig:
    """Entropy-based adaptive rollout settings (paper §3.2 defaults)."""

    initial_share: float = 0.5
    """Share of each group started as full chains (the rest of the budget goes to branches)."""
    alpha: float = 0.5
    """Base branching probability α."""
    beta: float = 0.2
    """Weight β of the entropy change in the branching probability."""
    entropy_tokens: int = 10
    """k: leading tokens of a turn whose mean entropy is measured."""
    top_logprobs: int = 20
    """vLLM: log-probabilities per position requested to estimate the entropy; at most vLLM's
    ``max_logprobs`` (20 in the engine TRL starts: ``RLRunConfig`` refuses more with ``use_vllm``)."""

    def __post_init__(self) -> None:
        if not 0 < self.initial_share <= 1:
            raise ValueError(f"initial_share must be in (0, 1], got {self.initial_share}")
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"alpha is a probability in [0, 1], got {self.alpha}")
        if not math.isfinite(self.beta):
            raise ValueError(f"beta must be a finite number, got {self.beta}")
        if self.entropy_tokens < 1 or self.top_logprobs < 2:
            raise ValueError("entropy_tokens must be >= 1 and top_logprobs >= 2")


# ───────────────────────────── pure parts ─────────────────────────────


def initial_chains(group_size: int, initial_share: float) -> int:
    """Full chains a group starts with: ``round(G × share)``, at least 1, at most G.

    >>> initial_chains(8, 0.5), initial_chains(3, 0.5), initial_chains(4, 0.01)
    (4, 2, 1)
    """
    return min(group_size, max(1, math.floor(group_size * initial_share + 0.5)))


def branch_probability(delta_entropy: float, alpha: float = 0.5, beta: float = 0.2) -> float:
    """ARPO's branching probability ``α + β·ΔH``, clipped to [0, 1].

    >>> branch_probability(0.0), branch_probability(0.5), branch_probability(-5.0)
    (0.5, 0.6, 0.0)
    """
    return min(1.0, max(0.0, alpha + beta * delta_entropy))


def entropy_from_top_logprobs(logprobs: Sequence[float]) -> float:
    """Normalised entropy of a top-k distribution (renormalised over the k candidates): ``H / log k``.

    >>> round(entropy_from_top_logprobs([math.log(0.25)] * 4), 6)
    1.0
    >>> entropy_from_top_logprobs([0.0, -math.inf])
    0.0
    """
    finite = [float(x) for x in logprobs if x is not None and math.isfinite(float(x))]
    if len(logprobs) < 2 or not finite:
        return 0.0
    top = max(finite)
    weights = [math.exp(x - top) for x in finite]
    total = sum(weights)
    h = -sum(w / total * math.log(w / total) for w in weights if w > 0)
    return min(1.0, max(0.0, h / math.log(len(logprobs))))


def leading_entropy(generation: Generation, k: int) -> float | None:
    """Mean entropy of a turn's first ``k`` tokens; None when the policy gave no entropies."""
    values = getattr(generation, "entropies", None)
    if not values:
        return None
    head = values[:k]
    return float(sum(head) / len(head))


# ───────────────────────────── policies with entropies ─────────────────────────────


EntropyTransformersPolicy = TransformersPolicy
"""The transformers backend with entropies: ``TransformersPolicy(..., entropy_tokens=k)`` returns
:class:`EntropyGeneration` (the entropies come from its own ``generate``, not a copy of it)."""


class EntropyVLLMPolicy(VLLMPolicy):
    """:class:`~star_lib.agent.policies.VLLMPolicy` with entropies estimated from top-k log-probabilities.

    Raises:
        ImportError: When vLLM is not installed (GPU machines only).

    """

    def __init__(self, *args: Any, top_logprobs: int = 20, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.top_logprobs = top_logprobs

    def generate(self, conversations: Sequence[Any], *, max_new_tokens: int) -> list[Generation]:
        """Generate one turn per conversation; ``logprobs=top_logprobs`` for the entropy estimate."""
        result: list[Generation] = []
        for completion in self._sample(conversations, max_new_tokens):
            base = self._to_generation(completion)
            steps = list(completion.logprobs or [])
            entropies = [
                entropy_from_top_logprobs([lp.logprob for lp in step.values()]) for step in steps if step
            ]
            result.append(EntropyGeneration(**vars(base), entropies=entropies or None))
        return result


def entropy_policy(trainer: Any, cfg: Any) -> Any:
    """Build ARPO's rollout policy: the trained model with entropies.

    vLLM when TRL colocates an engine, :class:`~star_lib.agent.fastgen.FastPolicy` with
    ``fast_generation`` (the tiny models' KV-cached CPU sampler), else the transformers backend; each
    returns :class:`EntropyGeneration` with the entropies of a turn's first ``arpo.entropy_tokens`` tokens.
    """
    from star_lib.agent.policies import SamplingParams

    arpo = cfg.arpo
    sampling = SamplingParams(temperature=float(cfg._pick("temperature")), top_p=cfg.top_p)
    tokenizer = trainer.processing_class
    if getattr(trainer, "use_vllm", False):  # colocate (RLRunConfig refuses server mode)
        # TRL's generation object: the policy handles sleep mode and TP groups (see VLLMPolicy)
        return EntropyVLLMPolicy(trainer.vllm_generation, tokenizer, sampling, top_logprobs=arpo.top_logprobs)
    model = trainer.accelerator.unwrap_model(trainer.model)
    if cfg.fast_generation:
        from star_lib.agent.fastgen import FastPolicy

        return FastPolicy(model, tokenizer, sampling, entropy_tokens=arpo.entropy_tokens)
    return TransformersPolicy(
        model, tokenizer, sampling, batch_size=cfg.batch_size, entropy_tokens=arpo.entropy_tokens
    )


# ───────────────────────────── the adaptive runner ─────────────────────────────


@dataclass
class ARPOStats:
    """What the adaptive runner did in one call."""

    groups: int = 0
    """Groups rolled out."""
    branches: list[int] = field(default_factory=list)
    """Branches (copied chains) per group."""
    topups: int = 0
    """Fresh full chains started because a group's chains ended before it had G members."""
    entropy_deltas: list[float] = field(default_factory=list)
    """H_t − H₀ at every branching decision."""
    probabilities: list[float] = field(default_factory=list)
    """Branching probability at every decision."""
    initial_entropies: list[float] = field(default_factory=list)
    """H₀ of every chain that measured one."""
    missing_entropy: int = 0
    """Turns whose generation carried no entropies (no branching possible there)."""

    def metrics(self) -> dict[str, float]:
        """Per-call counters with ``arpo/`` keys."""

        def mean(values: Sequence[float]) -> float:
            return float(sum(values) / len(values)) if values else 0.0

        return {
            "arpo/branches_per_group": mean(self.branches),
            "arpo/topup_chains": float(self.topups),
            "arpo/branch_decisions": float(len(self.probabilities)),
            "arpo/branch_prob_mean": mean(self.probabilities),
            "arpo/entropy_delta_mean": mean(self.entropy_deltas),
            "arpo/entropy_delta_max": max(self.entropy_deltas) if self.entropy_deltas else 0.0,
            "arpo/initial_entropy": mean(self.initial_entropies),
            "arpo/missing_entropy_turns": float(self.missing_entropy),
        }


@dataclass
class _Chain:
    """One member of a group: the runner's live episode plus ARPO's bookkeeping."""

    live: Any
    group: int
    h0: float | None = None
    after_tool: bool = False


def run_arpo_episodes(
    policy: Any,
    queries: Sequence[Any],
    world: Any,
    cfg: Any,
    arpo: ARPOConfig,
    group_size: int,
    rng: Any,
    *,
    faults: Any = None,
    tools: Any = None,
    tokenizer: Any = None,
    stats: ARPOStats | None = None,
) -> list[Any]:
    """Roll out ``group_size`` episodes per query with entropy-based branching, all chains in lockstep.

    Args:
        policy: Writes the turns; :class:`EntropyGeneration` results enable branching.
        queries: One task per group.
        world: The database behind tools and evaluator.
        cfg: A :class:`~star_lib.agent.config.RolloutConfig` (limits, reward, seed).
        arpo: Branching settings.
        group_size: G, the members each group returns.
        rng: A ``numpy.random.Generator`` for the branching draws.
        faults: A ``FaultConfig``; member slot ``s`` of the batch is seeded ``faults.seed + cfg.seed + s``
            (a branch continues its parent's fault sequence).
        tools: Tools to use instead of the world's registry.
        tokenizer: Chat-template tokenizer; defaults to ``policy.tokenizer``.
        stats: Filled in place.

    Returns:
        ``len(queries) × group_size`` finished episodes, group by group (``group_id`` = group index).

    """
    from star_lib.agent import rollout as runner

    stats = stats if stats is not None else ARPOStats()
    stats.groups += len(queries)
    tokenizer = tokenizer if tokenizer is not None else getattr(policy, "tokenizer", None)
    timing = runner.RolloutStats()
    members: list[list[_Chain]] = [[] for _ in queries]
    shared: dict[str, Any] = {"renderer": None}

    def start(group: int) -> None:
        slot = group * group_size + len(members[group])
        live = runner.LiveEpisode.start(slot, queries[group], world, cfg, faults, tools, timing)
        if shared["renderer"] is None and tokenizer is not None:
            shared["renderer"] = runner.chat_renderer(tokenizer, live.env)
        live.env.episode.group_id = group
        live.record_prompt(shared["renderer"])
        members[group].append(_Chain(live=live, group=group))

    first = initial_chains(group_size, arpo.initial_share)
    for group in range(len(queries)):
        for _ in range(first):
            start(group)
    branches = [0] * len(queries)
    while True:
        for group, chains in enumerate(members):  # top up groups whose chains all ended short of G
            if len(chains) < group_size and all(c.live.env.done for c in chains):
                stats.topups += group_size - len(chains)
                for _ in range(group_size - len(chains)):
                    start(group)
        active = [c for chains in members for c in chains if not c.live.env.done]
        if not active:
            break
        renderer = shared["renderer"]
        conversations = [c.live.conversation(renderer) for c in active]
        generations = policy.generate(conversations, max_new_tokens=cfg.max_new_tokens)
        for chain, generation in zip(active, generations, strict=True):
            if _decide_branch(chain, generation, members, group_size, arpo, rng, stats):
                members[chain.group].append(_fork(chain, group_size, len(members[chain.group]), world))
                branches[chain.group] += 1
            calls_before = chain.live.env.episode.tool_calls
            chain.live.advance(generation, renderer, cfg, timing)
            chain.after_tool = chain.live.env.episode.tool_calls > calls_before and not chain.live.env.done
    stats.branches.extend(branches)
    return [c.live.finish() for chains in members for c in chains]


def _decide_branch(
    chain: _Chain,
    generation: Generation,
    members: list[list[_Chain]],
    group_size: int,
    arpo: ARPOConfig,
    rng: Any,
    stats: ARPOStats,
) -> bool:
    """Measure this turn's leading entropy; after a tool response, draw whether to branch."""
    h = leading_entropy(generation, arpo.entropy_tokens)
    if h is None:
        stats.missing_entropy += 1
        return False
    if chain.h0 is None:
        chain.h0 = h
        stats.initial_entropies.append(h)
        return False
    if not chain.after_tool or len(members[chain.group]) >= group_size:
        return False
    delta = h - chain.h0
    p = branch_probability(delta, arpo.alpha, arpo.beta)
    stats.entropy_deltas.append(delta)
    stats.probabilities.append(p)
    return bool(rng.random() < p)


def _fork(chain: _Chain, group_size: int, member: int, world: Any) -> _Chain:
    """Copy a chain's state (before its pending turn is applied); the copy samples that turn anew."""
    env = chain.live.env
    shared = (world, env.world, env.base_tools, env.config, getattr(env, "protocol", None))
    keep = {id(obj): obj for obj in shared if obj is not None}  # databases, tools, settings: never copied
    live = copy.deepcopy(chain.live, keep)
    live.env.episode.index = chain.group * group_size + member
    return _Chain(live=live, group=chain.group, h0=chain.h0, after_tool=chain.after_tool)
