"""The travel-planning environment, shaped like Gymnasium: ``reset`` → ``step`` … until done.

An observation is the list of chat messages the step adds (the first one holds the system and user
messages; later ones hold one ``tool`` message). ``terminated`` means the agent answered; ``truncated``
means it hit the turn limit or the context limit (Gymnasium terms). The reward is 0 until the episode
ends, then the configured reward of :mod:`star_lib.rewards` (format gate included).

The episode protocol (``RolloutConfig.protocol``, a :class:`~star_lib.agent.protocol.Protocol`) renders the
task and the observations and parses the turns and the plan; ``reset`` has it wrap the tools for the episode's
task (:meth:`~star_lib.agent.protocol.Protocol.wrap_tools`: compact lines carry what its constraints need).

Tools come from a :class:`~star_lib.travel.tools.ToolRegistry` over the world, optionally wrapped in a
:class:`~star_lib.travel.faults.FaultInjector` seeded per episode. Model mistakes never raise: a malformed
turn becomes an observation (or ends the episode, as configured) and is counted.

Example:
    >>> env = TravelEnv(World.synthetic(seed=0, scale="tiny"))  # doctest: +SKIP
    >>> obs, info = env.reset(options={"query": record})  # doctest: +SKIP
    >>> turn = '<think>…</think><tool_call>{"name": "SearchCity", "arguments": {"state": "Ohio"}}</tool_call>'
    >>> obs, reward, terminated, truncated, info = env.step(turn)  # doctest: +SKIP

"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from star_lib.agent.config import RolloutConfig
from star_lib.agent.protocol import FinalAnswer, FormatError, Protocol, get_protocol, tool_schemas
from star_lib.types import (
    DayPlan,
    EpisodeResult,
    EvaluationReport,
    Observation,
    QueryRecord,
    Termination,
    ToolCall,
    Tools,
)

INVALID_CALL_ERRORS = frozenset({"unknown_tool", "bad_arguments"})
"""Observation errors that make a tool call invalid (``no_result`` and injected failures are valid calls)."""


@dataclass
class Episode(EpisodeResult):
    """An :class:`~star_lib.types.EpisodeResult` with what the runner and trainers need besides."""

    index: int = 0
    """Position of the episode in its batch."""
    group_id: Any = None
    """Caller-supplied group key (e.g. the GRPO prompt index shared by the ``num_generations`` rollouts)."""
    reward: float = 0.0
    """The configured reward of the finished episode (0 when malformed)."""
    tool_histogram: dict[str, int] = field(default_factory=dict)
    """Tool calls per tool name."""
    format_error_reasons: list[str] = field(default_factory=list)
    """Why each malformed turn was rejected."""
    answer_text: str | None = None
    """The inside of the final ``<answer>`` tags, when there was one."""
    retokenized_turns: int = 0
    """Assistant turns whose recorded ids are a re-tokenisation of the sampled ids."""
    error: str | None = None
    """A backend failure that ended the episode (then ``termination`` is ``malformed``)."""
    tool_schemas: list[dict[str, Any]] = field(default_factory=list)
    """Schemas given to the chat template as ``tools=`` (empty when they are listed in the system text)."""
    protocol: str = "react"
    """The episode protocol it was run in (``RolloutConfig.protocol``)."""
    steps: list[tuple[ToolCall, Observation]] = field(default_factory=list)
    """Each tool call and the observation it got, in order (the milestone reward's input)."""

    @property
    def model_tokens(self) -> int:
        """Tokens the model produced (``env_mask`` 1)."""
        return sum(self.env_mask)


class TravelEnv:
    """One TravelPlanner episode at a time over a world, its tools and an optional fault model.

    Args:
        world: The database (``star_lib.travel.world.World``); used by the default tools and the evaluator.
        config: Episode settings.
        tools: Tools to call instead of ``ToolRegistry(world)`` (e.g. a fake in tests).
        faults: Fault model (``star_lib.travel.faults.FaultConfig``); None = no wrapper.

    """

    def __init__(
        self,
        world: Any,
        config: RolloutConfig | None = None,
        *,
        tools: Tools | None = None,
        faults: Any = None,
    ) -> None:
        self.world = world
        self.config = config or RolloutConfig()
        self.protocol: Protocol = get_protocol(self.config.protocol)
        self._raw_tools: Tools = tools if tools is not None else _registry(world)
        self.faults = faults
        # e.g. compact observations, rendered before any fault is injected; rewrapped for each task in reset
        self.base_tools: Tools = self.protocol.wrap_tools(self._raw_tools)
        self.tools: Tools = self._with_faults(self.base_tools)
        self.schemas = tool_schemas(self.base_tools)
        self._episode: Episode | None = None
        self._final_requested = False
        self.done = True

    # ── Gymnasium API ──

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list, dict]:
        """Start an episode for ``options["query"]``; ``seed`` restarts the fault sequence.

        Returns:
            The first messages (system, user) and an info dict with the query and the tool schemas.

        Raises:
            ValueError: When ``options`` has no ``QueryRecord`` under ``"query"``.

        """
        query = (options or {}).get("query")
        if not isinstance(query, QueryRecord):
            raise ValueError('reset needs options={"query": QueryRecord(...)}')
        base = self.protocol.wrap_tools(self._raw_tools, query)  # the task decides what compact lines carry
        if base is not self.base_tools:
            self.base_tools, self.tools = base, self._with_faults(base)
        if hasattr(self.tools, "reset"):
            self.tools.reset(seed)
        task = self.protocol.render_task(query, self.schemas, self.config)
        messages = task.messages
        self._episode = Episode(
            query=query,
            messages=list(messages),
            termination=Termination.MALFORMED,
            tool_schemas=list(task.template_tools),
            protocol=self.protocol.name,
        )
        self._final_requested = False
        self.done = False
        return messages, {"query": query, "tools": self.schemas}

    def step(self, action: str) -> tuple[list, float, bool, bool, dict]:
        """Take one assistant turn (raw text) and return ``(obs, reward, terminated, truncated, info)``.

        Raises:
            RuntimeError: When called on a finished episode (call ``reset`` first).

        """
        ep = self._require_live()
        content = action.strip() if isinstance(action, str) else ""
        ep.messages.append({"role": "assistant", "content": content})
        ep.turns += 1
        turn = self.protocol.parse_turn(content)
        info: dict[str, Any] = {"turn": turn}
        if isinstance(turn, FormatError):
            obs = self._on_format_error(ep, turn)
        elif isinstance(turn, FinalAnswer):
            ep.answer_text = turn.text
            obs = self._finish(Termination.CONTEXT_LIMIT if self._final_requested else Termination.ANSWER)
        elif self._final_requested:
            obs = self._finish(Termination.CONTEXT_LIMIT)  # a tool call where the plan was asked for
        else:
            obs = self._call_tool(ep, turn, info)
        if not self.done and ep.turns >= self.config.max_turns:
            obs = self._finish(Termination.TURN_LIMIT)
        ep.messages.extend(obs)
        return self._outcome(obs, info)

    def request_final_answer(self) -> list[dict[str, Any]]:
        """Replace the last observation with the context-limit request (STAR: ask once, then stop).

        Returns:
            The new last observation (one ``user`` message).

        """
        ep = self._require_live()
        ask = {"role": "user", "content": self.context_limit_prompt}
        if ep.messages[-1]["role"] != "assistant":
            ep.messages[-1] = ask
        else:
            ep.messages.append(ask)
        self._final_requested = True
        return [ask]

    def stop_at_context_limit(self) -> Episode:
        """End the episode at the context limit without another turn: truncated, not terminated.

        The runner calls it when the context leaves no useful room for a reply. An observation the model
        will never see (the last message, after its last turn) is dropped, so the transcript holds exactly
        what the model saw.
        """
        ep = self._require_live()
        if ep.turns and ep.messages[-1]["role"] != "assistant":
            ep.messages.pop()
        self._finish(Termination.CONTEXT_LIMIT)
        return ep

    def fail(self, reason: str) -> Episode:
        """End the episode because the policy backend failed (recorded as malformed)."""
        ep = self._require_live()
        ep.error = reason
        self._finish(Termination.MALFORMED)
        return ep

    @property
    def context_limit_prompt(self) -> str:
        """What the model is told when its context overflows (the config's text, else the protocol's)."""
        return self.config.context_limit_prompt or self.protocol.context_limit_prompt

    @property
    def episode(self) -> Episode:
        """The current (or last) episode record."""
        if self._episode is None:
            raise RuntimeError("no episode yet: call reset() first")
        return self._episode

    # ── internals ──

    def _with_faults(self, base: Tools) -> Tools:
        """Wrap ``base`` in the fault injector when the environment has a fault model."""
        if self.faults is None:
            return base
        from star_lib.travel.faults import FaultInjector

        return FaultInjector(base, self.faults)

    def _require_live(self) -> Episode:
        if self._episode is None or self.done:
            raise RuntimeError("the episode is over (or never started): call reset() first")
        return self._episode

    def _on_format_error(self, ep: Episode, error: FormatError) -> list[dict[str, Any]]:
        ep.format_errors += 1
        ep.format_error_reasons.append(error.reason)
        cfg = self.config
        if self._final_requested:
            return self._finish(Termination.CONTEXT_LIMIT)
        if cfg.on_format_error == "stop" or (
            cfg.max_format_errors and ep.format_errors >= cfg.max_format_errors
        ):
            return self._finish(Termination.MALFORMED)
        return [self.protocol.render_format_error(error)]

    def _call_tool(self, ep: Episode, call: ToolCall, info: dict[str, Any]) -> list[dict[str, Any]]:
        observation = self.tools.call(call.name, call.arguments)
        ep.tool_calls += 1
        ep.tool_histogram[call.name] = ep.tool_histogram.get(call.name, 0) + 1
        if observation.error not in INVALID_CALL_ERRORS:
            ep.valid_tool_calls += 1
        if observation.fault:
            ep.faults[observation.fault] = ep.faults.get(observation.fault, 0) + 1
        info["observation"] = observation
        ep.steps.append((call, observation))
        return [self.protocol.render_observation(observation.text)]

    def _finish(self, termination: Termination) -> list[dict[str, Any]]:
        ep = self.episode
        ep.termination = termination
        self.done = True
        if ep.answer_text is not None:
            ep.plan, ep.plan_error = self.protocol.parse_plan(ep.answer_text, ep.query, self.world)
        if self.config.evaluate and self.world is not None:
            ep.report = _evaluate(ep.query, ep.plan, self.world, self.config.eval_mode)
        ep.reward = _reward(self.config.reward, ep)
        return []

    def _outcome(self, obs: list, info: dict[str, Any]) -> tuple[list, float, bool, bool, dict]:
        ep = self.episode
        if not self.done:
            return obs, 0.0, False, False, info
        info.update(termination=ep.termination, report=ep.report, plan_error=ep.plan_error)
        terminated = ep.termination in (Termination.ANSWER, Termination.MALFORMED)
        return obs, ep.reward, terminated, ep.termination.truncated, info


def _registry(world: Any) -> Tools:
    from star_lib.travel.tools import ToolRegistry

    return ToolRegistry(world)


def _evaluate(
    query: QueryRecord, plan: tuple[DayPlan, ...] | None, world: Any, mode: str
) -> EvaluationReport:
    from star_lib.travel.evaluate import evaluate_plan

    return evaluate_plan(query, plan, world, mode)


def _reward(name: str, ep: Episode) -> float:
    """Apply the configured reward of :mod:`star_lib.rewards` (0 without a report or with ``none``)."""
    if name == "none" or ep.report is None:
        return 0.0
    from star_lib.rewards import milestone_reward, reward_value

    credit = None
    if name == "milestone":
        credit = milestone_reward(ep.plan, ep.steps, ep.query, ep.malformed, ep.report)
    return float(reward_value(name, ep.report, ep.malformed, credit=credit))


def fault_config_for(faults: Any, index: int, base_seed: int) -> Any:
    """Return the fault config of episode ``index``: same rates, seed ``faults.seed + base_seed + index``."""
    if faults is None:
        return None
    return replace(faults, seed=faults.seed + base_seed + index)


def tool_histogram(episodes: list[Episode]) -> dict[str, int]:
    """Sum the per-tool call counts of many episodes."""
    total: Counter[str] = Counter()
    for ep in episodes:
        total.update(ep.tool_histogram)
    return dict(total)
