"""A small OpenAI-compatible chat server for a transformers model (``POST /v1/chat/completions``).

It renders each request with the model's chat template (``messages`` and ``tools``), generates with a
:class:`~star_lib.agent.policies.TransformersPolicy` and answers in the OpenAI response shape, including
``logprobs`` when asked. It is meant for tests, demos and local teachers, and built so that no client can
block it (standard library HTTP only):

- one generation runs at a time, in a worker thread fed by a bounded FIFO queue; when the queue is full a
  request gets ``429`` with ``Retry-After`` at once (never a connection reset);
- a request is checked before it is queued: a body over ``max_body_bytes`` gets ``413``, a prompt that
  does not fit the model's context gets ``413``, and every malformed field gets ``400`` naming the field;
- a client that disconnects cancels its request, queued or running (checked before each forward pass);
- idle or stalled sockets time out after ``socket_timeout_s``; at most ``max_connections`` connections are
  served at once, further ones get ``503`` with ``Retry-After``; the listen backlog is large.

Example:
    >>> server = ChatServer.from_pretrained("runs/sft/model", port=0).start()  # doctest: +SKIP
    >>> server.base_url  # doctest: +SKIP
    'http://127.0.0.1:43121/v1'
    >>> server.stop()  # doctest: +SKIP

"""

from __future__ import annotations

import errno
import json
import math
import queue
import secrets
import select
import selectors
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from star_lib.agent.policies import Conversation, SamplingParams, TransformersPolicy, render_prompt_ids

MAX_BODY_BYTES = 2 * 1024 * 1024
"""Default bound on a request body (a full 32k-token conversation is ~150 kB of JSON)."""
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


class ServerConfigError(ValueError):
    """The server cannot start as configured (address cannot be resolved or bound, bad limit)."""


class _Aborted(Exception):
    """Raised inside the model's forward pass to stop a cancelled or overdue generation."""


# ───────────────────────────── listening address ─────────────────────────────


def resolve_listen_address(
    host: str, port: int, *, host_option: str = "host", port_option: str = "port"
) -> tuple[int, tuple[Any, ...]]:
    """Resolve where to listen, checking the host and port without binding.

    Args:
        host: Interface name or address (``127.0.0.1``, ``::1``, ``localhost``, ``0.0.0.0``).
        port: TCP port, 0..65535 (0 picks a free one).
        host_option: How error messages name the host (``--host`` on the command line).
        port_option: How error messages name the port.

    Returns:
        ``(address_family, sockaddr)`` for the socket.

    Raises:
        ServerConfigError: The port is out of range or the host does not resolve to a local address family.

    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ServerConfigError(
            f"{port_option} must be an integer in 1..65535 (0 = any free port), got {port!r}"
        )
    if not isinstance(host, str) or not host.strip():
        raise ServerConfigError(f"{host_option} must be an interface name or address, got {host!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise ServerConfigError(
            f"{host_option} {host!r} is not an address or a name this machine resolves ({exc}); "
            "use e.g. 127.0.0.1, ::1 or 0.0.0.0"
        ) from None
    families = [info for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)]
    if not families:
        raise ServerConfigError(f"{host_option} {host!r} resolves to no IPv4/IPv6 address")
    family, _, _, _, sockaddr = families[0]
    return int(family), tuple(sockaddr)


def check_listen_address(
    host: str, port: int, *, host_option: str = "host", port_option: str = "port"
) -> None:
    """Check that ``host:port`` can be bound now (before loading a model for minutes), then release it.

    Args:
        host: Interface name or address.
        port: TCP port (0 picks a free one).
        host_option: How error messages name the host.
        port_option: How error messages name the port.

    Raises:
        ServerConfigError: The address does not resolve, is not on this machine, or the port is in use.

    """
    family, sockaddr = resolve_listen_address(host, port, host_option=host_option, port_option=port_option)
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP server binds
        _bind(probe, sockaddr, host, port, host_option, port_option)


def _bind(
    sock: socket.socket, sockaddr: tuple[Any, ...], host: str, port: int, host_option: str, port_option: str
) -> None:
    try:
        sock.bind(sockaddr)
    except PermissionError:
        raise ServerConfigError(
            f"{port_option} {port}: binding a port below 1024 needs privileges; use e.g. 8000"
        ) from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ServerConfigError(
                f"{port_option} {port} is already in use on {host}; stop the other server or pick another"
            ) from None
        raise ServerConfigError(
            f"{host_option} {host!r} cannot be bound on this machine: {exc.strerror}"
        ) from None


# ───────────────────────────── the server ─────────────────────────────


@dataclass
class _Prepared:
    """A validated request, rendered to token ids, ready to generate."""

    conversation: Conversation
    max_tokens: int
    sampling: SamplingParams
    seed: int | None
    logprobs: bool


@dataclass
class _Job:
    """A queued generation and how its handler thread learns the outcome."""

    request: _Prepared
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: BaseException | None = None


class ChatServer:
    """Serve one model over HTTP in a background thread.

    Args:
        policy: The model, tokenizer and default sampling settings.
        model_name: Name reported by ``/v1/models`` and in responses.
        host: Interface to bind (loopback by default).
        port: TCP port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        api_key: When set, requests must send ``Authorization: Bearer <api_key>``.
        max_new_tokens_limit: Upper bound on ``max_tokens`` per request.
        max_context_tokens: Prompt plus completion tokens allowed; defaults to the model's
            ``max_position_embeddings`` (a longer prompt gets 413).
        max_queue: Requests waiting for the model beyond the one generating; more get 429.
        max_connections: Connections served at once; more get 503 (bounds the server's threads).
        socket_timeout_s: A connection idle (or stalled mid-request) this long is closed.
        max_body_bytes: Largest request body; larger gets 413.
        generation_timeout_s: Stop a generation running longer than this (503); None = no limit.

    Raises:
        ServerConfigError: A limit is not positive, or the address cannot be resolved or bound.

    """

    def __init__(
        self,
        policy: TransformersPolicy,
        *,
        model_name: str = "star-local",
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        max_new_tokens_limit: int = 4096,
        max_context_tokens: int | None = None,
        max_queue: int = 32,
        max_connections: int = 128,
        socket_timeout_s: float = 30.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        generation_timeout_s: float | None = None,
    ) -> None:
        counts = {
            "max_new_tokens_limit": max_new_tokens_limit,
            "max_queue": max_queue,
            "max_connections": max_connections,
            "max_body_bytes": max_body_bytes,
            "max_context_tokens": 1 if max_context_tokens is None else max_context_tokens,
        }
        seconds = {
            "socket_timeout_s": socket_timeout_s,
            "generation_timeout_s": 1 if generation_timeout_s is None else generation_timeout_s,
        }
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ServerConfigError(f"{name} must be an integer >= 1, got {value!r}")
        for name, value in seconds.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ServerConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        self.policy = policy
        self.model_name = model_name
        self.api_key = api_key
        self.max_new_tokens_limit = max_new_tokens_limit
        self.max_context_tokens = max_context_tokens or _model_context(policy)
        self.max_body_bytes = max_body_bytes
        self.socket_timeout_s = socket_timeout_s
        self.generation_timeout_s = generation_timeout_s
        self.stats: Counter[str] = Counter()
        """Outcome counts: ``ok``, ``bad_request``, ``too_large``, ``queue_full``, ``busy``, ``cancelled``…"""
        self._stats_lock = threading.Lock()
        self._lock = threading.Lock()  # one generation at a time
        self._render_lock = threading.Lock()  # a fast tokenizer is not safe to share across threads
        self._jobs: queue.Queue[_Job] = queue.Queue(maxsize=max_queue)
        self._current: _Job | None = None
        self._seconds_per_job = 1.0  # running mean, for Retry-After
        self._stopping = threading.Event()
        family, sockaddr = resolve_listen_address(host, port)
        self._rejector = _Rejector()
        self._httpd = _HTTPServer(
            family, sockaddr, _handler_for(self), max_connections, self._rejector, self._count, (host, port)
        )
        self._worker = threading.Thread(target=self._work, name="star-serve-model", daemon=True)
        self._worker.start()
        self._thread: threading.Thread | None = None
        self._serving = False

    @classmethod
    def from_pretrained(cls, path: str, **kwargs: Any) -> ChatServer:
        """Load a model folder and build a server for it (``kwargs`` go to the constructor)."""
        return cls(TransformersPolicy.from_pretrained(path, batch_size=1), model_name=path, **kwargs)

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` of this server."""
        host = str(self._httpd.server_address[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/v1"

    @property
    def active_connections(self) -> int:
        """Connections being served now (not counting ones refused with 503)."""
        return self._httpd.active

    def start(self) -> ChatServer:
        """Serve in a daemon thread; returns self."""
        self._serving = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="star-serve", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted."""
        self._serving = True
        try:
            self._httpd.serve_forever()
        finally:
            self._shutdown_workers()
            self._httpd.server_close()

    def stop(self) -> None:
        """Stop serving, cancel queued and running work, and close the socket (safe if never started)."""
        if self._serving:
            self._serving = False
            self._httpd.shutdown()  # waits for the serve loop, which only exists once started
        self._shutdown_workers()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ── request handling ──

    def complete(self, body: Any) -> dict[str, Any]:
        """Answer one chat-completions request body now, bypassing the queue.

        Raises:
            RequestError: A malformed body (400) or a prompt too long for the model (413).

        """
        return self._generate(self.prepare(body), threading.Event())

    def prepare(self, body: Any) -> _Prepared:
        """Validate a request body and render its prompt (raises :class:`RequestError`)."""
        messages, tools, max_tokens, sampling, seed = self._parse(body)
        conversation = Conversation(messages=messages, tools=tools)
        with self._render_lock:
            try:
                conversation.prompt_ids = render_prompt_ids(self.policy.tokenizer, conversation)
            except Exception as exc:  # noqa: BLE001 - a template error is the client's request
                raise RequestError(
                    f"the chat template cannot render these messages/tools: {exc}", param="messages"
                ) from exc
        prompt_tokens = len(conversation.prompt_ids)
        room = self.max_context_tokens - prompt_tokens
        if room < 1:
            raise RequestError(
                f"the prompt is {prompt_tokens} tokens but this model's context is "
                f"{self.max_context_tokens} tokens; shorten 'messages'",
                status=413,
                param="messages",
            )
        if max_tokens is None:
            max_tokens = min(512, room, self.max_new_tokens_limit)
        elif max_tokens > room:
            raise RequestError(
                f"max_tokens {max_tokens} plus the {prompt_tokens}-token prompt exceeds this model's "
                f"context of {self.max_context_tokens} tokens; ask for at most {room}",
                param="max_tokens",
            )
        logprobs = bool(body.get("logprobs"))
        return _Prepared(conversation, max_tokens, sampling, seed, logprobs)

    def submit(self, request: _Prepared) -> _Job:
        """Queue a prepared request for the model (:class:`RequestError` 429 when the queue is full)."""
        if self._stopping.is_set():
            raise RequestError("the server is shutting down", status=503)
        job = _Job(request)
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            raise self.queue_full_error() from None
        return job

    def queue_full_error(self) -> RequestError:
        """Build the 429 answered when ``max_queue`` requests are already waiting."""
        return RequestError(
            f"the server is busy ({self._jobs.maxsize} requests already waiting); retry later", status=429
        )

    def retry_after_s(self) -> int:
        """Seconds a refused client should wait: the expected time to drain the queue (at least 1)."""
        return max(1, math.ceil(self._seconds_per_job * (self._jobs.qsize() + 1)))

    def _count(self, outcome: str) -> None:
        with self._stats_lock:
            self.stats[outcome] += 1

    def _work(self) -> None:
        while not self._stopping.is_set():
            try:
                job = self._jobs.get(timeout=0.1)
            except queue.Empty:
                continue
            self._current = job
            started = time.monotonic()
            try:
                if not job.cancel.is_set():
                    job.result = self._generate(job.request, job.cancel)
            except Exception as exc:  # noqa: BLE001 - handed to the waiting handler thread
                job.error = exc
            finally:
                self._current = None
                if job.cancel.is_set():
                    self._count("cancelled")
                else:
                    elapsed = time.monotonic() - started
                    self._seconds_per_job = 0.8 * self._seconds_per_job + 0.2 * elapsed
                job.done.set()

    def _shutdown_workers(self) -> None:
        self._stopping.set()
        current = self._current
        if current is not None:
            current.cancel.set()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            job.cancel.set()
            job.done.set()
        self._worker.join(timeout=5)
        self._rejector.stop()

    def _generate(self, request: _Prepared, cancel: threading.Event) -> dict[str, Any]:
        deadline = None if self.generation_timeout_s is None else time.monotonic() + self.generation_timeout_s

        def check(_module: Any, _args: Any) -> None:  # a forward pre-hook: runs before every token
            if cancel.is_set():
                raise _Aborted("cancelled")
            if deadline is not None and time.monotonic() > deadline:
                raise _Aborted("timeout")

        with self._lock:
            old = self.policy.sampling
            self.policy.sampling = request.sampling
            hook = self.policy.model.register_forward_pre_hook(check)
            try:
                generation = self.policy.generate(
                    [request.conversation], max_new_tokens=request.max_tokens, seed=request.seed
                )[0]
            except _Aborted as exc:
                if str(exc) == "timeout":
                    raise RequestError(
                        f"generation ran past the server's {self.generation_timeout_s} s limit; "
                        "ask for fewer max_tokens",
                        status=503,
                    ) from None
                raise
            finally:
                hook.remove()
                self.policy.sampling = old
        return self._response(request, generation)

    def _response(self, request: _Prepared, generation: Any) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": generation.text},
            "finish_reason": generation.finish_reason,
            "logprobs": None,
        }
        if request.logprobs and generation.token_ids is not None:
            choice["logprobs"] = {
                "content": self._logprob_items(generation.token_ids, generation.logprobs or [])
            }
        prompt_tokens = len(request.conversation.prompt_ids or [])
        completion_tokens = len(generation.token_ids or [])
        return {
            "id": f"chatcmpl-{secrets.token_hex(8)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _parse(
        self, body: Any
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int | None, SamplingParams, int | None]:
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
            raise RequestError(
                f"'logprobs' must be true or false, got {body['logprobs']!r}", param="logprobs"
            )
        max_tokens = None
        for name in ("max_tokens", "max_completion_tokens"):  # max_completion_tokens wins when both are set
            if body.get(name) is not None:
                max_tokens = _integer(body, name, 1, self.max_new_tokens_limit)
        default = self.policy.sampling
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

    def _logprob_items(self, ids: list[int], logprobs: list[float]) -> list[dict[str, Any]]:
        tokenizer = self.policy.tokenizer
        return [
            {"token": tokenizer.decode([tok]), "logprob": float(lp), "bytes": None, "top_logprobs": []}
            for tok, lp in zip(ids, logprobs, strict=False)
        ]


def _model_context(policy: TransformersPolicy) -> int:
    """Return the model's context length (``max_position_embeddings``), else 32768."""
    config = getattr(policy.model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else 32768


# ───────────────────────────── body validation ─────────────────────────────


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


# ───────────────────────────── HTTP ─────────────────────────────


def _error_payload(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind = {401: "authentication_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error"}
    return {
        "error": {
            "message": message,
            "type": kind.get(status, "invalid_request_error"),
            "param": param,
            "code": status,
        }
    }


def _busy_response() -> bytes:
    body = json.dumps(_error_payload(503, "too many open connections; retry later")).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class _Rejector:
    """Answers connections over the cap with 503 from one thread, then closes them without a reset.

    The response is sent at once and the write side shut; the socket is kept (reading and discarding what
    the client sends) until the client closes or two seconds pass, so the kernel never answers the client's
    request bytes with a reset before it has read the 503.
    """

    LINGER_S = 2.0

    def __init__(self) -> None:
        self._incoming: queue.SimpleQueue[socket.socket] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._response = _busy_response()

    def reject(self, sock: socket.socket) -> None:
        """Send 503 on a freshly accepted socket and hand it to the lingering thread."""
        try:
            sock.setblocking(False)
            sock.send(self._response)  # a few hundred bytes into an empty send buffer
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="star-serve-reject", daemon=True)
                self._thread.start()
        self._incoming.put(sock)

    def stop(self) -> None:
        """Close every lingering socket and end the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        selector = selectors.DefaultSelector()
        deadlines: dict[socket.socket, float] = {}
        while not self._stop.is_set():
            while not self._incoming.empty():
                sock = self._incoming.get()
                deadlines[sock] = time.monotonic() + self.LINGER_S
                selector.register(sock, selectors.EVENT_READ)
            for key, _ in selector.select(timeout=0.05) if deadlines else []:
                sock = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    deadlines[sock] = 0.0
            now = time.monotonic()
            for sock in [s for s, t in deadlines.items() if t <= now]:
                selector.unregister(sock)
                sock.close()
                del deadlines[sock]
            if not deadlines:
                self._stop.wait(0.05)
        for sock in deadlines:
            sock.close()
        selector.close()


class _HTTPServer(ThreadingHTTPServer):
    """A threading HTTP server with a large backlog and a cap on connections served at once."""

    daemon_threads = True
    request_queue_size = 1024  # the kernel caps it at net.core.somaxconn

    def __init__(
        self,
        family: int,
        sockaddr: tuple[Any, ...],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int,
        rejector: _Rejector,
        count: Any,
        requested: tuple[str, int],
    ) -> None:
        self.address_family = family
        self.max_connections = max_connections
        self.active = 0
        self._active_lock = threading.Lock()
        self._rejector = rejector
        self._count = count
        self._requested = requested
        super().__init__(sockaddr, handler, bind_and_activate=False)
        try:
            self.server_bind()
            self.server_activate()
        except OSError as exc:
            self.server_close()
            raise ServerConfigError(f"cannot listen on {requested[0]}:{requested[1]}: {exc}") from None
        except BaseException:
            self.server_close()
            raise

    def server_bind(self) -> None:
        """Bind with the same checks and messages as :func:`check_listen_address`."""
        if self.allow_reuse_address:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _bind(self.socket, self.server_address, *self._requested, "host", "port")
        self.server_address = self.socket.getsockname()
        self.server_name = str(self.server_address[0])  # no reverse DNS lookup (HTTPServer does one)
        self.server_port = int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve in a thread, or answer 503 when ``max_connections`` are already being served."""
        with self._active_lock:
            full = self.active >= self.max_connections
            if not full:
                self.active += 1
        if full:
            self._count("busy")
            self._rejector.reject(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve one connection, then free its slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._active_lock:
            self.active -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that went away; other errors are already answered with 500."""


def _client_gone(sock: socket.socket) -> bool:
    """Whether the peer closed its side (readable with zero bytes) or the socket broke."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def _handler_for(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = server.socket_timeout_s  # applied to the socket in setup(): idle/stalled sockets close

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass  # quiet: never log request headers (they carry the API key)

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                data = [{"id": server.model_name, "object": "model", "owned_by": "star"}]
                self._send(200, {"object": "list", "data": data})
            elif self.path.rstrip("/") in ("/health", "/v1/health"):
                self._send(200, {"status": "ok", "queued": server._jobs.qsize()})
            else:
                self._error(404, f"no route {self.path}; use POST /v1/chat/completions")

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            try:
                body = self._read_body()
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    raise RequestError(f"no route {self.path}; use POST /v1/chat/completions", status=404)
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    raise RequestError("missing or wrong API key", status=401)
                if server._jobs.full():  # refuse before spending time on the template
                    raise server.queue_full_error()
                job = server.submit(server.prepare(body))
            except RequestError as exc:
                server._count({413: "too_large", 429: "queue_full"}.get(exc.status, "bad_request"))
                self._error(exc.status, str(exc), exc.param)
                return
            self._wait(job)

        def _read_body(self) -> Any:
            length_header = self.headers.get("Content-Length")
            if self.headers.get("Transfer-Encoding") or length_header is None:
                self.close_connection = True
                raise RequestError(
                    "send the JSON body with a Content-Length header (no chunked encoding)", status=411
                )
            try:
                length = int(length_header)
            except ValueError:
                length = -1
            if length < 0:
                self.close_connection = True
                raise RequestError(f"Content-Length must be a byte count, got {length_header!r}")
            if length > server.max_body_bytes:
                self.close_connection = True  # the body stays unread; _error lingers so no reset
                raise RequestError(
                    f"the body is {length} bytes; this server accepts at most {server.max_body_bytes}",
                    status=413,
                )
            raw = self.rfile.read(length)
            if len(raw) < length:
                self.close_connection = True
                raise RequestError(f"the body ended after {len(raw)} of {length} bytes")
            return parse_body(raw)

        def _wait(self, job: _Job) -> None:
            while not job.done.wait(0.05):
                if _client_gone(self.connection):
                    job.cancel.set()
                    self.close_connection = True
                    return
            if job.cancel.is_set():
                self.close_connection = True
                if server._stopping.is_set():
                    self._error(503, "the server is shutting down")
                return
            if isinstance(job.error, RequestError):
                self._error(job.error.status, str(job.error), job.error.param)
            elif job.error is not None:
                server._count("error")
                message = f"generation failed: {type(job.error).__name__}: {job.error}"
                self._error(500, message)
            else:
                server._count("ok")
                self._send(200, job.result or {})

        def _error(self, status: int, message: str, param: str | None = None) -> None:
            headers = {}
            if status in (429, 503):
                headers["Retry-After"] = str(server.retry_after_s())
            self._send(status, _error_payload(status, message, param), headers)

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                if self.close_connection:
                    _linger(self.connection)
            except OSError:
                self.close_connection = True  # the client went away mid-answer

    return Handler


def _linger(sock: socket.socket, seconds: float = 1.0, most_bytes: int = 4 * 1024 * 1024) -> None:
    """Shut the write side and discard what the client still sends, so closing does not reset the answer."""
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + seconds
        drained = 0
        while drained < most_bytes:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            drained += len(chunk)
    except OSError:
        pass
