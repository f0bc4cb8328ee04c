"""Request limits and validation: what a chat-completions body may hold, checked before it is queued.

Every malformed field gets a :class:`RequestError` (HTTP 400 unless said) naming the field and what to send
instead; a validated request becomes a :class:`PreparedRequest`, and a queued one a :class:`Job`.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from star_lib.agent.policies import Conversation, SamplingParams

MAX_BODY_BYTES = 2 * 1024 * 1024
"""Default bound on a request body (a full 32k-token conversation is ~150 kB of JSON)."""
MAX_DISCARD_BYTES = 32 * 1024 * 1024
"""Most bytes of a refused body read and discarded after its answer, so a client still sending it reads the
status instead of a connection reset (a larger body is cut off)."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays/objects accepted in a request body."""
ROLES = ("system", "user", "assistant", "tool")
_SEED_RANGE = (-(2**63), 2**63 - 1)  # what torch.manual_seed takes


class RequestError(ValueError):
    """A request the server rejects (HTTP ``status``, 400 unless said); the message says what to change.

    Args:
        message: One sentence naming the field and what to send instead.
        status: HTTP status of the answer.
        param: The offending body field (reported as the OpenAI error's ``param``).

    """

    def __init__(self, message: str, *, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


@dataclass
class PreparedRequest:
    """A validated request, rendered to token ids, ready to generate."""

    conversation: Conversation
    max_tokens: int
    sampling: SamplingParams
    seed: int | None
    logprobs: bool


@dataclass
class Job:
    """A queued generation and how its handler thread learns the outcome."""

    request: PreparedRequest
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: BaseException | None = None


def parse_body(raw: bytes) -> Any:
    """Decode a request body: JSON, UTF-8, nested at most :data:`MAX_JSON_DEPTH` deep.

    Raises:
        RequestError: Not UTF-8, not JSON, or nested too deeply (400).

    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the body is not UTF-8 (byte {exc.start}); send UTF-8 JSON") from None
    too_deep = f"the body nests arrays/objects more than {MAX_JSON_DEPTH} deep; flatten it"
    try:
        body = json.loads(text)
    except RecursionError:  # the C parser gives up near 1000 levels
        raise RequestError(too_deep) from None
    except ValueError as exc:
        raise RequestError(f"the body is not valid JSON: {exc}") from None
    if _depth(body) > MAX_JSON_DEPTH:
        raise RequestError(too_deep)
    return body


def parse_request(
    body: Any, defaults: SamplingParams, max_new_tokens_limit: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int | None, SamplingParams, int | None]:
    """Check a decoded body's fields: ``(messages, tools, max_tokens, sampling, seed)``.

    Unset sampling fields take ``defaults`` (the server's, never another request's); ``max_tokens`` is
    None when the body sets none.

    Raises:
        RequestError: naming the malformed field (400).

    """
    if not isinstance(body, dict):
        raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}")
    messages = _parse_messages(body.get("messages"))
    tools = body.get("tools")
    if tools is None:
        tools = []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise RequestError("'tools' must be a list of function-schema objects", param="tools")
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise RequestError(f"'n' must be 1 (one choice per request), got {n!r}", param="n")
    if body.get("stream"):
        raise RequestError("'stream' is not supported; send stream=false", param="stream")
    if not isinstance(body.get("logprobs", False), bool | None):
        raise RequestError(f"'logprobs' must be true or false, got {body['logprobs']!r}", param="logprobs")
    max_tokens = None
    for name in ("max_tokens", "max_completion_tokens"):  # max_completion_tokens wins when both are set
        if body.get(name) is not None:
            max_tokens = _integer(body, name, 1, max_new_tokens_limit)
    default = defaults
    temperature = _number(body, "temperature", default.temperature, 0.0, 2.0)
    top_p = _number(body, "top_p", default.top_p, 0.0, 1.0)
    if top_p == 0:
        raise RequestError("'top_p' must be in (0, 1], got 0", param="top_p")
    top_k = default.top_k if body.get("top_k") is None else _integer(body, "top_k", 0, 1_000_000)
    seed = None if body.get("seed") is None else _integer(body, "seed", *_SEED_RANGE)
    sampling = replace(
        default,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed if seed is not None else default.seed,
    )
    return messages, tools, max_tokens, sampling, seed


def _depth(value: Any) -> int:
    """Deepest list/dict nesting of a parsed JSON value (iterative: no recursion limit to hit)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _parse_messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of {role, content} objects", param="messages")
    clean = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise RequestError(f"'{where}' must be a {{role, content}} object", param="messages")
        if message.get("role") not in ROLES:
            raise RequestError(
                f"'{where}.role' must be one of {', '.join(ROLES)}, got {message.get('role')!r}",
                param="messages",
            )
        content = message.get("content")
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            if not all(
                isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                for p in content
            ):
                raise RequestError(
                    f"'{where}.content' parts must all be {{type: text, text}}", param="messages"
                )
            content = "".join(p["text"] for p in content)
        if content is not None and not isinstance(content, str):
            raise RequestError(
                f"'{where}.content' must be a string, got {type(content).__name__}", param="messages"
            )
        clean.append({"role": message["role"], "content": content or ""})
    return clean


def _integer(body: dict[str, Any], name: str, low: int, high: int) -> int:
    value = body[name]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(f"'{name}' must be an integer in {low}..{high}, got {value!r}", param=name)
    return value


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RequestError(
            f"'{name}' must be a finite number in [{low:g}, {high:g}], got {value!r}", param=name
        )
    if not low <= value <= high:
        raise RequestError(f"'{name}' must be in [{low:g}, {high:g}], got {value!r}", param=name)
    return float(value)
