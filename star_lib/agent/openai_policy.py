"""An OpenAI-compatible chat endpoint as a :class:`~star_lib.agent.policies.Policy`.

Hosted teachers, a vLLM server and :mod:`star_lib.agent.serve` all speak this protocol. The API key comes
from a named environment variable only; failures come back as ``Generation.error`` after retries with
exponential backoff, never as exceptions.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlparse

from star_lib.agent.policies import Conversation, Generation, SamplingParams, request_max_tokens


@dataclass(frozen=True)
class OpenAIConfig:
    """How to reach an OpenAI-compatible chat endpoint."""

    model: str
    """Model name sent with each request."""
    base_url: str | None = None
    """Endpoint root such as ``http://localhost:8000/v1``; None = the client default (``OPENAI_BASE_URL``)."""
    api_key_env: str = "OPENAI_API_KEY"
    """NAME of the environment variable holding the key (the key is never stored in configs or logs)."""
    concurrency: int = 8
    """Most requests in flight at once."""
    max_retries: int = 4
    """Retries after a failed or empty response (with exponential backoff and jitter)."""
    timeout_s: float = 120.0
    """Per-request timeout in seconds."""
    backoff_s: float = 1.0
    """First backoff delay; doubles at each retry."""
    tools_mode: Literal["system", "template"] = "system"
    """``system``: list the tools in the system message (hosted teachers); ``template``: send ``tools=`` so
    the server renders them with the model's chat template (vLLM, :mod:`star_lib.agent.serve`)."""
    tool_messages: Literal["user", "tool"] = "user"
    """Send tool results as ``user`` turns wrapped in ``<tool_response>`` (accepted everywhere) or as
    ``tool`` messages (servers that render them with the chat template)."""
    logprobs: bool = False
    """Ask for per-token log-probabilities."""
    retry_empty: bool = True
    """Treat an empty (or whitespace-only) reply as a failure and retry it (STAR's client does)."""
    extra_body: dict[str, Any] | None = None
    """Extra JSON fields for the request body (e.g. ``{"top_k": 20}`` for vLLM)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.max_retries < 0 or self.timeout_s <= 0 or self.backoff_s < 0:
            raise ValueError("max_retries must be >= 0, timeout_s > 0 and backoff_s >= 0")
        if self.tools_mode not in ("system", "template") or self.tool_messages not in ("user", "tool"):
            raise ValueError("tools_mode must be 'system' or 'template'; tool_messages 'user' or 'tool'")


def _is_local(url: str | None) -> bool:
    host = urlparse(url or "").hostname or ""
    return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0")


class OpenAIPolicy:
    """Any OpenAI-compatible chat endpoint, with a concurrency limit, retries with backoff and timeouts.

    Args:
        config: Endpoint settings. The API key is read from the environment variable ``config.api_key_env``;
            a local endpoint without that variable gets the placeholder key ``EMPTY``.
        sampling: Sampling settings (``top_k`` goes into the request body).
        tokenizer: Optional tokenizer so the runner can record token ids and count context tokens.

    Raises:
        ValueError: When a remote endpoint is configured and the key variable is unset.

    """

    def __init__(
        self, config: OpenAIConfig, sampling: SamplingParams | None = None, *, tokenizer: Any = None
    ):
        import openai

        key = os.environ.get(config.api_key_env)
        if not key:
            if not _is_local(config.base_url):
                raise ValueError(
                    f"set the environment variable {config.api_key_env} to the API key of the endpoint"
                )
            key = "EMPTY"
        self.config = config
        self.sampling = sampling or SamplingParams()
        self.tokenizer = tokenizer
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=0
        )
        self._lock = threading.Lock()
        self._calls = 0

    def __repr__(self) -> str:
        return f"OpenAIPolicy(model={self.config.model!r}, base_url={self.config.base_url!r})"

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int) -> list[Generation]:
        """Send one request per conversation, at most ``concurrency`` at a time."""
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            return list(pool.map(lambda c: self._complete(c, max_new_tokens), conversations))

    def request_body(self, conversation: Conversation, max_new_tokens: int) -> dict[str, Any]:
        """Build the keyword arguments of ``chat.completions.create`` for one conversation."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": self._messages(conversation),
            "max_tokens": request_max_tokens(conversation, 0, max_new_tokens, None),  # the runner's room
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
        }
        if self.config.tools_mode == "template" and conversation.tools:
            body["tools"] = conversation.tools
        if self.sampling.seed is not None:
            with self._lock:
                body["seed"] = self.sampling.seed + self._calls
                self._calls += 1
        if self.config.logprobs:
            body["logprobs"] = True
        extra = dict(self.config.extra_body or {})
        if self.sampling.top_k > 0:
            extra.setdefault("top_k", self.sampling.top_k)
        if extra:
            body["extra_body"] = extra
        return body

    def _messages(self, conversation: Conversation) -> list[dict[str, Any]]:
        messages = [dict(m) for m in conversation.messages]
        if (
            self.config.tools_mode == "system"
            and conversation.tools
            and messages
            and messages[0]["role"] == "system"
        ):
            listing = "\n".join(json.dumps(s, ensure_ascii=False) for s in conversation.tools)
            messages[0]["content"] += f"\n\nAvailable tools:\n<tools>\n{listing}\n</tools>"
        if self.config.tool_messages == "user":
            for m in messages:
                if m["role"] == "tool":
                    m["role"], m["content"] = "user", f"<tool_response>\n{m['content']}\n</tool_response>"
        return messages

    def _complete(self, conversation: Conversation, max_new_tokens: int) -> Generation:
        body = self.request_body(conversation, max_new_tokens)
        error = "no attempt made"
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                delay = self.config.backoff_s * 2 ** (attempt - 1)
                time.sleep(delay + random.uniform(0, delay))
            try:
                response = self._client.chat.completions.create(**body)
            except self._openai.APIStatusError as exc:
                error = f"HTTP {exc.status_code}: {str(exc)[:200]}"
                if exc.status_code not in (408, 409, 429) and exc.status_code < 500:
                    break  # a request the server will never accept: do not retry
                continue
            except (self._openai.APIConnectionError, self._openai.APITimeoutError) as exc:
                error = f"{type(exc).__name__}: {str(exc)[:200]}"
                continue
            generation = _from_response(response)
            if generation.text.strip() or not self.config.retry_empty:
                return generation
            error = "empty response"
        return Generation(text="", finish_reason="error", error=error)


def _from_response(response: Any) -> Generation:
    """Turn a chat completion into a :class:`Generation` (structured tool calls folded back into text)."""
    choice = response.choices[0]
    message = choice.message
    text = message.content or ""
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    if reasoning and "<think>" not in text:
        text = f"<think>{reasoning.strip()}</think>{text.strip()}"
    for call in message.tool_calls or []:
        arguments = call.function.arguments
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass  # keep the raw string: the strict parser will report it to the model
        payload = json.dumps({"name": call.function.name, "arguments": arguments}, ensure_ascii=False)
        text += f"<tool_call>{payload}</tool_call>"
    logprobs = None
    if getattr(choice, "logprobs", None) is not None and choice.logprobs.content:
        logprobs = [float(item.logprob) for item in choice.logprobs.content]
    reason = "length" if choice.finish_reason == "length" else "stop"
    return Generation(text=text, logprobs=logprobs, finish_reason=reason)
