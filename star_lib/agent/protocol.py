"""The episode protocol as one object: how a task is rendered, turns parsed, observations shown, plans read.

An episode speaks exactly one protocol, named by ``RolloutConfig.protocol`` (:data:`PROTOCOLS`):

- ``react`` (:class:`ReactProtocol`, :mod:`star_lib.agent.react`): the paper's JSON tool calls and JSON plan;
- ``compact`` (:class:`CompactProtocol`, :mod:`star_lib.agent.compact`): short calls, one-line observations
  and a compact plan expanded to the official one before evaluation (tiny models).

:func:`get_protocol` returns the object; :class:`~star_lib.agent.env.TravelEnv`, the trajectory explorer and
the teacher ask it instead of branching on the name. A model folder records the protocol it was trained on
in ``star_protocol.json`` (:func:`write_protocol`); :func:`check_protocol` refuses to load it into a rollout
that speaks the other one.

>>> get_protocol("compact").parse_turn("<think>x</think><tool_call>SearchCity|Ohio</tool_call>")
ToolCall(name='SearchCity', arguments={'state': 'Ohio'})
>>> get_protocol("react").name
'react'
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from star_lib.agent import compact, react
from star_lib.agent.config import PROTOCOLS, RolloutConfig
from star_lib.agent.react import (  # the ReAct functions, re-exported for existing importers
    CONTEXT_LIMIT_PROMPT,
    FinalAnswer,
    FormatError,
    Turn,
    format_answer,
    format_tool_call,
    parse_turn,
    plan_json,
    system_prompt,
    tool_response,
    tool_schemas,
    user_prompt,
)
from star_lib.types import DayPlan, QueryRecord, Tools

PROTOCOL_FILE = "star_protocol.json"
"""The file in a model folder that names the protocol the model was trained on."""

__all__ = [
    "CONTEXT_LIMIT_PROMPT",
    "PROTOCOLS",
    "PROTOCOL_FILE",
    "CompactProtocol",
    "FinalAnswer",
    "FormatError",
    "Protocol",
    "ProtocolMismatchError",
    "ReactProtocol",
    "RenderedTask",
    "Turn",
    "check_protocol",
    "detect_protocol",
    "format_answer",
    "format_tool_call",
    "get_protocol",
    "parse_turn",
    "plan_json",
    "read_protocol",
    "system_prompt",
    "tool_response",
    "tool_schemas",
    "user_prompt",
    "write_protocol",
]


@dataclass(frozen=True)
class RenderedTask:
    """The opening of an episode: its system and user messages and the schemas given as ``tools=``."""

    messages: list[dict[str, str]]
    """The system message, then the user message."""
    template_tools: list[dict[str, Any]]
    """Tool schemas for the chat template (empty when the system text lists them or none are shown)."""


class Protocol(ABC):
    """One episode protocol: everything :class:`~star_lib.agent.env.TravelEnv` needs to run an episode."""

    name: str
    """The name in :data:`PROTOCOLS` (what ``RolloutConfig.protocol`` and ``star_protocol.json`` hold)."""
    default_system_prompt: str
    """The protocol's own system message (a transcript is recognised by it, see :func:`detect_protocol`)."""
    context_limit_prompt: str
    """What the model is told when its context overflows (unless ``RolloutConfig.context_limit_prompt``)."""

    @abstractmethod
    def render_task(
        self, query: QueryRecord, schemas: Sequence[dict[str, Any]], config: RolloutConfig
    ) -> RenderedTask:
        """Render the first two messages of an episode on ``query`` and the template's tool schemas."""

    @abstractmethod
    def parse_turn(self, text: Any) -> Turn:
        """Parse one assistant turn strictly; never raises (mistakes are :class:`FormatError` data)."""

    def wrap_tools(self, tools: Tools, query: QueryRecord | None = None) -> Tools:
        """Return the tools as this protocol's model sees them on ``query`` (before any fault is injected).

        :class:`~star_lib.agent.env.TravelEnv` wraps once without a query (for the schemas) and again at
        every ``reset`` with the episode's task; a protocol whose observations do not depend on the task
        returns the same object both times.
        """
        return tools

    def render_observation(self, text: str) -> dict[str, str]:
        """Return the message holding a tool's answer."""
        return tool_response(text)

    @abstractmethod
    def render_format_error(self, error: FormatError) -> dict[str, str]:
        """Return the observation a model gets after a malformed turn."""

    @abstractmethod
    def parse_plan(
        self, text: str, query: QueryRecord, world: Any
    ) -> tuple[tuple[DayPlan, ...] | None, str | None]:
        """Read the inside of ``<answer>`` as official day plans (a plan it cannot read: an error string)."""

    @abstractmethod
    def expert(self, **options: Any) -> Any:
        """Return the programmatic expert that acts out reference plans in this protocol (a ``Policy``)."""

    def recognises(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Whether a transcript opens with this protocol's reference system message."""
        first = messages[0] if messages else {}
        return first.get("role") == "system" and str(first.get("content", "")) == self.default_system_prompt

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ReactProtocol(Protocol):
    """The paper's protocol: JSON tool calls in ``<tool_call>``, the official JSON plan in ``<answer>``."""

    name = "react"
    default_system_prompt = react.system_prompt()
    context_limit_prompt = react.CONTEXT_LIMIT_PROMPT

    def render_task(
        self, query: QueryRecord, schemas: Sequence[dict[str, Any]], config: RolloutConfig
    ) -> RenderedTask:
        """Render our rules (tools in the text when ``tools_in_system_prompt``) and the query's text."""
        listed = config.tools_in_system_prompt
        system = config.system_prompt or react.system_prompt(schemas, include_tools=listed)
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": react.user_prompt(query)},
        ]
        return RenderedTask(messages, [] if listed else list(schemas))

    def parse_turn(self, text: Any) -> Turn:
        """Parse with :func:`star_lib.agent.react.parse_turn`."""
        return react.parse_turn(text)

    def render_format_error(self, error: FormatError) -> dict[str, str]:
        """Tell the model what was wrong and to follow the rules."""
        return react.format_error_message(error)

    def parse_plan(
        self, text: str, query: QueryRecord, world: Any
    ) -> tuple[tuple[DayPlan, ...] | None, str | None]:
        """Parse the JSON plan (spec §4) for the query's number of days; a key given twice is an error.

        The evaluator's own decoding keeps the official last-key-wins reading (official mode must); the
        protocol refuses a plan that says two things about one field, so neither is silently dropped.
        """
        from star_lib.io import DuplicateKeyError, loads_strict
        from star_lib.travel.plan import parse_plan

        try:
            loads_strict(text)
        except DuplicateKeyError as exc:
            return None, f"the plan repeats a key: {exc}"
        except ValueError:
            pass  # not JSON at all: parse_plan says what is wrong with it
        try:
            return parse_plan(text, days=query.days), None
        except ValueError as exc:
            return None, str(exc)

    def expert(self, **options: Any) -> Any:
        """Return an :class:`~star_lib.agent.expert.ExpertPolicy` (``options`` are its keyword arguments)."""
        from star_lib.agent.expert import ExpertPolicy

        return ExpertPolicy(**options)

    def recognises(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Whether a transcript opens with our rules (with or without the tool listing)."""
        first = messages[0] if messages else {}
        rules = react.system_prompt()
        return first.get("role") == "system" and str(first.get("content", "")).startswith(rules)


class CompactProtocol(Protocol):
    """Short calls, one line per search result and a compact plan (:mod:`star_lib.agent.compact`)."""

    name = "compact"
    default_system_prompt = compact.SYSTEM_PROMPT
    context_limit_prompt = compact.CONTEXT_LIMIT_PROMPT

    def render_task(
        self, query: QueryRecord, schemas: Sequence[dict[str, Any]], config: RolloutConfig
    ) -> RenderedTask:
        """Render the one-word system message and the compact task line; no tool schemas are shown."""
        system = config.system_prompt or compact.SYSTEM_PROMPT
        user = compact.user_prompt(query)
        return RenderedTask([{"role": "system", "content": system}, {"role": "user", "content": user}], [])

    def parse_turn(self, text: Any) -> Turn:
        """Parse with :func:`star_lib.agent.compact.parse_turn`."""
        return compact.parse_turn(text)

    def wrap_tools(self, tools: Tools, query: QueryRecord | None = None) -> Tools:
        """Make the tools answer compactly, with what ``query``'s constraints need in the lines."""
        if isinstance(tools, compact.CompactTools):
            return tools.for_query(query)
        return compact.CompactTools(tools, query)

    def render_format_error(self, error: FormatError) -> dict[str, str]:
        """Return a short observation (tiny models read it)."""
        return tool_response(f"format error: {error.reason}")

    def parse_plan(
        self, text: str, query: QueryRecord, world: Any
    ) -> tuple[tuple[DayPlan, ...] | None, str | None]:
        """Expand the compact plan (:func:`star_lib.agent.compact.expand_plan`)."""
        try:
            return compact.expand_plan(text, query, world), None
        except ValueError as exc:
            return None, str(exc)

    def expert(self, **options: Any) -> Any:
        """Return a :class:`~star_lib.agent.compact.CompactExpert` (``options`` are its keyword arguments)."""
        return compact.CompactExpert(**options)


_PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (ReactProtocol(), CompactProtocol())}
if tuple(_PROTOCOLS) != PROTOCOLS:  # pragma: no cover - a protocol added to one list and not the other
    raise RuntimeError(f"protocol objects {tuple(_PROTOCOLS)} differ from RolloutConfig's {PROTOCOLS}")


class UnknownProtocolError(ValueError):
    """A protocol name that is not one of :data:`PROTOCOLS`."""


def get_protocol(name: str) -> Protocol:
    """Return the protocol object named ``name`` (``react`` | ``compact``).

    Raises:
        UnknownProtocolError: For any other name.

    """
    if name not in _PROTOCOLS:
        raise UnknownProtocolError(f"protocol must be one of {PROTOCOLS}, got {name!r}")
    return _PROTOCOLS[name]


def detect_protocol(messages: Sequence[Mapping[str, Any]], default: str = "react") -> str:
    """Name the protocol a stored transcript speaks, by its system message; ``default`` when none matches."""
    for protocol in _PROTOCOLS.values():
        if protocol.name != default and protocol.recognises(messages):
            return protocol.name
    return default


# ───────────────────────────── checkpoints ─────────────────────────────


class ProtocolMismatchError(ValueError):
    """A model folder trained on one protocol, loaded into a rollout that speaks another."""


def write_protocol(model_dir: str | Path, name: str) -> Path:
    """Record in ``model_dir/star_protocol.json`` that the model there speaks protocol ``name``.

    Returns:
        The path written.

    Raises:
        UnknownProtocolError: When ``name`` is not a protocol.

    """
    from star_lib.io import write_json_atomic

    get_protocol(name)
    path = Path(model_dir) / PROTOCOL_FILE
    write_json_atomic(path, {"protocol": name})
    return path


def read_protocol(model_dir: str | Path) -> str | None:
    """Return the protocol a model folder records, or None (no file: a hub id or an older folder).

    Raises:
        ValueError: When ``star_protocol.json`` is not a JSON object naming a known protocol.

    """
    path = Path(model_dir) / PROTOCOL_FILE
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not readable JSON ({exc})") from None
    name = payload.get("protocol") if isinstance(payload, dict) else None
    if name not in _PROTOCOLS:
        raise ValueError(f'{path}: "protocol" must be one of {PROTOCOLS}, got {name!r}')
    return name


def check_protocol(model_dir: str | Path, name: str) -> str | None:
    """Refuse a model folder whose ``star_protocol.json`` names another protocol than ``name``.

    Returns:
        The recorded protocol (None when the folder records none, which is accepted).

    Raises:
        ProtocolMismatchError: When the folder records the other protocol.

    """
    get_protocol(name)
    recorded = read_protocol(model_dir)
    if recorded is not None and recorded != name:
        raise ProtocolMismatchError(
            f"{Path(model_dir)} was trained on the {recorded} protocol ({PROTOCOL_FILE}) but this rollout "
            f"speaks {name}: set protocol: {recorded}, or use a model trained on {name}"
        )
    return recorded
