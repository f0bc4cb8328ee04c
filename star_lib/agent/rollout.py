"""The episode runner: a batch of episodes in lockstep, token-exact, for teachers, evaluation and RL.

Each turn, every live episode asks the policy for its next assistant turn in one batched call; each
environment then steps on its own. The runner records the episode's tokens through the model's chat
template (see :mod:`star_lib.agent.chat`): ``prompt_ids`` (system + user + generation prompt), and
``completion_ids`` with ``env_mask`` (1 on the model's tokens and their end-of-turn token, 0 on tool
responses and template glue) and, when the backend gives them, per-token sampling ``logprobs``
(0.0 on environment tokens). Those are exactly the rows a TRL ``rollout_func`` returns; see
:func:`trl_rollout_output`.

Limits: ``max_turns`` truncates; when the context plus room for one more turn (``max_new_tokens``)
would exceed ``max_context_tokens``, the last tool response is replaced by a request for the final plan,
the model answers once, and the episode stops (``Termination.CONTEXT_LIMIT``), as in STAR's inference code.
Every request asks for :meth:`LiveEpisode.room` new tokens (``Conversation.max_new_tokens``, clamped by
:func:`~star_lib.agent.policies.clamp_max_tokens`), so prompt + ``max_tokens`` never exceeds
``max_context_tokens`` (the vLLM engine's ``max_model_len`` in RL); an episode whose context leaves less
than :data:`MIN_REPLY_TOKENS` (or ``max_new_tokens``, if smaller) is not asked again: it ends truncated
(``Termination.CONTEXT_LIMIT``), with the observation it would not see dropped.

Example:
    >>> episodes = run_episodes(policy, queries, world, RolloutConfig(max_turns=20))  # doctest: +SKIP
    >>> batch = trl_rollout_output(episodes)  # doctest: +SKIP

"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from star_lib.agent.chat import ChatRenderer, TokenTrace
from star_lib.agent.config import RolloutConfig
from star_lib.agent.env import Episode, TravelEnv, fault_config_for
from star_lib.agent.policies import Conversation, Generation, Policy, clamp_max_tokens
from star_lib.types import COMMONSENSE_KEYS, HARD_KEYS, QueryRecord, Tools

__all__ = [
    "MIN_REPLY_TOKENS",
    "LiveEpisode",
    "RolloutConfig",
    "RolloutStats",
    "chat_renderer",
    "episode_row",
    "episodes_frame",
    "run_episodes",
    "trl_rollout_output",
]

MIN_REPLY_TOKENS = 16
"""Fewest new tokens worth asking for (at most ``max_new_tokens``); with less room it ends truncated."""


@dataclass
class RolloutStats:
    """Where the wall time of :func:`run_episodes` went (seconds), filled in place."""

    generation_s: float = 0.0
    """Inside ``policy.generate``."""
    env_s: float = 0.0
    """Inside the environment: parsing, tools, plan parsing, evaluation, rewards."""
    tokenize_s: float = 0.0
    """Rendering the chat template and tokenising segments."""
    total_s: float = 0.0
    """Wall time of the whole call."""
    turns: int = 0
    """Policy calls (lockstep turns)."""
    episodes: int = 0
    """Episodes run."""

    @property
    def env_share(self) -> float:
        """Share of wall time spent in the environment."""
        return self.env_s / self.total_s if self.total_s else 0.0


def run_episodes(
    policy: Policy,
    queries: Sequence[QueryRecord],
    world: Any,
    cfg: RolloutConfig | None = None,
    faults: Any = None,
    *,
    group_ids: Sequence[Any] | None = None,
    tools: Tools | None = None,
    tokenizer: Any = None,
    stats: RolloutStats | None = None,
    progress: bool = False,
) -> list[Episode]:
    """Run one episode per query, all in lockstep, and return them in query order.

    Args:
        policy: Writes the assistant turns.
        queries: One task per episode (repeat a query for several samples of it).
        world: The database behind the tools and the evaluator, or a set of worlds with
            ``for_query(query) -> World`` (each episode then runs in its own query's world).
        cfg: Episode settings.
        faults: A ``FaultConfig``; episode ``i`` gets seed ``faults.seed + cfg.seed + i``.
        group_ids: One key per query, copied to ``Episode.group_id`` (e.g. the GRPO prompt index).
        tools: Tools to use instead of ``ToolRegistry(world)``.
        tokenizer: Tokenizer with a chat template; defaults to ``policy.tokenizer``. Without one, no ids
            are recorded and the context budget is estimated from characters.
        stats: Filled in place with timings.
        progress: Show a progress bar of finished episodes.

    Returns:
        The finished episodes.

    Raises:
        ValueError: When ``group_ids`` does not match ``queries`` in length.

    """
    cfg = cfg or RolloutConfig()
    stats = stats if stats is not None else RolloutStats()
    if group_ids is not None and len(group_ids) != len(queries):
        raise ValueError(
            f"group_ids has {len(group_ids)} entries for {len(queries)} queries; give one per query"
        )
    start = time.perf_counter()
    tokenizer = tokenizer if tokenizer is not None else getattr(policy, "tokenizer", None)
    lives = [LiveEpisode.start(i, q, world, cfg, faults, tools, stats) for i, q in enumerate(queries)]
    renderer = chat_renderer(tokenizer, lives[0].env) if lives else None
    for i, live in enumerate(lives):
        live.env.episode.group_id = group_ids[i] if group_ids is not None else None
        _timed(stats, "tokenize_s", live.record_prompt, renderer)
    bar = _progress_bar(len(lives), progress)
    while active := [live for live in lives if not live.env.done]:
        conversations = [live.conversation(renderer) for live in active]
        t0 = time.perf_counter()
        generations = policy.generate(conversations, max_new_tokens=cfg.max_new_tokens)
        stats.generation_s += time.perf_counter() - t0
        stats.turns += 1
        for live, generation in zip(active, generations, strict=True):
            live.advance(generation, renderer, cfg, stats)
            if live.env.done and bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    stats.episodes += len(lives)
    stats.total_s += time.perf_counter() - start
    return [live.finish() for live in lives]


# ───────────────────────────── per-episode steps ─────────────────────────────


@dataclass
class LiveEpisode:
    """One episode while it runs: its environment and token trace, stepped by a runner.

    :func:`run_episodes` steps a batch of these in lockstep; ARPO (:mod:`star_lib.train.arpo`) steps them
    too and forks them mid-episode. The steps: :meth:`start`, :meth:`record_prompt`, then
    :meth:`conversation` → the policy → :meth:`advance` until ``env.done``, then :meth:`finish`.
    """

    env: TravelEnv
    """The episode's environment (its ``episode`` holds the transcript)."""
    trace: TokenTrace = field(default_factory=TokenTrace)
    """Token ids and masks recorded so far."""
    chars: int = 0
    """Characters of the conversation (the context estimate when there is no tokenizer)."""

    @classmethod
    def start(
        cls,
        index: int,
        query: QueryRecord,
        world: Any,
        cfg: RolloutConfig,
        faults: Any = None,
        tools: Tools | None = None,
        stats: RolloutStats | None = None,
    ) -> LiveEpisode:
        """Reset a new environment on ``query``; ``index`` seeds its faults (see :func:`run_episodes`)."""
        t0 = time.perf_counter()
        if hasattr(world, "for_query"):  # many worlds: the episode runs in its query's own world
            world = world.for_query(query)
        env = TravelEnv(world, cfg, tools=tools, faults=fault_config_for(faults, index, cfg.seed))
        env.reset(options={"query": query})
        env.episode.index = index
        if stats is not None:
            stats.env_s += time.perf_counter() - t0
        return cls(env=env)

    def record_prompt(self, renderer: ChatRenderer | None) -> None:
        """Record the prompt's tokens (system + user + generation prompt); stop if no room is left."""
        messages = self.env.episode.messages
        self.chars = sum(len(m["content"]) for m in messages)
        if renderer is not None:
            self.trace.start(renderer, messages)
        self._stop_without_room()

    def context_tokens(self) -> int:
        """Tokens of the context the next turn continues (estimated from characters without a tokenizer)."""
        if self.trace.prompt_ids:
            return self.trace.length
        return math.ceil(self.chars / self.env.config.chars_per_token)

    def room(self, extra_tokens: int = 0) -> int:
        """Return the ``max_tokens`` of the next request (after ``extra_tokens`` more context), clamped."""
        cfg = self.env.config
        prompt = self.context_tokens() + extra_tokens
        return clamp_max_tokens(prompt, cfg.max_new_tokens, cfg.max_context_tokens)

    def conversation(self, renderer: ChatRenderer | None) -> Conversation:
        """Return what the policy sees for the next turn, with the room left for it (``max_new_tokens``)."""
        ep = self.env.episode
        return Conversation(
            messages=[dict(m) for m in ep.messages],
            tools=ep.tool_schemas,
            prompt_ids=self.trace.context_ids if renderer is not None else None,
            query=ep.query,
            key=ep.index,
            max_new_tokens=self.room(),
        )

    def advance(
        self,
        generation: Generation,
        renderer: ChatRenderer | None,
        cfg: RolloutConfig,
        stats: RolloutStats,
    ) -> None:
        """Step the environment with one generation and record the new tokens."""
        env = self.env
        t0 = time.perf_counter()
        if generation.error is not None:
            env.fail(generation.error)
            stats.env_s += time.perf_counter() - t0
            return
        obs, *_ = env.step(generation.text)
        t1 = time.perf_counter()
        stats.env_s += t1 - t0
        messages = env.episode.messages
        n_assistant = len(messages) - len(obs)
        self.chars += len(messages[n_assistant - 1]["content"]) + sum(len(m["content"]) for m in obs)
        if renderer is not None:
            self.trace.add_assistant(renderer, messages[:n_assistant], generation, cfg.token_ids)
        if not env.done:
            self._add_observation(renderer, cfg)
        stats.tokenize_s += time.perf_counter() - t1

    def _add_observation(self, renderer: ChatRenderer | None, cfg: RolloutConfig) -> None:
        """Record the environment's reply; on context overflow swap it for the final-plan request.

        The request is checked like any observation: when even it leaves no useful room, the episode ends
        truncated instead (:meth:`_stop_without_room`).
        """
        env, trace = self.env, self.trace
        if renderer is None:
            if self.room() < cfg.max_new_tokens:
                env.request_final_answer()
                self.chars = sum(len(m["content"]) for m in env.episode.messages)
            self._stop_without_room()
            return
        text, ids = trace.env_segment(renderer, env.episode.messages)
        if self.room(len(ids)) < cfg.max_new_tokens:
            env.request_final_answer()
            text, ids = trace.env_segment(renderer, env.episode.messages)
        if self.room(len(ids)) < _min_reply(cfg):
            env.stop_at_context_limit()
            return
        trace.add_env(text, ids)

    def _stop_without_room(self) -> None:
        """End the episode truncated when its context leaves no useful room for another turn."""
        if not self.env.done and self.room() < _min_reply(self.env.config):
            self.env.stop_at_context_limit()

    def finish(self) -> Episode:
        """Return the finished episode with its token ids, mask and logprobs."""
        ep, trace = self.env.episode, self.trace
        ep.prompt_ids = trace.prompt_ids
        ep.completion_ids = trace.completion_ids
        ep.env_mask = trace.env_mask
        ep.logprobs = trace.logprobs if trace.logprobs is not None and trace.completion_ids else None
        ep.retokenized_turns = trace.retokenized_turns
        return ep


def chat_renderer(tokenizer: Any, env: TravelEnv) -> ChatRenderer | None:
    """Return the renderer that records an environment's episodes with ``tokenizer`` (None: no tokenizer).

    The template's tools are those the protocol rendered for the environment's (started) episode.
    """
    if tokenizer is None:
        return None
    return ChatRenderer(tokenizer, env.episode.tool_schemas or None)


def _min_reply(cfg: RolloutConfig) -> int:
    return min(MIN_REPLY_TOKENS, cfg.max_new_tokens)


def _timed(stats: RolloutStats, bucket: str, fn: Any, *args: Any) -> None:
    t0 = time.perf_counter()
    fn(*args)
    setattr(stats, bucket, getattr(stats, bucket) + time.perf_counter() - t0)


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="episodes", unit="ep")


# ───────────────────────────── outputs ─────────────────────────────


def trl_rollout_output(episodes: Sequence[Episode]) -> dict[str, Any]:
    """Convert episodes to what a TRL 1.16 ``GRPOTrainer`` ``rollout_func`` returns (one row per episode).

    ``logprobs`` is None unless every episode has them (TRL accepts None without vLLM); the extra keys
    (``episode``, ``reward``, ``malformed``, ``report``) reach reward functions as keyword lists.

    Raises:
        ValueError: When an episode has no token ids (run with a tokenizer).

    """
    if any(not ep.prompt_ids for ep in episodes):
        raise ValueError("episodes carry no token ids: run_episodes needs a tokenizer (policy.tokenizer)")
    has_logprobs = all(ep.logprobs is not None for ep in episodes)
    return {
        "prompt_ids": [list(ep.prompt_ids) for ep in episodes],
        "completion_ids": [list(ep.completion_ids) for ep in episodes],
        "logprobs": [list(ep.logprobs) for ep in episodes] if has_logprobs else None,  # type: ignore[arg-type]
        "env_mask": [list(ep.env_mask) for ep in episodes],
        "episode": list(episodes),
        "reward": [ep.reward for ep in episodes],
        "malformed": [ep.malformed for ep in episodes],
        "report": [ep.report for ep in episodes],
    }


def episode_row(ep: Episode) -> dict[str, Any]:
    """One flat row per episode: plan, verdicts, turns, tokens, termination (for parquet tables)."""
    report = ep.report
    row: dict[str, Any] = {
        "index": ep.index,
        "group_id": None if ep.group_id is None else str(ep.group_id),
        "idx": ep.query.idx,
        "level": ep.query.level,
        "days": ep.query.days,
        "org": ep.query.org,
        "dest": ep.query.dest,
        "protocol": ep.protocol,
        "termination": ep.termination.value,
        "malformed": ep.malformed,
        "turns": ep.turns,
        "tool_calls": ep.tool_calls,
        "valid_tool_calls": ep.valid_tool_calls,
        "format_errors": ep.format_errors,
        "faults": json.dumps(ep.faults, sort_keys=True),
        "tool_histogram": json.dumps(ep.tool_histogram, sort_keys=True),
        "prompt_tokens": len(ep.prompt_ids),
        "completion_tokens": len(ep.completion_ids),
        "model_tokens": ep.model_tokens,
        "plan": None if ep.plan is None else json.dumps([d.to_dict() for d in ep.plan], ensure_ascii=False),
        "plan_error": ep.plan_error,
        "error": ep.error,
        "reward": ep.reward,
        "delivered": bool(report and report.delivered),
        "commonsense_pass": bool(report and report.commonsense_all),
        "hard_pass": bool(report and report.hard_all),
        "final_pass": bool(report and report.final_pass),
        "cs_micro": report.cs_micro if report else 0.0,
        "hard_micro": report.hard_micro if report else 0.0,
    }
    for key in COMMONSENSE_KEYS:
        result = report.commonsense.get(key) if report else None
        row[f"cs/{key}"] = None if result is None else result.passed
    for key in HARD_KEYS:
        result = report.hard.get(key) if report and report.hard else None
        row[f"hard/{key}"] = None if result is None else result.passed
    return row


def episodes_frame(episodes: Sequence[Episode]) -> Any:
    """Build a polars DataFrame with one :func:`episode_row` per episode."""
    import polars as pl

    rows = [episode_row(ep) for ep in episodes]
    schema_overrides = {k: pl.Boolean for k in rows[0] if k.startswith(("cs/", "hard/"))} if rows else None
    return pl.DataFrame(rows, schema_overrides=schema_overrides, infer_schema_length=None)
